//! Engine agreement: the engine's own counters read just before and just after each measured
//! repeat (`engine_window.jsonl`), and their comparison with what the prober measured over the
//! same window (`engine_agreement` of each repeat in the summary and report).
//!
//! Read from a vLLM-style Prometheus page: the TTFT histogram's `_sum`/`_count` and the generated
//! token counter (summed over every series: engines, data-parallel ranks). The engine counts
//! every request it served in the window, so warm-up requests are sent before the window opens,
//! and nothing else may use the server during a run for the figures to be comparable.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::records::{Phase, Record};
use crate::source::promtext::{self, Page};

/// The window file inside a result directory.
const WINDOW_FILE: &str = "engine_window.jsonl";

/// TTFT histogram names, newest first (the family name has been stable across vLLM releases;
/// listed as a map so a rename is one line).
const TTFT: &[&str] = &["vllm:time_to_first_token_seconds"];
/// Generated-token counter names: the text-format name, and the OpenMetrics family name without
/// `_total` some exporters write.
const GENERATION_TOKENS: &[&str] = &["vllm:generation_tokens_total", "vllm:generation_tokens"];

/// Agreement tolerance for the TTFT means: the engine measures from the request's arrival in the
/// engine, the prober from the send, so the prober's mean may exceed the engine's by the HTTP,
/// tokenisation and detokenisation overhead. Agreement: `|delta| <= 15 ms + 15% of the engine mean`.
pub const TTFT_TOLERANCE_MS: f64 = 15.0;
pub const TTFT_TOLERANCE_REL: f64 = 0.15;

/// Cumulative engine counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AgreementCounters {
    pub ttft_sum_s: f64,
    pub ttft_count: f64,
    pub generation_tokens: f64,
}

impl AgreementCounters {
    /// The counters on a page; `None` when it lacks the vLLM names.
    pub fn read(page: &Page) -> Option<AgreementCounters> {
        let first = |names: &[&str], suffix: &str| names.iter().find_map(|n| page.sum(&format!("{n}{suffix}")));
        Some(AgreementCounters { ttft_sum_s: first(TTFT, "_sum")?, ttft_count: first(TTFT, "_count")?, generation_tokens: first(GENERATION_TOKENS, "")? })
    }
}

/// Reads an engine page's counters.
pub struct Scraper {
    client: reqwest::Client,
    pub url: String,
}

impl Scraper {
    pub fn new(url: String) -> anyhow::Result<Scraper> {
        let client = crate::client::plain_client()?;
        Ok(Scraper { client, url })
    }

    pub async fn read(&self) -> anyhow::Result<AgreementCounters> {
        let resp = self
            .client
            .get(&self.url)
            .timeout(std::time::Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GET {}: {}", self.url, crate::client::error_chain(&e)))?;
        anyhow::ensure!(resp.status().is_success(), "GET {}: HTTP {}", self.url, resp.status());
        let text = resp.text().await.with_context(|| format!("reading {}", self.url))?;
        AgreementCounters::read(&promtext::parse(&text))
            .with_context(|| format!("{}: no vllm:time_to_first_token_seconds_sum/_count and vllm:generation_tokens_total on the page", self.url))
    }
}

/// One measured repeat's window: counters just before its first request and just after its last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub run_id: String,
    pub point: usize,
    pub repeat: u32,
    pub url: String,
    pub before_unix_s: f64,
    pub after_unix_s: f64,
    pub before: AgreementCounters,
    pub after: AgreementCounters,
}

/// Appends one window line.
pub fn append(dir: &Path, w: &Window) -> anyhow::Result<()> {
    let path = dir.join(WINDOW_FILE);
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut line = serde_json::to_string(w)?;
    line.push('\n');
    f.write_all(line.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

/// Every window of a result directory (none when the file is absent).
pub fn read(dir: &Path) -> anyhow::Result<Vec<Window>> {
    let path = dir.join(WINDOW_FILE);
    let Ok(f) = std::fs::File::open(&path) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).with_context(|| format!("{}:{}: not a window line", path.display(), i + 1))?);
    }
    Ok(out)
}

/// Client and engine figures over one repeat's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Increase of the engine's TTFT `_sum` / `_count` over the window, milliseconds.
    pub engine_ttft_mean_ms: Option<f64>,
    /// Mean TTFT of the repeat's requests that got a first token, milliseconds.
    pub client_ttft_mean_ms: Option<f64>,
    /// client - engine, milliseconds.
    pub delta_ms: Option<f64>,
    /// `|delta_ms| <= 15 ms + 15% of the engine mean`.
    pub ttft_within_tolerance: Option<bool>,
    /// Requests the engine counted a first token for (TTFT `_count` increase).
    pub engine_requests: u64,
    /// The repeat's requests with a first token, as the prober saw them.
    pub client_requests: u64,
    /// Increase of the engine's generated-token counter over the window.
    pub engine_generation_tokens: u64,
    /// Sum of the output tokens (server usage) of the repeat's requests.
    pub client_output_tokens: u64,
    pub tokens_equal: bool,
}

/// Compares a window with the records of the same repeat; `None` after a counter reset.
pub fn agreement(w: &Window, records: &[&Record]) -> Option<Agreement> {
    let d = |a: f64, b: f64| (b >= a).then_some(b - a);
    let (sum, count, tokens) =
        (d(w.before.ttft_sum_s, w.after.ttft_sum_s)?, d(w.before.ttft_count, w.after.ttft_count)?, d(w.before.generation_tokens, w.after.generation_tokens)?);
    let measured: Vec<&&Record> = records.iter().filter(|r| r.phase == Phase::Measure).collect();
    let ttfts: Vec<f64> = measured.iter().filter_map(|r| r.ttft_ms).collect();
    let client_ttft = (!ttfts.is_empty()).then(|| ttfts.iter().sum::<f64>() / ttfts.len() as f64);
    let engine_ttft = (count > 0.0).then(|| sum / count * 1e3);
    let delta = client_ttft.zip(engine_ttft).map(|(c, e)| c - e);
    let client_tokens: u64 = measured.iter().filter_map(|r| r.output_tokens).sum();
    Some(Agreement {
        engine_ttft_mean_ms: engine_ttft,
        client_ttft_mean_ms: client_ttft,
        delta_ms: delta,
        ttft_within_tolerance: delta.zip(engine_ttft).map(|(d, e)| d.abs() <= TTFT_TOLERANCE_MS + TTFT_TOLERANCE_REL * e),
        engine_requests: count.round() as u64,
        client_requests: ttfts.len() as u64,
        engine_generation_tokens: tokens.round() as u64,
        client_output_tokens: client_tokens,
        tokens_equal: tokens.round() as u64 == client_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_over_series_and_need_every_name() {
        let page = promtext::parse(
            "vllm:time_to_first_token_seconds_sum{engine=\"0\"} 1.5\nvllm:time_to_first_token_seconds_sum{engine=\"1\"} 0.5\n\
             vllm:time_to_first_token_seconds_count{engine=\"0\"} 10\nvllm:generation_tokens_total{engine=\"0\"} 640\n",
        );
        assert_eq!(AgreementCounters::read(&page), Some(AgreementCounters { ttft_sum_s: 2.0, ttft_count: 10.0, generation_tokens: 640.0 }));
        assert_eq!(AgreementCounters::read(&promtext::parse("vllm:num_requests_running 1\n")), None);
    }

    #[test]
    fn a_counter_reset_gives_no_agreement() {
        let c = |s, n, t| AgreementCounters { ttft_sum_s: s, ttft_count: n, generation_tokens: t };
        let w = Window {
            run_id: "r".into(),
            point: 0,
            repeat: 0,
            url: "u".into(),
            before_unix_s: 0.0,
            after_unix_s: 1.0,
            before: c(5.0, 10.0, 100.0),
            after: c(1.0, 2.0, 10.0),
        };
        assert!(agreement(&w, &[]).is_none());
        let w = Window { after: c(5.5, 12.0, 228.0), ..w };
        let a = agreement(&w, &[]).unwrap();
        assert_eq!(a.engine_ttft_mean_ms, Some(250.0));
        assert_eq!((a.engine_requests, a.engine_generation_tokens, a.client_output_tokens, a.tokens_equal), (2, 128, 0, false));
    }
}
