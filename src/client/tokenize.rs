//! A target's `/tokenize` as a source of prompt-length calibration (see `workload::calibrate` for
//! the model it fits): a few prompts of known word counts are tokenized by the server, with
//! `messages` on chat APIs so the template is counted.

use std::sync::Arc;
use std::time::Duration;

use super::discovery::{MAX_INFO_BYTES, read_limited};
use super::runtime::TargetRuntime;
use crate::workload::prompt::synthesize;
use crate::workload::{Calibration, Fit};

/// Word counts tokenized to fit the line (span the usual prompt sizes).
const TOKENIZE_WORDS: [u32; 3] = [32, 256, 1024];

/// Fits `cal` from the target's `/tokenize`, with the bodies its API family names
/// (`Family::tokenize_bodies`). The error says why it could not.
pub async fn calibrate_with_tokenize(target: &TargetRuntime, cal: &Calibration) -> Result<Fit, String> {
    let model = target.model().await.map_err(|f| format!("model discovery: {}", f.detail))?;
    let mut points = Vec::new();
    for (i, words) in TOKENIZE_WORDS.into_iter().enumerate() {
        let text = synthesize(words, 0x5eed_0000 + i as u64, None);
        let tokens = tokenize(target, &model, &text).await?;
        points.push((words, tokens));
    }
    cal.set_tokenized(&points);
    Ok(cal.fit())
}

async fn tokenize(target: &TargetRuntime, model: &str, text: &str) -> Result<u32, String> {
    let [own, fallback] = target.config.api.family().tokenize_bodies(model, text);
    match post_count(target, &own).await {
        Ok(n) => Ok(n),
        Err(first) => post_count(target, &fallback).await.map_err(|_| first),
    }
}

async fn post_count(target: &TargetRuntime, body: &serde_json::Value) -> Result<u32, String> {
    let timeout = target.config.timeouts.connect.saturating_add(Duration::from_secs(10));
    let request = target
        .request(reqwest::Method::POST, "/tokenize")
        .map_err(|f| f.detail)?
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).expect("JSON body"));
    let resp = tokio::time::timeout(timeout, target.send_general(request)).await.map_err(|_| "POST /tokenize timed out".to_owned())?.map_err(|f| f.detail)?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("POST /tokenize: HTTP {status}"));
    }
    let bytes = tokio::time::timeout(timeout, read_limited(resp, MAX_INFO_BYTES))
        .await
        .map_err(|_| "POST /tokenize body timed out".to_owned())?
        .map_err(|f| target.redact(&format!("POST /tokenize: {}", f.detail)))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| format!("POST /tokenize: {e}"))?;
    let count = value.get("count").and_then(serde_json::Value::as_u64).or_else(|| value.get("tokens").and_then(|t| t.as_array()).map(|a| a.len() as u64));
    count.map(|n| u32::try_from(n).unwrap_or(u32::MAX)).ok_or_else(|| "POST /tokenize: no count or tokens in the answer".to_owned())
}

/// Background calibration of one target: retries `/tokenize` until it answers or is clearly
/// absent (HTTP 404/405/400 etc.: usage learning takes over), stopping with `stop`.
pub async fn run(target: Arc<TargetRuntime>, cal: Arc<Calibration>, stop: tokio_util::sync::CancellationToken) {
    for attempt in 0..5u32 {
        let result = tokio::select! {
            r = calibrate_with_tokenize(&target, &cal) => r,
            _ = stop.cancelled() => return,
        };
        match result {
            Ok(fit) => {
                tracing::info!(target_name = %target.name, overhead = fit.overhead, per_word = fit.per_word, "prompt length calibrated with /tokenize");
                return;
            }
            Err(e) if e.contains("HTTP 4") => {
                tracing::info!(target_name = %target.name, "no usable /tokenize ({e}): learning prompt length from usage");
                return;
            }
            Err(e) => {
                tracing::debug!(target_name = %target.name, attempt, "calibration failed: {e}");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5 << attempt.min(3))) => {}
                    _ = stop.cancelled() => return,
                }
            }
        }
    }
    tracing::info!(target_name = %target.name, "giving up on /tokenize: learning prompt length from usage");
}
