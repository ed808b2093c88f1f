//! Figures per point and repeat, computed from the request records alone (so merged result
//! directories summarise exactly like one), the spread across repeats, and the summary file.
//!
//! Percentiles are nearest-rank (`stats::percentile`): always a value that was observed.
//! Windows use wall-clock (`*_unix_s`) so that records from several machines can be pooled.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::figure::Figure;
use super::records::{Phase, Record};
use crate::util::stats::{percentile, sort_f64};

/// The summary file inside a result directory.
pub const SUMMARY_FILE: &str = "summary.json";

/// Stated in every summary file.
pub const PERCENTILE_METHOD: &str = "nearest-rank: the value at rank ceil(q*n) of the sorted sample; no interpolation";

/// Figures of one repeat of one point (or of all repeats pooled, `repeat: None`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatSummary {
    pub point: usize,
    pub load: f64,
    pub repeat: Option<u32>,
    /// Every request of the repeat: success + failed + dropped.
    pub requests: u64,
    pub success: u64,
    /// Sent and failed (by class in `errors`).
    pub failed: u64,
    /// Not sent: the in-flight cap was reached.
    pub dropped: u64,
    pub errors: BTreeMap<String, u64>,
    /// First intended send -> last request end, seconds.
    pub duration_s: f64,
    pub request_throughput_rps: f64,
    pub output_token_throughput_per_s: f64,
    pub total_token_throughput_per_s: f64,
    pub goodput_requests: u64,
    pub request_goodput_rps: f64,
    /// goodput_requests / requests (failures and drops count against it).
    pub goodput_ratio: f64,
    /// Rate mode: the point's target arrival rate.
    pub target_rate_rps: Option<f64>,
    /// Intended arrivals per second over the schedule: (n - 1) / (last - first intended).
    pub offered_rate_rps: Option<f64>,
    /// Sends per second the server actually got: (n - 1) / (last - first send).
    pub achieved_rate_rps: Option<f64>,
    pub schedule_lag_p99_ms: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p95_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p95_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub itl_p50_ms: Option<f64>,
    pub itl_p95_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p95_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    /// The engine's own counters over this repeat's window against the prober's figures
    /// (`engine.rs`); present only for a repeat of a single run whose engine page was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_agreement: Option<super::engine::Agreement>,
}

impl RepeatSummary {
    /// One figure of this repeat.
    pub fn get(&self, figure: Figure) -> Option<f64> {
        match figure {
            Figure::RequestThroughput => Some(self.request_throughput_rps),
            Figure::OutputTokenThroughput => Some(self.output_token_throughput_per_s),
            Figure::TotalTokenThroughput => Some(self.total_token_throughput_per_s),
            Figure::RequestGoodput => Some(self.request_goodput_rps),
            Figure::GoodputRatio => Some(self.goodput_ratio),
            Figure::TtftP50 => self.ttft_p50_ms,
            Figure::TtftP95 => self.ttft_p95_ms,
            Figure::TtftP99 => self.ttft_p99_ms,
            Figure::TpotP50 => self.tpot_p50_ms,
            Figure::TpotP95 => self.tpot_p95_ms,
            Figure::TpotP99 => self.tpot_p99_ms,
            Figure::ItlP50 => self.itl_p50_ms,
            Figure::ItlP95 => self.itl_p95_ms,
            Figure::ItlP99 => self.itl_p99_ms,
            Figure::E2eP50 => self.e2e_p50_ms,
            Figure::E2eP95 => self.e2e_p95_ms,
            Figure::E2eP99 => self.e2e_p99_ms,
        }
    }
}

/// Spread of one figure across repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub min: f64,
    /// Nearest-rank median of the repeats' values.
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation / mean; `None` with fewer than two repeats or a zero mean.
    pub cv: Option<f64>,
}

/// One load point: each repeat, all repeats pooled, and the spread across repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointSummary {
    pub point: usize,
    pub load: f64,
    pub warmup_requests: u64,
    pub repeats: Vec<RepeatSummary>,
    pub pooled: RepeatSummary,
    pub spread: BTreeMap<String, Spread>,
}

impl PointSummary {
    /// The median across repeats of a figure (the pooled value when there is no spread).
    pub fn median(&self, figure: Figure) -> Option<f64> {
        self.spread_of(figure).map(|s| s.median).or_else(|| self.pooled.get(figure))
    }

    /// The spread of a figure across repeats, when the repeats have it.
    pub fn spread_of(&self, figure: Figure) -> Option<&Spread> {
        self.spread.get(figure.name())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// Largest load with goodput ratio >= objective at it and at every lighter point.
    pub candidate: Option<f64>,
    pub candidate_reason: String,
    /// Last load before throughput stopped growing while TTFT p95 rose.
    pub saturation: Option<f64>,
    pub saturation_reason: String,
}

/// The whole `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryFile {
    /// Run IDs whose records are summarised (several after a merge).
    pub run_ids: Vec<String>,
    pub mode: String,
    pub percentile_method: String,
    pub goodput_objective: f64,
    pub points: Vec<PointSummary>,
    pub knee: Knee,
}

fn sorted(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.collect();
    sort_f64(&mut v);
    v
}

fn span_rate(mut times: Vec<f64>) -> Option<f64> {
    if times.len() < 2 {
        return None;
    }
    sort_f64(&mut times);
    let span = times[times.len() - 1] - times[0];
    (span > 0.0).then(|| (times.len() - 1) as f64 / span)
}

/// Summarises a set of measured records (one repeat, or several pooled).
pub fn summarize(records: &[&Record], point: usize, load: f64, repeat: Option<u32>, rate_mode: bool) -> RepeatSummary {
    let ok: Vec<&Record> = records.iter().copied().filter(|r| r.is_success()).collect();
    let dropped = records.iter().filter(|r| r.is_dropped()).count() as u64;
    let mut errors = BTreeMap::new();
    for r in records.iter().filter(|r| !r.is_success()) {
        *errors.entry(r.error_class.clone().unwrap_or_else(|| "unknown".into())).or_insert(0) += 1;
    }
    let start = records.iter().map(|r| r.intended_unix_s).fold(f64::INFINITY, f64::min);
    let end = records.iter().map(|r| r.end_unix_s).fold(f64::NEG_INFINITY, f64::max);
    let duration_s = if records.is_empty() { 0.0 } else { (end - start).max(0.0) };
    let per_s = |x: f64| if duration_s > 0.0 { x / duration_s } else { 0.0 };
    let out_tokens: u64 = ok.iter().filter_map(|r| r.output_tokens).sum();
    let in_tokens: u64 = ok.iter().map(|r| r.input_tokens.unwrap_or(r.requested_input_tokens as u64)).sum();
    let goodput = records.iter().filter(|r| r.is_goodput()).count() as u64;
    let ttft = sorted(ok.iter().filter_map(|r| r.ttft_ms));
    let tpot = sorted(ok.iter().filter_map(|r| r.tpot_ms));
    let itl = sorted(ok.iter().flat_map(|r| r.itl_gaps_ms.iter().copied()));
    let e2e = sorted(ok.iter().filter_map(|r| r.e2e_ms));
    let lag = sorted(records.iter().filter(|r| !r.is_dropped()).map(|r| r.schedule_lag_ms));
    let n = records.len() as u64;
    RepeatSummary {
        point,
        load,
        repeat,
        requests: n,
        success: ok.len() as u64,
        failed: n - ok.len() as u64 - dropped,
        dropped,
        errors,
        duration_s,
        request_throughput_rps: per_s(ok.len() as f64),
        output_token_throughput_per_s: per_s(out_tokens as f64),
        total_token_throughput_per_s: per_s((out_tokens + in_tokens) as f64),
        goodput_requests: goodput,
        request_goodput_rps: per_s(goodput as f64),
        goodput_ratio: if n > 0 { goodput as f64 / n as f64 } else { 0.0 },
        target_rate_rps: rate_mode.then_some(load),
        offered_rate_rps: span_rate(records.iter().map(|r| r.intended_unix_s).collect()),
        achieved_rate_rps: span_rate(records.iter().filter(|r| !r.is_dropped()).map(|r| r.sent_unix_s).collect()),
        schedule_lag_p99_ms: percentile(&lag, 0.99),
        ttft_p50_ms: percentile(&ttft, 0.5),
        ttft_p95_ms: percentile(&ttft, 0.95),
        ttft_p99_ms: percentile(&ttft, 0.99),
        tpot_p50_ms: percentile(&tpot, 0.5),
        tpot_p95_ms: percentile(&tpot, 0.95),
        tpot_p99_ms: percentile(&tpot, 0.99),
        itl_p50_ms: percentile(&itl, 0.5),
        itl_p95_ms: percentile(&itl, 0.95),
        itl_p99_ms: percentile(&itl, 0.99),
        e2e_p50_ms: percentile(&e2e, 0.5),
        e2e_p95_ms: percentile(&e2e, 0.95),
        e2e_p99_ms: percentile(&e2e, 0.99),
        engine_agreement: None,
    }
}

/// Spread of each figure across the repeats that have it.
pub fn spread(repeats: &[RepeatSummary]) -> BTreeMap<String, Spread> {
    let mut out = BTreeMap::new();
    for figure in Figure::ALL {
        let values = sorted(repeats.iter().filter_map(|r| r.get(figure)));
        if values.is_empty() {
            continue;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let cv = (n >= 2 && mean != 0.0).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            var.sqrt() / mean.abs()
        });
        out.insert(figure.name().to_owned(), Spread { n, min: values[0], median: percentile(&values, 0.5).unwrap_or(values[0]), max: values[n - 1], mean, cv });
    }
    out
}

/// Summarises every point of a set of records (from one run or merged runs). A point's load is
/// the sum of the loads of the runs that contributed to it (pods that split the rate add up).
pub fn points(records: &[Record], rate_mode: bool) -> Vec<PointSummary> {
    let mut by_point: BTreeMap<usize, Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_point.entry(r.point).or_default().push(r);
    }
    by_point.into_iter().map(|(point, recs)| point_summary(point, &recs, rate_mode)).collect()
}

fn point_summary(point: usize, recs: &[&Record], rate_mode: bool) -> PointSummary {
    let mut loads: BTreeMap<&str, f64> = BTreeMap::new();
    for r in recs {
        loads.insert(r.run_id.as_str(), r.load);
    }
    let load: f64 = loads.values().sum();
    let measured: Vec<&Record> = recs.iter().copied().filter(|r| r.phase == Phase::Measure).collect();
    let warmup_requests = (recs.len() - measured.len()) as u64;
    let mut by_repeat: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in &measured {
        by_repeat.entry(r.repeat.unwrap_or(0)).or_default().push(r);
    }
    let repeats: Vec<RepeatSummary> = by_repeat.iter().map(|(&k, v)| summarize(v, point, load, Some(k), rate_mode)).collect();
    let pooled = pool(summarize(&measured, point, load, None, rate_mode), &repeats);
    PointSummary { point, load, warmup_requests, spread: spread(&repeats), pooled, repeats }
}

/// All repeats pooled: percentiles over every record, but rates over the repeats' own windows
/// (the time between repeats is not load time).
fn pool(mut pooled: RepeatSummary, repeats: &[RepeatSummary]) -> RepeatSummary {
    let duration: f64 = repeats.iter().map(|r| r.duration_s).sum();
    let per_s = |count: f64| if duration > 0.0 { count / duration } else { 0.0 };
    let tokens_out: f64 = repeats.iter().map(|r| r.output_token_throughput_per_s * r.duration_s).sum();
    let tokens_all: f64 = repeats.iter().map(|r| r.total_token_throughput_per_s * r.duration_s).sum();
    pooled.duration_s = duration;
    pooled.request_throughput_rps = per_s(pooled.success as f64);
    pooled.request_goodput_rps = per_s(pooled.goodput_requests as f64);
    pooled.output_token_throughput_per_s = per_s(tokens_out);
    pooled.total_token_throughput_per_s = per_s(tokens_all);
    let mean = |f: fn(&RepeatSummary) -> Option<f64>| {
        let v: Vec<f64> = repeats.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    pooled.offered_rate_rps = mean(|r| r.offered_rate_rps);
    pooled.achieved_rate_rps = mean(|r| r.achieved_rate_rps);
    pooled
}
