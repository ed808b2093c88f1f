//! `detect:` — the release-regression detector: on or off, where its baselines survive
//! restarts, and who may post release markers. The statistical settings (`tuning`) are the
//! detector's own `DetectSettings`, with its documented defaults field by field.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::Checker;
use super::duration::RawDuration;

/// The section as written. Absent, empty (`detect:`) and `{}` all mean the defaults below.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with enabled, state_dir, state_max_age, release_token_file, tuning")]
pub struct RawDetect {
    /// Run the detector. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Directory for the detector's state (baselines), written atomically every minute and at
    /// shutdown, read at start: a prober restarted with its pod keeps its baselines. Default none.
    pub state_dir: Option<String>,
    /// A state file older than this is ignored (with a warning). Default `6h`.
    #[serde(default = "default_state_max_age")]
    pub state_max_age: RawDuration,
    /// File holding the bearer token for `POST /api/v1/releases`; the endpoint is off without it.
    pub release_token_file: Option<String>,
    /// The detector's statistical settings (see the README, "Release regression detection").
    #[serde(default)]
    pub tuning: DetectSettings,
}

impl Default for RawDetect {
    fn default() -> Self {
        RawDetect { enabled: true, state_dir: None, state_max_age: default_state_max_age(), release_token_file: None, tuning: DetectSettings::default() }
    }
}

fn default_true() -> bool {
    true
}

fn default_state_max_age() -> RawDuration {
    RawDuration("6h".to_owned())
}

/// The validated section.
#[derive(Debug, Clone, PartialEq)]
pub struct Detect {
    pub enabled: bool,
    pub state_dir: Option<PathBuf>,
    pub state_max_age: Duration,
    pub release_token_file: Option<PathBuf>,
    pub tuning: DetectSettings,
}

/// The documented defaults: what an absent section gives.
impl Default for Detect {
    fn default() -> Self {
        let mut c = Checker::detached();
        detect(&RawDetect::default(), &mut c)
    }
}

pub(super) fn detect(raw: &RawDetect, c: &mut Checker) -> Detect {
    if let Err(problems) = raw.tuning.validate() {
        for p in problems {
            let (field, message) = p.split_once(": ").unwrap_or(("", p.as_str()));
            c.error(format!("detect.tuning.{field}"), message);
        }
    }
    let path = |what: &str, v: &Option<String>, c: &mut Checker| match v.as_deref() {
        Some("") => {
            c.error(format!("detect.{what}"), "must not be empty");
            None
        }
        other => other.map(PathBuf::from),
    };
    Detect {
        enabled: raw.enabled,
        state_dir: path("state_dir", &raw.state_dir, c),
        state_max_age: c.positive_duration("detect.state_max_age", &raw.state_max_age),
        release_token_file: path("release_token_file", &raw.release_token_file, c),
        tuning: raw.tuning.clone(),
    }
}

/// Detector settings. `Default` is the documented default set; a config section deserializes onto
/// it (`#[serde(default)]`), so an omitted field keeps its default and an unknown field is an error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DetectSettings {
    /// False-alarm probability of one release-armed window, for the whole target (all signals and
    /// scenarios together). Split: half to goodput, a sixth to each latency signal.
    pub armed_alpha: f64,
    /// How long a release marker arms the sequential tests (seconds).
    pub armed_window_s: f64,
    /// Latency baseline: the probes of the last this many seconds before the marker.
    pub latency_baseline_s: f64,
    /// Goodput baseline: the probes of the last this many seconds before the marker (bad outcomes
    /// are rare, so this window is longer).
    pub goodput_baseline_s: f64,
    /// Cap on stored latency values per target × scenario × signal (the newest are kept).
    pub baseline_max_samples: usize,
    /// A scenario takes part in a latency test only with at least this many baseline probes.
    pub min_latency_baseline: usize,
    /// A scenario takes part in a goodput test only with at least this many baseline probes.
    pub min_goodput_baseline: usize,
    /// Smallest latency slowdown (post/pre ratio) the armed test is built to find.
    pub latency_min_effect: f64,
    /// Slowdown (post/pre ratio) still counted as no regression: the null hypothesis of the latency
    /// tests is "ratio ≤ tolerance". It absorbs slow drift: a ±20% daily cycle moves the mean of an
    /// hour after the marker against a 30 min baseline by up to about 4%.
    pub latency_tolerance: f64,
    /// Smallest rise of the bad fraction (absolute, 0.01 = one point) the armed test is built to find.
    pub goodput_min_effect: f64,
    /// Log latencies are winsorized at baseline median ± (this many robust standard deviations +
    /// the largest slowdown the test weighs).
    pub clip_sigmas: f64,
    /// A scenario row is marked regressed when the target's pooled row is and the scenario's own
    /// evidence reaches ln(1/attribution_alpha).
    pub attribution_alpha: f64,
    /// Error level of the "no longer worse" test that turns `regressed` into `recovered`.
    pub recovery_alpha: f64,
    /// Run the continuous (marker-free) CUSUM detector.
    pub continuous: bool,
    /// Average run length between false alarms of the continuous detector, per target (days).
    pub continuous_arl_days: f64,
    /// Smallest latency slowdown the continuous detector is built to find.
    pub continuous_latency_min_effect: f64,
    /// Smallest rise of the bad fraction the continuous detector is built to find.
    pub continuous_goodput_min_effect: f64,
    /// Time constant of the continuous detector's latency baseline (EWMA, seconds). An EWMA lags a
    /// daily cycle of amplitude A by about A·(2π/86400)·τ in log latency: 0.035 for ±20% at 2400 s,
    /// inside `latency_tolerance` (ln 1.05 = 0.049).
    pub continuous_latency_tau_s: f64,
    /// Time constant of the continuous detector's bad-fraction baseline (EWMA, seconds).
    pub continuous_goodput_tau_s: f64,
    /// Continuous charts start after this long (seconds) and 100 probes of a scenario.
    pub continuous_warmup_s: f64,
    /// Cap on target × scenario keys; probes of further keys are ignored (counted).
    pub max_keys: usize,
}

impl Default for DetectSettings {
    fn default() -> Self {
        DetectSettings {
            armed_alpha: 0.015,
            armed_window_s: 3600.0,
            latency_baseline_s: 1800.0,
            goodput_baseline_s: 21600.0,
            baseline_max_samples: 2048,
            min_latency_baseline: 30,
            min_goodput_baseline: 200,
            latency_min_effect: 1.10,
            latency_tolerance: 1.05,
            goodput_min_effect: 0.01,
            clip_sigmas: 3.0,
            attribution_alpha: 0.05,
            recovery_alpha: 0.01,
            continuous: true,
            continuous_arl_days: 60.0,
            continuous_latency_min_effect: 1.20,
            continuous_goodput_min_effect: 0.02,
            continuous_latency_tau_s: 2400.0,
            continuous_goodput_tau_s: 21600.0,
            continuous_warmup_s: 3600.0,
            max_keys: 256,
        }
    }
}

impl DetectSettings {
    /// Every problem as `field: message`; empty when valid.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        let mut prob = |name: &str, v: f64, hi: f64| {
            if !(v > 0.0 && v < hi) {
                errors.push(format!("{name}: must be in (0, {hi}), got {v}"));
            }
        };
        prob("armed_alpha", self.armed_alpha, 0.5);
        prob("attribution_alpha", self.attribution_alpha, 0.5);
        prob("recovery_alpha", self.recovery_alpha, 0.5);
        prob("goodput_min_effect", self.goodput_min_effect, 0.5);
        prob("continuous_goodput_min_effect", self.continuous_goodput_min_effect, 0.5);
        let mut positive = |name: &str, v: f64| {
            if !(v.is_finite() && v > 0.0) {
                errors.push(format!("{name}: must be a positive number, got {v}"));
            }
        };
        positive("armed_window_s", self.armed_window_s);
        positive("latency_baseline_s", self.latency_baseline_s);
        positive("goodput_baseline_s", self.goodput_baseline_s);
        positive("clip_sigmas", self.clip_sigmas);
        positive("continuous_arl_days", self.continuous_arl_days);
        positive("continuous_latency_tau_s", self.continuous_latency_tau_s);
        positive("continuous_goodput_tau_s", self.continuous_goodput_tau_s);
        if !(self.continuous_warmup_s.is_finite() && self.continuous_warmup_s >= 0.0) {
            errors.push(format!("continuous_warmup_s: must be >= 0, got {}", self.continuous_warmup_s));
        }
        for (name, v) in [("latency_min_effect", self.latency_min_effect), ("continuous_latency_min_effect", self.continuous_latency_min_effect)] {
            if !(v.is_finite() && v > 1.0 && v < 10.0) {
                errors.push(format!("{name}: must be a ratio in (1, 10), got {v}"));
            }
        }
        for (name, v, lo, hi) in [
            ("baseline_max_samples", self.baseline_max_samples, 16, 1 << 16),
            ("min_latency_baseline", self.min_latency_baseline, 2, 1 << 16),
            ("min_goodput_baseline", self.min_goodput_baseline, 1, 1 << 24),
            ("max_keys", self.max_keys, 1, 1 << 16),
        ] {
            if v < lo || v > hi {
                errors.push(format!("{name}: must be in [{lo}, {hi}], got {v}"));
            }
        }
        if !(self.latency_tolerance >= 1.0 && self.latency_tolerance < self.latency_min_effect && self.latency_tolerance < self.continuous_latency_min_effect) {
            errors
                .push(format!("latency_tolerance: must be in [1, latency_min_effect) and below continuous_latency_min_effect, got {}", self.latency_tolerance));
        }
        if self.min_latency_baseline > self.baseline_max_samples {
            errors.push("min_latency_baseline: must not exceed baseline_max_samples".to_string());
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}
