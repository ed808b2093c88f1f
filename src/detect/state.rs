//! The detector's state and its types: the observations it takes, the signals, row states and
//! causes, the rows it reports, and per target × scenario the values, frozen baselines and row
//! states every test reads and writes, held by `Detector`. Time is the `now` the caller passes
//! (seconds, one clock throughout).

use std::collections::VecDeque;
use std::num::NonZeroU32;

use serde::Serialize;

use super::baseline::{Ewma, GoodBin, GoodFrozen, LatencyFrozen, LatencyPost};
use super::covariates::{Adjust, CacheRef, CacheWarmup, ReplicaOffsets, adjusted};
use super::daily::DailyShape;
use super::history::{BinnedHistory, Dependence, Trend, bin_index};
use super::tail::TailHistory;
use crate::config::DetectSettings;

/// One probe as the detector sees it. Latencies in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Observation {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2e: Option<f64>,
    /// `Some(true)`: succeeded and met the SLO; `Some(false)`: failed (no latency) or missed it
    /// (with its latency); `None`: the probe's own failure (dropped, cancelled) — the whole
    /// observation is ignored.
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
    /// Sent to a replica still warming up (it came up during a rolling update less than
    /// `release_grace_s` ago): after a marker its latency is held out of the release tests, as
    /// the whole target's is in the grace window.
    pub replica_warming: bool,
    /// The replica that served it (`replica_id` of its node where discovery read one, else of its
    /// endpoint; `None`: not known). The release
    /// tests take out each replica's offset from the others in the baseline hour
    /// (docs/detection.md, "Replicas that differ").
    pub replica: Option<NonZeroU32>,
}

impl Observation {
    /// Bad for goodput but answered, with a latency: an SLO miss rather than an error.
    pub fn missed_slo(&self) -> bool {
        self.good == Some(false) && !self.check_failed && (self.ttft.is_some() || self.tpot.is_some() || self.e2e.is_some())
    }
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

    pub(super) fn index(self) -> usize {
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
    /// Latency rows: an incident that was running at a marker of stated time has not ended, and
    /// the release's latency tests wait for it (false otherwise, and for goodput).
    pub incident_hold: bool,
    /// At the window's latest look a test of this signal found a change that began after the
    /// marker (its late half far stronger than its early one: an incident that started later,
    /// not the release), so it raised no alarm.
    pub late_onset: bool,
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
    /// Pooled goodput rows of a release window: the bad fraction's change split into errors
    /// (failed probes, failed checks included) and SLO misses (answered, too slow).
    pub error_delta: Option<Estimate>,
    pub slo_miss_delta: Option<Estimate>,
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
    /// Latency rows: half the range over a day of the target's daily shape that the tests take
    /// out (log latency; 0 while none is in use, and for goodput).
    pub daily_amplitude: f64,
    /// The target's offered-load reading: half the range over a day of its own daily shape
    /// (ln(1 + requests/s)) that the load adjustment takes out; the same on every row of the
    /// target, 0 while none is in use.
    pub reading_daily_amplitude: f64,
    /// Latency rows: how much the load's part of the variance is widened because the hours at
    /// the level latency is at now swing more than the history's average (1: not widened; the
    /// one frozen at the marker while its window is open, else the history's current one; 1
    /// for goodput).
    pub swing_scale: f64,
    /// Scenario latency rows: how much the scenario feels the target's shared load relative to
    /// the pooled bins, learned at the marker (`sensitivity.rs`; 1: not learned, the pooled load
    /// assumed; 1 for pooled rows and goodput).
    pub load_sensitivity: f64,
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

/// Where a marker's time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerTime {
    /// The release's own time, stated by whoever marked it (the API's `"at"`, `llmprobe release
    /// mark --at`): the release did not begin before it.
    Stated,
    /// When the marker came or the change was seen (the API without `"at"`, discovery's read,
    /// a behaviour change): the release may have begun minutes before it.
    Seen,
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
    /// The replica of each value (`None`: not known).
    pub(super) replicas: VecDeque<Option<NonZeroU32>>,
    /// Long-run level and spread (winsorizing bounds); held still while the target is armed or
    /// regressed.
    pub(super) level: Ewma,
    /// The fixed level residuals of the binned history are taken from (the level after
    /// `ANCHOR_PROBES` probes). It must not move with the probes: a wandering centre would read
    /// as load in the history. Re-set only when the level has moved by more than `REANCHOR`.
    pub(super) anchor: Option<f64>,
    pub(super) frozen: Option<LatencyFrozen>,
    pub(super) post: LatencyPost,
    /// Departures from the recent level, hour by hour (the tail test's history).
    pub(super) tail: TailHistory,
}

impl LatencyKey {
    /// Stored value `i` (log seconds), adjusted for its load reading.
    pub(super) fn value(&self, i: usize, adjust: Option<Adjust>) -> f64 {
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
    /// The variogram of the pooled capped bad counts before the marker (the goodput tests'
    /// dependence).
    pub(super) good_gamma: Option<Vec<f64>>,
    /// Per latency signal, how the pooled capped bad counts move with its bin mean before the
    /// marker (`HistBin::count_coupling`): the load SLO misses carry.
    pub(super) good_coupling: [Option<f64>; 3],
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
    /// Each latency signal's replica offsets in the baseline hour, frozen at the marker.
    pub(super) replicas: [ReplicaOffsets; 3],
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
    /// An incident flagged in the bin before a marker of stated time that came on time has not
    /// ended yet: the window's latency probes are held until it does (it began before the
    /// release, so it is not the release's).
    pub(super) incident_at_marker: bool,
    /// Per signal, whether the latest look held back a change that began after the marker
    /// (`SignalReport::late_onset`), and how many looks of the window did.
    pub(super) late_onset: [bool; 4],
    pub(super) late_onset_looks: u32,
    /// The open window's marker may hold an incident running at it (stated and on time,
    /// `Detector::mark_release`): kept in the snapshot, so a window re-opened after a restart
    /// holds as the marker did.
    pub(super) marker_holds_incident: bool,
    pub(super) hist: BinnedHistory,
    /// Per latency signal, the daily shape learned from earlier days (taken out of every
    /// residual the tests see).
    pub(super) daily: [DailyShape; 3],
    /// The daily shape of the offered-load reading, taken out of every reading the detector
    /// keeps (so a reading's adjustment does not take the daily cycle out a second time).
    pub(super) reading_daily: DailyShape,
}

/// Probes of a scenario before its residuals enter the binned history.
pub(super) const ANCHOR_PROBES: u64 = 100;
/// ln 1.5: the long-run level moved this far from the anchor (a scenario changed for good) sets a
/// new anchor.
pub(super) const REANCHOR: f64 = 0.405;

/// The regression detector: its settings, per target the state above, the events not yet
/// drained. What it does lives in `detector` (the lifecycle), `release`, `continuous` and `report`.
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

// What the tests, the report and the lifecycle share: error levels, bins, a new target's state.
impl Detector {
    /// The release test's error level for one signal (per release and target).
    pub(super) fn alpha(&self, signal: Signal) -> f64 {
        self.settings.armed_alpha * if signal == Signal::Goodput { 0.5 } else { 1.0 / 6.0 }
    }

    /// ln of the alarm threshold of a signal's release test: evidence (ln 1/adjusted p) at or
    /// above it is `regressed`.
    pub fn threshold(&self, signal: Signal) -> f64 {
        (1.0 / self.alpha(signal)).ln()
    }

    pub(super) fn bin_of(&self, t: f64) -> i64 {
        bin_index(t, self.settings.bin_s)
    }

    /// The first bin that starts at or after `t`.
    pub(super) fn bin_after(&self, t: f64) -> i64 {
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
            good_gamma: None,
            good_coupling: [None; 3],
            recovery_ref: [None; 4],
            continuous: [(0.0, 0.0); 4],
            continuous_passed: [false; 4],
            dependence: [None, None, None],
            dependence_raw: [None, None, None],
            adjust: [None; 3],
            replicas: Default::default(),
            alarm_deff: [1.0; 4],
            trend: [None, None, None],
            cache_ref: None,
            warm_held: 0,
            post_first: None,
            post_hit: (0.0, 0),
            cold_now: false,
            incident_at_marker: false,
            late_onset: [false; 4],
            late_onset_looks: 0,
            marker_holds_incident: false,
            daily: Default::default(),
            reading_daily: DailyShape::default(),
            hist: BinnedHistory::new(k_max, cap, ((s.continuous_window_s / s.bin_s).round() as usize).min(cap)),
        }
    }
}
