//! Probe-rate planner: drives the real `Detector` in virtual time with synthetic (or replayed)
//! probes and measures detection probability, time to detect and false alarms.
//!
//! Two kinds of trial, each with a fresh detector and its own seed:
//! - a detection trial warms the baselines up for `warmup_s`, marks a release, applies the
//!   regression and runs until the first pooled `regressed` row (any signal, either detector) or
//!   the horizon;
//! - a null trial is one simulated day (after the same warm-up) with one release at a random time
//!   and no regression; every pooled transition to `regressed` during the day is a false alarm,
//!   counted by source. False alarms per 30 days = 30 × alarms per simulated day, so the
//!   release-armed tests and the continuous detector are measured together, on the same probes.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, StandardNormal};

use super::detector::{Detector, Observation, Signal, Source, State};
use crate::config::DetectSettings;

/// One recorded probe used as the baseline distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayProbe {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2e: Option<f64>,
    pub good: bool,
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct PlanParams {
    /// Probes per second to the target, all scenarios together.
    pub rate: f64,
    pub scenarios: usize,
    pub ttft_median_s: f64,
    pub ttft_sigma: f64,
    pub tpot_median_s: f64,
    pub tpot_sigma: f64,
    /// e2e = ttft + output_tokens × tpot.
    pub output_tokens: f64,
    /// Factor on TTFT after the release (1 = none).
    pub regression: f64,
    pub good_before: f64,
    pub good_after: f64,
    /// Relative amplitude of the daily latency cycle (0.2 = ±20%).
    pub drift: f64,
    pub drift_period_s: f64,
    pub outlier_share: f64,
    pub outlier_factor: f64,
    pub trials: usize,
    pub seed: u64,
    /// How long a detection trial runs after the release (s).
    pub horizon_s: f64,
    /// Baseline warm-up before the release (s).
    pub warmup_s: f64,
    /// Worker threads (0: all cores).
    pub threads: usize,
    /// Mark the release (false: a silent regression, only the continuous detector can see it).
    pub marker: bool,
    /// Recorded probes per scenario; when set they replace the synthetic distributions.
    pub replay: Option<Vec<Vec<ReplayProbe>>>,
    pub settings: DetectSettings,
}

impl PlanParams {
    /// The acceptance scenario's parameters with the given detector settings.
    pub fn new(settings: DetectSettings) -> Self {
        let warmup_s = settings.goodput_baseline_s.max(settings.latency_baseline_s).max(settings.continuous_warmup_s);
        PlanParams {
            rate: 0.5,
            scenarios: 3,
            ttft_median_s: 0.2,
            ttft_sigma: 0.5,
            tpot_median_s: 0.02,
            tpot_sigma: 0.2,
            output_tokens: 64.0,
            regression: 1.25,
            good_before: 0.995,
            good_after: 0.995,
            drift: 0.2,
            drift_period_s: 86_400.0,
            outlier_share: 0.01,
            outlier_factor: 10.0,
            trials: 1000,
            seed: 1,
            horizon_s: 3600.0,
            warmup_s,
            threads: 0,
            marker: true,
            replay: None,
            settings,
        }
    }
}

/// What the planner measured.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanResult {
    pub trials: usize,
    /// Time from release to detection per detection trial (`None`: not within the horizon).
    pub detect_s: Vec<Option<f64>>,
    /// Simulated days of the null trials and the false alarms in them, by source.
    pub days: f64,
    pub armed_alarms: u64,
    pub continuous_alarms: u64,
    /// Null trials whose release window raised at least one alarm.
    pub windows_alarmed: u64,
    /// False alarms by signal (ttft, tpot, e2e, goodput): (release-armed, continuous).
    pub by_signal: [(u64, u64); 4],
}

impl PlanResult {
    pub fn detected_within(&self, s: f64) -> f64 {
        self.detect_s.iter().filter(|d| d.is_some_and(|d| d <= s)).count() as f64 / self.detect_s.len().max(1) as f64
    }

    /// Median time to detect (s); `None` when fewer than half the trials detected.
    pub fn median_detect_s(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.detect_s.iter().map(|d| d.unwrap_or(f64::INFINITY)).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len().saturating_sub(1) / 2).copied().filter(|m| m.is_finite())
    }

    pub fn per_30_days(&self, alarms: u64) -> f64 {
        alarms as f64 / self.days.max(1e-9) * 30.0
    }
}

struct Gen<'a> {
    p: &'a PlanParams,
    rng: SmallRng,
    phase: f64,
    exp: Exp<f64>,
}

impl Gen<'_> {
    fn normal(&mut self) -> f64 {
        StandardNormal.sample(&mut self.rng)
    }

    fn probe(&mut self, scenario: usize, t: f64, after: bool) -> Observation {
        let p = self.p;
        let drift = 1.0 + p.drift * (std::f64::consts::TAU * t / p.drift_period_s + self.phase).sin();
        let outlier = p.outlier_share > 0.0 && self.rng.random_bool(p.outlier_share.min(1.0));
        let f = drift * if outlier { p.outlier_factor } else { 1.0 };
        let reg = if after { p.regression } else { 1.0 };
        let (bad_before, bad_after) = (1.0 - p.good_before, 1.0 - p.good_after);
        if let Some(replay) = &p.replay {
            let pool = &replay[scenario % replay.len()];
            let r = pool[self.rng.random_range(0..pool.len())];
            let mut good = r.good;
            if after && good && bad_after > bad_before {
                good = !self.rng.random_bool(((bad_after - bad_before) / (1.0 - bad_before)).min(1.0));
            }
            let ttft = r.ttft.map(|v| v * f * reg);
            let tpot = r.tpot.map(|v| v * f);
            let e2e = r.e2e.map(|v| v * f + r.ttft.map_or(0.0, |x| x * f * (reg - 1.0)));
            return Observation { ttft, tpot, e2e, good: Some(good) };
        }
        let bad = if after { bad_after } else { bad_before };
        if self.rng.random_bool(bad.clamp(0.0, 1.0)) {
            return Observation { ttft: None, tpot: None, e2e: None, good: Some(false) };
        }
        let ttft = p.ttft_median_s * (p.ttft_sigma * self.normal()).exp() * f * reg;
        let tpot = p.tpot_median_s * (p.tpot_sigma * self.normal()).exp() * f;
        Observation { ttft: Some(ttft), tpot: Some(tpot), e2e: Some(ttft + p.output_tokens * tpot), good: Some(true) }
    }

    fn next_gap(&mut self) -> f64 {
        self.exp.sample(&mut self.rng)
    }
}

const TARGET: &str = "target";

fn scenario_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("s{i}")).collect()
}

/// Runs one detection trial: seconds from release to the first pooled `regressed`, if any.
fn detection_trial(p: &PlanParams, seed: u64) -> Option<f64> {
    let names = scenario_names(p.scenarios.max(1));
    let mut rng = SmallRng::seed_from_u64(seed);
    let phase = rng.random_range(0.0..std::f64::consts::TAU);
    let mut g = Gen { p, rng, phase, exp: Exp::new(p.rate).expect("rate > 0") };
    let mut det = Detector::new(p.settings.clone());
    let release = p.warmup_s;
    let mut released = false;
    let mut t = 0.0;
    loop {
        t += g.next_gap();
        if !released && t >= release {
            if p.marker {
                det.mark_release(TARGET, release);
            }
            det.drain_events();
            released = true;
        }
        if t > release + p.horizon_s {
            return None;
        }
        let s = g.rng.random_range(0..names.len());
        let obs = g.probe(s, t, released);
        det.observe(TARGET, &names[s], obs, t);
        if det.has_events() {
            let ev = det.drain_events();
            if released && ev.iter().any(|e| e.scenario.is_none() && e.state == State::Regressed) {
                return Some(t - release);
            }
        }
    }
}

/// Runs one null day: false alarms by signal, (release-armed, continuous).
fn null_trial(p: &PlanParams, seed: u64) -> [(u64, u64); 4] {
    let names = scenario_names(p.scenarios.max(1));
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9E37_79B9_7F4A_7C15);
    let phase = rng.random_range(0.0..std::f64::consts::TAU);
    let release = p.warmup_s + rng.random_range(0.0..86_400.0);
    let mut g = Gen { p, rng, phase, exp: Exp::new(p.rate).expect("rate > 0") };
    let mut det = Detector::new(p.settings.clone());
    let end = p.warmup_s + 86_400.0;
    let mut alarms = [(0u64, 0u64); 4];
    let mut released = false;
    let mut t = 0.0;
    while t < end {
        t += g.next_gap();
        if !released && t >= release {
            det.mark_release(TARGET, release);
            released = true;
        }
        let s = g.rng.random_range(0..names.len());
        let obs = g.probe(s, t, false);
        det.observe(TARGET, &names[s], obs, t);
        if det.has_events() {
            for e in det.drain_events() {
                if e.scenario.is_none() && e.state == State::Regressed && e.at >= p.warmup_s {
                    let a = &mut alarms[Signal::ALL.iter().position(|s| *s == e.signal).unwrap_or(0)];
                    match e.source {
                        Source::Release => a.0 += 1,
                        Source::Continuous => a.1 += 1,
                    }
                }
            }
        }
    }
    alarms
}

fn parallel<T: Send>(n: usize, threads: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = if threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { threads };
    let threads = threads.clamp(1, n.max(1));
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    std::thread::scope(|scope| {
        let f = &f;
        let chunks: Vec<_> = out
            .chunks_mut(n.div_ceil(threads).max(1))
            .enumerate()
            .map(|(c, chunk)| {
                let base = c * n.div_ceil(threads).max(1);
                scope.spawn(move || {
                    for (i, slot) in chunk.iter_mut().enumerate() {
                        *slot = Some(f(base + i));
                    }
                })
            })
            .collect();
        for c in chunks {
            c.join().expect("a simulation thread panicked");
        }
    });
    out.into_iter().map(|x| x.expect("every trial ran")).collect()
}

/// Runs the detection trials and the null days.
pub fn run(p: &PlanParams) -> PlanResult {
    let detect_s = parallel(p.trials, p.threads, |i| detection_trial(p, p.seed.wrapping_mul(1_000_003).wrapping_add(i as u64)));
    let null = parallel(p.trials, p.threads, |i| null_trial(p, p.seed.wrapping_mul(1_000_003).wrapping_add(i as u64)));
    PlanResult {
        trials: p.trials,
        detect_s,
        days: p.trials as f64,
        armed_alarms: null.iter().flatten().map(|n| n.0).sum(),
        continuous_alarms: null.iter().flatten().map(|n| n.1).sum(),
        windows_alarmed: null.iter().filter(|n| n.iter().any(|a| a.0 > 0)).count() as u64,
        by_signal: std::array::from_fn(|i| (null.iter().map(|n| n[i].0).sum(), null.iter().map(|n| n[i].1).sum())),
    }
}

/// Only the detection trials (for tests and quick looks).
pub fn run_detection(p: &PlanParams) -> Vec<Option<f64>> {
    parallel(p.trials, p.threads, |i| detection_trial(p, p.seed.wrapping_mul(1_000_003).wrapping_add(i as u64)))
}

/// Upper end of a one-sided 95% Poisson interval for a count (for "≤ x per 30 days" claims).
pub fn poisson_upper95(k: u64) -> f64 {
    // Wilson–Hilferty approximation of the chi-square quantile, 2(k+1) degrees of freedom.
    let df = 2.0 * (k as f64 + 1.0);
    let z = 1.644_853_626_951_472_2;
    let c = 1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt();
    df * c * c * c / 2.0
}

/// The planner's table.
pub fn format(p: &PlanParams, r: &PlanResult) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let minutes = |s: Option<f64>| s.map_or_else(|| format!("> {:.0} min", p.horizon_s / 60.0), |s| format!("{:.1} min", s / 60.0));
    let _ = writeln!(o, "probes: {:.3}/s per target over {} scenarios ({:.1} per minute)", p.rate, p.scenarios, p.rate * 60.0);
    match &p.replay {
        Some(r) => {
            let _ = writeln!(o, "latency: replayed records ({} scenarios, {} probes)", r.len(), r.iter().map(Vec::len).sum::<usize>());
        }
        None => {
            let _ = writeln!(
                o,
                "latency: TTFT lognormal median {:.0} ms sigma {:.2}; TPOT median {:.1} ms sigma {:.2}; e2e = TTFT + {} x TPOT",
                p.ttft_median_s * 1e3,
                p.ttft_sigma,
                p.tpot_median_s * 1e3,
                p.tpot_sigma,
                p.output_tokens
            );
        }
    }
    let _ = writeln!(
        o,
        "drift: +-{:.0}% over {:.0} h; outliers: {:.1}% at x{}",
        p.drift * 100.0,
        p.drift_period_s / 3600.0,
        p.outlier_share * 100.0,
        p.outlier_factor
    );
    let _ = writeln!(o, "release: TTFT x{}, goodput {:.2}% -> {:.2}%", p.regression, p.good_before * 100.0, p.good_after * 100.0);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "detection ({} trials, release after {:.0} h of baseline{}):",
        r.trials,
        p.warmup_s / 3600.0,
        if p.marker { "" } else { ", no marker: continuous detector only" }
    );
    for m in [5.0, 15.0, 60.0] {
        if m * 60.0 <= p.horizon_s + 1e-9 {
            let _ = writeln!(o, "  detected within {m:>2} min   {:.3}", r.detected_within(m * 60.0));
        }
    }
    let _ = writeln!(o, "  median time to detect    {}", minutes(r.median_detect_s()));
    let _ = writeln!(o);
    let total = r.armed_alarms + r.continuous_alarms;
    let _ = writeln!(o, "false alarms without a regression ({:.0} simulated days, one release a day; per 30 days, 95% upper bound):", r.days);
    for (label, k) in [("release-armed", r.armed_alarms), ("continuous", r.continuous_alarms), ("total", total)] {
        let _ = writeln!(o, "  {label:<14} {:>6.3}  (<= {:.3})  [{k} alarms]", r.per_30_days(k), poisson_upper95(k) / r.days.max(1e-9) * 30.0);
    }
    let _ = writeln!(o, "  release windows with an alarm: {} of {:.0}", r.windows_alarmed, r.days);
    let by: Vec<String> = Signal::ALL.iter().zip(&r.by_signal).map(|(s, (a, c))| format!("{} {a}+{c}", s.as_str())).collect();
    let _ = writeln!(o, "  alarms by signal (release-armed+continuous): {}", by.join(", "));
    o
}
