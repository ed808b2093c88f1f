//! `detect:` — the release-regression detector: on or off, where its baselines survive
//! restarts, and who may post release markers. The statistical settings (`tuning`) are the
//! detector's own `DetectSettings`, with its documented defaults field by field.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::check::Checker;
use super::duration::RawDuration;

/// The section as written. Absent, empty (`detect:`) and `{}` all mean the defaults below.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with enabled, state_dir, state_max_age, release_token_file, release_read_token_file, tuning")]
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
    /// File holding the bearer token for `POST /api/v1/releases` (release markers); it also reads
    /// `GET /api/v1/verdict` and `GET /api/v1/releases`. The marker endpoint is off without it.
    pub release_token_file: Option<String>,
    /// File holding a read-only bearer token: `GET /api/v1/verdict` and `GET /api/v1/releases`
    /// accept it, `POST /api/v1/releases` refuses it (403). For pipelines and rollout controllers
    /// that judge a release but must not mark one. Must differ from `release_token_file`.
    pub release_read_token_file: Option<String>,
    /// The detector's statistical settings (docs/detection.md).
    #[serde(default)]
    pub tuning: DetectSettings,
}

impl Default for RawDetect {
    fn default() -> Self {
        RawDetect {
            enabled: true,
            state_dir: None,
            state_max_age: default_state_max_age(),
            release_token_file: None,
            release_read_token_file: None,
            tuning: DetectSettings::default(),
        }
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
    pub release_read_token_file: Option<PathBuf>,
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
    let state_dir = path("state_dir", &raw.state_dir, c);
    let state_max_age = c.positive_duration("detect.state_max_age", &raw.state_max_age);
    let release_token_file = path("release_token_file", &raw.release_token_file, c);
    let release_read_token_file = path("release_read_token_file", &raw.release_read_token_file, c);
    // One file for both would make the read-only token a marker token.
    if release_token_file.is_some() && release_read_token_file == release_token_file {
        c.error("detect.release_read_token_file", "must not be the file of detect.release_token_file: the read-only token must differ from the marker token");
    }
    Detect { enabled: raw.enabled, state_dir, state_max_age, release_token_file, release_read_token_file, tuning: raw.tuning.clone() }
}

/// Detector settings. `Default` is the documented default set; a config section deserializes onto
/// it (`#[serde(default)]`), so an omitted field keeps its default and an unknown field is an error.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DetectSettings {
    /// False-alarm probability of one release window, for the whole target (all signals,
    /// scenarios and looks together). Split: half to goodput, a sixth to each latency signal.
    pub armed_alpha: f64,
    /// How long a release marker arms the tests (seconds).
    pub armed_window_s: f64,
    /// Probes of the first this many seconds after a marker are reported but do not decide:
    /// pods restart, caches and compilation warm up, a few requests fail.
    pub release_grace_s: f64,
    /// Latency baseline: the probes of the last this many seconds before the marker.
    pub latency_baseline_s: f64,
    /// Goodput baseline: the last this many seconds before the marker (bad outcomes are rare,
    /// so this window is longer).
    pub goodput_baseline_s: f64,
    /// Width of the time bins (seconds) in which the probes of a target are pooled. The load a
    /// target is under is measured from the variability of these bins over `history_s`.
    pub bin_s: f64,
    /// How much of each target's binned history is kept for the dependence model (seconds).
    pub history_s: f64,
    /// Cap on stored latency values per target × scenario × signal (the newest are kept).
    pub baseline_max_samples: usize,
    /// A scenario takes part in a latency test only with at least this many baseline probes.
    pub min_latency_baseline: usize,
    /// A scenario takes part in a goodput test only with at least this many baseline probes.
    pub min_goodput_baseline: usize,
    /// Smallest slowdown (post/pre ratio) worth an alarm: the tests ask whether the release made
    /// latency slower at all (with the load's own variance), and an alarm also needs the
    /// estimated slowdown to reach this (for the exceedance test: the share of baseline probes a
    /// slowdown this large would push above the quantile).
    pub latency_tolerance: f64,
    /// The recovery test's "still regressed" alternative (post/pre ratio) after a release alarm.
    pub latency_min_effect: f64,
    /// The exceedance test counts probes above this quantile of the baseline.
    pub exceedance_quantile: f64,
    /// The tail test counts probes whose departure from their scenario's recent level is above
    /// this (higher) quantile of the history's departures: it sees the slowest few percent get
    /// slower while the median holds.
    pub tail_quantile: f64,
    /// How late a marker may say its release happened (its `at` before the time it arrives,
    /// seconds): the probes since `at` are tested as if the marker had come on time. An older
    /// `at` is taken as this long ago (and never before the window it opens would have closed:
    /// at most `armed_window_s`).
    pub marker_max_delay_s: f64,
    /// A cold prefix cache after a rollout's restarts: while the engine's prefix-cache hit rate
    /// reading is below the baseline hour's, latency probes after the grace window are held out
    /// of the release tests as warm-up, for at most this long after the grace window (seconds;
    /// 0: never). A cache that stays cold past it is tested (and named in the alarm).
    pub cache_warmup_max_s: f64,
    /// The recovery test's "still regressed" alternative for goodput (rise of the bad fraction,
    /// absolute: 0.01 = one point) after a release alarm.
    pub goodput_min_effect: f64,
    /// Log latencies are winsorized at the scenario's long-run mean ± (this many standard
    /// deviations + ln 2).
    pub clip_sigmas: f64,
    /// When the pooled row regressed, a scenario row is marked regressed when its own test
    /// (one look) reaches this level.
    pub attribution_alpha: f64,
    /// Persistence: a test that passes must also pass at this level on each half of the
    /// post-grace probes on its own, so a transient is not a regression.
    pub confirm_alpha: f64,
    /// Error level of the "no longer worse" test that turns `regressed` into `recovered`.
    pub recovery_alpha: f64,
    /// Run the continuous (marker-free) detector.
    pub continuous: bool,
    /// Average time between false alarms of the continuous detector, per target (days).
    pub continuous_arl_days: f64,
    /// The continuous detector compares the last this many seconds ...
    pub continuous_window_s: f64,
    /// ... with this many seconds before them (goodput: `goodput_baseline_s`). Long, so the
    /// reference's own load noise is small beside the recent window's.
    pub continuous_reference_s: f64,
    /// How often the continuous detector looks (seconds).
    pub continuous_look_s: f64,
    /// The recovery test's alternative after a continuous latency alarm (post/pre ratio).
    pub continuous_latency_min_effect: f64,
    /// The recovery test's alternative after a continuous goodput alarm (rise of the bad fraction).
    pub continuous_goodput_min_effect: f64,
    /// Cap on target × scenario keys; probes of further keys are ignored (counted).
    pub max_keys: usize,
    /// The verdict API's `passed` needs the closed window to have been able to find a latency
    /// slowdown this large (post/pre ratio) with 80% power; otherwise `inconclusive`.
    pub verdict_latency_effect: f64,
    /// The same for goodput: a rise of the bad fraction this large (0.02 = two points).
    pub verdict_goodput_effect: f64,
}

impl Default for DetectSettings {
    fn default() -> Self {
        DetectSettings {
            armed_alpha: 0.015,
            armed_window_s: 3600.0,
            release_grace_s: 300.0,
            latency_baseline_s: 3600.0,
            goodput_baseline_s: 21600.0,
            bin_s: 60.0,
            history_s: 43200.0,
            baseline_max_samples: 2048,
            min_latency_baseline: 30,
            min_goodput_baseline: 200,
            latency_tolerance: 1.05,
            latency_min_effect: 1.10,
            exceedance_quantile: 0.9,
            tail_quantile: 0.99,
            marker_max_delay_s: 1800.0,
            cache_warmup_max_s: 1800.0,
            goodput_min_effect: 0.01,
            clip_sigmas: 3.0,
            attribution_alpha: 0.05,
            confirm_alpha: 0.05,
            recovery_alpha: 0.01,
            continuous: true,
            continuous_arl_days: 60.0,
            continuous_window_s: 1800.0,
            continuous_reference_s: 21600.0,
            continuous_look_s: 300.0,
            continuous_latency_min_effect: 1.20,
            continuous_goodput_min_effect: 0.02,
            max_keys: 256,
            verdict_latency_effect: 1.25,
            verdict_goodput_effect: 0.02,
        }
    }
}

/// Most time bins of history kept per target (memory: about 80 bytes a bin).
pub const MAX_HISTORY_BINS: f64 = 50_000.0;

impl DetectSettings {
    /// How far back the raw latency values are kept: a baseline window before the latest a
    /// marker may say it came, or before the oldest marker whose window is still open (a window
    /// restored after a restart freezes its baselines again from them).
    pub fn value_retention_s(&self) -> f64 {
        self.latency_baseline_s + self.marker_max_delay_s.max(self.armed_window_s)
    }

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
        prob("confirm_alpha", self.confirm_alpha, 0.5);
        prob("recovery_alpha", self.recovery_alpha, 0.5);
        prob("goodput_min_effect", self.goodput_min_effect, 0.5);
        prob("continuous_goodput_min_effect", self.continuous_goodput_min_effect, 0.5);
        prob("verdict_goodput_effect", self.verdict_goodput_effect, 1.0);
        prob("exceedance_quantile", self.exceedance_quantile, 1.0);
        prob("tail_quantile", self.tail_quantile, 1.0);
        let mut positive = |name: &str, v: f64| {
            if !(v.is_finite() && v > 0.0) {
                errors.push(format!("{name}: must be a positive number, got {v}"));
            }
        };
        positive("armed_window_s", self.armed_window_s);
        positive("latency_baseline_s", self.latency_baseline_s);
        positive("goodput_baseline_s", self.goodput_baseline_s);
        positive("bin_s", self.bin_s);
        positive("history_s", self.history_s);
        positive("clip_sigmas", self.clip_sigmas);
        positive("continuous_arl_days", self.continuous_arl_days);
        positive("continuous_window_s", self.continuous_window_s);
        positive("continuous_reference_s", self.continuous_reference_s);
        positive("continuous_look_s", self.continuous_look_s);
        if !(self.marker_max_delay_s.is_finite() && self.marker_max_delay_s >= 0.0) {
            errors.push(format!("marker_max_delay_s: must be a number >= 0, got {}", self.marker_max_delay_s));
        }
        if !(self.cache_warmup_max_s.is_finite() && self.cache_warmup_max_s >= 0.0) {
            errors.push(format!("cache_warmup_max_s: must be a number >= 0, got {}", self.cache_warmup_max_s));
        }
        if self.tail_quantile <= self.exceedance_quantile {
            errors.push(format!("tail_quantile: must be above exceedance_quantile ({}), got {}", self.exceedance_quantile, self.tail_quantile));
        }
        if !(self.release_grace_s.is_finite() && self.release_grace_s >= 0.0 && self.release_grace_s < self.armed_window_s) {
            errors.push(format!("release_grace_s: must be >= 0 and below armed_window_s, got {}", self.release_grace_s));
        }
        for (name, v) in [
            ("latency_min_effect", self.latency_min_effect),
            ("continuous_latency_min_effect", self.continuous_latency_min_effect),
            ("verdict_latency_effect", self.verdict_latency_effect),
        ] {
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
        if self.bin_s > 0.0 && self.history_s > 0.0 {
            let bins = self.history_s / self.bin_s;
            if bins > MAX_HISTORY_BINS {
                errors.push(format!("history_s: at most {MAX_HISTORY_BINS} bins of bin_s, got {bins:.0}"));
            }
            let needed = [
                ("latency_baseline_s + armed_window_s", self.latency_baseline_s + self.armed_window_s),
                ("goodput_baseline_s + armed_window_s", self.goodput_baseline_s + self.armed_window_s),
                ("continuous_reference_s + continuous_window_s", self.continuous_reference_s + self.continuous_window_s),
            ];
            for (what, span) in needed {
                if span > self.history_s {
                    errors.push(format!("history_s: must cover {what} ({span} s), got {}", self.history_s));
                }
            }
            for (name, v) in [
                ("latency_baseline_s", self.latency_baseline_s),
                ("continuous_window_s", self.continuous_window_s),
                ("continuous_look_s", self.continuous_look_s),
            ] {
                if v < self.bin_s {
                    errors.push(format!("{name}: must be at least bin_s ({}), got {v}", self.bin_s));
                }
            }
        }
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}
