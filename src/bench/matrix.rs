//! Matrix planning: `bench.matrix` expands into runs, one per input × output token combination,
//! each a full sweep (over the matrix's load list, else the bench's). Every run has a hash of
//! what it will send, so identical runs are recognisable across machines and days.

use std::fmt::Write;

use serde::Serialize;

use super::plan::BenchPlan;
use crate::config::LengthSpec;

/// One planned run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Subdirectory name under `--output`.
    pub name: String,
    pub mode: String,
    pub points: Vec<f64>,
    /// `None`: the scenarios' own lengths.
    pub input_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
    /// Requests per point: warm-up + repeats × requests (duration-only runs: `None`).
    pub requests_per_point: Option<u64>,
    /// SHA-256 over the config file's hash and this run's overrides.
    pub run_sha256: String,
    #[serde(skip)]
    pub plan: BenchPlan,
}

/// The runs of a plan: the matrix's cells, or the one sweep when there is no matrix.
pub fn expand(plan: &BenchPlan) -> Vec<Run> {
    let b = &plan.bench;
    let Some(m) = &b.matrix else { return vec![run(plan, "sweep", b.points.clone(), None, None)] };
    let points = if m.points.is_empty() { b.points.clone() } else { m.points.clone() };
    let ins: Vec<Option<u32>> = if m.input_tokens.is_empty() { vec![None] } else { m.input_tokens.iter().copied().map(Some).collect() };
    let outs: Vec<Option<u32>> = if m.output_tokens.is_empty() { vec![None] } else { m.output_tokens.iter().copied().map(Some).collect() };
    let mut runs = Vec::new();
    for &i in &ins {
        for &o in &outs {
            let name = format!("in{}-out{}", i.map_or("-".into(), |v| v.to_string()), o.map_or("-".into(), |v| v.to_string()));
            runs.push(run(plan, &name, points.clone(), i, o));
        }
    }
    runs
}

fn run(plan: &BenchPlan, name: &str, points: Vec<f64>, input: Option<u32>, output: Option<u32>) -> Run {
    let mut p = plan.clone();
    p.bench.points = points.clone();
    p.bench.matrix = None;
    for s in &mut p.config.scenarios {
        if let Some(i) = input {
            s.input_tokens = LengthSpec::Fixed(i);
        }
        if let Some(o) = output {
            s.output_tokens = LengthSpec::Fixed(o);
        }
    }
    let b = &p.bench;
    let identity = format!("config={};mode={};points={:?};input={:?};output={:?}", plan.config_sha256, b.mode.as_str(), points, input, output);
    Run {
        name: name.to_owned(),
        mode: b.mode.as_str().to_owned(),
        requests_per_point: b.requests.map(|n| b.warmup_requests + u64::from(b.repeats) * n),
        run_sha256: crate::workload::sha256_hex(identity.as_bytes()),
        points,
        input_tokens: input,
        output_tokens: output,
        plan: p,
    }
}

/// The dry-run listing.
pub fn listing(runs: &[Run]) -> String {
    let mut s = format!("{:<20} {:<12} {:<24} {:>7} {:>7} {:>10}  run sha256\n", "run", "mode", "points", "input", "output", "req/point");
    let mut total = Some(0u64);
    for r in runs {
        let pts: Vec<String> = r.points.iter().map(|&p| super::knee::fmt(p)).collect();
        let _ = writeln!(
            s,
            "{:<20} {:<12} {:<24} {:>7} {:>7} {:>10}  {}",
            r.name,
            r.mode,
            pts.join(","),
            r.input_tokens.map_or("scenario".into(), |v| v.to_string()),
            r.output_tokens.map_or("scenario".into(), |v| v.to_string()),
            r.requests_per_point.map_or("duration".into(), |v| v.to_string()),
            r.run_sha256
        );
        total = total.zip(r.requests_per_point).map(|(t, n)| t + n * r.points.len() as u64);
    }
    let _ = writeln!(
        s,
        "{} run(s); {}; nothing sent (--dry-run)",
        runs.len(),
        total.map_or("request count set by duration".into(), |t| format!("{t} requests in total"))
    );
    s
}
