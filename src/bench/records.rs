//! Per-request evidence: one JSON line per request (warm-up included, marked), built from the
//! prober's `Outcome` and the recorder's `Sample`, and read back by `report`, `compare` and the merge.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::config::Slo;
use crate::probe::measure::{Sample, input_tokens};
use crate::probe::outcome::Outcome;
use crate::util::stats::{percentile, sort_f64};

/// The records file inside a result directory.
pub const RECORDS_FILE: &str = "records.jsonl";

/// Which part of a point a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Sent before the repeats; excluded from every figure.
    Warmup,
    Measure,
}

/// ITL of one request, summarised (per frame gap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItlSummary {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Which SLO thresholds a successful request met (`None` when unset or undefined).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloVerdict {
    pub ttft_ok: Option<bool>,
    pub tpot_ok: Option<bool>,
    pub e2e_ok: Option<bool>,
    /// Succeeded and met every configured threshold.
    pub goodput: bool,
}

/// One request as written to `records.jsonl`. Times: `*_s` are seconds since the run started
/// (one monotonic clock), `*_unix_s` the same instants as wall-clock Unix seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub run_id: String,
    /// Index of the load point (0-based) and its load (workers or requests/s).
    pub point: usize,
    pub load: f64,
    /// Repeat index (0-based); `None` for warm-up.
    pub repeat: Option<u32>,
    pub phase: Phase,
    pub request_id: String,
    pub seq: u64,
    pub target: String,
    pub scenario: String,
    pub model: String,
    pub requested_input_tokens: u32,
    pub requested_output_tokens: u32,
    /// The server's usage, else the API's own prompt counter (as `measure`), when reported.
    pub input_tokens: Option<u64>,
    /// Usage, or text frames when the server sent none (see `token_source`); `None` on failure.
    pub output_tokens: Option<u64>,
    pub token_source: Option<String>,
    pub intended_s: f64,
    pub sent_s: f64,
    pub first_token_s: Option<f64>,
    pub end_s: f64,
    pub intended_unix_s: f64,
    pub sent_unix_s: f64,
    pub first_token_unix_s: Option<f64>,
    pub end_unix_s: f64,
    /// What the first token's time is: `arrival` (when its bytes reached the host, by the
    /// kernel's receive stamp: the lean client on Linux) or `read` (when the prober read them);
    /// `None` without a first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_time: Option<String>,
    pub schedule_lag_ms: f64,
    pub ttft_ms: Option<f64>,
    /// The server's own time to the first text frame, from the request's arrival there to the
    /// frame's emission, when the server stamps frames (the mock's `mock_emitted_ns`); absent
    /// otherwise. `ttft_ms` minus this is the prober's TTFT error plus the loopback transit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_first_token_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub itl: Option<ItlSummary>,
    /// Every gap between text-bearing frames, rounded to the microsecond (summaries pool them).
    #[serde(default)]
    pub itl_gaps_ms: Vec<f64>,
    pub e2e_ms: Option<f64>,
    /// `success`, `error` or `dropped`.
    pub outcome: String,
    pub error_class: Option<String>,
    /// Bounded, secrets redacted; for reading, never for grouping.
    pub error_detail: Option<String>,
    pub http_status: Option<u16>,
    pub finish_reason: Option<String>,
    /// `None` unless the request succeeded.
    pub slo: Option<SloVerdict>,
    /// Behaviour checks that failed (`checks:`), by name; what failed is in `error_detail`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks_failed: Vec<String>,
    /// Fingerprint of a temperature-0 answer (`checks.fingerprint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

impl Record {
    pub fn is_success(&self) -> bool {
        self.outcome == "success"
    }
    pub fn is_dropped(&self) -> bool {
        self.outcome == "dropped"
    }
    pub fn is_goodput(&self) -> bool {
        self.slo.as_ref().is_some_and(|s| s.goodput)
    }
}

/// The run's time origin on both clocks.
#[derive(Debug, Clone, Copy)]
pub struct Epoch {
    pub instant: Instant,
    pub unix_s: f64,
}

impl Epoch {
    pub fn now() -> Self {
        let unix_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        Epoch { instant: Instant::now(), unix_s }
    }
    pub fn rel(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.instant).as_secs_f64()
    }
}

/// Where a request belongs in the sweep.
#[derive(Debug, Clone)]
pub struct Place {
    pub run_id: String,
    pub point: usize,
    pub load: f64,
    pub repeat: Option<u32>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Builds the record of one finished (or dropped) request from its outcome and the recorder's
/// measurement of it under `slo`.
pub fn from_outcome(o: &Outcome, sample: Option<&Sample>, slo: &Slo, epoch: &Epoch, place: &Place) -> Record {
    let tl = &o.timeline;
    let first = tl.first_token().map(|t| epoch.rel(t));
    let unix = |rel: f64| epoch.unix_s + rel;
    let (error_class, error_detail) = match &o.result {
        Ok(()) => (None, None),
        Err(f) => (Some(f.class.as_str().to_owned()), Some(f.detail.clone())),
    };
    let outcome = match o.error_class() {
        None => "success",
        Some(c) => c.outcome_label(),
    };
    Record {
        run_id: place.run_id.clone(),
        point: place.point,
        load: place.load,
        repeat: place.repeat,
        phase: if place.repeat.is_some() { Phase::Measure } else { Phase::Warmup },
        request_id: o.request_id.clone(),
        seq: o.seq,
        target: o.target.to_string(),
        scenario: o.scenario.to_string(),
        model: o.model.to_string(),
        requested_input_tokens: o.requested_input_tokens,
        requested_output_tokens: o.requested_output_tokens,
        input_tokens: input_tokens(o),
        output_tokens: sample.map(|s| s.output_tokens),
        token_source: sample.map(|s| s.token_source.as_str().to_owned()),
        intended_s: epoch.rel(tl.intended),
        sent_s: epoch.rel(tl.sent),
        first_token_s: first,
        end_s: epoch.rel(tl.end),
        intended_unix_s: unix(epoch.rel(tl.intended)),
        sent_unix_s: unix(epoch.rel(tl.sent)),
        first_token_unix_s: first.map(unix),
        end_unix_s: unix(epoch.rel(tl.end)),
        first_token_time: first.map(|_| if tl.first_token_stamped { "arrival" } else { "read" }.to_owned()),
        schedule_lag_ms: ms(tl.schedule_lag()),
        ttft_ms: sample.map(|s| ms(s.ttft)),
        server_first_token_ms: tl.first_emitted_ns.filter(|_| sample.is_some()).map(|ns| ns as f64 / 1e6),
        tpot_ms: sample.and_then(|s| s.tpot.map(ms)),
        itl: sample.and_then(itl_summary),
        itl_gaps_ms: sample.map(|s| s.itl.iter().map(|d| round_us(ms(*d))).collect()).unwrap_or_default(),
        e2e_ms: sample.map(|s| ms(s.e2e)),
        outcome: outcome.to_owned(),
        error_class,
        error_detail,
        http_status: o.http_status,
        finish_reason: o.finish_reason.clone(),
        slo: sample.map(|s| verdict(s, slo)),
        checks_failed: o.checks.iter().flat_map(|r| r.failed.iter().map(|f| f.check.as_str().to_owned())).collect(),
        fingerprint: o.checks.as_ref().and_then(|r| r.fingerprint.clone()),
    }
}

/// Milliseconds rounded to three decimals (microseconds), to keep the file compact.
fn round_us(ms: f64) -> f64 {
    (ms * 1e3).round() / 1e3
}

fn verdict(s: &Sample, slo: &Slo) -> SloVerdict {
    let ok = |set: bool, missed: bool| set.then_some(!missed);
    SloVerdict {
        ttft_ok: ok(slo.ttft.is_some(), s.slo_missed.ttft),
        tpot_ok: ok(slo.tpot.is_some() && s.tpot.is_some(), s.slo_missed.tpot),
        e2e_ok: ok(slo.e2e.is_some(), s.slo_missed.e2e),
        goodput: s.goodput,
    }
}

fn itl_summary(s: &Sample) -> Option<ItlSummary> {
    if s.itl.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = s.itl.iter().map(|d| ms(*d)).collect();
    sort_f64(&mut v);
    Some(ItlSummary {
        count: v.len(),
        mean_ms: v.iter().sum::<f64>() / v.len() as f64,
        p50_ms: percentile(&v, 0.5)?,
        p99_ms: percentile(&v, 0.99)?,
        max_ms: *v.last()?,
    })
}

/// Appends records to `records.jsonl`.
pub fn append(dir: &Path, records: &[Record]) -> anyhow::Result<()> {
    let path = dir.join(RECORDS_FILE);
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    for r in records {
        serde_json::to_writer(&mut w, r)?;
        w.write_all(b"\n")?;
    }
    w.flush().with_context(|| format!("writing {}", path.display()))
}

/// Reads every record of a result directory; a bad line is an error naming its line.
pub fn read(dir: &Path) -> anyhow::Result<Vec<Record>> {
    let path = dir.join(RECORDS_FILE);
    let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let r: Record = serde_json::from_str(&line).with_context(|| format!("{}:{}: not a request record", path.display(), i + 1))?;
        out.push(r);
    }
    Ok(out)
}
