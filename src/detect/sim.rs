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
//!
//! Both kinds see the same day model (`Conditions`): the daily cycle, a load offset shared by all
//! scenarios (Ornstein–Uhlenbeck in log latency), a rollout warm-up after the release, and one
//! outage and one error burst per simulated day at random times. Latency per probe is lognormal
//! (optionally bimodal: prefix-cache hits and misses) with outliers, or a recorded probe.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, StandardNormal};

use super::compare::{CompareSettings, Group, compare_with};
use super::state::{Cause, Detector, MarkerTime, Observation, Signal, State};
use crate::config::DetectSettings;

const DAY_S: f64 = 86_400.0;

/// One recorded probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayProbe {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2e: Option<f64>,
    pub good: bool,
    /// When it was sent (Unix s: the intended time, else the sent time), if recorded.
    pub at_s: Option<f64>,
}

/// A recorded probe in the send-order timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimedProbe {
    pub scenario: usize,
    pub probe: ReplayProbe,
    /// Seconds since the previous probe of the recording (the first: the mean gap, for looping).
    pub gap_s: f64,
}

/// Recorded probes, per scenario (random-order replay) and in send order (time-order replay).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    pub pools: Vec<Vec<ReplayProbe>>,
    /// Empty unless every probe has a time and the times advance.
    pub timeline: Vec<TimedProbe>,
}

impl Replay {
    /// From (scenario index, probe) in file order. The timeline is sorted by send time (stable):
    /// records are written when a request ends, so file order is not quite send order.
    pub fn new(records: Vec<(usize, ReplayProbe)>) -> Replay {
        let scenarios = records.iter().map(|r| r.0 + 1).max().unwrap_or(0);
        let mut pools = vec![Vec::new(); scenarios];
        for (s, r) in &records {
            pools[*s].push(*r);
        }
        let mut timeline = Vec::new();
        if records.iter().all(|r| r.1.at_s.is_some_and(f64::is_finite)) && records.len() >= 2 {
            let mut sorted = records;
            sorted.sort_by(|a, b| a.1.at_s.unwrap_or(0.0).total_cmp(&b.1.at_s.unwrap_or(0.0)));
            let at = |i: usize| sorted[i].1.at_s.unwrap_or(0.0);
            let span = at(sorted.len() - 1) - at(0);
            if span > 0.0 {
                let mean_gap = span / (sorted.len() - 1) as f64;
                timeline = (0..sorted.len())
                    .map(|i| TimedProbe { scenario: sorted[i].0, probe: sorted[i].1, gap_s: if i == 0 { mean_gap } else { at(i) - at(i - 1) } })
                    .collect();
            }
        }
        Replay { pools, timeline }
    }

    /// Recorded probes per second (time order), from the recording's span.
    pub fn rate(&self) -> Option<f64> {
        let span: f64 = self.timeline.iter().skip(1).map(|t| t.gap_s).sum();
        (span > 0.0).then(|| (self.timeline.len() - 1) as f64 / span)
    }
}

/// How recorded probes are replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayOrder {
    /// Each probe drawn at random from its scenario's records, at Poisson times of `rate`.
    Random,
    /// The records in send order at their recorded gaps (looping), keeping the recording's
    /// autocorrelation; `rate` is then the recording's.
    Time,
}

/// Which probes the latency regression slows down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegressionTarget {
    All,
    /// Prefix-cache misses only (the slow mode of a bimodal TTFT).
    Miss,
    /// The slowest `slowest_share` of requests (their own draw above that quantile): a tail
    /// regression with the median unchanged.
    Slowest,
}

/// A load offset shared by all scenarios of the target: L(t), an Ornstein–Uhlenbeck process in
/// log latency. TTFT × e^L, TPOT × e^(tpot_share·L).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadOffset {
    /// Stationary standard deviation of L (0: no shared load).
    pub sd: f64,
    /// Time constant (s): the autocorrelation at lag τ is 1/e.
    pub tau_s: f64,
    pub tpot_share: f64,
    /// Scenarios feel the load and the daily cycle unlike: scenario i of n by 1 + spread·uᵢ,
    /// uᵢ evenly spaced over [−1, 1] (a short prompt's TTFT moves more with queueing).
    pub scenario_spread: f64,
    /// The sd follows the daily cycle: sd·(1 + day_swing·sin(cycle phase)), busy hours swing more.
    pub day_swing: f64,
}

impl LoadOffset {
    /// Scenario `i` of `n`'s factor on the shared load and the daily cycle (in log latency).
    fn sensitivity(&self, i: usize, n: usize) -> f64 {
        if n < 2 { 1.0 } else { 1.0 + self.scenario_spread * (2.0 * i as f64 / (n - 1) as f64 - 1.0) }
    }
}

/// The warm-up of a rollout after each release: latency × a factor drawn from
/// [factor_min, factor_max] for a duration drawn from [duration_min_s, duration_max_s], and a
/// share of failures for the first `error_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rollout {
    pub factor_min: f64,
    pub factor_max: f64,
    pub duration_min_s: f64,
    pub duration_max_s: f64,
    pub error_share: f64,
    pub error_s: f64,
}

impl Default for Rollout {
    fn default() -> Self {
        Rollout { factor_min: 1.3, factor_max: 2.0, duration_min_s: 120.0, duration_max_s: 300.0, error_share: 0.03, error_s: 120.0 }
    }
}

/// A traffic ramp (the morning's): TTFT × `factor` over `duration_s`, geometric, then held (it
/// is traffic: TPOT moves by the load's `tpot_share` of it, as with load swings); each trial's
/// release falls inside it. The offered-load reading (when simulated) rises with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ramp {
    pub factor: f64,
    pub duration_s: f64,
}

/// A cold prefix cache after each release's restarts: the hit share falls to 0 at the release and
/// recovers linearly to `cache_hit_share` over a time drawn from [min_s, max_s].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColdCache {
    pub min_s: f64,
    pub max_s: f64,
}

/// Two versions side by side during a rolling update: `replicas` replicas (each probe to one at
/// random), replaced by the new version one by one, the first at the release and the others
/// evenly over `rollout_s`; only the new version's replicas carry the regression (and the rollout
/// warm-up, from each one's own start). Each replica's latency carries a lasting offset of log sd
/// `replica_sd` (another GPU, a noisy neighbour). The canary comparison runs on them as the
/// prober's does (`sink/replicas.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SideBySide {
    pub replicas: usize,
    pub rollout_s: f64,
    pub replica_sd: f64,
}

impl SideBySide {
    /// When replica `j` starts serving the new version.
    fn start(&self, release: f64, j: usize) -> f64 {
        release + j as f64 * self.rollout_s / self.replicas.max(1) as f64
    }
}

/// The engine's load reading the prober joins to each probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadReading {
    /// Share of the load's variance the reading explains (1: exact).
    pub r2: f64,
    /// Share of a latency regression the reading carries after the release (0 for offered
    /// load; a queue length carries part of a slowdown).
    pub mediator: f64,
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
    pub regression_target: RegressionTarget,
    /// Only the first this many scenarios regress (`None`: all).
    pub regression_scenarios: Option<usize>,
    pub good_before: f64,
    pub good_after: f64,
    /// Relative amplitude of the daily latency cycle (0.2 = ±20%).
    pub drift: f64,
    pub drift_period_s: f64,
    /// Day-to-day variation of the daily cycle: its amplitude × (1 + this × z), z standard
    /// normal drawn per day and interpolated linearly between days (0: every day alike).
    pub drift_day_sd: f64,
    pub load: LoadOffset,
    /// Share of prefix-cache hits (0: unimodal TTFT); a miss's TTFT median is × `miss_factor`.
    pub cache_hit_share: f64,
    pub miss_factor: f64,
    pub outlier_share: f64,
    pub outlier_factor: f64,
    /// An outlier's factor is Pareto(α) (minimum 1) instead of `outlier_factor`.
    pub tail_pareto_alpha: Option<f64>,
    /// One total outage a simulated day, this long (s; 0: none).
    pub outage_s: f64,
    /// One error burst a simulated day, this long (s; 0: none), failing this share of probes.
    pub burst_s: f64,
    pub burst_error_share: f64,
    pub rollout: Option<Rollout>,
    /// The engine's load reading joined to each probe (`None`: no reading).
    pub reading: Option<LoadReading>,
    /// One latency incident a simulated day, this long (s; 0: none): every probe x
    /// `incident_factor`. In detection trials it comes earlier that day, before the baseline hour.
    pub incident_s: f64,
    pub incident_factor: f64,
    /// `RegressionTarget::Slowest`: the share of requests slowed.
    pub slowest_share: f64,
    /// The marker arrives this long after the release it names (its `at` is the release).
    pub marker_delay_s: f64,
    /// A second marker of the same version this long after the release (`None`: one marker).
    pub second_marker_s: Option<f64>,
    pub ramp: Option<Ramp>,
    /// A creep (a leak): in detection trials latency × this factor per hour from the release on
    /// (1: none), on top of `regression`.
    pub creep_per_h: f64,
    /// A TTFT SLO (s): a probe slower than it counts as bad for goodput (an SLO miss, which load
    /// makes more frequent), its latency still observed. `None`: only errors are bad.
    pub slo_ttft_s: Option<f64>,
    pub cold_cache: Option<ColdCache>,
    /// Join the engine's prefix-cache hit rate (the current hit share, ±0.02) to each probe.
    pub cache_reading: bool,
    pub side_by_side: Option<SideBySide>,
    /// Detection trials.
    pub trials: usize,
    /// Null trials (simulated days).
    pub days: usize,
    pub seed: u64,
    /// How long a detection trial runs after the release (s).
    pub horizon_s: f64,
    /// Baseline warm-up before the release (s).
    pub warmup_s: f64,
    /// Worker threads (0: all cores).
    pub threads: usize,
    /// Mark the release (false: a silent regression, only the continuous detector can see it).
    pub marker: bool,
    /// Recorded probes; when set they replace the synthetic distributions.
    pub replay: Option<Replay>,
    pub replay_order: ReplayOrder,
    pub settings: DetectSettings,
}

impl PlanParams {
    /// The acceptance scenario's parameters with the given detector settings.
    pub fn new(settings: DetectSettings) -> Self {
        // Long enough for every baseline and for the continuous test's reference window.
        let warmup_s = settings.goodput_baseline_s.max(settings.latency_baseline_s).max(settings.continuous_reference_s + settings.continuous_window_s);
        PlanParams {
            rate: 0.5,
            scenarios: 3,
            ttft_median_s: 0.2,
            ttft_sigma: 0.5,
            tpot_median_s: 0.02,
            tpot_sigma: 0.2,
            output_tokens: 64.0,
            regression: 1.25,
            regression_target: RegressionTarget::All,
            regression_scenarios: None,
            good_before: 0.995,
            good_after: 0.995,
            drift: 0.2,
            drift_period_s: DAY_S,
            drift_day_sd: 0.0,
            load: LoadOffset { sd: 0.0, tau_s: 300.0, tpot_share: 0.5, scenario_spread: 0.0, day_swing: 0.0 },
            cache_hit_share: 0.0,
            miss_factor: 3.0,
            outlier_share: 0.01,
            outlier_factor: 10.0,
            tail_pareto_alpha: None,
            outage_s: 0.0,
            burst_s: 0.0,
            burst_error_share: 0.25,
            rollout: None,
            reading: None,
            incident_s: 0.0,
            incident_factor: 2.0,
            slowest_share: 0.03,
            marker_delay_s: 0.0,
            second_marker_s: None,
            ramp: None,
            creep_per_h: 1.0,
            slo_ttft_s: None,
            cold_cache: None,
            cache_reading: false,
            side_by_side: None,
            trials: 1000,
            days: 1000,
            seed: 1,
            horizon_s: 3600.0,
            warmup_s,
            threads: 0,
            marker: true,
            replay: None,
            replay_order: ReplayOrder::Random,
            settings,
        }
    }

    fn timed_replay(&self) -> Option<&[TimedProbe]> {
        self.replay.as_ref().filter(|r| self.replay_order == ReplayOrder::Time && !r.timeline.is_empty()).map(|r| r.timeline.as_slice())
    }
}

/// What found a regression: one of the detector's two tests, or the canary comparison while two
/// versions serve side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Release,
    Continuous,
    Canary,
}

impl From<Cause> for Found {
    fn from(c: Cause) -> Found {
        match c {
            Cause::Release => Found::Release,
            Cause::Continuous => Found::Continuous,
        }
    }
}

/// A detection: seconds after the release and what raised it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    pub after_s: f64,
    pub source: Found,
}

/// What the planner measured.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanResult {
    pub trials: usize,
    /// The first pooled `regressed` after the release per detection trial (`None`: not within
    /// the horizon).
    pub detections: Vec<Option<Detection>>,
    /// Simulated days of the null trials and the false alarms in them, by source.
    pub days: f64,
    pub armed_alarms: u64,
    pub continuous_alarms: u64,
    /// Null trials whose release window raised at least one release-armed alarm (with a rollout
    /// warm-up: mostly the warm-up's).
    pub windows_alarmed: u64,
    /// Rollouts whose canary comparison called the new version regressed (side by side only).
    pub canary_alarms: u64,
    /// Null days whose release test took a load adjustment for TTFT: (from the increments, from
    /// the level relation).
    pub load_adjusted: (u64, u64),
    /// False alarms by signal (ttft, tpot, e2e, goodput): (release-armed, continuous).
    pub by_signal: [(u64, u64); 4],
    /// Pooled `regressed` rows that a marker turned into anything else (over every trial): a
    /// marker must never erase an alarm.
    pub cleared_by_marker: u64,
    /// Null days whose release marker came while an incident ran, so that the window's latency
    /// tests waited for it to end (`SignalReport::incident_hold`).
    pub incident_holds: u64,
    /// Null days whose release window held back, at some look, a change that began after the
    /// marker (`SignalReport::late_onset`).
    pub late_onsets: u64,
}

impl PlanResult {
    /// A result of detection trials only.
    pub fn from_detections(detections: Vec<Option<Detection>>) -> Self {
        PlanResult {
            trials: detections.len(),
            detections,
            days: 0.0,
            armed_alarms: 0,
            continuous_alarms: 0,
            windows_alarmed: 0,
            canary_alarms: 0,
            load_adjusted: (0, 0),
            by_signal: Default::default(),
            cleared_by_marker: 0,
            incident_holds: 0,
            late_onsets: 0,
        }
    }

    /// Share of detection trials detected within `s` seconds (by either detector).
    pub fn detected_within(&self, s: f64) -> f64 {
        self.detected_within_by(s, None)
    }

    /// The same, counting only detections whose first pooled alarm came from `source`.
    pub fn detected_within_by(&self, s: f64, source: Option<Found>) -> f64 {
        let hit = |d: &Option<Detection>| d.is_some_and(|d| d.after_s <= s && source.is_none_or(|x| x == d.source));
        self.detections.iter().filter(|d| hit(d)).count() as f64 / self.detections.len().max(1) as f64
    }

    /// Median time to detect (s); `None` when fewer than half the trials detected.
    pub fn median_detect_s(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.detections.iter().map(|d| d.map_or(f64::INFINITY, |d| d.after_s)).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len().saturating_sub(1) / 2).copied().filter(|m| m.is_finite())
    }

    pub fn per_30_days(&self, alarms: u64) -> f64 {
        alarms as f64 / self.days.max(1e-9) * 30.0
    }

    /// One-sided 95% upper bound of the rate per 30 days.
    pub fn upper95_per_30_days(&self, alarms: u64) -> f64 {
        poisson_upper95(alarms) / self.days.max(1e-9) * 30.0
    }
}

/// The events of one trial besides the steady state, drawn up front.
#[derive(Debug, Clone, Default)]
struct Conditions {
    release: f64,
    /// Apply the regression from the release on (detection trials).
    regress: bool,
    /// [start, end) of each outage and error burst.
    outages: Vec<(f64, f64)>,
    bursts: Vec<(f64, f64)>,
    incidents: Vec<(f64, f64)>,
    /// Rollout warm-up: (latency factor, slow until, errors until).
    rollout: Option<(f64, f64, f64)>,
    /// The traffic ramp's [start, end).
    ramp: Option<(f64, f64)>,
    /// The cold cache's [release, warm again).
    cold: Option<(f64, f64)>,
}

impl Conditions {
    /// One outage and one burst per simulated day, the days counted from the end of the warm-up
    /// (so a null day holds exactly one of each and the warm-up its share); with its own seed, so
    /// turning a condition on leaves the probe stream of the others as it was.
    fn draw(p: &PlanParams, seed: u64, release: f64, end: f64, regress: bool) -> Conditions {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xD1B5_4A32_D192_ED03);
        let daily = |len: f64, rng: &mut SmallRng| {
            let mut v = Vec::new();
            if len <= 0.0 {
                return v;
            }
            let mut day = p.warmup_s - (p.warmup_s / DAY_S).ceil() * DAY_S;
            while day < end {
                let at = day + rng.random_range(0.0..DAY_S);
                if at + len > 0.0 && at < end {
                    v.push((at, at + len));
                }
                day += DAY_S;
            }
            v
        };
        let outages = daily(p.outage_s, &mut rng);
        let bursts = if p.burst_error_share > 0.0 { daily(p.burst_s, &mut rng) } else { Vec::new() };
        // An incident of a detection trial comes earlier that day, before the release's baseline
        // hour (and its margin); a null day meets one at a random time.
        let incidents = if p.incident_s <= 0.0 {
            Vec::new()
        } else if regress {
            let latest = (release - p.settings.latency_baseline_s - 1800.0 - p.incident_s).max(0.0);
            let at = rng.random_range(0.0..=latest);
            vec![(at, at + p.incident_s)]
        } else {
            daily(p.incident_s, &mut rng)
        };
        let rollout = p.rollout.map(|r| {
            let factor = if r.factor_max > r.factor_min { rng.random_range(r.factor_min..r.factor_max) } else { r.factor_min };
            let slow = if r.duration_max_s > r.duration_min_s { rng.random_range(r.duration_min_s..r.duration_max_s) } else { r.duration_min_s };
            (factor, release + slow, release + r.error_s)
        });
        let ramp = p.ramp.map(|r| {
            let start = release - rng.random_range(0.0..r.duration_s.max(1.0));
            (start, start + r.duration_s)
        });
        let cold = p.cold_cache.map(|c| (release, release + if c.max_s > c.min_s { rng.random_range(c.min_s..c.max_s) } else { c.min_s }));
        Conditions { release, regress, outages, bursts, incidents, rollout, ramp, cold }
    }
}

fn within(windows: &[(f64, f64)], t: f64) -> bool {
    windows.iter().any(|(a, b)| t >= *a && t < *b)
}

/// The probe generator of one trial. Per probe O(1): the load offset is advanced exactly over the
/// gap since the previous probe.
struct Gen<'a> {
    p: &'a PlanParams,
    rng: SmallRng,
    phase: f64,
    exp: Exp<f64>,
    cond: Conditions,
    /// Virtual time of the last probe (s).
    t: f64,
    /// The load offset L(t).
    load: f64,
    /// The reading's error: an OU process with the load's time constant (a reading that misses
    /// part of the load misses it for as long as the load lasts, not probe by probe), unit sd.
    reading_err: f64,
    /// Next record of a time-order replay.
    cursor: usize,
    /// Side by side: each replica's lasting log offset, and the replica of the current probe.
    offsets: Vec<f64>,
    replica: usize,
    /// The daily cycle's amplitude factor of each day (empty: every day alike).
    day_amp: Vec<f64>,
}

/// One generated probe.
struct Probe {
    t: f64,
    scenario: usize,
    /// Side by side: the replica probed.
    replica: usize,
    obs: Observation,
}

impl<'a> Gen<'a> {
    fn new(p: &'a PlanParams, mut rng: SmallRng, phase: f64, cond: Conditions) -> Self {
        // L starts from its stationary distribution.
        let load = if p.load.sd > 0.0 { p.load.sd * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng) } else { 0.0 };
        // A time-order replay starts at a random record, so trials differ.
        let cursor = p.timed_replay().map_or(0, |tl| rng.random_range(0..tl.len()));
        let reading_err = <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng);
        let offsets = p.side_by_side.map_or_else(Vec::new, |b| {
            (0..b.replicas).map(|_| b.replica_sd * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng)).collect()
        });
        let days = ((p.warmup_s + p.horizon_s.max(DAY_S)) / DAY_S).ceil() as usize + 2;
        let day_amp = if p.drift_day_sd > 0.0 {
            (0..days).map(|_| 1.0 + p.drift_day_sd * <StandardNormal as Distribution<f64>>::sample(&StandardNormal, &mut rng)).collect()
        } else {
            Vec::new()
        };
        Gen { p, rng, phase, exp: Exp::new(p.rate).expect("rate > 0"), cond, t: 0.0, load, reading_err, cursor, offsets, replica: 0, day_amp }
    }

    fn normal(&mut self) -> f64 {
        StandardNormal.sample(&mut self.rng)
    }

    /// The daily cycle's latency factor at `t`.
    fn drift_at(&self, t: f64) -> f64 {
        let amp = match self.day_amp.len() {
            0 => 1.0,
            n => {
                let x = (t / DAY_S).max(0.0);
                let i = (x.floor() as usize).min(n - 1);
                let f = x - x.floor();
                self.day_amp[i] * (1.0 - f) + self.day_amp[(i + 1).min(n - 1)] * f
            }
        };
        1.0 + self.p.drift * amp * (std::f64::consts::TAU * t / self.p.drift_period_s + self.phase).sin()
    }

    /// OU exact step: L' = L·e^(−dt/τ) + sd·√(1 − e^(−2dt/τ))·N(0, 1).
    fn advance_load(&mut self, dt: f64) {
        let l = self.p.load;
        let a = (-dt / l.tau_s).exp();
        if l.sd > 0.0 {
            let sd = l.sd * (1.0 + l.day_swing * (std::f64::consts::TAU * self.t / self.p.drift_period_s + self.phase).sin());
            self.load = self.load * a + sd * (1.0 - a * a).max(0.0).sqrt() * self.normal();
        }
        if self.p.reading.is_some() {
            self.reading_err = self.reading_err * a + (1.0 - a * a).max(0.0).sqrt() * self.normal();
        }
    }

    fn next(&mut self) -> Probe {
        let p = self.p;
        let (dt, scenario, record) = match p.timed_replay() {
            Some(tl) => {
                let r = tl[self.cursor];
                self.cursor = (self.cursor + 1) % tl.len();
                (r.gap_s, r.scenario, Some(r.probe))
            }
            None => {
                let dt = self.exp.sample(&mut self.rng);
                let s = self.rng.random_range(0..p.scenarios.max(1));
                let record = p.replay.as_ref().map(|r| {
                    let pool = &r.pools[s % r.pools.len()];
                    pool[self.rng.random_range(0..pool.len())]
                });
                (dt, s, record)
            }
        };
        self.t += dt;
        self.advance_load(dt);
        if let Some(b) = p.side_by_side {
            self.replica = self.rng.random_range(0..b.replicas.max(1));
        }
        Probe { t: self.t, scenario, replica: self.replica, obs: self.probe(scenario, record) }
    }

    /// A probe with the engine's load reading at its send time.
    fn probe(&mut self, scenario: usize, record: Option<ReplayProbe>) -> Observation {
        let obs = self.probe_latency(scenario, record);
        let cache_hit = if self.p.cache_reading { Some((self.hit_share() + 0.02 * self.normal()).clamp(0.0, 1.0)) } else { None };
        // Side by side, a replica that came up less than the grace ago is warming up, as replica
        // discovery tells the detector.
        let replica_warming = self.p.side_by_side.is_some_and(|b| {
            let start = b.start(self.cond.release, self.replica);
            self.t >= start && self.t < start + self.p.settings.release_grace_s
        });
        // The replica as the prober keys it: the same machine before and after the release.
        let replica = self.p.side_by_side.and_then(|_| std::num::NonZeroU32::new(self.replica as u32 + 1));
        Observation { load: self.reading(), cache_hit, replica_warming, replica, ..obs }
    }

    /// ln of the traffic ramp's latency factor now.
    fn ramp_ln(&self) -> f64 {
        match (self.p.ramp, self.cond.ramp) {
            (Some(r), Some((a, b))) => r.factor.ln() * ((self.t.clamp(a, b) - a) / (b - a).max(1e-9)),
            _ => 0.0,
        }
    }

    /// The prefix cache's hit share now (recovering after a release's restarts).
    fn hit_share(&self) -> f64 {
        let h = self.p.cache_hit_share;
        match self.cond.cold {
            Some((a, b)) if self.t >= a && self.t < b => h * (self.t - a) / (b - a).max(1e-9),
            _ => h,
        }
    }

    /// The engine's load reading: the load offset (and the daily cycle, which is traffic too)
    /// plus reading noise sized for `reading.r2`; after a regressing release it also carries
    /// `reading.mediator` of the slowdown (a queue reading does; an offered-load one does not).
    fn reading(&mut self) -> Option<f64> {
        let p = self.p;
        let r = p.reading?;
        let t = self.t;
        let drift = self.drift_at(t);
        let spread = p.load.sd * p.load.sd + p.drift * p.drift / 2.0;
        let noise = (spread * (1.0 / r.r2.max(1e-6) - 1.0)).max(0.0).sqrt() * self.reading_err;
        let after = self.cond.regress && t >= self.cond.release;
        let carried = if after { r.mediator * p.regression.ln() } else { 0.0 };
        Some(self.load + drift.ln() + self.ramp_ln() + carried + noise)
    }

    fn probe_latency(&mut self, scenario: usize, record: Option<ReplayProbe>) -> Observation {
        let p = self.p;
        let t = self.t;
        let c = &self.cond;
        // Side by side, a replica serves the new version from its own start (its warm-up too).
        let since = p.side_by_side.map_or(c.release, |b| b.start(c.release, self.replica));
        let t_new = t - (since - c.release);
        let after = c.regress && t >= since && p.regression_scenarios.is_none_or(|n| scenario < n);
        let rollout = c.rollout.filter(|_| t >= since);
        let failed = within(&c.outages, t)
            || (within(&c.bursts, t) && self.rng.random_bool(p.burst_error_share.clamp(0.0, 1.0)))
            || rollout.is_some_and(|r| t_new < r.2 && self.rng.random_bool(p.rollout.map_or(0.0, |r| r.error_share).clamp(0.0, 1.0)));
        if failed {
            return Observation { good: Some(false), ..Observation::default() };
        }
        let drift = self.drift_at(t);
        let outlier = p.outlier_share > 0.0 && self.rng.random_bool(p.outlier_share.min(1.0));
        let tail = match (outlier, p.tail_pareto_alpha) {
            (false, _) => 1.0,
            (true, None) => p.outlier_factor,
            (true, Some(alpha)) => (1.0 - self.rng.random::<f64>()).powf(-1.0 / alpha),
        };
        let warm = rollout.filter(|r| t_new < r.1).map_or(1.0, |r| r.0);
        let replica = self.offsets.get(self.replica).map_or(1.0, |o| o.exp());
        let incident = if within(&c.incidents, t) { p.incident_factor } else { 1.0 };
        let creep = if c.regress && t >= c.release { (p.creep_per_h.ln() * (t - c.release) / 3600.0).exp() } else { 1.0 };
        let m = p.load.sensitivity(scenario, p.scenarios.max(1));
        let common = drift.powf(m) * tail * warm * incident * creep * replica;
        // The ramp is traffic: it moves latency as the load does (TPOT by `tpot_share`).
        let traffic = self.load + self.ramp_ln();
        let (ttft_f, tpot_f) = (common * (m * traffic).exp(), common * (p.load.tpot_share * m * traffic).exp());
        let (bad_before, bad_after) = (1.0 - p.good_before, 1.0 - p.good_after);
        if let Some(r) = record {
            let mut good = r.good;
            if after && good && bad_after > bad_before {
                good = !self.rng.random_bool(((bad_after - bad_before) / (1.0 - bad_before)).min(1.0));
            }
            let ttft = r.ttft.map(|v| v * ttft_f * if after { p.regression } else { 1.0 });
            // The part of e2e after the first token moves with TPOT.
            let e2e = r.e2e.map(|v| ttft.unwrap_or(0.0) + (v - r.ttft.unwrap_or(0.0)).max(0.0) * tpot_f);
            return Observation { ttft, tpot: r.tpot.map(|v| v * tpot_f), e2e, good: Some(good), ..Observation::default() };
        }
        let bad = if after { bad_after } else { bad_before };
        if self.rng.random_bool(bad.clamp(0.0, 1.0)) {
            return Observation { good: Some(false), ..Observation::default() };
        }
        let share = self.hit_share();
        let miss = p.cache_hit_share > 0.0 && !self.rng.random_bool(share.clamp(0.0, 1.0));
        let mode = if miss { p.miss_factor } else { 1.0 };
        let hit = match p.regression_target {
            RegressionTarget::All => true,
            RegressionTarget::Miss => miss,
            RegressionTarget::Slowest => false,
        };
        let reg = if after && hit { p.regression } else { 1.0 };
        let draw = self.normal();
        let slowest = p.regression_target == RegressionTarget::Slowest && draw > super::math::normal_quantile(1.0 - p.slowest_share);
        let reg = if after && slowest { p.regression } else { reg };
        let ttft = p.ttft_median_s * mode * (p.ttft_sigma * draw).exp() * ttft_f * reg;
        let tpot = p.tpot_median_s * (p.tpot_sigma * self.normal()).exp() * tpot_f;
        let good = p.slo_ttft_s.is_none_or(|slo| ttft <= slo);
        Observation { ttft: Some(ttft), tpot: Some(tpot), e2e: Some(ttft + p.output_tokens * tpot), good: Some(good), ..Observation::default() }
    }
}

const TARGET: &str = "target";

fn scenario_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("s{i}")).collect()
}

fn pooled_regressed(e: &super::state::StateChange) -> bool {
    e.scenario.is_none() && e.state == State::Regressed
}

/// The markers of a trial: the release's (late by `marker_delay_s`) and an optional repeat, each
/// told to the detector when its time comes. Counts pooled `regressed` rows a marker cleared.
struct Markers {
    /// (time told, the release's time), in order.
    due: Vec<(f64, f64)>,
    cleared: u64,
    /// Markers that came while an incident ran (the window's latency tests wait for its end).
    held: u64,
}

impl Markers {
    fn new(p: &PlanParams, release: f64) -> Markers {
        let mut due = Vec::new();
        if p.marker {
            due.push((release + p.marker_delay_s, release));
            if let Some(s) = p.second_marker_s {
                due.push((release + s, release + s));
            }
            due.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Markers { due, cleared: 0, held: 0 }
    }

    /// Tells the detector the markers due by `now`.
    fn tell(&mut self, det: &mut Detector, now: f64) {
        while self.due.first().is_some_and(|d| d.0 <= now) {
            let (told, at) = self.due.remove(0);
            let regressed =
                |d: &Detector| d.report().into_iter().filter(|r| r.scenario.is_none() && r.state == State::Regressed).map(|r| r.signal).collect::<Vec<_>>();
            let before = regressed(det);
            det.mark_release(TARGET, "v2", at, MarkerTime::Stated, told);
            self.held += u64::from(det.report().iter().any(|r| r.scenario.is_none() && r.incident_hold));
            let after = regressed(det);
            self.cleared += before.iter().filter(|s| !after.contains(s)).count() as u64;
        }
    }
}

/// The canary comparison of a side-by-side rollout, as the prober runs it: the new version's
/// replicas against the old ones', each replica counted after the release grace from its own
/// start (a replica that came up during the watch), compared every `CANARY_LOOK_S` while both
/// versions serve, with the prober's settings (`CompareSettings::canary`).
struct CanaryWatch {
    side: SideBySide,
    release: f64,
    grace_s: f64,
    settings: CompareSettings,
    groups: [Group; 2],
    /// Per replica, its probes of the `BEFORE_S` before the release (the replicas' spread).
    before: Vec<Group>,
    next_look: f64,
    regressed: bool,
}

/// The prober's window of each replica's recent probes (its outlier window), from which the
/// canary takes how much replicas differ before the rollout.
const BEFORE_S: f64 = 900.0;

/// How often the canary comparison is run (the prober publishes its state about this often).
const CANARY_LOOK_S: f64 = 15.0;

impl CanaryWatch {
    fn new(p: &PlanParams, release: f64) -> Option<CanaryWatch> {
        let side = p.side_by_side?;
        let settings = CompareSettings::canary(&p.settings);
        let before = vec![Group::default(); side.replicas];
        Some(CanaryWatch {
            side,
            release,
            grace_s: p.settings.release_grace_s,
            settings,
            groups: Default::default(),
            before,
            next_look: release,
            regressed: false,
        })
    }

    /// Takes a probe; true when this look called the new version regressed (once per rollout).
    fn observe(&mut self, probe: &Probe) -> bool {
        let t = probe.t;
        let end = self.release + self.side.rollout_s;
        if t < self.release {
            if t >= self.release - BEFORE_S
                && let Some(g) = self.before.get_mut(probe.replica)
            {
                g.observe(&probe.obs, t);
            }
            return false;
        }
        if t >= end || self.regressed {
            return false;
        }
        let start = self.side.start(self.release, probe.replica);
        if t < start {
            self.groups[0].observe_replica(&probe.obs, t, probe.replica as u32);
        } else if t >= start + self.grace_s {
            self.groups[1].observe_replica(&probe.obs, t, probe.replica as u32);
        }
        if t >= self.next_look {
            self.next_look = t + CANARY_LOOK_S;
            self.regressed = Signal::ALL.iter().any(|s| compare_with(&self.groups[1], &self.groups[0], *s, &self.settings, &self.before).regressed);
            return self.regressed;
        }
        false
    }
}

/// Runs one detection trial: the first pooled `regressed` after the release, if any, and the
/// alarms a marker cleared. Alarms before the release (warm-up) are dropped: the question is
/// what the release set off, or what the continuous detector finds after it.
fn detection_trial(p: &PlanParams, seed: u64) -> (Option<Detection>, u64) {
    let names = scenario_names(p.scenarios.max(1));
    let mut rng = SmallRng::seed_from_u64(seed);
    let phase = rng.random_range(0.0..std::f64::consts::TAU);
    let release = p.warmup_s;
    let end = release + p.horizon_s;
    let mut g = Gen::new(p, rng, phase, Conditions::draw(p, seed, release, end, true));
    let mut det = Detector::new(p.settings.clone());
    let mut markers = Markers::new(p, release);
    let mut canary = CanaryWatch::new(p, release);
    let mut released = false;
    let mut detection = None;
    loop {
        let probe = g.next();
        let t = probe.t;
        if !released && t >= release {
            det.drain_events();
            released = true;
        }
        if t > end {
            return (detection, markers.cleared);
        }
        markers.tell(&mut det, t);
        if canary.as_mut().is_some_and(|c| c.observe(&probe)) && detection.is_none() {
            detection = Some(Detection { after_s: t - release, source: Found::Canary });
            if markers.due.is_empty() {
                return (detection, markers.cleared);
            }
        }
        det.observe(TARGET, &names[probe.scenario % names.len()], probe.obs, t);
        // Before the release, events pile up and are dropped at the release.
        if released && det.has_events() {
            let first = det.drain_events().into_iter().find(pooled_regressed);
            if let (None, Some(e)) = (detection, first) {
                detection = Some(Detection { after_s: t - release, source: e.source.into() });
                // A repeated marker still to come is what this trial is about: run on to it.
                if markers.due.is_empty() {
                    return (detection, markers.cleared);
                }
            }
        }
    }
}

/// One null day: false alarms by signal, (release-armed, continuous), and alarms a marker cleared.
struct NullDay {
    alarms: [(u64, u64); 4],
    cleared: u64,
    /// Markers that came while an incident ran.
    held: u64,
    /// The window held back a change that began after the marker.
    late_onset: bool,
    /// The canary comparison called the rollout regressed.
    canary: bool,
    /// TTFT's load adjustment frozen at the release: none, the increments', the level relation's.
    adjust: Option<bool>,
}

fn null_trial(p: &PlanParams, seed: u64) -> NullDay {
    let names = scenario_names(p.scenarios.max(1));
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x9E37_79B9_7F4A_7C15);
    let phase = rng.random_range(0.0..std::f64::consts::TAU);
    let release = p.warmup_s + rng.random_range(0.0..DAY_S);
    let end = p.warmup_s + DAY_S;
    let mut g = Gen::new(p, rng, phase, Conditions::draw(p, seed ^ 0x9E37_79B9_7F4A_7C15, release, end, false));
    let mut det = Detector::new(p.settings.clone());
    let mut markers = Markers::new(p, release);
    let mut canary = CanaryWatch::new(p, release);
    let mut canary_alarm = false;
    let mut alarms = [(0u64, 0u64); 4];
    let mut adjust = None;
    while g.t < end {
        let probe = g.next();
        let t = probe.t;
        markers.tell(&mut det, t);
        if adjust.is_none()
            && let Some(x) = det.targets.first().filter(|x| x.frozen_at.is_some())
        {
            adjust = Some(x.adjust[0].map(|a| a.levels));
        }
        canary_alarm |= canary.as_mut().is_some_and(|c| c.observe(&probe));
        det.observe(TARGET, &names[probe.scenario % names.len()], probe.obs, t);
        if det.has_events() {
            for e in det.drain_events() {
                if pooled_regressed(&e) && e.at >= p.warmup_s {
                    let a = &mut alarms[Signal::ALL.iter().position(|s| *s == e.signal).unwrap_or(0)];
                    match e.source {
                        Cause::Release => a.0 += 1,
                        Cause::Continuous => a.1 += 1,
                    }
                }
            }
        }
    }
    let late_onset = det.targets.first().is_some_and(|t| t.late_onset_looks > 0);
    NullDay { alarms, cleared: markers.cleared, held: markers.held, late_onset, canary: canary_alarm, adjust: adjust.flatten() }
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

fn trial_seed(p: &PlanParams, i: usize) -> u64 {
    p.seed.wrapping_mul(1_000_003).wrapping_add(i as u64)
}

/// Runs `p.trials` detection trials and `p.days` null days.
pub fn run(p: &PlanParams) -> PlanResult {
    let trials = parallel(p.trials, p.threads, |i| detection_trial(p, trial_seed(p, i)));
    let null = parallel(p.days, p.threads, |i| null_trial(p, trial_seed(p, i)));
    let cleared_by_marker = trials.iter().map(|t| t.1).sum::<u64>() + null.iter().map(|n| n.cleared).sum::<u64>();
    let detections = trials.into_iter().map(|t| t.0).collect();
    PlanResult {
        cleared_by_marker,
        days: p.days as f64,
        armed_alarms: null.iter().flat_map(|n| n.alarms).map(|n| n.0).sum(),
        continuous_alarms: null.iter().flat_map(|n| n.alarms).map(|n| n.1).sum(),
        windows_alarmed: null.iter().filter(|n| n.alarms.iter().any(|a| a.0 > 0)).count() as u64,
        canary_alarms: null.iter().filter(|n| n.canary).count() as u64,
        load_adjusted: (null.iter().filter(|n| n.adjust == Some(false)).count() as u64, null.iter().filter(|n| n.adjust == Some(true)).count() as u64),
        by_signal: std::array::from_fn(|i| (null.iter().map(|n| n.alarms[i].0).sum(), null.iter().map(|n| n.alarms[i].1).sum())),
        incident_holds: null.iter().map(|n| n.held).sum(),
        late_onsets: null.iter().filter(|n| n.late_onset).count() as u64,
        ..PlanResult::from_detections(detections)
    }
}

/// Only the detection trials, with the detector that raised each.
pub fn detections(p: &PlanParams) -> Vec<Option<Detection>> {
    parallel(p.trials, p.threads, |i| detection_trial(p, trial_seed(p, i)).0)
}

/// Only the detection trials: seconds from release to detection (for tests and quick looks).
pub fn run_detection(p: &PlanParams) -> Vec<Option<f64>> {
    detections(p).into_iter().map(|d| d.map(|d| d.after_s)).collect()
}

/// The TTFT slowdowns the smallest-detectable search tries (the planner's; the preview's is coarser).
pub const SLOWDOWN_GRID: [f64; 13] = [1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0, 2.5, 3.0];

/// Share of trials a slowdown must be detected in to count as detectable.
pub const DETECTABLE_POWER: f64 = 0.9;

/// The smallest TTFT slowdown of the grid detected in ≥ 90% of trials within 15 and within
/// 60 minutes (`None`: not even the grid's largest).
#[derive(Debug, Clone, PartialEq)]
pub struct MinDetectable {
    pub within_15_min: Option<f64>,
    pub within_60_min: Option<f64>,
    pub trials: usize,
    /// (factor, detected within 15 min, within 60 min) for every factor run.
    pub runs: Vec<(f64, f64, f64)>,
}

/// Bisects `grid` (ascending) for the smallest TTFT slowdown detected in ≥ 90% of `trials`
/// trials, within 15 and within 60 min. Power grows with the slowdown, so each deadline takes
/// about log2(grid) steps; both share the runs, and every step uses the same seeds (common random
/// numbers keep the measured power monotone). Goodput is left unchanged.
pub fn min_detectable(p: &PlanParams, grid: &[f64], trials: usize) -> MinDetectable {
    let mut q = p.clone();
    q.trials = trials;
    q.horizon_s = q.horizon_s.max(3600.0);
    q.good_after = q.good_before;
    let mut power: Vec<Option<(f64, f64)>> = vec![None; grid.len()];
    let mut smallest = |deadline: usize| {
        let (mut lo, mut hi) = (0, grid.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let pw = *power[mid].get_or_insert_with(|| {
                q.regression = grid[mid];
                let r = PlanResult::from_detections(detections(&q));
                (r.detected_within(900.0), r.detected_within(3600.0))
            });
            if [pw.0, pw.1][deadline] >= DETECTABLE_POWER {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        grid.get(lo).copied()
    };
    let (within_15_min, within_60_min) = (smallest(0), smallest(1));
    let runs = grid.iter().zip(&power).filter_map(|(f, pw)| pw.map(|(a, b)| (*f, a, b))).collect();
    MinDetectable { within_15_min, within_60_min, trials, runs }
}

/// Upper end of a one-sided 95% Poisson interval for a count (for "≤ x per 30 days" claims).
fn poisson_upper95(k: u64) -> f64 {
    // Wilson–Hilferty approximation of the chi-square quantile, 2(k+1) degrees of freedom.
    let df = 2.0 * (k as f64 + 1.0);
    let z = 1.644_853_626_951_472_2;
    let c = 1.0 - 2.0 / (9.0 * df) + z * (2.0 / (9.0 * df)).sqrt();
    df * c * c * c / 2.0
}

/// The day model in words (the conditions that are on).
fn conditions(p: &PlanParams) -> Vec<String> {
    let mut c = Vec::new();
    if p.load.sd > 0.0 {
        c.push(format!(
            "shared load: log-latency offset sd {} with {:.1} min time constant (TPOT x{} of it)",
            p.load.sd,
            p.load.tau_s / 60.0,
            p.load.tpot_share
        ));
    }
    if p.drift_day_sd > 0.0 {
        c.push(format!("the daily cycle's amplitude varies from day to day by sd {:.0}%", p.drift_day_sd * 100.0));
    }
    if p.load.day_swing > 0.0 {
        c.push(format!("load sd x{:.2}..x{:.2} over the day, largest in the busiest hour", 1.0 - p.load.day_swing, 1.0 + p.load.day_swing));
    }
    if p.load.scenario_spread > 0.0 {
        c.push(format!("scenarios feel load and the daily cycle by x{:.2}..x{:.2}", 1.0 - p.load.scenario_spread, 1.0 + p.load.scenario_spread));
    }
    if p.cache_hit_share > 0.0 && p.replay.is_none() {
        c.push(format!("prefix cache: {:.0}% hits; misses x{} TTFT", p.cache_hit_share * 100.0, p.miss_factor));
    }
    if let Some(a) = p.tail_pareto_alpha {
        c.push(format!("outlier factor Pareto(alpha {a})"));
    }
    if p.outage_s > 0.0 {
        c.push(format!("one {:.0} s total outage a day", p.outage_s));
    }
    if let Some(r) = p.reading {
        c.push(format!("engine load reading joined to each probe: R² {} of the load, carrying {} of a regression", r.r2, r.mediator));
    }
    if p.incident_s > 0.0 {
        c.push(format!("one {:.0} s latency incident (x{}) a day; in detection trials before the baseline hour", p.incident_s, p.incident_factor));
    }
    if p.marker_delay_s > 0.0 {
        c.push(format!("the marker arrives {:.0} s after the release it names", p.marker_delay_s));
    }
    if let Some(s2) = p.second_marker_s {
        c.push(format!("a second marker of the same version {s2:.0} s after the release"));
    }
    if let Some(slo) = p.slo_ttft_s {
        c.push(format!("goodput counts TTFT above {:.0} ms as a miss", slo * 1e3));
    }
    if p.creep_per_h != 1.0 {
        c.push(format!("latency creeping x{} an hour from the release on", p.creep_per_h));
    }
    if let Some(b) = p.side_by_side {
        c.push(format!(
            "{} replicas replaced one by one over {:.0} min (replica offsets sd {}), the canary comparison running",
            b.replicas,
            b.rollout_s / 60.0,
            b.replica_sd
        ));
    }
    if let Some(r) = p.ramp {
        c.push(format!("a traffic ramp: latency x{} over {:.0} min, the release inside it", r.factor, r.duration_s / 60.0));
    }
    if let Some(c0) = p.cold_cache {
        c.push(format!(
            "a cold prefix cache after each release: hit share 0 recovering to {:.0}% over {:.0}..{:.0} min",
            p.cache_hit_share * 100.0,
            c0.min_s / 60.0,
            c0.max_s / 60.0
        ));
    }
    if p.cache_reading {
        c.push("the engine's prefix-cache hit rate joined to each probe".to_owned());
    }
    if p.burst_s > 0.0 && p.burst_error_share > 0.0 {
        c.push(format!("one {:.0} s error burst a day ({:.0}% fail)", p.burst_s, p.burst_error_share * 100.0));
    }
    if let Some(r) = p.rollout {
        c.push(format!(
            "rollout warm-up after each release: latency x{}..{} for {:.0}..{:.0} s, {:.1}% errors for {:.0} s",
            r.factor_min,
            r.factor_max,
            r.duration_min_s,
            r.duration_max_s,
            r.error_share * 100.0,
            r.error_s
        ));
    }
    c
}

fn regression_words(p: &PlanParams) -> String {
    let scope = match (p.regression_target, p.regression_scenarios) {
        (RegressionTarget::All, None) => String::new(),
        (t, n) => {
            let mut s = Vec::new();
            match t {
                RegressionTarget::Miss => s.push("cache misses only".to_owned()),
                RegressionTarget::Slowest => s.push(format!("the slowest {:.1}% of requests", p.slowest_share * 100.0)),
                RegressionTarget::All => {}
            }
            if let Some(n) = n {
                s.push(format!("first {n} of {} scenarios", p.scenarios));
            }
            format!(" ({})", s.join(", "))
        }
    };
    format!("TTFT x{}{scope}, goodput {:.2}% -> {:.2}%", p.regression, p.good_before * 100.0, p.good_after * 100.0)
}

/// The planner's table.
pub fn format(p: &PlanParams, r: &PlanResult) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let minutes = |s: Option<f64>| s.map_or_else(|| format!("> {:.0} min", p.horizon_s / 60.0), |s| format!("{:.1} min", s / 60.0));
    match (p.timed_replay(), &p.replay) {
        (Some(tl), Some(r)) => {
            let rate = r.rate().unwrap_or(0.0);
            let _ = writeln!(o, "probes: replayed in recorded order at recorded gaps ({rate:.3}/s, {} probes, looped)", tl.len());
        }
        _ => {
            let _ = writeln!(o, "probes: {:.3}/s per target over {} scenarios ({:.1} per minute)", p.rate, p.scenarios, p.rate * 60.0);
        }
    }
    match &p.replay {
        Some(r) => {
            let _ = writeln!(o, "latency: replayed records ({} scenarios, {} probes)", r.pools.len(), r.pools.iter().map(Vec::len).sum::<usize>());
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
    for c in conditions(p) {
        let _ = writeln!(o, "{c}");
    }
    let _ = writeln!(o, "release: {}", regression_words(p));
    if r.trials > 0 {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "detection ({} trials, release after {:.0} h of baseline{}):",
            r.trials,
            p.warmup_s / 3600.0,
            if p.marker { "" } else { ", no marker: continuous detector only" }
        );
        for m in [5.0, 15.0, 60.0, 180.0, 360.0] {
            if m * 60.0 <= p.horizon_s + 1e-9 {
                let by = |f: Found| r.detected_within_by(m * 60.0, Some(f));
                let (a, c, k) = (by(Found::Release), by(Found::Continuous), by(Found::Canary));
                let canary = if p.side_by_side.is_some() { format!(", canary {k:.3}") } else { String::new() };
                let _ = writeln!(o, "  detected within {m:>2} min   {:.3}  (release-armed {a:.3}, continuous {c:.3}{canary})", r.detected_within(m * 60.0));
            }
        }
        let _ = writeln!(o, "  median time to detect    {}", minutes(r.median_detect_s()));
    }
    if r.days > 0.0 {
        let _ = writeln!(o);
        let total = r.armed_alarms + r.continuous_alarms;
        let _ = writeln!(o, "false alarms without a regression ({:.0} simulated days, one release a day; per 30 days, 95% upper bound):", r.days);
        for (label, k) in [("release-armed", r.armed_alarms), ("continuous", r.continuous_alarms), ("total", total)] {
            let _ = writeln!(o, "  {label:<14} {:>6.3}  (<= {:.3})  [{k} alarms]", r.per_30_days(k), r.upper95_per_30_days(k));
        }
        let what = if p.rollout.is_some() { "rollout windows with a release alarm" } else { "release windows with an alarm" };
        let _ = writeln!(o, "  {what}: {} of {:.0}", r.windows_alarmed, r.days);
        if p.side_by_side.is_some() {
            let _ = writeln!(o, "  rollouts the canary comparison called regressed: {} of {:.0}", r.canary_alarms, r.days);
        }
        if r.late_onsets > 0 {
            let _ = writeln!(o, "  release windows that held back a change beginning after the marker: {} of {:.0}", r.late_onsets, r.days);
        }
        if r.incident_holds > 0 {
            let _ = writeln!(o, "  release windows whose latency tests waited for an incident running at the marker: {} of {:.0}", r.incident_holds, r.days);
        }
        if p.reading.is_some() {
            let (inc, lev) = r.load_adjusted;
            let _ =
                writeln!(o, "  releases whose TTFT test took the load adjustment: {inc} from the increments, {lev} from the level relation, of {:.0}", r.days);
        }
        let by: Vec<String> = Signal::ALL.iter().zip(&r.by_signal).map(|(s, (a, c))| format!("{} {a}+{c}", s.as_str())).collect();
        let _ = writeln!(o, "  alarms by signal (release-armed+continuous): {}", by.join(", "));
    }
    o
}

/// Lines for the smallest-detectable search.
pub fn format_min_detectable(m: &MinDetectable) -> String {
    let f = |x: Option<f64>| x.map_or_else(|| format!("> x{}", SLOWDOWN_GRID[SLOWDOWN_GRID.len() - 1]), |x| format!("x{x}"));
    let runs: Vec<String> = m.runs.iter().map(|(x, a, b)| format!("x{x}: {a:.2}/{b:.2}")).collect();
    format!(
        "smallest TTFT slowdown detected in >= {:.0}% of {} trials: within 15 min {}, within 60 min {}\n  (runs, share within 15/60 min: {})\n",
        DETECTABLE_POWER * 100.0,
        m.trials,
        f(m.within_15_min),
        f(m.within_60_min),
        runs.join(", ")
    )
}

/// The result as one JSON object: every parameter and figure.
pub fn to_json(p: &PlanParams, r: &PlanResult, min: Option<&MinDetectable>) -> serde_json::Value {
    use serde_json::{Value, json};
    let within = |source: Option<Found>| {
        let mut m = serde_json::Map::new();
        for minutes in [5, 15, 60, 180, 360] {
            if minutes as f64 * 60.0 <= p.horizon_s + 1e-9 {
                m.insert(minutes.to_string(), json!(r.detected_within_by(minutes as f64 * 60.0, source)));
            }
        }
        Value::Object(m)
    };
    let alarms = |k: u64| json!({"count": k, "per_30_days": r.per_30_days(k), "upper95_per_30_days": r.upper95_per_30_days(k)});
    let by_signal: serde_json::Map<String, Value> =
        Signal::ALL.iter().zip(&r.by_signal).map(|(s, (a, c))| (s.as_str().to_owned(), json!({"release": a, "continuous": c}))).collect();
    let replay = p.replay.as_ref().map(|rp| {
        json!({
            "scenarios": rp.pools.len(),
            "probes": rp.pools.iter().map(Vec::len).sum::<usize>(),
            "order": match p.replay_order { ReplayOrder::Random => "random", ReplayOrder::Time => "time" },
            "recorded_rate": rp.rate(),
        })
    });
    json!({
        "params": {
            "rate": p.rate,
            "scenarios": p.scenarios,
            "ttft_median_ms": p.ttft_median_s * 1e3,
            "ttft_sigma": p.ttft_sigma,
            "tpot_median_ms": p.tpot_median_s * 1e3,
            "tpot_sigma": p.tpot_sigma,
            "output_tokens": p.output_tokens,
            "regression": p.regression,
            "regression_target": match p.regression_target { RegressionTarget::All => "all", RegressionTarget::Miss => "miss", RegressionTarget::Slowest => "slowest" },
            "slowest_share": p.slowest_share,
            "incident": {"s": p.incident_s, "factor": p.incident_factor},
            "marker_delay_s": p.marker_delay_s,
            "reading": p.reading.map(|r| json!({"r2": r.r2, "mediator": r.mediator})),
            "second_marker_s": p.second_marker_s,
            "creep_per_h": p.creep_per_h,
            "slo_ttft_ms": p.slo_ttft_s.map(|s| s * 1e3),
            "ramp": p.ramp.map(|r| json!({"factor": r.factor, "duration_min": r.duration_s / 60.0})),
            "cold_cache": p.cold_cache.map(|c| json!({"min_min": c.min_s / 60.0, "max_min": c.max_s / 60.0})),
            "cache_reading": p.cache_reading,
            "side_by_side": p.side_by_side.map(|b| json!({"replicas": b.replicas, "rollout_min": b.rollout_s / 60.0, "replica_sd": b.replica_sd})),
            "regression_scenarios": p.regression_scenarios,
            "good_before": p.good_before,
            "good_after": p.good_after,
            "drift": p.drift,
            "drift_period_h": p.drift_period_s / 3600.0,
            "drift_day_sd": p.drift_day_sd,
            "load": {"sd": p.load.sd, "tau_min": p.load.tau_s / 60.0, "tpot_share": p.load.tpot_share, "scenario_spread": p.load.scenario_spread, "sd_day_swing": p.load.day_swing},
            "cache": {"hit_share": p.cache_hit_share, "miss_factor": p.miss_factor},
            "outliers": {"share": p.outlier_share, "factor": p.outlier_factor, "pareto_alpha": p.tail_pareto_alpha},
            "outage_s": p.outage_s,
            "burst": {"s": p.burst_s, "error_share": p.burst_error_share},
            "rollout": p.rollout.map(|r| json!({
                "factor_min": r.factor_min, "factor_max": r.factor_max,
                "duration_min_s": r.duration_min_s, "duration_max_s": r.duration_max_s,
                "error_share": r.error_share, "error_s": r.error_s,
            })),
            "trials": p.trials,
            "days": p.days,
            "seed": p.seed,
            "horizon_min": p.horizon_s / 60.0,
            "warmup_h": p.warmup_s / 3600.0,
            "marker": p.marker,
            "replay": replay,
        },
        "detection": (r.trials > 0).then(|| json!({
            "trials": r.trials,
            "detected_within": within(None),
            "detected_within_by_source": {"release": within(Some(Found::Release)), "continuous": within(Some(Found::Continuous)), "canary": within(Some(Found::Canary))},
            "median_detect_min": r.median_detect_s().map(|s| s / 60.0),
        })),
        "cleared_by_marker": r.cleared_by_marker,
        "false_alarms": (r.days > 0.0).then(|| json!({
            "days": r.days,
            "release": alarms(r.armed_alarms),
            "continuous": alarms(r.continuous_alarms),
            "total": alarms(r.armed_alarms + r.continuous_alarms),
            "windows_alarmed": r.windows_alarmed,
            "canary_rollouts_alarmed": r.canary_alarms,
            "windows_incident_held": r.incident_holds,
            "windows_late_onset": r.late_onsets,
            "ttft_load_adjusted": {"increments": r.load_adjusted.0, "levels": r.load_adjusted.1},
            "rollout": p.rollout.is_some(),
            "by_signal": by_signal,
        })),
        "min_detectable": min.map(|m| json!({
            "power": DETECTABLE_POWER,
            "trials": m.trials,
            "within_15_min": m.within_15_min,
            "within_60_min": m.within_60_min,
            "runs": m.runs.iter().map(|(f, a, b)| json!({"factor": f, "within_15_min": a, "within_60_min": b})).collect::<Vec<_>>(),
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> PlanParams {
        let mut p = PlanParams::new(DetectSettings::default());
        p.warmup_s = 600.0;
        p
    }

    fn gen_for<'a>(p: &'a PlanParams, release: f64, end: f64, regress: bool) -> Gen<'a> {
        let cond = Conditions::draw(p, 7, release, end, regress);
        Gen::new(p, SmallRng::seed_from_u64(7), 0.0, cond)
    }

    /// The shared load offset has the stationary sd asked for and autocorrelation 1/e at lag τ.
    #[test]
    fn load_offset_is_an_ou_process_with_the_requested_sd_and_time_constant() {
        let mut p = params();
        p.load = LoadOffset { sd: 0.1, tau_s: 300.0, tpot_share: 0.5, scenario_spread: 0.0, day_swing: 0.0 };
        let mut g = gen_for(&p, 1e12, 1e12, false);
        let (dt, lag) = (10.0, 30); // lag 30 × 10 s = τ
        let xs: Vec<f64> = (0..200_000)
            .map(|_| {
                g.advance_load(dt);
                g.load
            })
            .collect();
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let cov = xs.windows(lag + 1).map(|w| (w[0] - mean) * (w[lag] - mean)).sum::<f64>() / (n - lag as f64);
        assert!((var.sqrt() - 0.1).abs() < 0.005, "sd {}", var.sqrt());
        let rho = cov / var;
        assert!((rho - (-1.0f64).exp()).abs() < 0.03, "lag-tau autocorrelation {rho}");
    }

    /// The load moves TTFT by e^L and TPOT by e^(share·L), and every scenario alike.
    #[test]
    fn load_is_shared_and_tpot_moves_by_its_share() {
        let mut p = params();
        (p.ttft_sigma, p.tpot_sigma, p.drift, p.outlier_share, p.good_before) = (0.0, 0.0, 0.0, 0.0, 1.0);
        p.load = LoadOffset { sd: 0.3, tau_s: 300.0, tpot_share: 0.5, scenario_spread: 0.0, day_swing: 0.0 };
        let mut g = gen_for(&p, 1e12, 1e12, false);
        for _ in 0..1000 {
            let probe = g.next();
            let (ttft, tpot) = (probe.obs.ttft.unwrap(), probe.obs.tpot.unwrap());
            assert!((ttft / p.ttft_median_s - g.load.exp()).abs() < 1e-9);
            assert!((tpot / p.tpot_median_s - (0.5 * g.load).exp()).abs() < 1e-9);
        }
    }

    /// Every probe inside an outage fails without latency; none outside does (goodput 100%).
    #[test]
    fn outage_fails_every_probe_in_its_window_and_only_there() {
        let mut p = params();
        p.rate = 2.0;
        p.good_before = 1.0;
        p.outage_s = 600.0;
        p.warmup_s = 0.0;
        let end = DAY_S;
        let mut g = gen_for(&p, 1e12, end, false);
        assert_eq!(g.cond.outages.len(), 1, "one a day");
        let (from, to) = g.cond.outages[0];
        assert!((to - from - 600.0).abs() < 1e-9 && (0.0..DAY_S).contains(&from));
        let mut inside = 0;
        while g.t < end {
            let probe = g.next();
            let out = (from..to).contains(&probe.t);
            assert_eq!(probe.obs.good, Some(!out), "at {} (outage {from}..{to})", probe.t);
            if out {
                inside += 1;
                assert!(probe.obs.ttft.is_none() && probe.obs.e2e.is_none());
            }
        }
        assert!(inside > 1000, "{inside} probes in the outage");
    }

    /// A burst fails about its share of the probes inside it.
    #[test]
    fn burst_fails_its_share() {
        let mut p = params();
        (p.rate, p.good_before, p.burst_s, p.burst_error_share, p.warmup_s) = (5.0, 1.0, 3600.0, 0.25, 0.0);
        let mut g = gen_for(&p, 1e12, DAY_S, false);
        let (from, to) = g.cond.bursts[0];
        let (mut n, mut bad) = (0, 0);
        while g.t < DAY_S {
            let probe = g.next();
            if probe.t >= from && probe.t < to {
                n += 1;
                bad += (probe.obs.good == Some(false)) as usize;
            } else {
                assert_eq!(probe.obs.good, Some(true));
            }
        }
        let share = bad as f64 / n as f64;
        assert!((share - 0.25).abs() < 0.03, "{bad} of {n}");
    }

    /// Null days: one outage each; detection trials: an outage with the day's probability.
    #[test]
    fn outages_come_once_a_simulated_day() {
        let mut p = params();
        p.outage_s = 40.0;
        p.warmup_s = 6.0 * 3600.0;
        let end = p.warmup_s + DAY_S;
        let in_day =
            (0..200).map(|s| Conditions::draw(&p, s, 0.0, end, false).outages.iter().filter(|w| w.0 >= p.warmup_s && w.0 < end).count()).collect::<Vec<_>>();
        assert!(in_day.iter().all(|n| *n == 1), "{in_day:?}");
        // 6 h warm-up + 1 h horizon: 7/24 outages a trial on average.
        let n: usize = (0..2000).map(|s| Conditions::draw(&p, s, 0.0, p.warmup_s + 3600.0, true).outages.len()).sum();
        assert!((n as f64 / 2000.0 - 7.0 / 24.0).abs() < 0.04, "{n} in 2000 trials");
    }

    /// The rollout warm-up slows TTFT and TPOT by one factor in [min, max] for a duration in
    /// [min, max] after the release, and fails about its error share for `error_s`.
    #[test]
    fn rollout_warmup_slows_then_stops() {
        let mut p = params();
        (p.ttft_sigma, p.tpot_sigma, p.drift, p.outlier_share, p.good_before, p.rate) = (0.0, 0.0, 0.0, 0.0, 1.0, 5.0);
        p.rollout = Some(Rollout { error_share: 0.2, ..Rollout::default() });
        let release = 1000.0;
        let mut g = gen_for(&p, release, 3000.0, false);
        let (factor, slow_until, errors_until) = g.cond.rollout.unwrap();
        assert!((1.3..=2.0).contains(&factor) && (120.0..=300.0).contains(&(slow_until - release)) && errors_until == release + 120.0);
        let (mut n_err, mut bad) = (0, 0);
        while g.t < 3000.0 {
            let probe = g.next();
            let t = probe.t;
            if t >= release && t < errors_until {
                n_err += 1;
                bad += (probe.obs.good == Some(false)) as usize;
            }
            if let Some(ttft) = probe.obs.ttft {
                let want = if t >= release && t < slow_until { factor } else { 1.0 };
                assert!((ttft / p.ttft_median_s - want).abs() < 1e-9, "at {t}");
                assert!((probe.obs.tpot.unwrap() / p.tpot_median_s - want).abs() < 1e-9);
            } else {
                assert!(t >= release && t < errors_until, "a failure outside the error window at {t}");
            }
        }
        assert!(bad > 0 && (bad as f64 / n_err as f64) < 0.4, "{bad} of {n_err}");
    }

    /// Bimodal TTFT: hits at the median, misses at × miss_factor; a miss-only regression slows
    /// only the misses, and only the first N scenarios.
    #[test]
    fn cache_modes_and_partial_regression() {
        let mut p = params();
        (p.ttft_sigma, p.drift, p.outlier_share, p.good_before, p.good_after) = (0.0, 0.0, 0.0, 1.0, 1.0);
        (p.cache_hit_share, p.miss_factor, p.regression, p.regression_target, p.regression_scenarios) = (0.7, 3.0, 1.5, RegressionTarget::Miss, Some(1));
        let mut g = gen_for(&p, 0.0, 1e12, true);
        let (mut hits, mut n) = (0, 0);
        for _ in 0..20_000 {
            let probe = g.next();
            let x = probe.obs.ttft.unwrap() / p.ttft_median_s;
            let slow_miss = if probe.scenario == 0 { 4.5 } else { 3.0 };
            assert!((x - 1.0).abs() < 1e-9 || (x - slow_miss).abs() < 1e-9, "scenario {}: x{x}", probe.scenario);
            hits += ((x - 1.0).abs() < 1e-9) as usize;
            n += 1;
        }
        assert!((hits as f64 / n as f64 - 0.7).abs() < 0.02);
    }

    /// Pareto tails: outliers are ≥ 1 and heavy (some far beyond the fixed factor).
    #[test]
    fn pareto_outliers_are_heavy() {
        let mut p = params();
        (p.ttft_sigma, p.drift, p.outlier_share, p.tail_pareto_alpha, p.good_before) = (0.0, 0.0, 1.0, Some(1.0), 1.0);
        let mut g = gen_for(&p, 1e12, 1e12, false);
        let xs: Vec<f64> = (0..10_000).map(|_| g.next().obs.ttft.unwrap() / p.ttft_median_s).collect();
        assert!(xs.iter().all(|x| *x >= 1.0 - 1e-12));
        // P(X > 100) = 1/100 for alpha 1.
        let big = xs.iter().filter(|x| **x > 100.0).count();
        assert!((50..200).contains(&big), "{big}");
    }

    fn record(ttft_ms: f64, at: f64) -> ReplayProbe {
        ReplayProbe { ttft: Some(ttft_ms / 1e3), tpot: Some(0.01), e2e: Some(ttft_ms / 1e3 + 0.5), good: true, at_s: Some(at) }
    }

    /// Time order replays the records in send order at their recorded gaps, looping.
    #[test]
    fn time_order_replay_keeps_the_recorded_order_and_gaps() {
        // File order is completion order; send order is by time.
        let records = vec![(0, record(100.0, 10.0)), (1, record(300.0, 12.0)), (0, record(200.0, 11.0)), (1, record(400.0, 15.0))];
        let replay = Replay::new(records);
        let order: Vec<f64> = replay.timeline.iter().map(|t| t.probe.ttft.unwrap()).collect();
        assert_eq!(order, vec![0.1, 0.2, 0.3, 0.4]);
        assert_eq!(replay.timeline.iter().map(|t| t.scenario).collect::<Vec<_>>(), vec![0, 0, 1, 1]);
        let mut p = params();
        (p.drift, p.outlier_share) = (0.0, 0.0);
        p.replay = Some(replay.clone());
        p.replay_order = ReplayOrder::Time;
        let mut g = gen_for(&p, 1e12, 1e12, false);
        let start = g.cursor;
        let mut last = 0.0;
        for i in 0..10 {
            let probe = g.next();
            let want = replay.timeline[(start + i) % 4];
            assert_eq!(probe.scenario, want.scenario);
            assert!((probe.obs.ttft.unwrap() - want.probe.ttft.unwrap()).abs() < 1e-12);
            assert!((probe.t - last - want.gap_s).abs() < 1e-9);
            last = probe.t;
        }
        assert_eq!(replay.timeline[0].gap_s, 5.0 / 3.0, "the loop's gap is the mean gap");
        // Without times there is no timeline (the command refuses time order then).
        assert!(Replay::new(vec![(0, ReplayProbe { at_s: None, ..record(1.0, 0.0) }), (0, record(1.0, 1.0))]).timeline.is_empty());
    }

    /// The JSON object carries the parameters and every figure.
    #[test]
    fn json_has_every_figure() {
        let mut p = params();
        p.horizon_s = 3600.0;
        let mut r = PlanResult::from_detections(vec![
            Some(Detection { after_s: 200.0, source: Found::Release }),
            Some(Detection { after_s: 1200.0, source: Found::Continuous }),
            None,
        ]);
        r.days = 10.0;
        r.armed_alarms = 1;
        let m = MinDetectable { within_15_min: Some(1.3), within_60_min: None, trials: 5, runs: vec![(1.3, 0.9, 1.0)] };
        let v = to_json(&p, &r, Some(&m));
        assert!((v["detection"]["detected_within"]["15"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!((v["detection"]["detected_within"]["60"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert!((v["detection"]["detected_within_by_source"]["continuous"]["60"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(v["false_alarms"]["release"]["count"], 1);
        assert!((v["false_alarms"]["release"]["per_30_days"].as_f64().unwrap() - 3.0).abs() < 1e-12);
        assert!(v["false_alarms"]["total"]["upper95_per_30_days"].as_f64().unwrap() > 3.0);
        assert_eq!(v["min_detectable"]["within_15_min"], 1.3);
        assert!(v["min_detectable"]["within_60_min"].is_null());
        assert_eq!(v["params"]["load"]["tau_min"], 5.0);
        assert!(v["params"]["side_by_side"].is_null() && v["false_alarms"]["canary_rollouts_alarmed"] == 0);
        assert_eq!(v["false_alarms"]["ttft_load_adjusted"]["levels"], 0);
        assert_eq!(v["false_alarms"]["windows_incident_held"], 0);
        assert!(v["false_alarms"]["windows_late_onset"].is_u64());
    }

    /// Side by side: only the replicas already on the new version regress, one by one; the canary
    /// comparison (new replicas after their warm-up against the old ones) finds a clear slowdown
    /// while both serve, and a warming replica is marked for the detector.
    #[test]
    fn side_by_side_regresses_new_replicas_only_and_the_canary_finds_it() {
        let mut p = params();
        p.rate = 4.0;
        p.horizon_s = 1800.0;
        p.side_by_side = Some(SideBySide { replicas: 4, rollout_s: 1200.0, replica_sd: 0.0 });
        p.regression = 3.0;
        p.drift = 0.0;
        p.outlier_share = 0.0;
        let release = 1000.0;
        let mut g = gen_for(&p, release, 3000.0, true);
        let (mut slow, mut warming) = ([(0, 0); 4], 0);
        while g.t < release + 1200.0 {
            let probe = g.next();
            let Some(ttft) = probe.obs.ttft.filter(|_| probe.t >= release) else { continue };
            let new = probe.t >= release + 300.0 * probe.replica as f64;
            slow[probe.replica].0 += usize::from(new);
            slow[probe.replica].1 += usize::from(new && ttft > 0.6);
            warming += usize::from(probe.obs.replica_warming);
        }
        assert!(slow.iter().all(|(n, k)| *k as f64 > 0.3 * *n as f64), "new replicas are slower: {slow:?}");
        assert!(warming > 0);
        let found = detections(&PlanParams { trials: 4, ..p.clone() });
        assert!(found.iter().all(|d| d.is_some_and(|d| d.source == Found::Canary || d.source == Found::Release)), "{found:?}");
        assert!(found.iter().any(|d| d.is_some_and(|d| d.source == Found::Canary)), "{found:?}");
    }
}
