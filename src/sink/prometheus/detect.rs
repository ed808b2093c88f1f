//! The release-regression detector's families: state, effect estimates, evidence, markers.

use super::contract::{
    DETECT_BAD_FRACTION_DELTA, DETECT_DAILY_AMPLITUDE, DETECT_EVIDENCE, DETECT_LATENCY_RATIO, DETECT_LOAD_SENSITIVITY, DETECT_LOAD_SLOPE,
    DETECT_OVER_KEY_CAP_TOTAL, DETECT_READING_DAILY_AMPLITUDE, DETECT_RELEASE_PENDING, DETECT_SAMPLES, DETECT_STATE, DETECT_SWING_SCALE, DETECT_THRESHOLD,
    RELEASE_INFO, RELEASE_TIMESTAMP_SECONDS,
};
use super::labels::{TargetLabels, server_label};
use super::registry::{FloatGauge, InfoFamily, info_family, register, touch};
use crate::config::Config;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::Mutex;

// ---- Detector families ---------------------------------------------------------------------------

/// `llmprobe_detect_state`: a state set (1 for the current `state`, 0 for the others) whose
/// series all carry `source`, which detector set that state: `release` (the release-armed
/// sequential test), `continuous` (the marker-free continuous test) or `none` (watching).
///
/// `source` is a label of the state itself rather than a second state-set gauge: it is not an
/// independent enum (`none` exactly while watching), it changes only together with the state, and
/// every reader of the state (alerts, dashboards, ad-hoc queries) sees which detector set it
/// without a join; a query that leaves it out selects the same rows as before. The cost is the
/// usual one of a label that can change (like `version` on `llmprobe_release_info`): when it does,
/// the row's label sets are replaced, never left behind (`DetectFamilies::set_state`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetectStateLabels {
    pub target: String,
    pub scenario: String,
    pub signal: &'static str,
    pub state: &'static str,
    pub source: &'static str,
}

/// The states of `llmprobe_detect_state`, in export order.
const DETECT_STATES: [&str; 3] = ["watching", "regressed", "recovered"];
/// The values of its `source` label.
const DETECT_SOURCES: [&str; 3] = ["none", "release", "continuous"];
/// The signals of every detector row.
const DETECT_SIGNALS: [&str; 4] = ["ttft", "tpot", "e2e", "goodput"];

/// One detector row of the exposition: target, scenario (`*` pooled), signal.
type RowKey = (String, String, &'static str);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetectSignalLabels {
    pub target: String,
    pub scenario: String,
    pub signal: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetectRatioLabels {
    pub target: String,
    pub scenario: String,
    pub signal: &'static str,
    /// `p50` (median) or `p95` (not `quantile`: that label belongs to summaries).
    pub percentile: &'static str,
    /// `estimate`, `low` or `high` (95% interval).
    pub bound: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetectDeltaLabels {
    pub target: String,
    pub scenario: String,
    pub bound: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleaseLabels {
    pub target: String,
    pub version: String,
    pub source: String,
}

/// The detector's exported state; the detector sink (`sink/detect.rs`) writes it.
#[derive(Debug, Clone)]
pub struct DetectFamilies {
    /// Written only through `set_state`, which keeps one `source` per row.
    pub(super) state: Family<DetectStateLabels, Gauge>,
    /// The `source` each exported row's state series carry now.
    state_source: std::sync::Arc<Mutex<HashMap<RowKey, &'static str>>>,
    pub latency_ratio: Family<DetectRatioLabels, FloatGauge>,
    pub bad_delta: Family<DetectDeltaLabels, FloatGauge>,
    pub evidence: Family<DetectSignalLabels, FloatGauge>,
    pub threshold: Family<DetectSignalLabels, FloatGauge>,
    pub samples: Family<DetectSignalLabels, Gauge>,
    pub load_slope: Family<DetectSignalLabels, FloatGauge>,
    pub daily_amplitude: Family<DetectSignalLabels, FloatGauge>,
    pub swing_scale: Family<DetectSignalLabels, FloatGauge>,
    pub load_sensitivity: Family<DetectSignalLabels, FloatGauge>,
    /// Per target: 1 while a release is being judged but the test has not looked yet.
    pub(super) release_pending: Family<TargetLabels, Gauge>,
    /// Per target: the offered-load reading's daily shape, half its range over a day.
    pub(super) reading_daily_amplitude: Family<TargetLabels, FloatGauge>,
    /// Probes of keys beyond `detect.max_keys`, which the detector drops.
    pub over_key_cap: Counter,
    pub(super) release_info: InfoFamily<ReleaseLabels>,
    pub(super) release_current: std::sync::Arc<Mutex<HashMap<String, ReleaseLabels>>>,
    pub(super) release_timestamp: Family<TargetLabels, FloatGauge>,
}

impl DetectFamilies {
    pub(super) fn new() -> Self {
        DetectFamilies {
            state: Family::default(),
            state_source: Default::default(),
            latency_ratio: Family::default(),
            bad_delta: Family::default(),
            evidence: Family::default(),
            threshold: Family::default(),
            samples: Family::default(),
            load_slope: Family::default(),
            daily_amplitude: Family::default(),
            swing_scale: Family::default(),
            load_sensitivity: Family::default(),
            release_pending: Family::default(),
            reading_daily_amplitude: Family::default(),
            over_key_cap: Counter::default(),
            release_info: info_family(),
            release_current: Default::default(),
            release_timestamp: Family::default(),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        register(r, DETECT_STATE, self.state.clone());
        register(r, DETECT_LATENCY_RATIO, self.latency_ratio.clone());
        register(r, DETECT_BAD_FRACTION_DELTA, self.bad_delta.clone());
        register(r, DETECT_EVIDENCE, self.evidence.clone());
        register(r, DETECT_THRESHOLD, self.threshold.clone());
        register(r, DETECT_SAMPLES, self.samples.clone());
        register(r, DETECT_LOAD_SLOPE, self.load_slope.clone());
        register(r, DETECT_DAILY_AMPLITUDE, self.daily_amplitude.clone());
        register(r, DETECT_SWING_SCALE, self.swing_scale.clone());
        register(r, DETECT_LOAD_SENSITIVITY, self.load_sensitivity.clone());
        register(r, DETECT_RELEASE_PENDING, self.release_pending.clone());
        register(r, DETECT_READING_DAILY_AMPLITUDE, self.reading_daily_amplitude.clone());
        register(r, DETECT_OVER_KEY_CAP_TOTAL, self.over_key_cap.clone());
        register(r, RELEASE_INFO, self.release_info.clone());
        register(r, RELEASE_TIMESTAMP_SECONDS, self.release_timestamp.clone());
    }

    /// A release marker: replaces the target's `llmprobe_release_info` series and sets its time.
    pub fn set_release(&self, target: &str, version: &str, source: &str, unix_seconds: f64) {
        let labels = ReleaseLabels { target: target.to_owned(), version: server_label(version), source: source.to_owned() };
        let mut current = self.release_current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = current.insert(target.to_owned(), labels.clone()) {
            if old != labels {
                self.release_info.remove(&old);
            }
        }
        touch(&self.release_info, &labels);
        self.release_timestamp.get_or_create(&TargetLabels { target: target.to_owned() }).set(unix_seconds);
    }

    /// Whether `target`'s release is waiting for the test's first look.
    pub fn set_release_pending(&self, target: &str, pending: bool) {
        self.release_pending.get_or_create(&TargetLabels { target: target.to_owned() }).set(i64::from(pending));
    }

    /// The daily shape of `target`'s offered-load reading, half its range over a day.
    pub fn set_reading_daily_amplitude(&self, target: &str, amplitude: f64) {
        self.reading_daily_amplitude.get_or_create(&TargetLabels { target: target.to_owned() }).set(amplitude);
    }

    /// One row's state: 1 for `state`, 0 for the other states, every series labelled `source`.
    /// A row carries one `source` at a time: when it changes, the new label sets are created and
    /// then the old ones removed, so a scrape never misses the row and no stale series stays.
    pub fn set_state(&self, target: &str, scenario: &str, signal: &'static str, state: &'static str, source: &'static str) {
        let mut current = self.state_source.lock().unwrap_or_else(|e| e.into_inner());
        self.write_state(&mut current, target, scenario, signal, state, source);
    }

    fn write_state(
        &self,
        current: &mut HashMap<RowKey, &'static str>,
        target: &str,
        scenario: &str,
        signal: &'static str,
        state: &'static str,
        source: &'static str,
    ) {
        let old = current.insert((target.to_owned(), scenario.to_owned(), signal), source);
        let labels =
            |state: &'static str, source: &'static str| DetectStateLabels { target: target.to_owned(), scenario: scenario.to_owned(), signal, state, source };
        for s in DETECT_STATES {
            self.state.get_or_create(&labels(s, source)).set(i64::from(s == state));
        }
        if let Some(old) = old.filter(|old| *old != source) {
            for s in DETECT_STATES {
                self.state.remove(&labels(s, old));
            }
        }
    }

    /// Every detector row a config can have, so rules and dashboards see the series before the
    /// first probe. Rows are the target's pooled one (`scenario="*"`) and one per scenario, for
    /// each signal. A new row starts watching (`source="none"`), with no evidence and no estimate
    /// yet; a row already exported keeps its values (a reload does not reset it until the next
    /// export).
    pub(super) fn precreate(&self, config: &Config) {
        if !config.detect.enabled {
            return;
        }
        // Held throughout, so an export of a row racing a reload cannot be overwritten by its start.
        let mut current = self.state_source.lock().unwrap_or_else(|e| e.into_inner());
        for target in &config.targets {
            touch(&self.release_pending, &TargetLabels { target: target.name.clone() });
            touch(&self.reading_daily_amplitude, &TargetLabels { target: target.name.clone() });
            let rows = std::iter::once("*").chain(config.scenarios.iter().map(|s| s.name.as_str()));
            for scenario in rows {
                for signal in DETECT_SIGNALS {
                    if current.contains_key(&(target.name.clone(), scenario.to_owned(), signal)) {
                        continue;
                    }
                    self.write_state(&mut current, &target.name, scenario, signal, "watching", "none");
                    let sig = DetectSignalLabels { target: target.name.clone(), scenario: scenario.to_owned(), signal };
                    touch(&self.evidence, &sig);
                    touch(&self.samples, &sig);
                    touch(&self.load_slope, &sig);
                    touch(&self.daily_amplitude, &sig);
                    self.swing_scale.get_or_create(&sig).set(1.0);
                    self.load_sensitivity.get_or_create(&sig).set(1.0);
                    touch(&self.threshold, &sig);
                    // No estimate before a marker: NaN, never a misleading 0.
                    for bound in ["estimate", "low", "high"] {
                        if signal == "goodput" {
                            self.bad_delta
                                .get_or_create(&DetectDeltaLabels { target: target.name.clone(), scenario: scenario.to_owned(), bound })
                                .set(f64::NAN);
                        } else {
                            for percentile in ["p50", "p95"] {
                                let labels = DetectRatioLabels { target: target.name.clone(), scenario: scenario.to_owned(), signal, percentile, bound };
                                self.latency_ratio.get_or_create(&labels).set(f64::NAN);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Removes one detector row (target × scenario, `*` for the pooled one), every signal.
    pub fn forget_row(&self, target: &str, scenario: &str) {
        let mut current = self.state_source.lock().unwrap_or_else(|e| e.into_inner());
        for signal in DETECT_SIGNALS {
            current.remove(&(target.to_owned(), scenario.to_owned(), signal));
            for state in DETECT_STATES {
                for source in DETECT_SOURCES {
                    self.state.remove(&DetectStateLabels { target: target.to_owned(), scenario: scenario.to_owned(), signal, state, source });
                }
            }
            let sig = DetectSignalLabels { target: target.to_owned(), scenario: scenario.to_owned(), signal };
            self.evidence.remove(&sig);
            self.threshold.remove(&sig);
            self.samples.remove(&sig);
            self.load_slope.remove(&sig);
            self.daily_amplitude.remove(&sig);
            self.swing_scale.remove(&sig);
            self.load_sensitivity.remove(&sig);
            for bound in ["estimate", "low", "high"] {
                self.bad_delta.remove(&DetectDeltaLabels { target: target.to_owned(), scenario: scenario.to_owned(), bound });
                for percentile in ["p50", "p95"] {
                    self.latency_ratio.remove(&DetectRatioLabels { target: target.to_owned(), scenario: scenario.to_owned(), signal, percentile, bound });
                }
            }
        }
    }

    /// Removes a target's release series (it left the config).
    pub fn forget_target(&self, target: &str) {
        if let Some(old) = self.release_current.lock().unwrap_or_else(|e| e.into_inner()).remove(target) {
            self.release_info.remove(&old);
        }
        self.release_timestamp.remove(&TargetLabels { target: target.to_owned() });
        self.release_pending.remove(&TargetLabels { target: target.to_owned() });
        self.reading_daily_amplitude.remove(&TargetLabels { target: target.to_owned() });
    }
}
