//! The online detector: bounded rolling baselines per target × scenario × signal, release-armed
//! sequential tests against the baseline frozen at the marker, and a continuous CUSUM.
//!
//! Pure and I/O free: time is the `now` the caller passes (seconds, one clock throughout).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::math::{Z95, log_sum_exp, proportion_delta, quantile_se};
use crate::config::DetectSettings;

/// One probe as the detector sees it. Latencies in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observation {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2e: Option<f64>,
    /// `Some(true)`: succeeded and met the SLO; `Some(false)`: failed or missed it; `None`: the
    /// probe's own failure (dropped, cancelled) — the whole observation is ignored.
    pub good: Option<bool>,
}

/// What is tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    Ttft,
    Tpot,
    E2e,
    Goodput,
}

impl Signal {
    pub const ALL: [Signal; 4] = [Signal::Ttft, Signal::Tpot, Signal::E2e, Signal::Goodput];
    pub const LATENCY: [Signal; 3] = [Signal::Ttft, Signal::Tpot, Signal::E2e];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Ttft => "ttft",
            Signal::Tpot => "tpot",
            Signal::E2e => "e2e",
            Signal::Goodput => "goodput",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// State of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Watching,
    Regressed,
    Recovered,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Watching => "watching",
            State::Regressed => "regressed",
            State::Recovered => "recovered",
        }
    }
}

/// Which detector set `regressed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The sequential test armed by a release marker.
    Release,
    /// The marker-free CUSUM.
    Continuous,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Release => "release",
            Source::Continuous => "continuous",
        }
    }
}

/// A point estimate with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// One row of the exported state: a target × scenario × signal, or (scenario `None`) the
/// target's pooled row for the signal.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalReport {
    pub target: String,
    pub scenario: Option<String>,
    pub signal: Signal,
    pub state: State,
    /// What set the current `regressed`/`recovered` state; `None` while watching.
    pub source: Option<Source>,
    /// A release window is open.
    pub armed: bool,
    /// The last release marker of the target.
    pub marker_s: Option<f64>,
    /// When the state last changed.
    pub changed_s: Option<f64>,
    /// Probes since the marker that entered the test.
    pub samples: u64,
    /// Probes in the baseline: frozen at the marker once marked, else the current window.
    pub baseline_samples: u64,
    /// Latency: post/pre ratio of the median and of p95 (95% interval).
    pub median_ratio: Option<Estimate>,
    pub p95_ratio: Option<Estimate>,
    /// Goodput: post − pre bad fraction (95% interval).
    pub bad_delta: Option<Estimate>,
    /// ln of the release test's mixture likelihood ratio (an e-value), now.
    pub log_evidence: f64,
    /// Always-valid p-value of the release test: min over time of 1/e-value.
    pub p_value: f64,
    /// `log_evidence` at or above this is `regressed`.
    pub threshold: f64,
    /// Pooled rows: the continuous CUSUM statistic and its alarm threshold (0 for scenario rows).
    pub cusum: f64,
    pub cusum_threshold: f64,
}

/// A state change, for logs and alerts.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub target: String,
    pub scenario: Option<String>,
    pub signal: Signal,
    pub state: State,
    pub source: Source,
    pub at: f64,
}

/// Counters of input the detector did not use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ignored {
    /// Observations with `good: None`.
    pub own_failures: u64,
    /// Observations of a new key beyond `max_keys`.
    pub over_key_cap: u64,
    /// Latency values that were not finite and positive.
    pub bad_values: u64,
}

/// Exponentially weighted mean and variance (time constant from the settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Ewma {
    pub n: u64,
    pub mean: f64,
    pub var: f64,
    pub last: f64,
}

impl Ewma {
    fn weight(&self, now: f64, tau: f64) -> f64 {
        let by_time = 1.0 - (-(now - self.last).max(0.0) / tau).exp();
        (1.0 / (self.n as f64 + 1.0)).max(by_time)
    }

    /// Adds `y`, winsorized at mean ± clip·sd once there is a spread to clip with.
    fn push(&mut self, y: f64, now: f64, tau: f64, clip: f64) {
        let a = self.weight(now, tau);
        let y = if self.n >= 10 && self.var > 0.0 {
            let sd = self.var.sqrt();
            y.clamp(self.mean - clip * sd, self.mean + clip * sd)
        } else {
            y
        };
        if self.n == 0 {
            self.mean = y;
            self.var = 0.0;
        } else {
            let d = y - self.mean;
            self.mean += a * d;
            self.var = (1.0 - a) * (self.var + a * d * d);
        }
        self.n += 1;
        self.last = now;
    }
}

/// One bin of goodput counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Bin {
    pub start: f64,
    pub good: u32,
    pub bad: u32,
}

/// Baseline of one latency signal frozen at a marker (log seconds).
#[derive(Debug, Clone)]
struct LatencyFrozen {
    m: usize,
    median: f64,
    se_median: f64,
    p95: f64,
    se_p95: f64,
    lo: f64,
    hi: f64,
    /// Mean and variance of the winsorized log values.
    mean: f64,
    var: f64,
}

impl LatencyFrozen {
    /// `reach`: the largest log shift the test weighs. The clip bounds are that much wider than
    /// `clip` robust sd, so a slowdown the test is built to find is never clipped away when the
    /// baseline is tight (precise timing of a quiet server), while one 10x probe stays bounded.
    fn from_values(mut v: Vec<f32>, clip: f64, reach: f64) -> Option<Self> {
        v.sort_by(|a, b| a.total_cmp(b));
        let (median, se_median) = quantile_se(&v, 0.5)?;
        let (p95, se_p95) = quantile_se(&v, 0.95)?;
        let mut dev: Vec<f32> = v.iter().map(|x| (*x as f64 - median).abs() as f32).collect();
        dev.sort_by(|a, b| a.total_cmp(b));
        let mad = quantile_se(&dev, 0.5)?.0 * 1.4826;
        let n = v.len() as f64;
        let raw_mean = v.iter().map(|x| *x as f64).sum::<f64>() / n;
        let raw_sd = (v.iter().map(|x| (*x as f64 - raw_mean).powi(2)).sum::<f64>() / n).sqrt();
        let scale = if mad > 1e-6 { mad } else { raw_sd.max(1e-3) };
        let (lo, hi) = (median - clip * scale - reach, median + clip * scale + reach);
        let c: Vec<f64> = v.iter().map(|x| (*x as f64).clamp(lo, hi)).collect();
        let mean = c.iter().sum::<f64>() / n;
        let var = (c.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0)).max(1e-6);
        Some(LatencyFrozen { m: v.len(), median, se_median, p95, se_p95, lo, hi, mean, var })
    }

    /// ln LR of "post mean of winsorized logs = pre + null + δ" against "= pre + null", for the translation-
    /// invariant statistic (post mean − pre mean ~ N(δ, σ²/m + s²/n)): the baseline's own
    /// sampling error is in the variance, and so is the post probes' spread `s²` when it is wider
    /// than the baseline's (Welch), so a few post outliers on a tight baseline are spread, not a
    /// shift. Two post probes at least: one says nothing about spread.
    fn llr(&self, post: &LatencyPost, null: f64, delta: f64) -> f64 {
        if post.n < 2 {
            return 0.0;
        }
        let (n, m) = (post.n as f64, self.m as f64);
        let mean = post.sum / n;
        let post_var = ((post.sum_sq - n * mean * mean) / (n - 1.0)).max(self.var);
        let var = self.var / m + post_var / n;
        let d = mean - self.mean - null;
        (delta * d - delta * delta / 2.0) / var
    }
}

#[derive(Debug, Clone, Default)]
struct LatencyPost {
    n: u64,
    /// Sum and sum of squares of the winsorized log values.
    sum: f64,
    sum_sq: f64,
    values: Vec<f32>,
}

#[derive(Debug, Clone, Default)]
struct LatencyKey {
    times: VecDeque<f64>,
    values: VecDeque<f32>,
    ewma: Ewma,
    frozen: Option<LatencyFrozen>,
    post: LatencyPost,
    /// Reference (mean, variance) of the "no longer worse" test while regressed.
    reference: Option<(f64, f64)>,
}

#[derive(Debug, Clone, Copy)]
struct GoodFrozen {
    bad: u64,
    n: u64,
}

impl GoodFrozen {
    /// Posterior of the baseline bad fraction: Beta(bad + ½, good + ½).
    fn ab(&self) -> (f64, f64) {
        (self.bad as f64 + 0.5, (self.n - self.bad) as f64 + 0.5)
    }
    fn p_hat(&self) -> f64 {
        let (a, b) = self.ab();
        a / (a + b)
    }
}

#[derive(Debug, Clone, Default)]
struct GoodputKey {
    bins: VecDeque<Bin>,
    /// EWMA of the bad indicator (mean = bad fraction).
    ewma: Ewma,
    frozen: Option<GoodFrozen>,
    post_n: u64,
    post_bad: u64,
    /// ln of the null's sequential predictive probability of the post probes (Beta-binomial:
    /// the baseline's sampling error integrated out).
    ln_m0: f64,
    reference: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    state: State,
    source: Option<Source>,
    changed: Option<f64>,
    log_e: f64,
    max_log_e: f64,
    recovery: f64,
}

impl Default for Row {
    fn default() -> Self {
        Row { state: State::Watching, source: None, changed: None, log_e: 0.0, max_log_e: 0.0, recovery: 0.0 }
    }
}

#[derive(Debug, Clone)]
struct ScenarioState {
    name: String,
    first_seen: f64,
    latency: [LatencyKey; 3],
    goodput: GoodputKey,
    rows: [Row; 4],
}

#[derive(Debug, Clone)]
struct TargetState {
    name: String,
    first_seen: f64,
    scenarios: Vec<ScenarioState>,
    marker: Option<f64>,
    armed_until: Option<f64>,
    pooled: [Row; 4],
    cusum: [f64; 4],
    /// Exponentially weighted probe rate of the target (probes/s) and when it was last updated.
    rate: f64,
    rate_last: f64,
}

/// Latency mixture grid: tolerance · (min_effect/tolerance)^(2^k), k = 0..3 (1.10, 1.15, 1.27,
/// 1.52 at the defaults).
const LATENCY_GRID: usize = 4;

/// The largest log slowdown of the armed test's grid (ln 1.52 at the defaults).
fn armed_reach(s: &DetectSettings) -> f64 {
    let null = s.latency_tolerance.ln();
    null + (s.latency_min_effect.ln() - null) * (1u32 << (LATENCY_GRID - 1)) as f64
}
/// Goodput mixture grid: min_effect·2^k, k = 0..2 (+1, +2, +4 points at the default).
const GOODPUT_GRID: usize = 3;
/// Probes whose evidence it takes at least to raise a continuous alarm.
const CUSUM_MIN_PROBES: f64 = 4.0;
/// Probes of a scenario before its continuous chart counts.
const CONTINUOUS_MIN_PROBES: u64 = 100;
/// Goodput baseline bins per window.
const GOODPUT_BINS: f64 = 72.0;
/// Time constant of the target's probe-rate estimate (s).
const RATE_TAU_S: f64 = 3600.0;

/// The regression detector. See the module docs for the method.
#[derive(Debug, Clone)]
pub struct Detector {
    settings: DetectSettings,
    targets: Vec<TargetState>,
    keys: usize,
    events: Vec<Event>,
    ignored: Ignored,
    last_now: f64,
}

impl Detector {
    /// A detector with no baselines. Call `settings.validate()` first; invalid numbers make the
    /// tests meaningless but never panic.
    pub fn new(settings: DetectSettings) -> Self {
        Detector { settings, targets: Vec::new(), keys: 0, events: Vec::new(), ignored: Ignored::default(), last_now: 0.0 }
    }

    pub fn settings(&self) -> &DetectSettings {
        &self.settings
    }

    /// Input the detector did not use.
    pub fn ignored(&self) -> Ignored {
        self.ignored
    }

    /// Number of target × scenario keys held.
    pub fn keys(&self) -> usize {
        self.keys
    }

    /// The state changes since the last call.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Whether `drain_events` has anything (cheap).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// ln of the alarm threshold of a signal's pooled release test.
    pub fn threshold(&self, signal: Signal) -> f64 {
        let share = if signal == Signal::Goodput { 0.5 } else { 1.0 / 6.0 };
        (1.0 / (self.settings.armed_alpha * share)).ln()
    }

    fn attribution_threshold(&self) -> f64 {
        (1.0 / self.settings.attribution_alpha).ln()
    }

    /// ln threshold of the continuous CUSUM for a target probing at `rate` probes/s: Lorden's
    /// bound ARL₀ ≥ e^h (in probes) with the target's ARL split over its four charts.
    pub fn cusum_threshold(&self, rate: f64) -> f64 {
        (4.0 * self.settings.continuous_arl_days * 86_400.0 * rate.max(1e-3)).ln().max(1.0)
    }

    /// A release of `target` at `now`: freezes every scenario's baseline (the probes of the
    /// baseline windows before `now`), resets the target's rows to `watching` and arms the tests
    /// for `armed_window_s`. A marker for a target never seen is remembered (rows without a
    /// baseline stay out of the test).
    pub fn mark_release(&mut self, target: &str, now: f64) {
        self.tick(now);
        let s = self.settings.clone();
        let ti = match self.targets.iter().position(|t| t.name == target) {
            Some(i) => i,
            None => {
                self.targets.push(new_target(target, now));
                self.targets.len() - 1
            }
        };
        let t = &mut self.targets[ti];
        t.marker = Some(now);
        t.armed_until = Some(now + s.armed_window_s);
        t.pooled = [Row::default(); 4];
        for sc in &mut t.scenarios {
            sc.rows = [Row::default(); 4];
            for lk in &mut sc.latency {
                let from = now - s.latency_baseline_s;
                let vals: Vec<f32> = lk.times.iter().zip(&lk.values).filter(|(t, _)| **t >= from && **t <= now).map(|(_, v)| *v).collect();
                lk.frozen = if vals.len() >= s.min_latency_baseline { LatencyFrozen::from_values(vals, s.clip_sigmas, armed_reach(&s)) } else { None };
                lk.post = LatencyPost::default();
                lk.reference = None;
            }
            let g = &mut sc.goodput;
            let from = now - s.goodput_baseline_s;
            let (mut good, mut bad) = (0u64, 0u64);
            for b in g.bins.iter().filter(|b| b.start >= from - 1e-9 && b.start <= now) {
                good += b.good as u64;
                bad += b.bad as u64;
            }
            g.frozen = if good + bad >= s.min_goodput_baseline as u64 { Some(GoodFrozen { bad, n: good + bad }) } else { None };
            g.post_n = 0;
            g.post_bad = 0;
            g.ln_m0 = 0.0;
            g.reference = None;
        }
    }

    /// Advances time without a probe: closes release windows and ages `recovered` rows.
    pub fn tick(&mut self, now: f64) {
        self.last_now = self.last_now.max(now);
        let window = self.settings.armed_window_s;
        for t in &mut self.targets {
            if t.armed_until.is_some_and(|u| now >= u) {
                t.armed_until = None;
            }
            let age = |r: &mut Row| {
                if r.state == State::Recovered && r.changed.is_some_and(|c| now - c >= window) {
                    *r = Row::default();
                }
            };
            t.pooled.iter_mut().for_each(age);
            for sc in &mut t.scenarios {
                sc.rows.iter_mut().for_each(age);
            }
        }
    }

    /// One probe of `target` × `scenario` at `now`.
    pub fn observe(&mut self, target: &str, scenario: &str, obs: Observation, now: f64) {
        let Some(good) = obs.good else {
            self.ignored.own_failures += 1;
            return;
        };
        self.tick(now);
        let ti = match self.targets.iter().position(|t| t.name == target) {
            Some(i) => i,
            None => {
                if self.keys >= self.settings.max_keys {
                    self.ignored.over_key_cap += 1;
                    return;
                }
                self.targets.push(new_target(target, now));
                self.targets.len() - 1
            }
        };
        let si = match self.targets[ti].scenarios.iter().position(|s| s.name == scenario) {
            Some(i) => i,
            None => {
                if self.keys >= self.settings.max_keys {
                    self.ignored.over_key_cap += 1;
                    return;
                }
                self.keys += 1;
                let t = &mut self.targets[ti];
                t.scenarios.push(ScenarioState {
                    name: scenario.to_string(),
                    first_seen: now,
                    latency: Default::default(),
                    goodput: GoodputKey::default(),
                    rows: [Row::default(); 4],
                });
                t.scenarios.len() - 1
            }
        };
        {
            let t = &mut self.targets[ti];
            let dt = (now - t.rate_last).max(0.0);
            t.rate = t.rate * (-dt / RATE_TAU_S).exp() + 1.0 / RATE_TAU_S;
            t.rate_last = now;
        }
        let h = self.cusum_threshold(self.targets[ti].rate);
        for (i, v) in [obs.ttft, obs.tpot, obs.e2e].into_iter().enumerate() {
            let Some(v) = v else { continue };
            if !(v.is_finite() && v > 0.0) {
                self.ignored.bad_values += 1;
                continue;
            }
            self.observe_latency(ti, si, Signal::LATENCY[i], v.ln(), now, h);
        }
        self.observe_goodput(ti, si, !good, now, h);
    }

    fn observe_latency(&mut self, ti: usize, si: usize, signal: Signal, y: f64, now: f64, h: f64) {
        let s = &self.settings;
        let k = signal.index();
        let t = &mut self.targets[ti];
        let armed = t.armed_until.is_some();
        let warm_since = t.scenarios[si].first_seen;
        let lk = &mut t.scenarios[si].latency[k];
        // Continuous chart: standardized against the slow EWMA before it learns this probe.
        let mut alarm = false;
        if s.continuous && lk.ewma.n >= CONTINUOUS_MIN_PROBES && now - warm_since >= s.continuous_warmup_s {
            let sd = lk.ewma.var.sqrt().max(1e-3);
            let null = s.latency_tolerance.ln();
            // Clipped at clip sd plus the shift the chart looks for: a tight baseline must not
            // clip a real slowdown below the null (the chart would never move).
            let reach = s.clip_sigmas * sd + s.continuous_latency_min_effect.ln();
            let z = (y - lk.ewma.mean).clamp(-reach, reach) / sd - null / sd;
            let d = (s.continuous_latency_min_effect.ln() - null) / sd;
            // Bounded influence: no single probe adds more than a quarter of the threshold, so one
            // outlier cannot alarm on a tight baseline (capping only lowers increments, so the
            // ARL bound of `h` still holds) and a real slowdown needs at least four probes.
            t.cusum[k] = (t.cusum[k] + (d * z - d * d / 2.0).min(h / CUSUM_MIN_PROBES)).max(0.0);
            alarm = t.cusum[k] >= h;
        }
        lk.ewma.push(y, now, s.continuous_latency_tau_s, s.clip_sigmas);
        // Rolling baseline.
        lk.times.push_back(now);
        lk.values.push_back(y as f32);
        let from = now - s.latency_baseline_s;
        while lk.times.front().is_some_and(|t0| *t0 < from) || lk.times.len() > s.baseline_max_samples {
            lk.times.pop_front();
            lk.values.pop_front();
        }
        // Release test.
        if armed && let Some(f) = &lk.frozen {
            lk.post.n += 1;
            let yc = y.clamp(f.lo, f.hi);
            lk.post.sum += yc;
            lk.post.sum_sq += yc * yc;
            if lk.post.values.len() < s.baseline_max_samples {
                lk.post.values.push(y as f32);
            }
        }
        // "No longer worse" test while regressed.
        if let Some((mu, var)) = lk.reference {
            let sd = var.sqrt();
            let source = t.pooled[k].source.or(t.scenarios[si].rows[k].source);
            // ln LR of "shift = tolerance" against "shift = min effect".
            let a = s.latency_tolerance.ln();
            let b = match source {
                Some(Source::Continuous) => s.continuous_latency_min_effect.ln(),
                _ => s.latency_min_effect.ln(),
            };
            let yc = y.clamp(mu - s.clip_sigmas * sd - b, mu + s.clip_sigmas * sd + b);
            let inc = (b - a) * ((a + b) / 2.0 - (yc - mu)) / var;
            for r in [&mut t.pooled[k], &mut t.scenarios[si].rows[k]] {
                if r.state == State::Regressed {
                    r.recovery = (r.recovery + inc).max(0.0);
                }
            }
        }
        if alarm {
            t.cusum[k] = 0.0;
            self.continuous_alarm(ti, signal, now);
        }
        self.update_rows(ti, signal, now);
    }

    fn observe_goodput(&mut self, ti: usize, si: usize, bad: bool, now: f64, h: f64) {
        let s = &self.settings;
        let k = Signal::Goodput.index();
        let t = &mut self.targets[ti];
        let armed = t.armed_until.is_some();
        let warm_since = t.scenarios[si].first_seen;
        let g = &mut t.scenarios[si].goodput;
        let b = if bad { 1.0 } else { 0.0 };
        let mut alarm = false;
        if s.continuous && g.ewma.n >= CONTINUOUS_MIN_PROBES && now - warm_since >= s.continuous_warmup_s {
            let p0 = g.ewma.mean.clamp(1e-3, 0.9);
            let p1 = p0 + s.continuous_goodput_min_effect;
            let inc = if bad { (p1 / p0).ln() } else { ((1.0 - p1) / (1.0 - p0)).ln() };
            t.cusum[k] = (t.cusum[k] + inc).max(0.0);
            alarm = t.cusum[k] >= h;
        }
        g.ewma.push(b, now, s.continuous_goodput_tau_s, f64::INFINITY);
        // Rolling baseline in bins.
        let width = s.goodput_baseline_s / GOODPUT_BINS;
        let start = (now / width).floor() * width;
        match g.bins.back_mut() {
            Some(last) if last.start == start => {
                if bad {
                    last.bad += 1
                } else {
                    last.good += 1
                }
            }
            _ => g.bins.push_back(Bin { start, good: u32::from(!bad), bad: u32::from(bad) }),
        }
        while g.bins.front().is_some_and(|f| f.start + width < now - s.goodput_baseline_s) {
            g.bins.pop_front();
        }
        if armed && let Some(f) = g.frozen {
            let (a0, b0) = f.ab();
            let (j, n) = (g.post_bad as f64, g.post_n as f64);
            g.ln_m0 += if bad { ((a0 + j) / (a0 + b0 + n)).ln() } else { ((b0 + n - j) / (a0 + b0 + n)).ln() };
            g.post_n += 1;
            g.post_bad += u64::from(bad);
        }
        if let Some(p0) = g.reference {
            let source = t.pooled[k].source.or(t.scenarios[si].rows[k].source);
            let d = match source {
                Some(Source::Continuous) => s.continuous_goodput_min_effect,
                _ => s.goodput_min_effect,
            };
            let p1 = (p0 + d).min(0.999);
            let inc = if bad { (p0 / p1).ln() } else { ((1.0 - p0) / (1.0 - p1)).ln() };
            for r in [&mut t.pooled[k], &mut t.scenarios[si].rows[k]] {
                if r.state == State::Regressed {
                    r.recovery = (r.recovery + inc).max(0.0);
                }
            }
        }
        if alarm {
            t.cusum[k] = 0.0;
            self.continuous_alarm(ti, Signal::Goodput, now);
        }
        self.update_rows(ti, Signal::Goodput, now);
    }

    fn continuous_alarm(&mut self, ti: usize, signal: Signal, now: f64) {
        let k = signal.index();
        let t = &mut self.targets[ti];
        if t.pooled[k].state == State::Regressed {
            return;
        }
        t.pooled[k] = Row { state: State::Regressed, source: Some(Source::Continuous), changed: Some(now), ..t.pooled[k] };
        t.pooled[k].recovery = 0.0;
        for sc in &mut t.scenarios {
            if signal == Signal::Goodput {
                sc.goodput.reference = Some(sc.goodput.ewma.mean.clamp(1e-3, 0.9));
            } else {
                let e = sc.latency[k].ewma;
                sc.latency[k].reference = Some((e.mean, e.var.max(1e-6)));
            }
        }
        self.events.push(Event { target: t.name.clone(), scenario: None, signal, state: State::Regressed, source: Source::Continuous, at: now });
    }

    /// Per-scenario ln LR of each grid alternative (None: the scenario is not in the test).
    fn scenario_llrs(&self, sc: &ScenarioState, signal: Signal) -> Option<[f64; LATENCY_GRID]> {
        let s = &self.settings;
        let mut out = [f64::NEG_INFINITY; LATENCY_GRID];
        if signal == Signal::Goodput {
            let g = &sc.goodput;
            let f = g.frozen?;
            let p = f.p_hat();
            let (j, n) = (g.post_bad as f64, g.post_n as f64);
            for (i, o) in out.iter_mut().enumerate().take(GOODPUT_GRID) {
                let p1 = (p + s.goodput_min_effect * (1u32 << i) as f64).min(0.99);
                *o = j * p1.ln() + (n - j) * (1.0 - p1).ln() - g.ln_m0;
            }
        } else {
            let lk = &sc.latency[signal.index()];
            let f = lk.frozen.as_ref()?;
            let null = s.latency_tolerance.ln();
            let d0 = s.latency_min_effect.ln() - null;
            for (i, o) in out.iter_mut().enumerate() {
                *o = f.llr(&lk.post, null, d0 * (1u32 << i) as f64);
            }
        }
        Some(out)
    }

    fn update_rows(&mut self, ti: usize, signal: Signal, now: f64) {
        let k = signal.index();
        {
            let t = &self.targets[ti];
            if t.armed_until.is_none() && t.pooled[k].state != State::Regressed && t.scenarios.iter().all(|s| s.rows[k].state != State::Regressed) {
                return;
            }
        }
        let grid = if signal == Signal::Goodput { GOODPUT_GRID } else { LATENCY_GRID };
        let lw = -(grid as f64).ln();
        let thr = self.threshold(signal);
        let attr = self.attribution_threshold();
        let rec = (1.0 / self.settings.recovery_alpha).ln();
        let t = &self.targets[ti];
        let armed = t.armed_until.is_some();
        let mut pooled = [0.0f64; LATENCY_GRID];
        let mut any = false;
        let mut per_scenario: Vec<Option<f64>> = Vec::with_capacity(t.scenarios.len());
        if armed {
            for sc in &t.scenarios {
                match self.scenario_llrs(sc, signal) {
                    Some(l) => {
                        any = true;
                        for i in 0..grid {
                            pooled[i] += l[i];
                        }
                        let terms: Vec<f64> = l[..grid].iter().map(|x| x + lw).collect();
                        per_scenario.push(Some(log_sum_exp(&terms)));
                    }
                    None => per_scenario.push(None),
                }
            }
        }
        let pooled_log_e = if any {
            let terms: Vec<f64> = pooled[..grid].iter().map(|x| x + lw).collect();
            Some(log_sum_exp(&terms))
        } else {
            None
        };
        let mut events = Vec::new();
        let t = &mut self.targets[ti];
        let name = t.name.clone();
        {
            let r = &mut t.pooled[k];
            if let Some(le) = pooled_log_e {
                r.log_e = le;
                r.max_log_e = r.max_log_e.max(le);
                if r.state == State::Watching && le >= thr {
                    *r = Row { state: State::Regressed, source: Some(Source::Release), changed: Some(now), recovery: 0.0, ..*r };
                    events.push((None, State::Regressed, Source::Release));
                }
            }
            if r.state == State::Regressed && r.recovery >= rec {
                r.state = State::Recovered;
                r.changed = Some(now);
                events.push((None, State::Recovered, r.source.unwrap_or(Source::Release)));
            }
        }
        let pooled_release = t.pooled[k].state == State::Regressed && t.pooled[k].source == Some(Source::Release);
        for (i, sc) in t.scenarios.iter_mut().enumerate() {
            let r = &mut sc.rows[k];
            if let Some(Some(le)) = per_scenario.get(i) {
                r.log_e = *le;
                r.max_log_e = r.max_log_e.max(*le);
                if pooled_release && r.state == State::Watching && *le >= attr {
                    *r = Row { state: State::Regressed, source: Some(Source::Release), changed: Some(now), recovery: 0.0, ..*r };
                    events.push((Some(sc.name.clone()), State::Regressed, Source::Release));
                }
            }
            if r.state == State::Regressed && r.recovery >= rec {
                r.state = State::Recovered;
                r.changed = Some(now);
                events.push((Some(sc.name.clone()), State::Recovered, Source::Release));
            }
            // The recovery test needs its reference once any row of this key is regressed.
            if r.state == State::Regressed || pooled_release {
                if signal == Signal::Goodput {
                    if sc.goodput.reference.is_none() {
                        sc.goodput.reference = sc.goodput.frozen.map(|f| f.p_hat());
                    }
                } else {
                    let lk = &mut sc.latency[k];
                    if lk.reference.is_none() {
                        lk.reference = lk.frozen.as_ref().map(|f| (f.mean, f.var));
                    }
                }
            }
        }
        for (scenario, state, source) in events {
            self.events.push(Event { target: name.clone(), scenario, signal, state, source, at: now });
        }
    }

    /// The exported state: per target, the four pooled rows (scenario `None`) then four rows per
    /// scenario, in first-seen order.
    pub fn report(&self) -> Vec<SignalReport> {
        let mut out = Vec::new();
        for t in &self.targets {
            let h = self.cusum_threshold(t.rate);
            for signal in Signal::ALL {
                let k = signal.index();
                let mut row = self.row_report(t, None, signal, &t.pooled[k]);
                row.cusum = t.cusum[k];
                row.cusum_threshold = h;
                out.push(row);
            }
            for sc in &t.scenarios {
                for signal in Signal::ALL {
                    out.push(self.row_report(t, Some(sc), signal, &sc.rows[signal.index()]));
                }
            }
        }
        out
    }

    fn row_report(&self, t: &TargetState, only: Option<&ScenarioState>, signal: Signal, r: &Row) -> SignalReport {
        let scs: Vec<&ScenarioState> = match only {
            Some(sc) => vec![sc],
            None => t.scenarios.iter().collect(),
        };
        let k = signal.index();
        let (mut samples, mut baseline) = (0u64, 0u64);
        let (mut median_ratio, mut p95_ratio, mut bad_delta) = (None, None, None);
        if signal == Signal::Goodput {
            let mut parts = Vec::new();
            for sc in &scs {
                let g = &sc.goodput;
                samples += g.post_n;
                match g.frozen {
                    Some(f) => {
                        baseline += f.n;
                        if let Some(d) = proportion_delta(f.bad, f.n, g.post_bad, g.post_n) {
                            parts.push((g.post_n as f64, d));
                        }
                    }
                    None => baseline += g.bins.iter().map(|b| (b.good + b.bad) as u64).sum::<u64>(),
                }
            }
            let total: f64 = parts.iter().map(|p| p.0).sum();
            if total > 0.0 {
                let (mut point, mut centre, mut var) = (0.0, 0.0, 0.0);
                for (n, (p, c, v)) in &parts {
                    let w = n / total;
                    point += w * p;
                    centre += w * c;
                    var += w * w * v;
                }
                let half = Z95 * var.sqrt();
                bad_delta = Some(Estimate { value: point, low: centre - half, high: centre + half });
            }
        } else {
            let (mut med, mut p95) = (Vec::new(), Vec::new());
            for sc in &scs {
                let lk = &sc.latency[k];
                samples += lk.post.n;
                match &lk.frozen {
                    Some(f) => {
                        baseline += f.m as u64;
                        if lk.post.values.len() >= 5 {
                            let mut v = lk.post.values.clone();
                            v.sort_by(|a, b| a.total_cmp(b));
                            if let (Some((m, sm)), Some((q, sq))) = (quantile_se(&v, 0.5), quantile_se(&v, 0.95)) {
                                med.push((m - f.median, sm * sm + f.se_median * f.se_median));
                                p95.push((q - f.p95, sq * sq + f.se_p95 * f.se_p95));
                            }
                        }
                    }
                    None => baseline += lk.values.len() as u64,
                }
            }
            median_ratio = combine_log_ratios(&med);
            p95_ratio = combine_log_ratios(&p95);
        }
        let armed = t.armed_until.is_some();
        SignalReport {
            target: t.name.clone(),
            scenario: only.map(|s| s.name.clone()),
            signal,
            state: r.state,
            source: r.source,
            armed,
            marker_s: t.marker,
            changed_s: r.changed,
            samples,
            baseline_samples: baseline,
            median_ratio,
            p95_ratio,
            bad_delta,
            log_evidence: r.log_e,
            p_value: (-r.max_log_e).exp().min(1.0),
            threshold: if only.is_some() { self.attribution_threshold() } else { self.threshold(signal) },
            cusum: 0.0,
            cusum_threshold: 0.0,
        }
    }
}

/// Inverse-variance weighted mean of log ratios, as a ratio with its 95% interval.
fn combine_log_ratios(parts: &[(f64, f64)]) -> Option<Estimate> {
    if parts.is_empty() {
        return None;
    }
    let (mut sw, mut swx) = (0.0, 0.0);
    for (x, v) in parts {
        let w = 1.0 / v.max(1e-12);
        sw += w;
        swx += w * x;
    }
    let (mean, se) = (swx / sw, (1.0 / sw).sqrt());
    Some(Estimate { value: mean.exp(), low: (mean - Z95 * se).exp(), high: (mean + Z95 * se).exp() })
}

fn new_target(name: &str, now: f64) -> TargetState {
    TargetState {
        name: name.to_string(),
        first_seen: now,
        scenarios: Vec::new(),
        marker: None,
        armed_until: None,
        pooled: [Row::default(); 4],
        cusum: [0.0; 4],
        rate: 0.0,
        rate_last: now,
    }
}

// ---- snapshot ----

/// Format version of `Detector::snapshot`.
pub const SNAPSHOT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
pub(crate) struct Snapshot {
    pub version: u32,
    pub saved_at: f64,
    pub targets: Vec<SnapTarget>,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct SnapTarget {
    name: String,
    first_seen: f64,
    rate: f64,
    rate_last: f64,
    scenarios: Vec<SnapScenario>,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct SnapScenario {
    name: String,
    first_seen: f64,
    latency: Vec<SnapLatency>,
    goodput_bins: Vec<Bin>,
    goodput_ewma: Ewma,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct SnapLatency {
    times: Vec<f64>,
    values: Vec<f32>,
    ewma: Ewma,
}

/// What `restore` took over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    pub keys: usize,
    pub latency_samples: usize,
}

impl Detector {
    /// The baselines (rolling windows and continuous EWMAs) as versioned JSON. Release windows in
    /// progress are not saved. Size is bounded by `max_keys × 3 × baseline_max_samples` values
    /// (about 25 bytes each) plus 72 goodput bins per key.
    pub fn snapshot(&self) -> Vec<u8> {
        let snap = Snapshot {
            version: SNAPSHOT_VERSION,
            saved_at: self.last_now,
            targets: self
                .targets
                .iter()
                .map(|t| SnapTarget {
                    name: t.name.clone(),
                    first_seen: t.first_seen,
                    rate: t.rate,
                    rate_last: t.rate_last,
                    scenarios: t
                        .scenarios
                        .iter()
                        .map(|sc| SnapScenario {
                            name: sc.name.clone(),
                            first_seen: sc.first_seen,
                            latency: sc
                                .latency
                                .iter()
                                .map(|l| SnapLatency { times: l.times.iter().copied().collect(), values: l.values.iter().copied().collect(), ewma: l.ewma })
                                .collect(),
                            goodput_bins: sc.goodput.bins.iter().copied().collect(),
                            goodput_ewma: sc.goodput.ewma,
                        })
                        .collect(),
                })
                .collect(),
        };
        serde_json::to_vec(&snap).unwrap_or_default()
    }

    /// Replaces every baseline with those of `bytes` (from `snapshot`), dropping values older
    /// than the baseline windows before `now` and anything beyond the caps. Markers, release
    /// windows and states start afresh.
    pub fn restore(&mut self, bytes: &[u8], now: f64) -> Result<Restored, String> {
        let snap: Snapshot = serde_json::from_slice(bytes).map_err(|e| format!("not a detector snapshot: {e}"))?;
        if snap.version != SNAPSHOT_VERSION {
            return Err(format!("snapshot version {} (this build reads {SNAPSHOT_VERSION})", snap.version));
        }
        let s = &self.settings;
        let mut targets = Vec::new();
        let mut keys = 0;
        let mut samples = 0;
        for st in snap.targets {
            let mut t = new_target(&st.name, st.first_seen);
            t.rate = if st.rate.is_finite() { st.rate.max(0.0) } else { 0.0 };
            t.rate_last = st.rate_last;
            for ss in st.scenarios {
                if keys >= s.max_keys {
                    break;
                }
                if ss.latency.len() != 3 {
                    return Err(format!("{}/{}: {} latency signals, expected 3", st.name, ss.name, ss.latency.len()));
                }
                let mut sc = ScenarioState {
                    name: ss.name,
                    first_seen: ss.first_seen,
                    latency: Default::default(),
                    goodput: GoodputKey::default(),
                    rows: [Row::default(); 4],
                };
                for (lk, sl) in sc.latency.iter_mut().zip(ss.latency) {
                    if sl.times.len() != sl.values.len() {
                        return Err("latency times and values differ in length".to_string());
                    }
                    let from = now - s.latency_baseline_s;
                    for (tm, v) in sl.times.into_iter().zip(sl.values) {
                        if tm.is_finite() && v.is_finite() && tm >= from && tm <= now {
                            lk.times.push_back(tm);
                            lk.values.push_back(v);
                        }
                    }
                    while lk.times.len() > s.baseline_max_samples {
                        lk.times.pop_front();
                        lk.values.pop_front();
                    }
                    samples += lk.times.len();
                    lk.ewma = if sl.ewma.mean.is_finite() && sl.ewma.var.is_finite() { sl.ewma } else { Ewma::default() };
                }
                let from = now - s.goodput_baseline_s;
                sc.goodput.bins = ss.goodput_bins.into_iter().filter(|b| b.start.is_finite() && b.start >= from).take(GOODPUT_BINS as usize + 2).collect();
                sc.goodput.ewma = ss.goodput_ewma;
                t.scenarios.push(sc);
                keys += 1;
            }
            targets.push(t);
        }
        self.targets = targets;
        self.keys = keys;
        self.last_now = self.last_now.max(now);
        Ok(Restored { keys, latency_samples: samples })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};

    const SC: [&str; 3] = ["a", "b", "c"];

    fn probe(rng: &mut SmallRng, factor: f64) -> Observation {
        let z: f64 = StandardNormal.sample(rng);
        Observation { ttft: Some(0.2 * (0.5 * z).exp() * factor), tpot: None, e2e: None, good: Some(true) }
    }

    /// Feeds `n` probes one second apart from `t0`, round robin over the scenarios.
    fn feed(d: &mut Detector, rng: &mut SmallRng, t0: f64, n: usize, mut obs: impl FnMut(&mut SmallRng) -> Observation) -> f64 {
        for i in 0..n {
            d.observe("t", SC[i % 3], obs(rng), t0 + i as f64);
        }
        t0 + n as f64
    }

    fn pooled(d: &Detector, signal: Signal) -> SignalReport {
        d.report().into_iter().find(|r| r.scenario.is_none() && r.signal == signal).expect("pooled row")
    }

    fn quiet() -> DetectSettings {
        DetectSettings { continuous: false, ..DetectSettings::default() }
    }

    #[test]
    fn quiet_streams_stay_watching() {
        // 20 release windows without a change; the budget is 1.5% per window for the target.
        let mut alarms = 0;
        for seed in 0..20 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 1800, |r| probe(r, 1.0));
            d.mark_release("t", t);
            let end = feed(&mut d, &mut rng, t, 3600, |r| probe(r, 1.0));
            alarms += d.drain_events().iter().filter(|e| e.state == State::Regressed).count();
            d.tick(end);
            assert!(!pooled(&d, Signal::Ttft).armed, "the window closed");
        }
        assert!(alarms <= 2, "{alarms} false alarms in 20 windows");
    }

    #[test]
    fn a_tight_baseline_does_not_clip_a_real_slowdown_away() {
        // A quiet, precisely timed server: log sd 0.01. Clipped at 3 sd alone, a 1.3x slowdown
        // would count as 3% — below the 5% tolerance — and never alarm, armed or continuous.
        let tight = |r: &mut SmallRng, factor: f64| {
            let z: f64 = StandardNormal.sample(r);
            Observation { ttft: Some(0.2 * (0.01 * z).exp() * factor), tpot: None, e2e: None, good: Some(true) }
        };
        for settings in [quiet(), DetectSettings::default()] {
            let continuous = settings.continuous;
            let mut rng = SmallRng::seed_from_u64(11);
            let mut d = Detector::new(settings);
            // Past the continuous chart's warm-up (an hour).
            let t = feed(&mut d, &mut rng, 0.0, 4000, |r| tight(r, 1.0));
            if !continuous {
                d.mark_release("t", t);
            }
            feed(&mut d, &mut rng, t, 300, |r| tight(r, 1.3));
            let row = pooled(&d, Signal::Ttft);
            assert_eq!(row.state, State::Regressed, "continuous={continuous}: {row:?}");
        }
    }

    #[test]
    fn doubling_is_detected_within_40_probes() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 1500, |r| probe(r, 1.0));
        d.mark_release("t", t);
        let mut at = None;
        for i in 0..40 {
            d.observe("t", SC[i % 3], probe(&mut rng, 2.0), t + i as f64);
            if pooled(&d, Signal::Ttft).state == State::Regressed {
                at = Some(i + 1);
                break;
            }
        }
        let n = at.expect("2x slowdown detected within 40 probes");
        let r = pooled(&d, Signal::Ttft);
        assert_eq!(r.source, Some(Source::Release));
        assert_eq!(r.samples, n as u64);
        assert!(r.p_value < 0.015 / 6.0);
        let events = d.drain_events();
        assert!(events.iter().any(|e| e.scenario.is_none() && e.signal == Signal::Ttft && e.state == State::Regressed));
        // Keep going: the effect estimate brackets 2x, and scenario rows are attributed.
        feed(&mut d, &mut rng, t + 40.0, 300, |r| probe(r, 2.0));
        let r = pooled(&d, Signal::Ttft);
        let m = r.median_ratio.expect("median ratio");
        assert!(m.low < 2.0 && 2.0 < m.high && m.low > 1.5, "{m:?}");
        assert!(r.p95_ratio.is_some());
        let regressed_scenarios = d.report().iter().filter(|r| r.scenario.is_some() && r.state == State::Regressed).count();
        assert_eq!(regressed_scenarios, 3);
    }

    #[test]
    fn dropped_probes_never_count() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 900, |r| probe(r, 1.0));
        d.mark_release("t", t);
        let huge = Observation { ttft: Some(100.0), tpot: Some(10.0), e2e: Some(1000.0), good: None };
        for i in 0..500 {
            d.observe("t", SC[i % 3], huge, t + i as f64);
        }
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.samples), (State::Watching, 0));
        assert_eq!(pooled(&d, Signal::Goodput).samples, 0);
        assert_eq!(d.ignored().own_failures, 500);
    }

    #[test]
    fn one_outlier_is_no_regression_and_one_percent_at_10x_neither() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 1800, |r| probe(r, 1.0));
        d.mark_release("t", t);
        d.observe("t", "a", probe(&mut rng, 10.0), t);
        let r = pooled(&d, Signal::Ttft);
        assert_eq!(r.state, State::Watching);
        assert!(r.log_evidence < r.threshold / 2.0, "one outlier gave ln e = {}", r.log_evidence);
        // An hour with 1% of probes at 10x, absent from the baseline.
        let mut i = 0u64;
        feed(&mut d, &mut rng, t + 1.0, 3599, |r| {
            i += 1;
            probe(r, if i % 100 == 0 { 10.0 } else { 1.0 })
        });
        assert!(d.drain_events().iter().all(|e| e.state != State::Regressed));
    }

    #[test]
    fn goodput_drop_is_detected() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut d = Detector::new(quiet());
        let bad = |r: &mut SmallRng, p: f64| {
            if r.random_bool(p) { Observation { good: Some(false), ..Observation::default() } } else { probe(r, 1.0) }
        };
        let t = feed(&mut d, &mut rng, 0.0, 6000, |r| bad(r, 0.005));
        d.mark_release("t", t);
        feed(&mut d, &mut rng, t, 600, |r| bad(r, 0.10));
        let r = pooled(&d, Signal::Goodput);
        assert_eq!(r.state, State::Regressed);
        let delta = r.bad_delta.expect("bad delta");
        assert!(delta.low > 0.0 && delta.value > 0.03, "{delta:?}");
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Watching);
    }

    #[test]
    fn regression_recovers_and_window_ends() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 1800, |r| probe(r, 1.0));
        d.mark_release("t", t);
        let t = feed(&mut d, &mut rng, t, 120, |r| probe(r, 2.0));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Regressed);
        // Rolled back: the next probes look like the baseline again.
        let t = feed(&mut d, &mut rng, t, 600, |r| probe(r, 1.0));
        let r = pooled(&d, Signal::Ttft);
        assert_eq!(r.state, State::Recovered, "{r:?}");
        assert!(d.drain_events().iter().any(|e| e.state == State::Recovered && e.scenario.is_none()));
        // An hour later: back to watching, window closed.
        d.tick(t + 2.0 * 3600.0);
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.armed), (State::Watching, false));
    }

    #[test]
    fn silent_step_is_caught_by_the_continuous_detector() {
        let mut rng = SmallRng::seed_from_u64(13);
        let mut d = Detector::new(DetectSettings::default());
        // 2 h at 0.5 probes/s, then a 2x step without a marker.
        for i in 0..3600 {
            d.observe("t", SC[i % 3], probe(&mut rng, 1.0), i as f64 * 2.0);
        }
        assert!(d.drain_events().is_empty(), "no alarm on the quiet warm-up");
        let mut caught = None;
        for i in 0..600 {
            d.observe("t", SC[i % 3], probe(&mut rng, 2.0), 7200.0 + i as f64 * 2.0);
            if d.drain_events().iter().any(|e| e.source == Source::Continuous && e.signal == Signal::Ttft) {
                caught = Some(i);
                break;
            }
        }
        assert!(caught.is_some(), "continuous detector missed a 2x step within 600 probes");
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.source), (State::Regressed, Some(Source::Continuous)));
    }

    #[test]
    fn snapshot_round_trips_and_restart_still_detects() {
        let mut rng = SmallRng::seed_from_u64(17);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 1500, |r| probe(r, 1.0));
        let bytes = d.snapshot();
        let mut e = Detector::new(quiet());
        let restored = e.restore(&bytes, t - 1.0).expect("restore");
        assert_eq!(restored.keys, 3);
        assert_eq!(restored.latency_samples, 1500);
        assert!(e.snapshot() == bytes, "snapshot of the restored detector is the same");
        // The restarted detector has the baseline: a release right away is tested.
        e.mark_release("t", t + 10.0);
        feed(&mut e, &mut rng, t + 10.0, 60, |r| probe(r, 2.0));
        assert_eq!(pooled(&e, Signal::Ttft).state, State::Regressed);
        assert!(e.restore(b"{not json", t).is_err());
        let future = String::from_utf8(bytes).unwrap().replacen("\"version\":1", "\"version\":99", 1);
        assert!(e.restore(future.as_bytes(), t).unwrap_err().contains("version 99"));
    }

    #[test]
    fn report_has_pooled_and_scenario_rows_and_labels() {
        let mut rng = SmallRng::seed_from_u64(19);
        let mut d = Detector::new(quiet());
        feed(&mut d, &mut rng, 0.0, 30, |r| probe(r, 1.0));
        let rows = d.report();
        assert_eq!(rows.len(), 4 + 4 * 3);
        assert_eq!(rows.iter().filter(|r| r.scenario.is_none()).count(), 4);
        let labels: Vec<&str> = rows[..4].iter().map(|r| r.signal.as_str()).collect();
        assert_eq!(labels, ["ttft", "tpot", "e2e", "goodput"]);
        assert_eq!(rows[0].state.as_str(), "watching");
        assert_eq!(Source::Continuous.as_str(), "continuous");
        assert_eq!(State::Recovered.as_str(), "recovered");
    }

    #[test]
    fn keys_and_baselines_are_capped() {
        let s = DetectSettings { max_keys: 2, baseline_max_samples: 50, continuous: false, ..DetectSettings::default() };
        let mut d = Detector::new(s);
        let mut rng = SmallRng::seed_from_u64(23);
        feed(&mut d, &mut rng, 0.0, 300, |r| probe(r, 1.0));
        assert_eq!(d.keys(), 2);
        assert_eq!(d.ignored().over_key_cap, 100);
        let rows = d.report();
        let latency = rows.iter().filter(|r| r.scenario.is_some() && r.signal == Signal::Ttft);
        assert!(latency.clone().count() == 2 && latency.clone().all(|r| r.baseline_samples == 50));
    }
}
