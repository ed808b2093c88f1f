//! `llmprobe workload accuracy`: sends synthetic prompts of given token lengths to one server
//! and reports how close the server's prompt count (`usage.prompt_tokens`) came to each request,
//! before and after calibration, and whether output length equalled `max_tokens`. The probes of
//! each length are a scheduler run of one closed-loop worker, so each is drawn with the
//! calibration the previous one's usage refined.

use std::fmt::Write;
use std::sync::Arc;

use crate::client::TargetRuntime;
use crate::client::tokenize::calibrate_with_tokenize;
use crate::config::{LengthSpec, Scenario, Slo, SloTable, Target};
use crate::pipeline::scheduler::{self, Pacing, StopRule, Stream};
use crate::replicas::Endpoints;
use crate::sink::Collect;
use crate::workload::{Calibration, Mix, Sampler};

/// Accuracy has no latency objective: only the token counts matter.
const NO_SLO: Slo = Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 };

/// Figures for one requested length.
#[derive(Debug, Clone, PartialEq)]
pub struct LengthFigures {
    pub requested: u32,
    /// Server prompt counts, in send order (the first `warmup` are before warm-up ends).
    pub prompt_tokens: Vec<u64>,
    pub output_requested: u32,
    pub output_tokens: Vec<u64>,
    pub failures: Vec<String>,
}

impl LengthFigures {
    /// Largest |usage − requested| after the warm-up probes.
    pub fn max_abs_error(&self, warmup: usize) -> Option<u64> {
        self.prompt_tokens.iter().skip(warmup).map(|&p| p.abs_diff(self.requested as u64)).max()
    }

    /// Within ±2% or ±2 tokens, whichever is larger, after warm-up.
    pub fn within_tolerance(&self, warmup: usize) -> bool {
        let allowed = (self.requested as f64 * 0.02).max(2.0);
        self.prompt_tokens.len() > warmup && self.max_abs_error(warmup).is_some_and(|e| e as f64 <= allowed)
    }
}

/// What the check found.
#[derive(Debug, Clone)]
pub struct Report {
    pub calibration: String,
    pub rows: Vec<LengthFigures>,
    pub warmup: usize,
}

/// Runs the check: `probes` per length, the first `warmup` of each counting as warm-up. With
/// `use_tokenize` false, only usage learning is used (as for a server without `/tokenize`).
pub async fn check(target: Target, lengths: &[u32], output: u32, probes: usize, warmup: usize, use_tokenize: bool) -> anyhow::Result<Report> {
    let target = Arc::new(TargetRuntime::new(target)?);
    let cal = Arc::new(Calibration::new(target.config.api));
    let calibration = if use_tokenize {
        match calibrate_with_tokenize(&target, &cal).await {
            Ok(f) => format!("/tokenize: {:.3} tokens/word + {:.1}", f.per_word, f.overhead),
            Err(e) => format!("no /tokenize ({e}): learning from usage"),
        }
    } else {
        "usage only".to_owned()
    };
    let mut rows = Vec::new();
    for (i, &requested) in lengths.iter().enumerate() {
        let scenario = Scenario::synthetic("accuracy", 1.0, LengthSpec::Fixed(requested), LengthSpec::Fixed(output));
        let stream = Stream {
            endpoints: Arc::new(Endpoints::new(target.clone())),
            draws: Mix::single("accuracy", Sampler::new(scenario, 7 + i as u64, cal.clone())),
            pacing: Pacing::Closed { workers: 1 },
            id_prefix: format!("accuracy-{requested}"),
        };
        let seen = Arc::new(Collect::new(|o, _| match (&o.result, o.usage) {
            (Ok(()), Some(u)) => Ok((u.prompt_tokens, u.completion_tokens)),
            (Ok(()), None) => Err("no usage in the stream".to_owned()),
            (Err(f), _) => Err(format!("{}: {}", f.class.as_str(), f.detail)),
        }));
        let stop = StopRule { requests: Some(probes as u64), ..StopRule::default() };
        scheduler::drive(vec![stream], stop, vec![seen.clone()], SloTable::uniform(NO_SLO)).await?;
        let mut row = LengthFigures { requested, prompt_tokens: vec![], output_requested: output, output_tokens: vec![], failures: vec![] };
        for result in seen.take() {
            match result {
                Ok((prompt, completion)) => {
                    row.prompt_tokens.push(prompt);
                    row.output_tokens.push(completion);
                }
                Err(failure) => row.failures.push(failure),
            }
        }
        rows.push(row);
    }
    Ok(Report { calibration, rows, warmup })
}

/// A table of the figures.
pub fn render(report: &Report) -> String {
    let mut out = format!("calibration: {}\n", report.calibration);
    let _ = writeln!(
        out,
        "| requested | server prompt tokens (first {} = warm-up) | max error after warm-up | output requested | output tokens | ok |",
        report.warmup
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---|---|");
    for r in &report.rows {
        let err = r.max_abs_error(report.warmup).map_or("-".into(), |e| format!("{e} ({:.2}%)", 100.0 * e as f64 / r.requested as f64));
        let outputs_ok = r.output_tokens.iter().all(|&o| o == r.output_requested as u64);
        let ok = r.within_tolerance(report.warmup) && outputs_ok && r.failures.is_empty();
        let _ = writeln!(
            out,
            "| {} | {:?} | {err} | {} | {:?} | {} |",
            r.requested,
            r.prompt_tokens,
            r.output_requested,
            r.output_tokens,
            if ok { "yes" } else { "NO" }
        );
        for f in &r.failures {
            let _ = writeln!(out, "  failure: {f}");
        }
    }
    out
}
