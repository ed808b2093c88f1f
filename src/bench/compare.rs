//! The release gate: compares a new result with a baseline point by point and says whether
//! goodput, throughput or a latency percentile regressed beyond the thresholds, with the
//! run-to-run spread taken into account:
//!
//! - latency percentiles: the change must exceed the relative threshold and an absolute floor
//!   (timer and scheduler jitter of a millisecond is not a regression of a 10 ms figure), a
//!   bootstrap over the per-request records of all repeats (fixed seed, so the verdict is
//!   reproducible) must give a 95% interval of the change that excludes "no change", AND the
//!   repeats must be separated (every new repeat's percentile above every baseline repeat's):
//!   the bootstrap sees only the noise within a run, the repeats show the noise between runs;
//! - the goodput ratio: beyond the threshold and a bootstrap interval that excludes "no change";
//! - throughput: the median across repeats must drop beyond the threshold AND the repeats'
//!   ranges must not overlap.

use std::fmt::Write;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::figure::Figure;
use super::knee::fmt;
use super::records::{Phase, Record};
use super::report::ResultSet;
use super::summary::PointSummary;

/// Gate thresholds.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// Largest allowed relative increase of a latency percentile (0.10 = 10%).
    pub latency_increase: f64,
    /// Largest allowed absolute drop of the goodput ratio (0.02 = 2 points).
    pub goodput_drop: f64,
    /// Largest allowed relative drop of output token throughput (0.10 = 10%).
    pub throughput_drop: f64,
    /// Smallest latency increase that can count, milliseconds.
    pub latency_floor_ms: f64,
    /// Latency figures checked, e.g. `ttft_p95`.
    pub latency: Vec<String>,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            latency_increase: 0.10,
            goodput_drop: 0.02,
            throughput_drop: 0.10,
            latency_floor_ms: 1.0,
            latency: ["ttft_p95", "ttft_p99", "tpot_p95", "tpot_p99", "e2e_p95"].map(String::from).to_vec(),
            resamples: 1000,
            seed: 42,
        }
    }
}

/// One compared figure at one point.
#[derive(Debug, Clone)]
pub struct ComparedFigure {
    pub load: f64,
    pub figure: String,
    pub base: Option<f64>,
    pub new: Option<f64>,
    /// New relative to base (latency, throughput) or absolute difference (goodput ratio).
    pub change: Option<f64>,
    /// 95% interval of the change, when bootstrapped.
    pub interval: Option<(f64, f64)>,
    pub regression: bool,
    pub note: String,
}

/// The comparison: rows and points present on one side only.
#[derive(Debug, Clone)]
pub struct ResultComparison {
    pub rows: Vec<ComparedFigure>,
    pub unmatched: Vec<String>,
}

impl ResultComparison {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.regression)
    }
}

/// Compares every load present in both results.
pub fn compare(base: &ResultSet, new: &ResultSet, t: &Thresholds) -> ResultComparison {
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    let mut rng = StdRng::seed_from_u64(t.seed);
    for bp in &base.summary.points {
        let Some(np) = new.summary.points.iter().find(|p| (p.load - bp.load).abs() < 1e-9) else {
            unmatched.push(format!("load {} only in the baseline", fmt(bp.load)));
            continue;
        };
        let (bv, nv) = (measured(&base.records, bp.point), measured(&new.records, np.point));
        rows.push(goodput_row(bp.load, &bv, &nv, t, &mut rng));
        rows.push(throughput_row(bp, np, t));
        for fig in &t.latency {
            let mut row = latency_row(bp.load, fig, &bv, &nv, t, &mut rng);
            separate(&mut row, bp, np, fig, t);
            rows.push(row);
        }
    }
    for np in &new.summary.points {
        if !base.summary.points.iter().any(|p| (p.load - np.load).abs() < 1e-9) {
            unmatched.push(format!("load {} only in the new result", fmt(np.load)));
        }
    }
    ResultComparison { rows, unmatched }
}

fn measured(records: &[Record], point: usize) -> Vec<&Record> {
    records.iter().filter(|r| r.point == point && r.phase == Phase::Measure).collect()
}

/// `ttft_p95` -> (values of the successful requests, 0.95). ITL pools every frame gap.
fn values(records: &[&Record], figure: &str) -> Option<(Vec<f64>, f64)> {
    let (metric, q) = figure.rsplit_once("_p")?;
    let q: f64 = q.parse::<f64>().ok()? / 100.0;
    let ok = records.iter().filter(|r| r.is_success());
    let v: Vec<f64> = match metric {
        "ttft" => ok.filter_map(|r| r.ttft_ms).collect(),
        "tpot" => ok.filter_map(|r| r.tpot_ms).collect(),
        "e2e" => ok.filter_map(|r| r.e2e_ms).collect(),
        "itl" => ok.flat_map(|r| r.itl_gaps_ms.iter().copied()).collect(),
        _ => return None,
    };
    Some((v, q))
}

/// Nearest-rank percentile without a full sort.
fn pct(v: &mut [f64], q: f64) -> f64 {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    *v.select_nth_unstable_by(rank - 1, f64::total_cmp).1
}

fn resample(v: &[f64], rng: &mut StdRng, into: &mut Vec<f64>) {
    into.clear();
    into.extend((0..v.len()).map(|_| v[rng.random_range(0..v.len())]));
}

/// 2.5% and 97.5% of bootstrap replicates of `stat(new) ⊖ stat(base)`.
fn bootstrap(base: &[f64], new: &[f64], t: &Thresholds, rng: &mut StdRng, stat: impl Fn(&mut [f64]) -> f64, diff: impl Fn(f64, f64) -> f64) -> (f64, f64) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut reps: Vec<f64> = (0..t.resamples.max(10))
        .map(|_| {
            resample(base, rng, &mut a);
            resample(new, rng, &mut b);
            diff(stat(&mut a), stat(&mut b))
        })
        .collect();
    crate::util::stats::sort_f64(&mut reps);
    (crate::util::stats::percentile(&reps, 0.025).unwrap_or(0.0), crate::util::stats::percentile(&reps, 0.975).unwrap_or(0.0))
}

fn latency_row(load: f64, figure: &str, b: &[&Record], n: &[&Record], t: &Thresholds, rng: &mut StdRng) -> ComparedFigure {
    let mut row =
        ComparedFigure { load, figure: format!("{figure}_ms"), base: None, new: None, change: None, interval: None, regression: false, note: String::new() };
    let (Some((mut bv, q)), Some((mut nv, _))) = (values(b, figure), values(n, figure)) else {
        row.note = "unknown figure (use ttft|tpot|itl|e2e _pNN)".into();
        return row;
    };
    if bv.is_empty() || nv.is_empty() {
        row.note = "no successful requests on one side".into();
        row.regression = !bv.is_empty() && nv.is_empty();
        return row;
    }
    let (base, new) = (pct(&mut bv, q), pct(&mut nv, q));
    let rel = |a: f64, b: f64| if a > 0.0 { b / a - 1.0 } else { 0.0 };
    let ci = bootstrap(&bv, &nv, t, rng, |v| pct(v, q), rel);
    row.base = Some(base);
    row.new = Some(new);
    row.change = Some(rel(base, new));
    row.interval = Some(ci);
    row.regression = rel(base, new) > t.latency_increase && ci.0 > 0.0;
    row.note = verdict(row.regression, rel(base, new) > t.latency_increase, ci.0 > 0.0);
    row
}

/// Applies the absolute floor and the repeats' separation to a latency row the bootstrap flagged.
fn separate(row: &mut ComparedFigure, b: &PointSummary, n: &PointSummary, figure: &str, t: &Thresholds) {
    if !row.regression {
        return;
    }
    if let (Some(base), Some(new)) = (row.base, row.new) {
        if new - base <= t.latency_floor_ms {
            row.regression = false;
            row.note = format!("increase within the {} ms floor", t.latency_floor_ms);
            return;
        }
    }
    let Some(figure) = Figure::parse(&format!("{figure}_ms")) else { return };
    // With one repeat per side there is no spread to separate: the bootstrap decides alone.
    if let (Some(bs), Some(ns)) = (b.spread_of(figure), n.spread_of(figure)) {
        if bs.n > 1 && ns.n > 1 && ns.min <= bs.max {
            row.regression = false;
            row.note = "beyond threshold but the repeats overlap".into();
        }
    }
}

fn goodput_row(load: f64, b: &[&Record], n: &[&Record], t: &Thresholds, rng: &mut StdRng) -> ComparedFigure {
    let flags = |rs: &[&Record]| rs.iter().map(|r| if r.is_goodput() { 1.0 } else { 0.0 }).collect::<Vec<f64>>();
    let (bv, nv) = (flags(b), flags(n));
    let mut row =
        ComparedFigure { load, figure: "goodput_ratio".into(), base: None, new: None, change: None, interval: None, regression: false, note: String::new() };
    if bv.is_empty() || nv.is_empty() {
        row.note = "no requests on one side".into();
        return row;
    }
    let mean = |v: &mut [f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (base, new) = (mean(&mut bv.clone()), mean(&mut nv.clone()));
    let ci = bootstrap(&bv, &nv, t, rng, mean, |a, b| b - a);
    let beyond = base - new > t.goodput_drop;
    row.base = Some(base);
    row.new = Some(new);
    row.change = Some(new - base);
    row.interval = Some(ci);
    row.regression = beyond && ci.1 < 0.0;
    row.note = verdict(row.regression, beyond, ci.1 < 0.0);
    row
}

fn throughput_row(b: &PointSummary, n: &PointSummary, t: &Thresholds) -> ComparedFigure {
    let figure = Figure::OutputTokenThroughput;
    let mut row = ComparedFigure {
        load: b.load,
        figure: figure.name().into(),
        base: b.median(figure),
        new: n.median(figure),
        change: None,
        interval: None,
        regression: false,
        note: String::new(),
    };
    let (Some(base), Some(new)) = (row.base, row.new) else { return row };
    let change = if base > 0.0 { new / base - 1.0 } else { 0.0 };
    let beyond = -change > t.throughput_drop;
    // Separated: every new repeat below every baseline repeat.
    let separated = match (b.spread_of(figure), n.spread_of(figure)) {
        (Some(bs), Some(ns)) => ns.max < bs.min,
        _ => true,
    };
    row.change = Some(change);
    row.regression = beyond && separated;
    row.note = if row.regression {
        "REGRESSION".into()
    } else if beyond {
        "drop within the repeats' spread".into()
    } else {
        "ok".into()
    };
    row
}

fn verdict(regression: bool, beyond: bool, significant: bool) -> String {
    match (regression, beyond, significant) {
        (true, _, _) => "REGRESSION".into(),
        (false, true, false) => "beyond threshold but within the bootstrap interval".into(),
        _ => "ok".into(),
    }
}

/// The side-by-side table.
pub fn table(c: &ResultComparison, t: &Thresholds) -> String {
    let mut s = format!(
        "gate: latency +{:.0}% (and +{} ms) max, goodput ratio -{:.3} max, output throughput -{:.0}% max; bootstrap {} resamples, seed {}, 95% interval; repeats must separate\n",
        t.latency_increase * 100.0,
        t.latency_floor_ms,
        t.goodput_drop,
        t.throughput_drop * 100.0,
        t.resamples,
        t.seed
    );
    let _ = writeln!(s, "{:>8}  {:<30} {:>12} {:>12} {:>9} {:>20}  verdict", "load", "figure", "base", "new", "change", "95% interval");
    for r in &c.rows {
        let abs = r.figure == "goodput_ratio";
        let ch = |v: f64| if abs { format!("{v:+.3}") } else { format!("{:+.1}%", v * 100.0) };
        let _ = writeln!(
            s,
            "{:>8}  {:<30} {:>12} {:>12} {:>9} {:>20}  {}",
            fmt(r.load),
            r.figure,
            r.base.map_or("–".into(), |v| format!("{v:.3}")),
            r.new.map_or("–".into(), |v| format!("{v:.3}")),
            r.change.map_or("–".into(), ch),
            r.interval.map_or("–".into(), |(lo, hi)| format!("[{}, {}]", ch(lo), ch(hi))),
            r.note
        );
    }
    for u in &c.unmatched {
        let _ = writeln!(s, "not compared: {u}");
    }
    let n = c.rows.iter().filter(|r| r.regression).count();
    let _ = writeln!(s, "{}", if n == 0 { "result: no regression".to_owned() } else { format!("result: {n} regression(s)") });
    s
}
