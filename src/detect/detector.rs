//! The online detector: per target, the probes pooled in time bins (the dependence model), per
//! target × scenario × signal the recent raw values, release-armed tests against the baseline
//! frozen at the marker, and a continuous before/after test without a marker.
//!
//! Pure and I/O free: time is the `now` the caller passes (seconds, one clock throughout).

use std::collections::VecDeque;

use serde::Serialize;

use super::baseline::{Ewma, GoodBin, GoodFrozen, LatencyFrozen, LatencyPost, Part};
use super::history::{Adjust, BinnedHistory, Dependence, HistBin, MIN_VARIANCE_CUT, OpenBin, Trend, adjusted, bin_index, contrast_var};
use super::math::{Z95, binomial_sf, normal_quantile, normal_sf, proportion_delta, quantile_se};
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
    /// The load the target was offered when the probe was sent, as the engine reported it (ln of
    /// a rate; `None`: no fresh reading). The tests adjust latency for it (docs/detection.md,
    /// "Load-aware tests").
    pub load: Option<f64>,
    /// The engine's prefix-cache hit rate (0–1) when the probe was sent (`None`: no fresh
    /// reading). After a release, a rate below the baseline hour's marks a cold cache
    /// (docs/detection.md, "Cold caches after a rollout").
    pub cache_hit: Option<f64>,
    /// The answer failed a behaviour check (`invalid_output`, `wrong_answer`): counted apart
    /// from other failures so a release that breaks answers is named as such.
    pub check_failed: bool,
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
pub enum Cause {
    /// The tests armed by a release marker (docs/detection.md, "Release-armed tests").
    Release,
    /// The marker-free window test: the last 30 minutes against the 6 hours before
    /// (docs/detection.md, "Continuous test").
    Continuous,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Release => "release",
            Cause::Continuous => "continuous",
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
    pub source: Option<Cause>,
    /// A release window is open.
    pub armed: bool,
    /// A release window is open and its tests have not looked yet: the release is being judged
    /// but no verdict can have come (the grace window and the bins before the first look).
    pub pending: bool,
    /// The version of the last marker.
    pub version: Option<String>,
    /// Pooled rows: the smallest effect the release test's last look could have found with 80%
    /// power (latency: a post/pre ratio; goodput: a rise of the bad fraction). `None` before it.
    pub detectable: Option<f64>,
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
    /// Release test at its last look: ln(1/p), p adjusted for every look and test of the window
    /// (Bonferroni), so it compares with one threshold.
    pub log_evidence: f64,
    /// The smallest adjusted p-value of the window so far.
    pub p_value: f64,
    /// `log_evidence` at or above this (with both halves of the window agreeing) is `regressed`:
    /// ln(1/α) of the signal's share of `armed_alpha`.
    pub threshold: f64,
    /// Pooled rows: the continuous test's last look, ln(1/p), and its alarm threshold (0 for
    /// scenario rows and before its first look).
    pub continuous_evidence: f64,
    pub continuous_threshold: f64,
    /// Latency rows: the slope of log latency on the offered-load reading the tests adjust for
    /// (the one frozen at the marker while its window is open, else the history's current one);
    /// 0 without a usable reading, and for goodput.
    pub load_slope: f64,
    /// The cache warm-up of the open (or last) release window: latency probes held out of the
    /// release tests because the engine's prefix-cache hit rate was below the baseline's.
    pub warmup: Option<CacheWarmup>,
    /// Latency rows of a release window: the local trend taken out of its comparison (a ramp
    /// before the marker), as a latency factor per hour; `None` when there was no clear one.
    pub trend_per_hour: Option<f64>,
    /// The pooled goodput row of a release window: behaviour-check failures since the grace
    /// window against the goodput baseline's.
    pub checks: Option<ChecksReport>,
}

/// Behaviour-check failures after a release against before it (`Detector::report`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChecksReport {
    pub baseline_probes: u64,
    pub baseline_failed: u64,
    pub probes: u64,
    pub failed: u64,
    /// One-sided exact p of "no more failures than before" (the conditional test of two Poisson
    /// rates), times the looks of the window (Bonferroni).
    pub p_value: f64,
    /// ln(1/α) of the checks' share of `armed_alpha` (a sixth, like a latency signal).
    pub threshold: f64,
    /// The failed share rose by at least `goodput_min_effect` and `ln(1/p_value)` reached the
    /// threshold, at or after the first look.
    pub regressed: bool,
}

/// A release's prefix-cache warm-up as the detector saw it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CacheWarmup {
    /// The baseline hour's mean hit rate, and how far below it a reading counts as cold.
    pub hit_rate_before: f64,
    pub margin: f64,
    /// The mean hit rate of the probes since the grace window (`None`: no reading yet).
    pub hit_rate_after: Option<f64>,
    /// Probes held out as warm-up so far.
    pub held_probes: u64,
    /// The cache is still cold: the last probe with a reading was held (or would have been, had
    /// the hold not ended).
    pub cold: bool,
}

impl CacheWarmup {
    /// The mean hit rate since the grace window is below the baseline's by more than the margin:
    /// a slowdown found now may be the cold cache (or a cache the release broke).
    pub fn explains_slowdown(&self) -> bool {
        self.hit_rate_after.is_some_and(|h| h < self.hit_rate_before - self.margin)
    }
}

/// The baseline hour's prefix-cache hit rate, frozen at a marker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CacheRef {
    pub(super) mean: f64,
    pub(super) margin: f64,
}

impl CacheRef {
    /// Bins of the baseline with a hit-rate reading it needs.
    const MIN_BINS: usize = 10;
    /// The smallest drop of the hit rate that counts as cold, whatever the baseline's spread.
    const MIN_MARGIN: f64 = 0.05;

    /// From the bins' mean readings (probe-weighted mean; margin 3 standard deviations of the
    /// bin means, at least `MIN_MARGIN`).
    pub(super) fn from_bins<'a>(bins: impl Iterator<Item = &'a HistBin>) -> Option<CacheRef> {
        let v: Vec<(f64, f64)> = bins.filter(|b| b.h_n > 0 && b.h.is_finite()).map(|b| (b.h as f64, b.h_n as f64)).collect();
        if v.len() < Self::MIN_BINS {
            return None;
        }
        let w: f64 = v.iter().map(|x| x.1).sum();
        let mean = v.iter().map(|x| x.0 * x.1).sum::<f64>() / w;
        let m = v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64;
        let sd = (v.iter().map(|x| (x.0 - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
        Some(CacheRef { mean, margin: (3.0 * sd).max(Self::MIN_MARGIN) })
    }

    pub(super) fn cold(&self, hit: Option<f64>) -> bool {
        hit.is_some_and(|h| h < self.mean - self.margin)
    }
}

/// A state change, for logs and alerts.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    pub target: String,
    pub scenario: Option<String>,
    pub signal: Signal,
    pub state: State,
    pub source: Cause,
    pub at: f64,
}

/// What a release marker did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Marked {
    /// A release window opened at `at` (after clamping). `chained`: it came while a window was
    /// open or a row regressed, so the baselines frozen before stay.
    Armed { at: f64, chained: bool },
    /// The same version as the open window's: the same release, nothing changed.
    Repeated { first_at: f64 },
    /// Not a time a clock gives.
    Ignored,
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

// ---- per target × scenario -----------------------------------------------------------------------
#[derive(Debug, Clone, Default)]
pub(super) struct LatencyKey {
    /// Raw log values of the baseline window (for freezing).
    pub(super) times: VecDeque<f64>,
    pub(super) values: VecDeque<f32>,
    /// The load reading of each value (NaN: none).
    pub(super) loads: VecDeque<f32>,
    /// Long-run level and spread (winsorizing bounds); held still while the target is armed or
    /// regressed.
    pub(super) level: Ewma,
    /// The fixed level residuals of the binned history are taken from (the level after
    /// `ANCHOR_PROBES` probes). It must not move with the probes: a wandering centre would read
    /// as load in the history. Re-set only when the level has moved by more than `REANCHOR`.
    pub(super) anchor: Option<f64>,
    pub(super) frozen: Option<LatencyFrozen>,
    pub(super) post: LatencyPost,
}

impl LatencyKey {
    /// Stored value `i` (log seconds), adjusted for its load reading.
    fn value(&self, i: usize, adjust: Option<Adjust>) -> f64 {
        adjusted(self.values[i] as f64, self.loads.get(i).copied().unwrap_or(f32::NAN), adjust)
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct GoodputKey {
    pub(super) bins: VecDeque<GoodBin>,
    pub(super) frozen: Option<GoodFrozen>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct SignalState {
    pub(super) state: State,
    pub(super) source: Option<Cause>,
    pub(super) changed: Option<f64>,
    pub(super) log_e: f64,
    pub(super) max_log_e: f64,
}

impl Default for SignalState {
    fn default() -> Self {
        SignalState { state: State::Watching, source: None, changed: None, log_e: 0.0, max_log_e: 0.0 }
    }
}

#[derive(Debug, Clone)]
pub(super) struct ScenarioState {
    pub(super) name: String,
    pub(super) first_seen: f64,
    pub(super) latency: [LatencyKey; 3],
    pub(super) goodput: GoodputKey,
    pub(super) rows: [SignalState; 4],
}

#[derive(Debug, Clone)]
pub(super) struct TargetState {
    pub(super) name: String,
    pub(super) first_seen: f64,
    pub(super) scenarios: Vec<ScenarioState>,
    pub(super) marker: Option<f64>,
    /// The version of the last marker (a repeated marker of it is the same release).
    pub(super) version: Option<String>,
    /// When the baselines in use were frozen: the first marker of a chain of releases that came
    /// while a window was open or a row was regressed.
    pub(super) frozen_at: Option<f64>,
    pub(super) armed_until: Option<f64>,
    /// The open window's tests have looked at least once (before that no verdict can come).
    pub(super) looked: bool,
    /// Per signal, the smallest effect the last look could have found (latency: a ratio;
    /// goodput: a rise of the bad fraction).
    pub(super) detectable: [Option<f64>; 4],
    pub(super) pooled: [SignalState; 4],
    /// The pooled goodput baseline frozen at the marker.
    pub(super) good_frozen: Option<GoodFrozen>,
    /// Per signal: the reference bins of the recovery test while the pooled row is regressed,
    /// and the bad fraction it is compared with (goodput).
    pub(super) recovery_ref: [Option<(i64, i64, f64)>; 4],
    /// The continuous test's last evidence and threshold per signal, and whether its last look
    /// passed (an alarm needs two passing looks in a row).
    pub(super) continuous: [(f64, f64); 4],
    pub(super) continuous_passed: [bool; 4],
    /// The dependence of each latency signal frozen at the marker: the armed tests' variance
    /// comes from the history before the release, never from the probes they test. With a load
    /// adjustment, of the adjusted residuals; `dependence_raw` always of the raw ones (the
    /// recovery test compares raw latency).
    pub(super) dependence: [Option<Dependence>; 3],
    pub(super) dependence_raw: [Option<Dependence>; 3],
    /// The load adjustment of each latency signal frozen at the marker (None: no usable reading).
    pub(super) adjust: [Option<Adjust>; 3],
    /// Design effect of the test that raised each signal's alarm (for the recovery tests).
    pub(super) alarm_deff: [f64; 4],
    /// Per latency signal, the local trend before the marker where it was clear (a ramp), frozen
    /// at the marker: the window's values are compared with it taken out.
    pub(super) trend: [Option<Trend>; 3],
    /// The baseline's prefix-cache hit rate frozen at the marker (`None`: no reading).
    pub(super) cache_ref: Option<CacheRef>,
    /// The open window's warm-up: probes held, the first post-grace probe that was not held
    /// (the tests' window starts there), the hit-rate readings since the grace window (sum,
    /// count), and whether the last reading was cold.
    pub(super) warm_held: u64,
    pub(super) post_first: Option<f64>,
    pub(super) post_hit: (f64, u64),
    pub(super) cold_now: bool,
    pub(super) hist: BinnedHistory,
}

/// Post-grace bins counted as looks (bins after the grace window): every 2 from 4 up to 12, every
/// 5 up to 30, every 10 up to 120, then every 30. The tests spend their error level over the looks
/// a window holds (Bonferroni), so each look is valid whatever the dependence between looks. The
/// first look waits for 4 bins: the persistence check needs two halves of at least 2 bins, so a
/// warm-up that outlasts the grace window by up to 2 bins is never a regression.
fn is_look(e: i64) -> bool {
    match e {
        ..=3 => false,
        4..=12 => e % 2 == 0,
        13..=30 => e % 5 == 0,
        31..=120 => e % 10 == 0,
        _ => e % 30 == 0,
    }
}

fn looks_within(bins: i64) -> usize {
    (0..=bins).filter(|e| is_look(*e)).count().max(1)
}

/// The power at which `SignalReport::detectable` is the smallest effect found.
pub const DETECTABLE_POWER: f64 = 0.8;

/// Probes of a scenario before its residuals enter the binned history.
const ANCHOR_PROBES: u64 = 100;
/// ln 1.5: the long-run level moved this far from the anchor (a scenario changed for good) sets a
/// new anchor.
const REANCHOR: f64 = 0.405;

/// Bins of the recovery test's recent window.
const RECOVERY_BINS: i64 = 10;
/// Post-release probes a scenario needs before it takes part in a latency test.
const MIN_POST: f64 = 5.0;

/// One test at one look.
#[derive(Debug, Clone, Copy)]
struct TestResult {
    /// One-look p-value, and adjusted for the looks and the test's share of the error level.
    p: f64,
    p_adj: f64,
    /// Both halves of the post-grace probes show the effect on their own (persistence).
    confirmed: bool,
}

impl TestResult {
    fn passes(&self, alpha: f64) -> bool {
        self.p_adj <= alpha && self.confirmed
    }
}

/// The regression detector. See the module docs for the method.
#[derive(Debug, Clone)]
pub struct Detector {
    pub(super) settings: DetectSettings,
    pub(super) targets: Vec<TargetState>,
    pub(super) keys: usize,
    pub(super) events: Vec<StateChange>,
    pub(super) ignored: Ignored,
    pub(super) last_now: f64,
}

/// Longest release version the detector keeps: a longer one (from a marker, a snapshot or
/// discovery) is cut to it, so no version text grows the detector's state.
pub const MAX_VERSION_CHARS: usize = 128;

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
    pub fn drain_events(&mut self) -> Vec<StateChange> {
        std::mem::take(&mut self.events)
    }

    /// Whether `drain_events` has anything (cheap).
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The release test's error level for one signal (per release and target).
    fn alpha(&self, signal: Signal) -> f64 {
        self.settings.armed_alpha * if signal == Signal::Goodput { 0.5 } else { 1.0 / 6.0 }
    }

    /// ln of the alarm threshold of a signal's release test: evidence (ln 1/adjusted p) at or
    /// above it is `regressed`.
    pub fn threshold(&self, signal: Signal) -> f64 {
        (1.0 / self.alpha(signal)).ln()
    }

    /// The continuous test's error level per look and signal: its false alarms, summed over the
    /// looks of `continuous_arl_days` and the four signals, are at most one.
    fn continuous_alpha(&self) -> f64 {
        let s = &self.settings;
        let looks = s.continuous_arl_days * 86_400.0 / s.continuous_look_s;
        1.0 / (4.0 * looks.max(1.0))
    }

    pub(super) fn bin_of(&self, t: f64) -> i64 {
        bin_index(t, self.settings.bin_s)
    }

    /// The first bin that starts at or after `t`.
    fn bin_after(&self, t: f64) -> i64 {
        let b = (t / self.settings.bin_s).ceil();
        if b.is_finite() { b.clamp(-9.0e15, 9.0e15) as i64 } else { 0 }
    }

    pub(super) fn new_target(&self, name: &str, now: f64) -> TargetState {
        let s = &self.settings;
        let span = (s.latency_baseline_s + s.armed_window_s).max(s.continuous_reference_s + s.continuous_window_s);
        let cap = (s.history_s / s.bin_s).ceil().clamp(1.0, crate::config::MAX_HISTORY_BINS) as usize;
        let k_max = ((span / s.bin_s).ceil() as usize).clamp(1, cap);
        TargetState {
            name: name.to_string(),
            first_seen: now,
            scenarios: Vec::new(),
            marker: None,
            version: None,
            frozen_at: None,
            armed_until: None,
            looked: false,
            detectable: [None; 4],
            pooled: [SignalState::default(); 4],
            good_frozen: None,
            recovery_ref: [None; 4],
            continuous: [(0.0, 0.0); 4],
            continuous_passed: [false; 4],
            dependence: [None, None, None],
            dependence_raw: [None, None, None],
            adjust: [None; 3],
            alarm_deff: [1.0; 4],
            trend: [None, None, None],
            cache_ref: None,
            warm_held: 0,
            post_first: None,
            post_hit: (0.0, 0),
            cold_now: false,
            hist: BinnedHistory::new(k_max, cap, ((s.continuous_window_s / s.bin_s).round() as usize).min(cap)),
        }
    }

    /// A release of `target` to `version` that happened at `at`, told at `now`. Arms the tests
    /// for `armed_window_s` from `at`, the first `release_grace_s` of which do not decide; the
    /// probes since `at` count as if the marker had come on time (`at` is taken no earlier than
    /// `marker_max_delay_s` before `now`, nor after `now`).
    ///
    /// - The same version again while its window is open (a second pipeline step, discovery and
    ///   the API both marking one rollout) is the same release: nothing changes.
    /// - A first marker freezes every scenario's baseline (the baseline windows before `at`).
    /// - A marker while a window is open or a row is regressed keeps the baselines frozen before
    ///   (the last state not held as regressed) and tests the new version against them from its
    ///   own grace window on. Regressed rows stay regressed: only their recovery test clears
    ///   them, with an event. A marker never erases an alarm.
    ///
    /// A marker for a target never seen is remembered (rows without a baseline stay out of the
    /// test).
    pub fn mark_release(&mut self, target: &str, version: &str, at: f64, now: f64) -> Marked {
        // A time no clock gives would arm a window that never closes.
        if !(at.is_finite() && now.is_finite()) {
            return Marked::Ignored;
        }
        let version: String = version.chars().take(MAX_VERSION_CHARS).collect();
        let version = version.as_str();
        self.tick(now);
        let s = self.settings.clone();
        let at = at.min(now).max(now - s.marker_max_delay_s.min(s.armed_window_s));
        let ti = match self.targets.iter().position(|t| t.name == target) {
            Some(i) => i,
            None => {
                let t = self.new_target(target, now);
                self.targets.push(t);
                self.targets.len() - 1
            }
        };
        let t = &mut self.targets[ti];
        if t.armed_until.is_some() && t.version.as_deref() == Some(version) {
            return Marked::Repeated { first_at: t.marker.unwrap_or(at) };
        }
        let regressed = |r: &SignalState| r.state == State::Regressed;
        let chained =
            t.frozen_at.is_some() && (t.armed_until.is_some() || t.pooled.iter().any(regressed) || t.scenarios.iter().any(|sc| sc.rows.iter().any(regressed)));
        // A marker dated before the one it follows would test probes of the older version.
        let at = if chained { at.max(t.marker.unwrap_or(at)) } else { at };
        if !chained {
            freeze(t, at, &s);
        }
        self.arm(ti, version, at, now);
        Marked::Armed { at, chained }
    }

    /// Re-opens a release window a snapshot saved: the baselines frozen at `frozen_at` again from
    /// the restored values and bins, the window of the marker at `at` with the probes since it
    /// (as a late marker's). Windows already closed by `now` are not re-opened.
    pub(super) fn reopen(&mut self, target: &str, version: &str, at: f64, frozen_at: f64, now: f64) -> bool {
        let s = self.settings.clone();
        let Some(ti) = self.targets.iter().position(|t| t.name == target) else { return false };
        if !(at.is_finite() && frozen_at.is_finite() && frozen_at <= at && at <= now && at + s.armed_window_s > now) {
            return false;
        }
        freeze(&mut self.targets[ti], frozen_at, &s);
        self.arm(ti, version, at, now);
        true
    }

    /// Opens target `ti`'s release window for `version` at `at` against the baselines frozen
    /// before (`freeze`): resets the rows not held as regressed, takes the probes since `at` into
    /// the window and looks at once if the window already holds a look.
    fn arm(&mut self, ti: usize, version: &str, at: f64, now: f64) {
        let s = self.settings.clone();
        let regressed = |r: &SignalState| r.state == State::Regressed;
        let t = &mut self.targets[ti];
        t.version = Some(version.to_owned());
        t.marker = Some(at);
        t.armed_until = Some(at + s.armed_window_s);
        t.looked = false;
        t.detectable = [None; 4];
        t.warm_held = 0;
        t.post_first = None;
        t.post_hit = (0.0, 0);
        t.cold_now = false;
        let keep = |r: &mut SignalState| {
            if !regressed(r) {
                *r = SignalState::default();
            }
        };
        t.pooled.iter_mut().for_each(keep);
        for (k, r) in t.pooled.iter().enumerate() {
            if !regressed(r) {
                t.recovery_ref[k] = None;
            }
        }
        // The new version's probes so far (a late marker): into its window as if on time. A
        // probe's cache reading is its bin's mean here (the values keep no reading of their own).
        let post_from = at + s.release_grace_s;
        let (hist, cache_ref) = (&t.hist, t.cache_ref);
        let bin_s = s.bin_s;
        let cold_at = |time: f64| {
            time < post_from + s.cache_warmup_max_s
                && cache_ref.is_some_and(|c| c.cold(hist.get(bin_index(time, bin_s)).filter(|b| b.h_n > 0).map(|b| b.h as f64)))
        };
        for (b, h) in (bin_index(post_from, bin_s).max(hist.first)..hist.end()).filter_map(|b| hist.get(b).map(|h| (b, h))) {
            if h.h_n > 0 && (b as f64 + 1.0) * bin_s > post_from {
                t.post_hit.0 += h.h as f64 * h.h_n as f64;
                t.post_hit.1 += h.h_n as u64;
            }
        }
        for sc in &mut t.scenarios {
            sc.rows.iter_mut().for_each(keep);
            for (k, lk) in sc.latency.iter_mut().enumerate() {
                let mut post = LatencyPost::default();
                if let Some(f) = &lk.frozen {
                    for i in (0..lk.times.len()).filter(|&i| lk.times[i] >= post_from) {
                        let time = lk.times[i];
                        if cold_at(time) {
                            if k == 0 {
                                t.warm_held += 1;
                            }
                            continue;
                        }
                        t.post_first = Some(t.post_first.map_or(time, |p| p.min(time)));
                        let y = detrended(lk.value(i, t.adjust[k]), time, t.trend[k].as_ref());
                        post.add(f, y);
                        post.recent.push_back((lk.times[i], y as f32));
                    }
                } else if regressed(&sc.rows[k]) {
                    post.recent = lk.post.recent.iter().copied().filter(|(time, _)| *time >= post_from).collect();
                }
                lk.post = post;
            }
        }
        // The look the window would have had last by now, so a late marker judges at once.
        let current = self.bin_of(now);
        let post0 = self.bin_after(post_from);
        if let Some(e) = (0..=current - post0).rev().find(|e| is_look(*e)) {
            let end = (post0 + e) as f64 * s.bin_s;
            for signal in Signal::ALL {
                self.release_look(ti, signal, at, end, (post0, post0 + e));
            }
        }
    }

    /// Advances time without a probe: closes finished bins (running the looks they end), closes
    /// release windows and ages `recovered` rows.
    pub fn tick(&mut self, now: f64) {
        if !now.is_finite() {
            return;
        }
        self.last_now = self.last_now.max(now);
        let current = self.bin_of(now);
        for ti in 0..self.targets.len() {
            self.advance(ti, current);
        }
        let window = self.settings.armed_window_s;
        for t in &mut self.targets {
            if t.armed_until.is_some_and(|u| now >= u) {
                t.armed_until = None;
            }
            let age = |r: &mut SignalState| {
                if r.state == State::Recovered && r.changed.is_some_and(|c| now - c >= window) {
                    *r = SignalState::default();
                }
            };
            t.pooled.iter_mut().for_each(age);
            for sc in &mut t.scenarios {
                sc.rows.iter_mut().for_each(age);
            }
        }
    }

    /// Closes target `ti`'s open bin when time has reached bin `current`.
    fn advance(&mut self, ti: usize, current: i64) {
        let Some((bin, open)) = self.targets[ti].hist.open else { return };
        if bin >= current {
            return;
        }
        self.targets[ti].hist.open = None;
        self.targets[ti].hist.push(bin, open.close());
        self.bin_closed(ti, bin);
    }

    /// One probe of `target` × `scenario` at `now`.
    pub fn observe(&mut self, target: &str, scenario: &str, obs: Observation, now: f64) {
        let Some(good) = obs.good else {
            self.ignored.own_failures += 1;
            return;
        };
        if !now.is_finite() {
            self.ignored.bad_values += 1;
            return;
        }
        self.tick(now);
        let ti = match self.targets.iter().position(|t| t.name == target) {
            Some(i) => i,
            None => {
                if self.keys >= self.settings.max_keys {
                    self.ignored.over_key_cap += 1;
                    return;
                }
                let t = self.new_target(target, now);
                self.targets.push(t);
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
                    rows: [SignalState::default(); 4],
                });
                t.scenarios.len() - 1
            }
        };
        // A probe older than the open bin (clocks of concurrent probes) joins the open bin.
        let bin = self.bin_of(now).max(self.targets[ti].hist.open.map_or(i64::MIN, |o| o.0));
        let s = &self.settings;
        let t = &mut self.targets[ti];
        let hold = t.armed_until.is_some() || t.pooled.iter().any(|r| r.state == State::Regressed);
        let post_from = t.marker.map(|m| m + s.release_grace_s);
        let adjust = t.adjust;
        let load = obs.load.filter(|x| x.is_finite());
        let hit = obs.cache_hit.filter(|h| h.is_finite());
        // A cold prefix cache after the release: the probe is warm-up, held out of the tests.
        let mut warming = false;
        if let Some(p0) = post_from.filter(|p0| now >= *p0 && t.armed_until.is_some()) {
            if let Some(h) = hit {
                t.post_hit.0 += h;
                t.post_hit.1 += 1;
                t.cold_now = t.cache_ref.is_some_and(|c| c.cold(Some(h)));
            }
            warming = now < p0 + s.cache_warmup_max_s && t.cache_ref.is_some_and(|c| c.cold(hit));
            if warming {
                t.warm_held += 1;
            } else if t.post_first.is_none() {
                t.post_first = Some(now);
            }
        }
        let open = &mut t.hist.open.get_or_insert((bin, OpenBin::default())).1;
        if let Some(x) = load {
            open.x_n += 1;
            open.x_sum += x;
        }
        if let Some(h) = hit {
            open.h_n += 1;
            open.h_sum += h;
        }
        open.check_bad += u32::from(obs.check_failed && !good);
        let load = load.map_or(f32::NAN, |x| x as f32);
        let sc = &mut t.scenarios[si];
        for (k, v) in [obs.ttft, obs.tpot, obs.e2e].into_iter().enumerate() {
            let Some(v) = v else { continue };
            if !(v.is_finite() && v > 0.0) {
                self.ignored.bad_values += 1;
                continue;
            }
            let y = v.ln();
            let lk = &mut sc.latency[k];
            let (lo, hi) = lk.level.bounds(s.clip_sigmas);
            if let Some(anchor) = lk.anchor {
                let r = y.clamp(lo, hi) - anchor;
                open.n[k] += 1;
                open.sum[k] += r;
                open.sum_sq[k] += r * r;
            }
            if !hold || lk.level.n < ANCHOR_PROBES {
                lk.level.push(y, now, s.history_s / 2.0, s.clip_sigmas);
                let moved = lk.anchor.is_some_and(|a| (lk.level.mean - a).abs() > REANCHOR);
                if (lk.anchor.is_none() && lk.level.n >= ANCHOR_PROBES) || moved {
                    lk.anchor = Some(lk.level.mean);
                }
            }
            lk.times.push_back(now);
            lk.values.push_back(y as f32);
            lk.loads.push_back(load);
            let from = now - s.value_retention_s();
            while lk.times.front().is_some_and(|t0| *t0 < from) || lk.times.len() > s.baseline_max_samples {
                lk.times.pop_front();
                lk.values.pop_front();
                lk.loads.pop_front();
            }
            if warming {
                continue;
            }
            let y = detrended(adjusted(y, load, adjust[k]), now, t.trend[k].as_ref());
            if let (Some(f), Some(p0)) = (&lk.frozen, post_from)
                && now >= p0
                && t.armed_until.is_some()
            {
                lk.post.add(f, y);
            }
            if post_from.is_some_and(|p0| now >= p0) && (t.armed_until.is_some() || sc.rows[k].state == State::Regressed) {
                lk.post.recent.push_back((now, y as f32));
                if lk.post.recent.len() > s.baseline_max_samples {
                    lk.post.recent.pop_front();
                }
            }
        }
        if good {
            open.good += 1;
        } else {
            open.bad += 1;
        }
        let g = &mut sc.goodput;
        match g.bins.back_mut() {
            Some(last) if last.bin >= bin => {
                if good {
                    last.good += 1
                } else {
                    last.bad += 1
                }
            }
            _ => g.bins.push_back(GoodBin { bin, good: u32::from(good), bad: u32::from(!good) }),
        }
        let keep_from = bin - ((s.goodput_baseline_s + s.armed_window_s) / s.bin_s).ceil() as i64 - 1;
        while g.bins.front().is_some_and(|f| f.bin < keep_from) {
            g.bins.pop_front();
        }
    }

    /// Bin `bin` of target `ti` closed: the release looks it ends, the recovery tests, the
    /// continuous look.
    fn bin_closed(&mut self, ti: usize, bin: i64) {
        let s = self.settings.clone();
        let end = (bin + 1) as f64 * s.bin_s;
        if let (Some(marker), Some(_)) = (self.targets[ti].marker, self.targets[ti].armed_until) {
            let post0 = self.bin_after(marker + s.release_grace_s);
            let e = bin + 1 - post0;
            if is_look(e) {
                for signal in Signal::ALL {
                    self.release_look(ti, signal, marker, end, (post0, bin + 1));
                }
            }
        }
        for signal in Signal::ALL {
            self.recovery(ti, signal, bin, end);
        }
        let look_bins = (s.continuous_look_s / s.bin_s).round().max(1.0) as i64;
        if s.continuous && self.targets[ti].armed_until.is_none() && (bin + 1).rem_euclid(look_bins) == 0 {
            for signal in Signal::ALL {
                self.continuous_look(ti, signal, bin, end);
            }
        }
    }

    /// The release-armed tests of one signal at a look: per scenario and pooled, the mean of
    /// winsorized log latency and the share above the baseline quantile (latency), or the capped
    /// bad count per bin (goodput).
    fn release_look(&mut self, ti: usize, signal: Signal, marker: f64, end: f64, post: (i64, i64)) {
        self.targets[ti].looked = true;
        let mut detectable = None;
        let s = &self.settings;
        let alpha = self.alpha(signal);
        // Latency probes held as cache warm-up do not count: the window starts after them.
        let post_start = match self.targets[ti].post_first {
            Some(first) if signal != Signal::Goodput => (marker + s.release_grace_s).max(first),
            _ => marker + s.release_grace_s,
        };
        let post = if signal == Signal::Goodput { post } else { (post.0.max(self.bin_of(post_start)).min(post.1 - 1), post.1) };
        let mid = (post_start + end) / 2.0;
        let window_bins = ((s.armed_window_s - s.release_grace_s) / s.bin_s).floor() as i64;
        let looks = looks_within(window_bins) as f64;
        let t = &self.targets[ti];
        let mut scen: Vec<Option<[TestResult; 2]>> = vec![None; t.scenarios.len()];
        let mut pooled: Vec<TestResult> = Vec::new();
        if signal == Signal::Goodput {
            let outage = |bin: i64| t.hist.get(bin).is_some_and(HistBin::outage);
            let mid_bin = (post.0 + post.1) / 2;
            let split = |bins: Vec<(i64, u32, u32)>| {
                let all: Vec<(u32, u32)> = bins.iter().map(|b| (b.1, b.2)).collect();
                let early: Vec<(u32, u32)> = bins.iter().filter(|b| b.0 < mid_bin).map(|b| (b.1, b.2)).collect();
                let late: Vec<(u32, u32)> = bins.iter().filter(|b| b.0 >= mid_bin).map(|b| (b.1, b.2)).collect();
                (all, early, late)
            };
            let verdict = |f: &GoodFrozen, bins: Vec<(i64, u32, u32)>, share: f64| {
                let (all, early, late) = split(bins);
                let p = f.tail(&all);
                let confirmed = !early.is_empty() && !late.is_empty() && f.tail(&early) <= s.confirm_alpha && f.tail(&late) <= s.confirm_alpha;
                TestResult { p, p_adj: (p * looks / share).min(1.0), confirmed }
            };
            let k = t.scenarios.iter().filter(|sc| sc.goodput.frozen.is_some()).count().max(1) as f64;
            if let Some(f) = &t.good_frozen {
                let bins: Vec<(i64, u32, u32)> =
                    (post.0.max(t.hist.first)..post.1).filter_map(|b| t.hist.get(b).filter(|h| !h.outage()).map(|h| (b, h.good, h.bad))).collect();
                if !bins.is_empty() {
                    let n: u32 = bins.iter().map(|b| b.1 + b.2).sum();
                    let p0 = f.p_bad();
                    let sd = (p0 * (1.0 - p0) * (1.0 / f64::from(n.max(1)) + 1.0 / f.n.max(1) as f64)).sqrt();
                    detectable = Some(sd * (normal_quantile(1.0 - alpha * 0.5 / looks) + normal_quantile(DETECTABLE_POWER)));
                    pooled.push(verdict(f, bins, 0.5));
                }
            }
            for (i, sc) in t.scenarios.iter().enumerate() {
                let Some(f) = &sc.goodput.frozen else { continue };
                let bins: Vec<(i64, u32, u32)> =
                    sc.goodput.bins.iter().filter(|b| b.bin >= post.0 && b.bin < post.1 && !outage(b.bin)).map(|b| (b.bin, b.good, b.bad)).collect();
                if !bins.is_empty() {
                    let v = verdict(f, bins, 0.5 / k);
                    scen[i] = Some([v, v]);
                }
            }
        } else {
            let k = signal.index();
            let tol = s.latency_tolerance.ln();
            let frozen_at = t.frozen_at.unwrap_or(marker);
            let base = (self.bin_of(frozen_at - s.latency_baseline_s), self.bin_of(frozen_at));
            let (deff, shared) = t.dependence[k].as_ref().map_or((1.0, 0.0), |d| d.contrast(base, post, t.trend[k].as_ref(), s.bin_s));
            let deff_raw = t.dependence_raw[k].as_ref().map_or(1.0, |d| d.design_effect(base, post));
            // (part, frozen) per scenario in the test: all post probes, early half, late half.
            let mut parts: Vec<(usize, [Part; 3], &LatencyFrozen)> = Vec::new();
            for (i, sc) in t.scenarios.iter().enumerate() {
                let lk = &sc.latency[k];
                let Some(f) = &lk.frozen else { continue };
                let all = lk.post.all(f);
                if all.n >= MIN_POST {
                    parts.push((i, [all, lk.post.span(f, post_start, mid), lk.post.span(f, mid, f64::INFINITY)], f));
                }
            }
            let kk = parts.len().max(1) as f64;
            // For a weighted set of scenarios, per statistic (mean, exceedance): z of "no slower
            // than the baseline", and whether the estimate reaches the tolerance. The pooled
            // set's probe variance is scaled by the design effect; one scenario's gets the shared
            // load's variance added (its own probe noise is larger than the pooled set's, so the
            // pooled ratio would overstate its dependence many times).
            let z = |sel: &[(f64, Part, &LatencyFrozen)], own: bool| -> Option<[(f64, bool); 2]> {
                let total: f64 = sel.iter().filter(|x| x.1.n >= 2.0).map(|x| x.0).sum();
                if total <= 0.0 {
                    return None;
                }
                let (mut d, mut v, mut de, mut ve, mut tol_e) = (0.0, 0.0, 0.0, 0.0, 0.0);
                for (w, p, f) in sel {
                    if p.n < 2.0 {
                        continue;
                    }
                    let w = w / total;
                    let var = p.var.max(f.var);
                    d += w * (p.mean - f.mean);
                    v += w * w * (var / p.n + f.var / f.m as f64);
                    de += w * (p.above - f.above);
                    ve += w * w * f.above * (1.0 - f.above) * (1.0 / p.n + 1.0 / f.m as f64);
                    tol_e += w * f.above_tolerance;
                }
                // The exceedance share keeps the design effect either way (conservative: its load
                // part has no simple form in share units).
                let (v, ve) = if own { (v + shared, ve * deff) } else { (v * deff, ve * deff) };
                Some([(d / v.sqrt(), d >= tol), (de / ve.max(1e-12).sqrt(), de >= tol_e)])
            };
            // The tail test on the scenarios together: probes above each scenario's own high
            // quantile, after against before. The counts are small (1% of an hour's baseline), so
            // the test is exact: given the total above, the post count is binomial with the post
            // share of the probes (two Poisson rates compared), counts and sizes divided by the
            // design effect. Returns p and whether the share's rise reaches the tolerance.
            let tail = |sel: &[(Part, &LatencyFrozen)]| -> Option<(f64, bool)> {
                let (mut k1, mut m, mut k2, mut n, mut tol_e) = (0.0, 0.0, 0.0, 0.0, 0.0);
                for (p, f) in sel {
                    k1 += f.above_tail * f.m as f64;
                    m += f.m as f64;
                    k2 += p.above_tail * p.n;
                    n += p.n;
                    tol_e += p.n * f.tail_tolerance;
                }
                if n < 1.0 || m < 1.0 {
                    return None;
                }
                let p = binomial_sf(k2 / deff, (k1 + k2) / deff, n / (n + m));
                Some((p, k2 / n - k1 / m >= tol_e / n))
            };
            // The post-grace probes of the window and of each half: all, early, late.
            let verdicts = |sel: &[(f64, [Part; 3], &LatencyFrozen)], share: f64, own: bool| -> Option<[TestResult; 2]> {
                let pick = |j: usize| sel.iter().map(|(w, p, f)| (*w * p[j].n / p[0].n.max(1.0), p[j], *f)).collect::<Vec<_>>();
                let all = z(&pick(0), own)?;
                let halves = [z(&pick(1), own), z(&pick(2), own)];
                let confirmed = |j: usize| halves.iter().all(|h| h.is_some_and(|h| normal_sf(h[j].0) <= s.confirm_alpha && h[j].1));
                let make = |j: usize| {
                    let (zz, large) = all[j];
                    let p = normal_sf(zz);
                    TestResult { p, p_adj: (p * looks / share).min(1.0), confirmed: confirmed(j) && large }
                };
                Some([make(0), make(1)])
            };
            let all: Vec<(f64, [Part; 3], &LatencyFrozen)> = parts.iter().map(|(_, p, f)| (p[0].n, *p, *f)).collect();
            // The smallest slowdown the pooled mean test would find with DETECTABLE_POWER at this
            // look: its standard error (probe-weighted, times the design effect) times the sum
            // of the two normal quantiles.
            let total: f64 = all.iter().map(|x| x.1[0].n).sum();
            if total >= 2.0 {
                let var: f64 = all.iter().map(|(w, p, f)| (w / total).powi(2) * (p[0].var.max(f.var) / p[0].n.max(1.0) + f.var / f.m as f64)).sum();
                let z = normal_quantile(1.0 - alpha * 0.2 / looks) + normal_quantile(DETECTABLE_POWER);
                detectable = Some((z * (var * deff).sqrt()).exp());
            }
            // Pooled: mean and exceedance 0.4 of the pooled share each, tail 0.2.
            if let Some(v) = verdicts(&all, 0.2, false) {
                pooled.extend(v);
            }
            let pick = |j: usize| all.iter().map(|(_, p, f)| (p[j], *f)).collect::<Vec<_>>();
            if let Some((p, large)) = tail(&pick(0)) {
                let confirmed = [1, 2].iter().all(|j| tail(&pick(*j)).is_some_and(|(ph, l)| ph <= s.confirm_alpha && l));
                pooled.push(TestResult { p, p_adj: (p * looks / 0.1).min(1.0), confirmed: confirmed && large });
            }
            for (i, p, f) in &parts {
                scen[*i] = verdicts(&[(1.0, *p, *f)], 0.25 / kk, true);
            }
            self.targets[ti].alarm_deff[k] = deff_raw;
        }
        self.targets[ti].detectable[signal.index()] = detectable;
        self.apply_release_look(ti, signal, end, &pooled, &scen, alpha);
    }

    fn apply_release_look(&mut self, ti: usize, signal: Signal, now: f64, pooled: &[TestResult], scen: &[Option<[TestResult; 2]>], alpha: f64) {
        let k = signal.index();
        let attribution = self.settings.attribution_alpha;
        let baseline = self.baseline_ref(ti, signal);
        let t = &mut self.targets[ti];
        let evidence = |v: &TestResult| -(v.p_adj.max(1e-300)).ln();
        let mut events = Vec::new();
        let all = pooled.iter().chain(scen.iter().flatten().flatten());
        let best = all.clone().map(evidence).fold(f64::NEG_INFINITY, f64::max);
        let any_pass = all.clone().any(|v| v.passes(alpha));
        let pooled_pass = pooled.iter().any(|v| v.passes(alpha));
        {
            let r = &mut t.pooled[k];
            if best.is_finite() {
                r.log_e = best;
                r.max_log_e = r.max_log_e.max(best);
            }
            if r.state == State::Watching && any_pass {
                *r = SignalState { state: State::Regressed, source: Some(Cause::Release), changed: Some(now), ..*r };
                t.recovery_ref[k] = baseline;
                events.push((None, State::Regressed));
            }
        }
        let pooled_release = t.pooled[k].state == State::Regressed && t.pooled[k].source == Some(Cause::Release);
        for (i, sc) in t.scenarios.iter_mut().enumerate() {
            let Some(v) = scen.get(i).copied().flatten() else { continue };
            let r = &mut sc.rows[k];
            let le = v.iter().map(evidence).fold(f64::NEG_INFINITY, f64::max);
            r.log_e = le;
            r.max_log_e = r.max_log_e.max(le);
            let own = v.iter().any(|x| x.passes(alpha));
            let attributed = pooled_pass && pooled_release && v.iter().any(|x| x.p <= attribution && x.confirmed);
            if r.state == State::Watching && (own || attributed) {
                *r = SignalState { state: State::Regressed, source: Some(Cause::Release), changed: Some(now), ..*r };
                events.push((Some(sc.name.clone()), State::Regressed));
            }
        }
        let name = t.name.clone();
        for (scenario, state) in events {
            self.events.push(StateChange { target: name.clone(), scenario, signal, state, source: Cause::Release, at: now });
        }
    }

    /// The reference of a release alarm's recovery test: the baseline bins, and the baseline bad
    /// fraction (goodput).
    fn baseline_ref(&self, ti: usize, signal: Signal) -> Option<(i64, i64, f64)> {
        let s = &self.settings;
        let t = &self.targets[ti];
        let marker = t.frozen_at?;
        if signal == Signal::Goodput {
            let f = t.good_frozen.as_ref()?;
            Some((self.bin_of(marker - s.goodput_baseline_s), self.bin_of(marker), f.p_bad()))
        } else {
            Some((self.bin_of(marker - s.latency_baseline_s), self.bin_of(marker), 0.0))
        }
    }

    /// The continuous test of one signal: the last `continuous_window_s` against the
    /// `continuous_reference_s` before them (goodput: `goodput_baseline_s`), with the target's
    /// own dependence in the variance and both halves of the recent window required.
    fn continuous_look(&mut self, ti: usize, signal: Signal, bin: i64, now: f64) {
        let s = &self.settings;
        let k = signal.index();
        let alpha = self.continuous_alpha();
        let threshold = (1.0 / alpha).ln();
        let w = (s.continuous_window_s / s.bin_s).round().max(1.0) as i64;
        let reference_s = if signal == Signal::Goodput { s.goodput_baseline_s } else { s.continuous_reference_s };
        let r = (reference_s / s.bin_s).round().max(1.0) as i64;
        let recent = (bin + 1 - w, bin + 1);
        let reference = (recent.0 - r, recent.0);
        // Persistence: each third of the recent window must show the change on its own, the
        // newest one included, so an incident that is over (the burn-rate alerts' business) or a
        // spike is not a regression, while a step or a creep that is still there is.
        let thirds = {
            let (a, b) = (recent.0 + w / 3, recent.0 + 2 * w / 3);
            [(recent.0, a), (a, b), (b, recent.1)]
        };
        let t = &self.targets[ti];
        if t.pooled[k].state == State::Regressed || t.hist.first > reference.0 {
            return;
        }
        let mut deff = 1.0;
        let (p, confirmed, p_ref) = if signal == Signal::Goodput {
            let bins = |(a, b): (i64, i64)| (a..b).filter_map(|x| t.hist.get(x)).filter(|h| !h.outage()).map(|h| (h.good, h.bad)).collect::<Vec<_>>();
            let refs = bins(reference);
            let total: u64 = refs.iter().map(|(g, b)| (g + b) as u64).sum();
            let Some(f) = GoodFrozen::from_bins(refs.iter().copied()).filter(|_| total >= s.min_goodput_baseline as u64) else { return };
            let now_bins = bins(recent);
            if now_bins.is_empty() {
                return;
            }
            let confirmed = thirds.iter().all(|x| {
                let part = bins(*x);
                !part.is_empty() && f.tail(&part) <= s.confirm_alpha
            });
            (f.tail(&now_bins), confirmed, f.p_bad())
        } else {
            let tol = s.latency_tolerance.ln();
            // Unadjusted for load: adjusted by the current slope, this test raised a false alarm
            // every 2-4 days in the planner under load sd 0.2 with a reading (docs/detection.md).
            let Some(dep) = t.hist.dependence(k, None) else { return };
            let z = |b: (i64, i64)| {
                // Incident bins are left out of both blocks: a quarter hour of 2x latency is the
                // burn-rate alerts' business, and a lasting change stops being flagged once the
                // bins before it have moved to it.
                let (mr, nr) = t.hist.block_mean(k, reference, true);
                let (mb, nb) = t.hist.block_mean(k, b, true);
                if (nr as i64) * 2 < reference.1 - reference.0 || (nb as i64) * 2 < b.1 - b.0 {
                    return None;
                }
                Some(((mb - mr) / contrast_var(&dep.gamma, reference, b).max(1e-12).sqrt(), mb - mr >= tol))
            };
            let Some((zm, large)) = z(recent) else { return };
            deff = dep.design_effect(reference, recent);
            let confirmed = large && thirds.iter().all(|b| z(*b).is_some_and(|(x, l)| normal_sf(x) <= s.confirm_alpha && l));
            (normal_sf(zm), confirmed, 0.0)
        };
        let evidence = -(p.max(1e-300)).ln();
        let t = &mut self.targets[ti];
        t.continuous[k] = (evidence, threshold);
        let passes = p <= alpha && confirmed;
        let persisted = passes && t.continuous_passed[k];
        t.continuous_passed[k] = passes;
        if persisted {
            let name = t.name.clone();
            t.pooled[k] = SignalState { state: State::Regressed, source: Some(Cause::Continuous), changed: Some(now), ..t.pooled[k] };
            t.recovery_ref[k] = Some((reference.0, reference.1, p_ref));
            t.alarm_deff[k] = deff;
            self.events.push(StateChange { target: name, scenario: None, signal, state: State::Regressed, source: Cause::Continuous, at: now });
        }
    }

    /// "No longer worse": a regressed row recovers when its last `RECOVERY_BINS` bins are below
    /// the still-regressed alternative with confidence 1 − `recovery_alpha`.
    fn recovery(&mut self, ti: usize, signal: Signal, bin: i64, now: f64) {
        let s = &self.settings;
        let k = signal.index();
        let t = &self.targets[ti];
        let pooled = t.pooled[k];
        let any = pooled.state == State::Regressed || t.scenarios.iter().any(|sc| sc.rows[k].state == State::Regressed);
        if !any {
            return;
        }
        let z_rec = normal_quantile(1.0 - s.recovery_alpha);
        let continuous = pooled.source == Some(Cause::Continuous);
        let recent = (bin + 1 - RECOVERY_BINS, bin + 1);
        let since = |r: &SignalState| r.changed.map_or(i64::MAX, |c| self.bin_after(c));
        let mut recovered_pooled = false;
        if pooled.state == State::Regressed
            && recent.0 >= since(&pooled)
            && let Some((a, b, p0)) = t.recovery_ref[k]
        {
            recovered_pooled = if signal == Signal::Goodput {
                let me = if continuous { s.continuous_goodput_min_effect } else { s.goodput_min_effect };
                let bins: Vec<(u32, u32)> = (recent.0..recent.1).filter_map(|x| t.hist.get(x)).filter(|h| !h.outage()).map(|h| (h.good, h.bad)).collect();
                bad_share_below(&bins, p0 + me, z_rec)
            } else {
                let me = if continuous { s.continuous_latency_min_effect } else { s.latency_min_effect }.ln();
                // The variance of independent bins times the design effect at the alarm: the
                // history now holds the regression itself, which would inflate a fresh estimate.
                match t.hist.vario[k].nugget() {
                    Some(nugget) => {
                        let (mr, nr) = t.hist.block_mean(k, (a, b), true);
                        let (mb, nb) = t.hist.block_mean(k, recent, false);
                        let var = nugget * (1.0 / nr.max(1) as f64 + 1.0 / nb.max(1) as f64) * t.alarm_deff[k];
                        nr > 0 && nb as i64 * 2 >= RECOVERY_BINS && (mb - mr - me) / var.sqrt() <= -z_rec
                    }
                    None => false,
                }
            };
        }
        // Scenario rows: their own recent probes against their frozen baseline.
        let from = recent.0 as f64 * s.bin_s;
        let mut recovered_scen = vec![false; t.scenarios.len()];
        for (i, sc) in t.scenarios.iter().enumerate() {
            let r = &sc.rows[k];
            if r.state != State::Regressed || recent.0 < since(r) {
                continue;
            }
            recovered_scen[i] = if signal == Signal::Goodput {
                let Some(f) = &sc.goodput.frozen else { continue };
                let bins: Vec<(u32, u32)> = sc.goodput.bins.iter().filter(|b| b.bin >= recent.0 && b.bin < recent.1).map(|b| (b.good, b.bad)).collect();
                bad_share_below(&bins, f.p_bad() + s.goodput_min_effect, z_rec)
            } else {
                let lk = &sc.latency[k];
                let Some(f) = &lk.frozen else { continue };
                let p = lk.post.span(f, from, f64::INFINITY);
                p.n >= MIN_POST && {
                    let var = (p.var.max(f.var) / p.n + f.var / f.m as f64) * t.alarm_deff[k];
                    (p.mean - f.mean - s.latency_min_effect.ln()) / var.sqrt() <= -z_rec
                }
            };
        }
        let t = &mut self.targets[ti];
        let mut events = Vec::new();
        if recovered_pooled {
            t.pooled[k].state = State::Recovered;
            t.pooled[k].changed = Some(now);
            t.recovery_ref[k] = None;
            events.push((None, t.pooled[k].source.unwrap_or(Cause::Release)));
        }
        for (sc, rec) in t.scenarios.iter_mut().zip(recovered_scen) {
            if rec {
                sc.rows[k].state = State::Recovered;
                sc.rows[k].changed = Some(now);
                events.push((Some(sc.name.clone()), Cause::Release));
            }
        }
        let name = t.name.clone();
        for (scenario, source) in events {
            self.events.push(StateChange { target: name.clone(), scenario, signal, state: State::Recovered, source, at: now });
        }
    }

    /// The exported state: per target, the four pooled rows (scenario `None`) then four rows per
    /// scenario, in first-seen order.
    pub fn report(&self) -> Vec<SignalReport> {
        let mut out = Vec::new();
        for t in &self.targets {
            for signal in Signal::ALL {
                let k = signal.index();
                let mut row = self.row_report(t, None, signal, &t.pooled[k]);
                (row.continuous_evidence, row.continuous_threshold) = t.continuous[k];
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

    /// Behaviour-check failures of the release window (from the grace window on) against the
    /// goodput baseline's bins before the (first) marker of the chain; outage bins left out.
    fn checks_report(&self, t: &TargetState) -> Option<ChecksReport> {
        let s = &self.settings;
        let (marker, frozen_at) = (t.marker?, t.frozen_at?);
        let count = |(a, b): (i64, i64)| {
            (a.max(t.hist.first)..b)
                .filter_map(|x| t.hist.get(x))
                .filter(|h| !h.outage())
                .fold((0u64, 0u64), |(n, f), h| (n + (h.good + h.bad) as u64, f + h.check_bad as u64))
        };
        let (baseline_probes, baseline_failed) = count((self.bin_of(frozen_at - s.goodput_baseline_s), self.bin_of(frozen_at)));
        let post0 = self.bin_after(marker + s.release_grace_s);
        let (probes, failed) = count((post0, t.hist.end()));
        if baseline_probes < s.min_goodput_baseline as u64 || probes == 0 {
            return None;
        }
        let window_bins = ((s.armed_window_s - s.release_grace_s) / s.bin_s).floor() as i64;
        let p = binomial_sf(failed as f64, (failed + baseline_failed) as f64, probes as f64 / (probes + baseline_probes) as f64);
        let p_value = (p * looks_within(window_bins) as f64).min(1.0);
        let threshold = (6.0 / s.armed_alpha).ln();
        let rise = failed as f64 / probes as f64 - baseline_failed as f64 / baseline_probes as f64;
        let regressed = t.looked && rise >= s.goodput_min_effect && -(p_value.max(1e-300)).ln() >= threshold;
        Some(ChecksReport { baseline_probes, baseline_failed, probes, failed, p_value, threshold, regressed })
    }

    fn row_report(&self, t: &TargetState, only: Option<&ScenarioState>, signal: Signal, r: &SignalState) -> SignalReport {
        let s = &self.settings;
        let scs: Vec<&ScenarioState> = match only {
            Some(sc) => vec![sc],
            None => t.scenarios.iter().collect(),
        };
        let k = signal.index();
        let (mut samples, mut baseline) = (0u64, 0u64);
        let (mut median_ratio, mut p95_ratio, mut bad_delta) = (None, None, None);
        if signal == Signal::Goodput {
            let post0 = t.marker.map(|m| self.bin_after(m + s.release_grace_s));
            let frozen = match only {
                Some(sc) => sc.goodput.frozen.as_ref(),
                None => t.good_frozen.as_ref(),
            };
            let (mut n, mut bad) = (0u64, 0u64);
            if let Some(p0) = post0 {
                match only {
                    Some(sc) => sc.goodput.bins.iter().filter(|b| b.bin >= p0).for_each(|b| {
                        n += (b.good + b.bad) as u64;
                        bad += b.bad as u64;
                    }),
                    None => (p0.max(t.hist.first)..t.hist.end()).filter_map(|b| t.hist.get(b)).for_each(|b| {
                        n += (b.good + b.bad) as u64;
                        bad += b.bad as u64;
                    }),
                }
            }
            samples = n;
            match frozen {
                Some(f) => {
                    baseline = f.n;
                    if let Some((point, centre, var)) = proportion_delta(f.bad, f.n, bad, n) {
                        let half = Z95 * var.sqrt();
                        bad_delta = Some(Estimate { value: point, low: centre - half, high: centre + half });
                    }
                }
                None => baseline = scs.iter().flat_map(|sc| sc.goodput.bins.iter()).map(|b| (b.good + b.bad) as u64).sum(),
            }
        } else {
            let (mut med, mut p95) = (Vec::new(), Vec::new());
            for sc in &scs {
                let lk = &sc.latency[k];
                samples += lk.post.n;
                match &lk.frozen {
                    Some(f) => {
                        baseline += f.m as u64;
                        if lk.post.recent.len() >= 5 {
                            let mut v: Vec<f32> = lk.post.recent.iter().map(|x| x.1).collect();
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
        SignalReport {
            target: t.name.clone(),
            scenario: only.map(|s| s.name.clone()),
            signal,
            state: r.state,
            source: r.source,
            armed: t.armed_until.is_some(),
            pending: t.armed_until.is_some() && !t.looked,
            version: t.version.clone(),
            detectable: if only.is_none() { t.detectable[k] } else { None },
            marker_s: t.marker,
            changed_s: r.changed,
            samples,
            baseline_samples: baseline,
            median_ratio,
            p95_ratio,
            bad_delta,
            log_evidence: r.log_e,
            p_value: (-r.max_log_e).exp().min(1.0),
            threshold: self.threshold(signal),
            continuous_evidence: 0.0,
            continuous_threshold: 0.0,
            load_slope: if signal == Signal::Goodput {
                0.0
            } else {
                match (t.armed_until, t.adjust[k]) {
                    (Some(_), Some(a)) => a.slope,
                    (Some(_), None) => 0.0,
                    (None, _) => t.hist.vario[k].load_slope().unwrap_or(0.0),
                }
            },
            trend_per_hour: if signal == Signal::Goodput {
                None
            } else {
                t.trend[k].as_ref().filter(|_| t.marker.is_some()).map(|tr| (tr.slope * 3600.0).exp())
            },
            checks: if signal == Signal::Goodput && only.is_none() { self.checks_report(t) } else { None },
            warmup: t.cache_ref.filter(|_| t.marker.is_some()).map(|c| CacheWarmup {
                hit_rate_before: c.mean,
                margin: c.margin,
                hit_rate_after: (t.post_hit.1 > 0).then(|| t.post_hit.0 / t.post_hit.1 as f64),
                held_probes: t.warm_held,
                cold: t.cold_now,
            }),
        }
    }
}

/// Freezes target `t`'s baselines at `at`: the load adjustment, cache reference, trend and
/// dependence from the history before it, each scenario's latency values and goodput bins of the
/// baseline windows before it.
fn freeze(t: &mut TargetState, at: f64, s: &DetectSettings) {
    t.frozen_at = Some(at);
    // The load adjustment: the slope from the history's increments, compared at the
    // baseline hour's mean reading; taken only where it narrows the test (the variance of
    // the baseline against the first ten minutes after the grace window, adjusted against
    // raw, both from the history before the marker).
    let (b0, b1) = (bin_index(at - s.latency_baseline_s, s.bin_s), bin_index(at, s.bin_s));
    let (xs, xn) = (b0..b1).filter_map(|b| t.hist.get(b)).filter(|b| b.x_n > 0).fold((0.0, 0usize), |(a, n), b| (a + b.x as f64, n + 1));
    let p0 = b1 + (s.release_grace_s / s.bin_s).ceil() as i64;
    t.dependence_raw = std::array::from_fn(|k| t.hist.dependence(k, None));
    t.adjust = std::array::from_fn(|k| {
        let slope = t.hist.vario[k].load_slope()?;
        let adj = t.hist.dependence(k, Some(slope))?;
        let raw = t.dependence_raw[k].as_ref()?;
        let narrower = contrast_var(&adj.gamma, (b0, b1), (p0, p0 + 10)) < (1.0 - MIN_VARIANCE_CUT) * contrast_var(&raw.gamma, (b0, b1), (p0, p0 + 10));
        (xn > 0 && narrower).then(|| Adjust { slope, x_ref: xs / xn as f64 })
    });
    t.cache_ref = CacheRef::from_bins((b0..b1).filter_map(|b| t.hist.get(b)));
    t.trend = std::array::from_fn(|k| t.hist.trend(k, b1, t.adjust[k], s.bin_s));
    t.dependence = std::array::from_fn(|k| match t.adjust[k] {
        Some(a) => t.hist.dependence(k, Some(a.slope)),
        None => t.dependence_raw[k].clone(),
    });
    let (g0, g1) = (bin_index(at - s.goodput_baseline_s, s.bin_s), bin_index(at, s.bin_s));
    let pooled_bins = (g0..g1).filter_map(|b| t.hist.get(b)).filter(|b| !b.outage()).map(|b| (b.good, b.bad));
    let total: u64 = pooled_bins.clone().map(|(g, b)| (g + b) as u64).sum();
    t.good_frozen = if total >= s.min_goodput_baseline as u64 { GoodFrozen::from_bins(pooled_bins) } else { None };
    for sc in &mut t.scenarios {
        for (k, lk) in sc.latency.iter_mut().enumerate() {
            let from = at - s.latency_baseline_s;
            let (a, tr) = (t.adjust[k], t.trend[k].as_ref());
            let vals: Vec<f32> =
                (0..lk.times.len()).filter(|&i| lk.times[i] >= from && lk.times[i] <= at).map(|i| detrended(lk.value(i, a), lk.times[i], tr) as f32).collect();
            lk.frozen = if vals.len() >= s.min_latency_baseline { LatencyFrozen::from_values(vals, lk.level.bounds(s.clip_sigmas), s) } else { None };
        }
        let hist = &t.hist;
        let g = &mut sc.goodput;
        let bins = g.bins.iter().filter(|b| b.bin >= g0 && b.bin < g1 && !hist.get(b.bin).is_some_and(HistBin::outage)).map(|b| (b.good, b.bad));
        let total: u64 = bins.clone().map(|(g, b)| (g + b) as u64).sum();
        g.frozen = if total >= s.min_goodput_baseline as u64 { GoodFrozen::from_bins(bins) } else { None };
    }
}

/// A log latency with the release window's frozen trend taken out (unchanged without one).
fn detrended(y: f64, time: f64, trend: Option<&Trend>) -> f64 {
    trend.map_or(y, |tr| tr.detrend(y, time))
}

/// Whether the bad share of `bins` is below `limit` with confidence given by `z` (normal
/// approximation, the variance at the larger of the share and the limit). Needs 20 probes.
fn bad_share_below(bins: &[(u32, u32)], limit: f64, z: f64) -> bool {
    let n: f64 = bins.iter().map(|(g, b)| (g + b) as f64).sum();
    if n < 20.0 {
        return false;
    }
    let p = bins.iter().map(|(_, b)| *b as f64).sum::<f64>() / n;
    let v = (p * (1.0 - p)).max(limit.clamp(0.0, 1.0) * (1.0 - limit.clamp(0.0, 1.0))).max(1e-9);
    (p - limit) / (v / n).sqrt() <= -z
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};

    const SC: [&str; 3] = ["a", "b", "c"];

    fn lognormal(rng: &mut SmallRng, median: f64, sigma: f64) -> f64 {
        let z: f64 = StandardNormal.sample(rng);
        median * (sigma * z).exp()
    }

    fn probe(rng: &mut SmallRng, factor: f64) -> Observation {
        Observation { ttft: Some(lognormal(rng, 0.2, 0.5) * factor), tpot: None, e2e: None, good: Some(true), load: None, cache_hit: None, check_failed: false }
    }

    /// Feeds `n` probes one second apart from `t0`, round robin over the scenarios.
    fn feed(d: &mut Detector, rng: &mut SmallRng, t0: f64, n: usize, mut obs: impl FnMut(&mut SmallRng, usize, f64) -> Observation) -> f64 {
        for i in 0..n {
            let t = t0 + i as f64;
            d.observe("t", SC[i % 3], obs(rng, i % 3, t), t);
        }
        t0 + n as f64
    }

    fn pooled(d: &Detector, signal: Signal) -> SignalReport {
        d.report().into_iter().find(|r| r.scenario.is_none() && r.signal == signal).expect("pooled row")
    }

    fn quiet() -> DetectSettings {
        DetectSettings { continuous: false, ..DetectSettings::default() }
    }

    /// Seconds from the marker to the first pooled `regressed` event of `signal`, if any.
    fn first_alarm(d: &mut Detector, signal: Signal, marker: f64) -> Option<f64> {
        d.drain_events().iter().find(|e| e.scenario.is_none() && e.signal == signal && e.state == State::Regressed).map(|e| e.at - marker)
    }

    #[test]
    fn contrast_variance_of_independent_bins_is_the_textbook_one() {
        let gamma = vec![0.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        let v = contrast_var(&gamma, (0, 4), (4, 6));
        assert!((v - 2.0 * (1.0 / 4.0 + 1.0 / 2.0)).abs() < 1e-12, "{v}");
        // A random walk (γ(k) = k/2): mean of [2, 4) minus mean of [0, 2) has variance 1.5.
        let walk: Vec<f64> = (0..10).map(|k| k as f64 / 2.0).collect();
        let v = contrast_var(&walk, (0, 2), (2, 4));
        assert!((v - 1.5).abs() < 1e-12, "{v}");
    }

    #[test]
    fn load_that_lasts_minutes_raises_the_design_effect() {
        // Bins of 30 probes (sd 0.5) under an AR(1) load offset (sd 0.1, lag-1 correlation
        // e^(-1/5)): a before/after comparison of an hour and half an hour varies far more than
        // independent probes would say; without load the factor stays near 1.
        let mut rng = SmallRng::seed_from_u64(3);
        for (load_sd, lo, hi) in [(0.0, 1.0, 1.3), (0.1, 4.0, 60.0)] {
            let mut h = BinnedHistory::new(150, 720, 0);
            let rho = (-1.0f64 / 5.0).exp();
            let mut l = 0.0;
            for bin in 0..720 {
                let z: f64 = StandardNormal.sample(&mut rng);
                l = rho * l + load_sd * (1.0 - rho * rho).sqrt() * z;
                let mut open = OpenBin::default();
                for _ in 0..30 {
                    let e: f64 = StandardNormal.sample(&mut rng);
                    let r = l + 0.5 * e;
                    open.n[0] += 1;
                    open.sum[0] += r;
                    open.sum_sq[0] += r * r;
                }
                h.push(bin, open.close());
            }
            let deff = h.dependence(0, None).expect("enough history").design_effect((600, 660), (663, 693));
            assert!(deff >= lo && deff <= hi, "load sd {load_sd}: design effect {deff}");
        }
    }

    #[test]
    fn quiet_streams_stay_watching() {
        // 10 release windows without a change; the budget is 1.5% per window for the target.
        let mut alarms = 0;
        for seed in 0..10 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, t);
            let end = feed(&mut d, &mut rng, t, 3600, |r, _, _| probe(r, 1.0));
            alarms += d.drain_events().iter().filter(|e| e.state == State::Regressed).count();
            d.tick(end);
            assert!(!pooled(&d, Signal::Ttft).armed, "the window closed");
        }
        assert_eq!(alarms, 0, "{alarms} false alarms in 10 windows");
    }

    #[test]
    fn doubling_is_detected_at_the_first_look_after_the_grace_window() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 600, |r, _, _| probe(r, 2.0));
        let at = first_alarm(&mut d, Signal::Ttft, t).expect("2x detected within 10 min");
        assert!((540.0..=600.0).contains(&at), "detected {at} s after the marker");
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.source), (State::Regressed, Some(Cause::Release)));
        assert!(r.log_evidence >= r.threshold && r.p_value <= 0.015 / 6.0, "{r:?}");
        let m = r.median_ratio.expect("median ratio");
        assert!(m.low < 2.0 && 2.0 < m.high && m.low > 1.5, "{m:?}");
        let regressed = d.report().iter().filter(|r| r.scenario.is_some() && r.signal == Signal::Ttft && r.state == State::Regressed).count();
        assert_eq!(regressed, 3, "every scenario is named");
    }

    #[test]
    fn a_rollout_warm_up_is_no_regression() {
        // 2x for 5 minutes and 10% errors for 2 minutes after the marker, then healed.
        let mut alarms = 0;
        for seed in 0..5 {
            let mut rng = SmallRng::seed_from_u64(100 + seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
            d.mark_release("t", "v2", t, t);
            feed(&mut d, &mut rng, t, 3600, |r, _, now| {
                if now - t < 120.0 && r.random_bool(0.1) {
                    return Observation { good: Some(false), ..Observation::default() };
                }
                probe(r, if now - t < 300.0 { 2.0 } else { 1.0 })
            });
            alarms += d.drain_events().iter().filter(|e| e.state == State::Regressed).count();
        }
        assert_eq!(alarms, 0);
    }

    #[test]
    fn one_slower_scenario_is_found_and_named() {
        let mut rng = SmallRng::seed_from_u64(9);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 1200, |r, s, _| probe(r, if s == 1 { 1.6 } else { 1.0 }));
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some(), "the pooled row regressed");
        let rows = d.report();
        let state = |name: &str| rows.iter().find(|r| r.scenario.as_deref() == Some(name) && r.signal == Signal::Ttft).map(|r| r.state);
        assert_eq!(state("b"), Some(State::Regressed));
        assert_eq!((state("a"), state("c")), (Some(State::Watching), Some(State::Watching)));
    }

    #[test]
    fn a_slower_cache_miss_mode_is_detected() {
        // 70% prefix-cache hits at 100 ms, misses at 3x; the release makes misses 1.5x slower.
        let bimodal = |r: &mut SmallRng, miss_factor: f64| {
            let miss = r.random_bool(0.3);
            let median = if miss { 0.3 * miss_factor } else { 0.1 };
            Observation { ttft: Some(lognormal(r, median, 0.3)), tpot: None, e2e: None, good: Some(true), load: None, cache_hit: None, check_failed: false }
        };
        let mut rng = SmallRng::seed_from_u64(21);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| bimodal(r, 1.0));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 1800, |r, _, _| bimodal(r, 1.5));
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some_and(|at| at <= 1800.0));
    }

    /// 70% prefix-cache hits at 100 ms, misses at 3x, with the engine's hit-rate reading.
    fn cached(r: &mut SmallRng, hit_share: f64, factor: f64) -> Observation {
        let miss = !r.random_bool(hit_share.clamp(0.0, 1.0));
        let median = if miss { 0.3 } else { 0.1 };
        Observation { ttft: Some(lognormal(r, median, 0.3) * factor), cache_hit: Some(hit_share), good: Some(true), ..Observation::default() }
    }

    #[test]
    fn a_cold_cache_after_the_rollout_is_warm_up_and_a_cache_that_stays_cold_is_named() {
        // Restarts empty the cache: the hit share recovers from 0 to 0.7 over 15 minutes.
        let mut rng = SmallRng::seed_from_u64(31);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| cached(r, 0.7, 1.0));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| cached(r, 0.7 * ((now - t) / 900.0).min(1.0), 1.0));
        assert_eq!(first_alarm(&mut d, Signal::Ttft, t), None, "a warming cache is no regression");
        let w = pooled(&d, Signal::Ttft).warmup.expect("the hit rate was read");
        assert!((w.hit_rate_before - 0.7).abs() < 0.01 && w.held_probes > 300, "{w:?}");
        // Without the reading the same warm-up alarms: the hold is what keeps it quiet.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| Observation { cache_hit: None, ..cached(r, 0.7, 1.0) });
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| Observation { cache_hit: None, ..cached(r, 0.7 * ((now - t) / 900.0).min(1.0), 1.0) });
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some());
        // A release that turns the cache off: held for `cache_warmup_max_s`, then tested, and
        // the row says the hit rate fell.
        let mut d = Detector::new(DetectSettings { cache_warmup_max_s: 600.0, ..quiet() });
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| cached(r, 0.7, 1.0));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3000, |r, _, _| cached(r, 0.0, 1.0));
        let at = first_alarm(&mut d, Signal::Ttft, t).expect("a cache that stays cold is a regression");
        assert!(at > 300.0 + 600.0, "not before the warm-up allowance: {at}");
        assert!(pooled(&d, Signal::Ttft).warmup.is_some_and(|w| w.explains_slowdown() && w.cold));
    }

    #[test]
    fn a_ramp_before_the_marker_is_taken_out_and_a_regression_on_it_still_found() {
        // Latency rises 1.4x an hour (a morning ramp) from two hours before the marker on.
        let ramp = |now: f64| (1.4f64.ln() * (now - 7200.0).max(0.0) / 3600.0).exp();
        let run = |factor: f64, seed: u64| {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut d = Detector::new(quiet());
            let t = feed(&mut d, &mut rng, 0.0, 14_400, |r, _, now| probe(r, ramp(now)));
            d.mark_release("t", "v2", t, t);
            feed(&mut d, &mut rng, t, 1800, |r, _, now| probe(r, ramp(now) * factor));
            let trend = pooled(&d, Signal::Ttft).trend_per_hour;
            (first_alarm(&mut d, Signal::Ttft, t), trend)
        };
        let (alarm, trend) = run(1.0, 41);
        assert_eq!(alarm, None, "the ramp alone is no regression");
        assert!(trend.is_some_and(|f| (f - 1.4).abs() < 0.15), "{trend:?}");
        assert!(run(1.5, 42).0.is_some(), "a 1.5x release during the ramp is still found");
    }

    #[test]
    fn a_release_that_breaks_answers_is_regressed_on_checks() {
        let mut rng = SmallRng::seed_from_u64(51);
        let mut d = Detector::new(quiet());
        // 6 hours of baseline, 0.5% failures none of which a check failure.
        let t =
            feed(
                &mut d,
                &mut rng,
                0.0,
                21_600,
                |r, _, _| if r.random_bool(0.005) { Observation { good: Some(false), ..Observation::default() } } else { probe(r, 1.0) },
            );
        d.mark_release("t", "v2", t, t);
        let checks = |d: &Detector| pooled(d, Signal::Goodput).checks.expect("a goodput baseline");
        // A version whose answers fail a check 10% of the time.
        let end = feed(&mut d, &mut rng, t, 900, |r, _, _| {
            if r.random_bool(0.1) { Observation { good: Some(false), check_failed: true, ..Observation::default() } } else { probe(r, 1.0) }
        });
        d.tick(end);
        let c = checks(&d);
        assert!(c.regressed && c.failed > 20 && c.baseline_failed == 0, "{c:?}");
        let v = super::super::verdict::verdict(&d.report(), "t", Some("v2"), d.settings()).expect("a verdict");
        assert_eq!(v.state, super::super::verdict::VerdictState::Regressed);
        assert!(v.signals.iter().any(|s| s.signal == "checks" && s.state == "regressed"));
        // The same window without check failures: not regressed on checks.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, t);
        let end = feed(&mut d, &mut rng, t, 900, |r, _, _| probe(r, 1.0));
        d.tick(end);
        assert!(!checks(&d).regressed);
    }

    fn ttft_alarm(events: &[StateChange]) -> bool {
        events.iter().any(|e| e.scenario.is_none() && e.signal == Signal::Ttft && e.state == State::Regressed)
    }

    #[test]
    fn a_version_longer_than_the_bound_is_kept_cut_and_still_one_release() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 600, |r, _, _| probe(r, 1.0));
        let long = "v".repeat(10 * MAX_VERSION_CHARS);
        assert!(matches!(d.mark_release("t", &long, t, t), Marked::Armed { .. }));
        // The same long version again is the same release, as cut.
        assert_eq!(d.mark_release("t", &long, t + 1.0, t + 1.0), Marked::Repeated { first_at: t });
        let kept = d.targets[0].version.clone().unwrap_or_default();
        assert_eq!(kept.chars().count(), MAX_VERSION_CHARS);
    }

    #[test]
    fn a_repeated_marker_is_the_same_release_and_no_marker_clears_an_alarm() {
        let mut rng = SmallRng::seed_from_u64(31);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        assert_eq!(d.mark_release("t", "v2", t, t), Marked::Armed { at: t, chained: false });
        let t2 = feed(&mut d, &mut rng, t, 1200, |r, _, _| probe(r, 1.5));
        assert!(ttft_alarm(&d.drain_events()), "v2 is slower");
        // The same version again (a second pipeline step, or discovery after the API): nothing
        // changes, not even the window's start.
        assert_eq!(d.mark_release("t", "v2", t2, t2), Marked::Repeated { first_at: t });
        assert_eq!((pooled(&d, Signal::Ttft).state, pooled(&d, Signal::Ttft).marker_s), (State::Regressed, Some(t)));
        // Another version while v2's alarm is up: the alarm stays, and v3 is judged against the
        // baseline frozen before v2.
        assert!(matches!(d.mark_release("t", "v3", t2, t2), Marked::Armed { chained: true, .. }));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Regressed);
        assert!(d.drain_events().is_empty(), "a marker raises or clears nothing by itself");
        // v3 is the fix: the recovery test clears the alarm, with an event.
        feed(&mut d, &mut rng, t2, 1800, |r, _, _| probe(r, 1.0));
        let events = d.drain_events();
        assert!(events.iter().any(|e| e.scenario.is_none() && e.signal == Signal::Ttft && e.state == State::Recovered), "{events:?}");
        assert!(!ttft_alarm(&events), "v3 is as fast as the baseline before v2");
    }

    #[test]
    fn a_late_marker_tests_the_probes_since_its_time() {
        let mut rng = SmallRng::seed_from_u64(32);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        // Released at t, 2x slower from then on; the marker comes 20 minutes later with its time.
        let told = feed(&mut d, &mut rng, t, 1200, |r, _, _| probe(r, 2.0));
        assert_eq!(d.mark_release("t", "v2", t, told), Marked::Armed { at: t, chained: false });
        assert!(ttft_alarm(&d.drain_events()), "judged at once from the probes since its time");
        let row = pooled(&d, Signal::Ttft);
        assert_eq!((row.marker_s, row.armed), (Some(t), true));
        assert!(row.samples >= 800, "the post-grace probes since t count: {}", row.samples);
        // A time older than marker_max_delay_s is taken as that long ago; a future one as now.
        let mut e = Detector::new(quiet());
        let max = e.settings().marker_max_delay_s;
        assert_eq!(e.mark_release("t", "v2", 0.0, 10_000.0), Marked::Armed { at: 10_000.0 - max, chained: false });
        assert_eq!(e.mark_release("u", "v2", 20_000.0, 10_000.0), Marked::Armed { at: 10_000.0, chained: false });
        assert_eq!(e.mark_release("u", "v2", f64::NAN, 10_000.0), Marked::Ignored);
    }

    #[test]
    fn an_incident_earlier_in_the_day_does_not_widen_the_release_test() {
        // 15 minutes at 3x, two hours before the release; the release is 1.3x slower.
        let deff_and_alarm = |incident: bool| {
            let mut rng = SmallRng::seed_from_u64(33);
            let mut d = Detector::new(quiet());
            let slow = |t: f64| if incident && (14_400.0..15_300.0).contains(&t) { 3.0 } else { 1.0 };
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, t| probe(r, slow(t)));
            d.mark_release("t", "v2", t, t);
            feed(&mut d, &mut rng, t, 1800, |r, _, _| probe(r, 1.3));
            let tt = &d.targets[0];
            let base = (d.bin_of(t - 3600.0), d.bin_of(t));
            let deff = tt.dependence[0].as_ref().expect("dependence").design_effect(base, (base.1 + 5, base.1 + 30));
            let excluded = tt.hist.bins.iter().filter(|b| b.excluded[0]).count();
            (deff, ttft_alarm(&d.drain_events()), excluded)
        };
        let (clean, found_clean, _) = deff_and_alarm(false);
        let (after_incident, found, excluded) = deff_and_alarm(true);
        assert!((13..=17).contains(&excluded), "the incident's bins are left out: {excluded}");
        assert!(after_incident < 1.5 * clean, "design effect {after_incident} after the incident, {clean} without");
        assert!(found_clean && found, "the release is found with and without the incident");
    }

    #[test]
    fn the_slowest_few_percent_made_slower_is_found_by_the_tail_test() {
        // The median holds; the slowest 5% of requests (their own draw) become 3x slower. (The
        // planner measures the power for 3%: docs/detection.md.)
        let tailed = |r: &mut SmallRng, slower: bool| {
            let z: f64 = StandardNormal.sample(r);
            let f = if slower && z > normal_quantile(0.95) { 3.0 } else { 1.0 };
            Observation { ttft: Some(0.2 * (0.5 * z).exp() * f), tpot: None, e2e: None, good: Some(true), load: None, cache_hit: None, check_failed: false }
        };
        let mut rng = SmallRng::seed_from_u64(34);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, _, _| tailed(r, false));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, _| tailed(r, true));
        assert!(first_alarm(&mut d, Signal::Ttft, t).is_some(), "the tail test sees it");
        let median = pooled(&d, Signal::Ttft).median_ratio.expect("median ratio");
        assert!((0.9..1.1).contains(&median.value), "the median held: {median:?}");
    }

    #[test]
    fn a_load_reading_that_tracks_latency_narrows_the_release_test() {
        // Load swings (sd 0.15 in log latency, 5-minute time constant) that the engine's offered
        // load reading tracks; the release is 1.25x slower.
        let run = |with_reading: bool| {
            let mut rng = SmallRng::seed_from_u64(35);
            let mut d = Detector::new(quiet());
            let mut load = 0.0f64;
            let mut obs = |r: &mut SmallRng, _: usize, t: f64, factor: f64| {
                let a = (-1.0f64 / 300.0).exp();
                let z: f64 = StandardNormal.sample(r);
                load = load * a + 0.15 * (1.0 - a * a).sqrt() * z;
                let noise: f64 = StandardNormal.sample(r);
                let reading = with_reading.then_some(3.0 + load + 0.02 * noise);
                {
                    let _ = t;
                    Observation { load: reading, ..probe(r, factor * load.exp()) }
                }
            };
            let t = feed(&mut d, &mut rng, 0.0, 21_600, |r, s, t| obs(r, s, t, 1.0));
            d.mark_release("t", "v2", t, t);
            let base = (d.bin_of(t - 3600.0), d.bin_of(t));
            let tt = &d.targets[0];
            let deff = tt.dependence[0].as_ref().expect("dependence").design_effect(base, (base.1 + 5, base.1 + 15));
            let slope = tt.adjust[0].map(|a| a.slope);
            feed(&mut d, &mut rng, t, 900, |r, s, t| obs(r, s, t, 1.25));
            (deff, slope, first_alarm(&mut d, Signal::Ttft, t))
        };
        let (deff_raw, none, _) = run(false);
        let (deff_adj, slope, alarm) = run(true);
        assert_eq!(none, None, "no reading, no adjustment");
        assert!(slope.is_some_and(|b| (0.8..1.2).contains(&b)), "the slope of log latency on the reading: {slope:?}");
        assert!(deff_adj < deff_raw / 3.0, "design effect {deff_adj} adjusted, {deff_raw} raw");
        assert!(alarm.is_some_and(|at| at <= 900.0), "1.25x found within 15 minutes with the reading: {alarm:?}");
    }

    #[test]
    fn a_release_is_pending_from_its_marker_until_the_first_look() {
        let mut rng = SmallRng::seed_from_u64(36);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        assert!(!pooled(&d, Signal::Ttft).pending, "no marker, nothing pending");
        d.mark_release("t", "v2", t, t);
        // The grace window (300 s) and 3 of the 4 bins before the first look.
        let t2 = feed(&mut d, &mut rng, t, 480, |r, _, _| probe(r, 1.0));
        assert!(pooled(&d, Signal::Goodput).pending && pooled(&d, Signal::Ttft).pending);
        feed(&mut d, &mut rng, t2, 120, |r, _, _| probe(r, 1.0));
        assert!(!pooled(&d, Signal::Ttft).pending, "the first look has come");
        assert!(pooled(&d, Signal::Ttft).armed);
    }

    #[test]
    fn dropped_probes_never_count() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 3600, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, t);
        let huge = Observation { ttft: Some(100.0), tpot: Some(10.0), e2e: Some(1000.0), good: None, load: None, cache_hit: None, check_failed: false };
        for i in 0..500 {
            d.observe("t", SC[i % 3], huge, t + i as f64);
        }
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.samples), (State::Watching, 0));
        assert_eq!(pooled(&d, Signal::Goodput).samples, 0);
        assert_eq!(d.ignored().own_failures, 500);
    }

    fn flaky(r: &mut SmallRng, p: f64) -> Observation {
        if r.random_bool(p) { Observation { good: Some(false), ..Observation::default() } } else { probe(r, 1.0) }
    }

    #[test]
    fn goodput_drop_is_detected_and_an_outage_is_not_a_goodput_regression() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7 * 3600, |r, _, _| flaky(r, 0.005));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 1200, |r, _, _| flaky(r, 0.05));
        assert!(first_alarm(&mut d, Signal::Goodput, t).is_some());
        let r = pooled(&d, Signal::Goodput);
        let delta = r.bad_delta.expect("bad delta");
        assert!(delta.low > 0.0 && delta.value > 0.02, "{delta:?}");
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Watching);

        // A 90 s total outage ten minutes after a release: availability, not a regression.
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7 * 3600, |r, _, _| flaky(r, 0.005));
        d.mark_release("t", "v2", t, t);
        feed(&mut d, &mut rng, t, 3600, |r, _, now| if (600.0..690.0).contains(&(now - t)) { flaky(r, 1.0) } else { flaky(r, 0.005) });
        assert_eq!(first_alarm(&mut d, Signal::Goodput, t), None);
    }

    #[test]
    fn regression_recovers_and_window_ends() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        d.mark_release("t", "v2", t, t);
        let t1 = feed(&mut d, &mut rng, t, 600, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Regressed);
        // Rolled back: the next probes look like the baseline again.
        let t2 = feed(&mut d, &mut rng, t1, 1200, |r, _, _| probe(r, 1.0));
        let r = pooled(&d, Signal::Ttft);
        assert_eq!(r.state, State::Recovered, "{r:?}");
        assert!(d.drain_events().iter().any(|e| e.state == State::Recovered && e.scenario.is_none()));
        d.tick(t2 + 2.0 * 3600.0);
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.armed), (State::Watching, false));
    }

    #[test]
    fn silent_step_is_caught_by_the_continuous_detector() {
        let mut rng = SmallRng::seed_from_u64(13);
        let mut d = Detector::new(DetectSettings::default());
        // 7 h at 0.5 probes/s (the test compares the last 30 minutes with the 6 hours before),
        // then a 2x step without a marker. A step this large is treated as an incident (left to
        // the burn-rate alerts) until the bins before it have moved to it, about 30 minutes; the
        // continuous test then needs its whole window past that and two looks in a row.
        for i in 0..12_600 {
            d.observe("t", SC[i % 3], probe(&mut rng, 1.0), i as f64 * 2.0);
        }
        assert!(d.drain_events().is_empty(), "no alarm on the quiet warm-up");
        let mut caught = None;
        for i in 0..2700 {
            d.observe("t", SC[i % 3], probe(&mut rng, 2.0), 25_200.0 + i as f64 * 2.0);
            if d.drain_events().iter().any(|e| e.source == Cause::Continuous && e.signal == Signal::Ttft) {
                caught = Some(i);
                break;
            }
        }
        assert!(caught.is_some_and(|i| i >= 900), "a 2x step is no continuous alarm within its first 30 minutes: {caught:?}");
        assert!(caught.is_some(), "continuous detector missed a 2x step within 90 minutes");
        let r = pooled(&d, Signal::Ttft);
        assert_eq!((r.state, r.source), (State::Regressed, Some(Cause::Continuous)));
        assert!(r.continuous_evidence >= r.continuous_threshold, "{r:?}");
    }

    #[test]
    fn snapshot_round_trips_and_restart_still_detects() {
        let mut rng = SmallRng::seed_from_u64(17);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        let bytes = d.snapshot();
        let mut e = Detector::new(quiet());
        let restored = e.restore(&bytes, t - 1.0).expect("restore");
        assert_eq!(restored.keys, 3);
        // The values of a baseline window before the oldest marker whose window may still be
        // open (two hours), up to the cap per key.
        assert_eq!(restored.latency_samples, 3 * quiet().baseline_max_samples, "{restored:?}");
        assert_eq!(restored.releases, 0);
        // Restoring what a restored detector saves changes nothing.
        let again = e.snapshot();
        let mut f = Detector::new(quiet());
        f.restore(&again, t - 1.0).expect("restore");
        assert!(f.snapshot() == again, "snapshot of the restored detector is the same");
        // The restarted detector has the baseline: a release right away is tested.
        e.mark_release("t", "v2", t + 10.0, t + 10.0);
        feed(&mut e, &mut rng, t + 10.0, 600, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&e, Signal::Ttft).state, State::Regressed);
        assert!(e.restore(b"{not json", t).is_err());
        let future = String::from_utf8(bytes).unwrap().replacen("\"version\":2", "\"version\":99", 1);
        assert!(e.restore(future.as_bytes(), t).unwrap_err().contains("version 99"));
    }

    #[test]
    fn a_release_window_open_at_a_restart_is_judged_after_it() {
        // Released 2x slower; the prober restarts 8 minutes later, before any look. The restored
        // window keeps its version and baselines, judges the probes from before and after the
        // restart, and the same version marked again (discovery, a pipeline's retry) is the same
        // release.
        let mut rng = SmallRng::seed_from_u64(29);
        let mut d = Detector::new(quiet());
        let t = feed(&mut d, &mut rng, 0.0, 7200, |r, _, _| probe(r, 1.0));
        assert!(matches!(d.mark_release("t", "v2", t, t), Marked::Armed { .. }));
        let t2 = feed(&mut d, &mut rng, t, 480, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&d, Signal::Ttft).state, State::Watching, "no look before the restart");
        let bytes = d.snapshot();
        let mut e = Detector::new(quiet());
        let restored = e.restore(&bytes, t2 + 30.0).expect("restore");
        assert_eq!(restored.releases, 1);
        let row = pooled(&e, Signal::Ttft);
        assert!(row.armed && row.version.as_deref() == Some("v2"), "{row:?}");
        assert_eq!(e.mark_release("t", "v2", t2 + 40.0, t2 + 40.0), Marked::Repeated { first_at: t });
        feed(&mut e, &mut rng, t2 + 30.0, 900, |r, _, _| probe(r, 2.0));
        assert_eq!(pooled(&e, Signal::Ttft).state, State::Regressed);
        let alarm = first_alarm(&mut e, Signal::Ttft, t).expect("an alarm event after the restart");
        assert!(alarm < 1800.0, "{alarm}");

        // A window that closed before the restart is not opened again.
        let mut f = Detector::new(quiet());
        let restored = f.restore(&bytes, t + 3600.0 + 60.0).expect("restore");
        assert_eq!(restored.releases, 0);
        assert!(!pooled(&f, Signal::Ttft).armed);
    }

    #[test]
    fn report_has_pooled_and_scenario_rows_and_labels() {
        let mut rng = SmallRng::seed_from_u64(19);
        let mut d = Detector::new(quiet());
        feed(&mut d, &mut rng, 0.0, 30, |r, _, _| probe(r, 1.0));
        let rows = d.report();
        assert_eq!(rows.len(), 4 + 4 * 3);
        assert_eq!(rows.iter().filter(|r| r.scenario.is_none()).count(), 4);
        let labels: Vec<&str> = rows[..4].iter().map(|r| r.signal.as_str()).collect();
        assert_eq!(labels, ["ttft", "tpot", "e2e", "goodput"]);
        assert_eq!(rows[0].state.as_str(), "watching");
        assert_eq!(Cause::Continuous.as_str(), "continuous");
        assert_eq!(State::Recovered.as_str(), "recovered");
    }

    #[test]
    fn keys_and_baselines_are_capped() {
        let s = DetectSettings { max_keys: 2, baseline_max_samples: 50, continuous: false, ..DetectSettings::default() };
        let mut d = Detector::new(s);
        let mut rng = SmallRng::seed_from_u64(23);
        feed(&mut d, &mut rng, 0.0, 300, |r, _, _| probe(r, 1.0));
        assert_eq!(d.keys(), 2);
        assert_eq!(d.ignored().over_key_cap, 100);
        let rows = d.report();
        let latency = rows.iter().filter(|r| r.scenario.is_some() && r.signal == Signal::Ttft);
        assert!(latency.clone().count() == 2 && latency.clone().all(|r| r.baseline_samples == 50));
    }

    #[test]
    fn hostile_snapshots_and_times_never_panic() {
        let mut rng = SmallRng::seed_from_u64(29);
        let mut d = Detector::new(DetectSettings::default());
        let t = feed(&mut d, &mut rng, 0.0, 3000, |r, _, _| probe(r, 1.0));
        let bytes = d.snapshot();
        // Damaged snapshots: every restore either fails with a message or yields a detector that
        // keeps working.
        for _ in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..b.len());
                const BYTES: &[u8] = b"0123456789-.eE,:[]{}\"nu";
                b[i] = BYTES[rng.random_range(0..BYTES.len())];
            }
            let mut e = Detector::new(DetectSettings::default());
            if e.restore(&b, t).is_ok() {
                e.mark_release("t", "v2", t + 1.0, t + 1.0);
                feed(&mut e, &mut rng, t + 1.0, 30, |r, _, _| probe(r, 2.0));
                let _ = e.report();
            }
        }
        // Times and values no clock or server should send.
        for now in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0e300, 1.0e300, 0.0, t + 1.0e9, t - 1.0e9] {
            d.observe(
                "t",
                "a",
                Observation {
                    ttft: Some(f64::NAN),
                    tpot: Some(-1.0),
                    e2e: Some(f64::INFINITY),
                    good: Some(true),
                    load: None,
                    cache_hit: None,
                    check_failed: false,
                },
                now,
            );
            d.observe("t", "a", probe(&mut rng, 1.0), now);
            d.mark_release("t", "v2", now, now);
            d.tick(now);
            let _ = d.report();
        }
        assert!(d.ignored().bad_values > 0);
    }

    #[test]
    fn looks_are_spread_over_the_window() {
        let looks: Vec<i64> = (0..=57).filter(|e| is_look(*e)).collect();
        assert_eq!(looks, [4, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50]);
        assert_eq!(looks_within(57), 11);
    }
}
