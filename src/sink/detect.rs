//! The release-regression detector in the prober: every recorded probe is an observation, and
//! a loop (`publish`, every few seconds) ticks the detector, exports its state as metrics, logs
//! each state change and saves the baselines to `detect.state_dir`. Release markers from every
//! source (a discovery change, `POST /api/v1/releases`, `llmprobe release mark`) arrive through
//! `mark_release`. The detector outlives config reloads: a reload does not lose the baselines.

use crate::util::clock::unix_now;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::Sink;
use super::prometheus::{DetectDeltaLabels, DetectFamilies, DetectRatioLabels, DetectSignalLabels};
use super::replica_ages::ReplicaAges;
use crate::config::Detect;
use crate::detect::{Cause, Detector, Estimate, Marked, MarkerTime, Observation, Signal, SignalReport, State, StateChange, persist, replica_id};
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};
use crate::source::SnapshotCache;

/// The `scenario` label of a target's pooled rows (no scenario name can contain `*`).
const POOLED: &str = "*";

pub struct DetectSink {
    detector: Mutex<Detector>,
    families: DetectFamilies,
    state_dir: Mutex<Option<PathBuf>>,
    /// Label sets exported by the last `publish`, so rows that disappear are removed.
    exported: Mutex<HashSet<(String, String, &'static str)>>,
    /// The configured targets: a target a reload removed keeps its baselines in the detector
    /// (it may come back) but exports no rows.
    targets: Mutex<HashSet<String>>,
    /// The running generation's engine readings: each probe carries the offered load at its
    /// send time into the detector.
    readings: Mutex<Arc<SnapshotCache>>,
    /// Per target, when each discovered replica came up: a probe of one still warming up is
    /// held out of the release tests.
    ages: Mutex<HashMap<String, ReplicaAges>>,
    /// The detector's count of probes beyond `max_keys` when last exported (it restarts with a
    /// detector rebuilt for new settings), and whether that was warned about.
    over_key_cap: AtomicU64,
    warned_key_cap: AtomicBool,
}

impl DetectSink {
    /// A detector with `cfg`'s settings, restored from `state_dir` when a usable state file is
    /// there. Returns the warning when one was ignored (stale or corrupt).
    pub fn new(cfg: &Detect, targets: HashSet<String>, families: DetectFamilies) -> (DetectSink, Option<String>) {
        let mut detector = Detector::new(cfg.tuning.clone());
        let warning = cfg.state_dir.as_deref().and_then(|dir| persist::load(dir, &mut detector, unix_now(), cfg.state_max_age.as_secs_f64()));
        let sink = DetectSink {
            detector: Mutex::new(detector),
            families,
            state_dir: Mutex::new(cfg.state_dir.clone()),
            exported: Mutex::new(HashSet::new()),
            targets: Mutex::new(targets),
            readings: Mutex::new(Arc::default()),
            ages: Mutex::new(HashMap::new()),
            over_key_cap: AtomicU64::new(0),
            warned_key_cap: AtomicBool::new(false),
        };
        (sink, warning)
    }

    /// Applies a reloaded config: its targets, and its `detect:` section (new settings keep the
    /// baselines: snapshot and restore).
    pub fn reconfigure(&self, cfg: &Detect, targets: HashSet<String>) {
        *self.targets.lock().unwrap_or_else(|e| e.into_inner()) = targets;
        let mut det = self.lock();
        if det.settings() != &cfg.tuning {
            let snapshot = det.snapshot();
            let mut fresh = Detector::new(cfg.tuning.clone());
            if let Err(e) = fresh.restore(&snapshot, unix_now()) {
                tracing::warn!("detector: baselines not carried over to the new settings: {e}");
            }
            *det = fresh;
            self.over_key_cap.store(0, Ordering::Relaxed);
        }
        *self.state_dir.lock().unwrap_or_else(|e| e.into_inner()) = cfg.state_dir.clone();
    }

    /// The engine readings of the generation that runs now.
    pub fn set_readings(&self, cache: Arc<SnapshotCache>) {
        *self.readings.lock().unwrap_or_else(|e| e.into_inner()) = cache;
    }

    /// A release of `target` to `version` at `at` (`time`: the release's own time, or when it
    /// was seen): arms the release tests (a repeated marker of the same version is the same
    /// release; see `Detector::mark_release`).
    pub fn mark_release(&self, target: &str, version: &str, at: f64, time: MarkerTime) -> Marked {
        let marked = self.lock().mark_release(target, version, at, time, unix_now());
        match marked {
            Marked::Armed { at: armed_at, chained } if armed_at != at || chained => tracing::info!(
                target_name = %target, version = %version,
                "detector: release window from {} ({}{})",
                crate::util::rfc3339::format_unix(armed_at, 0),
                if armed_at != at { "the marker's time clamped to the latest allowed; " } else { "" },
                if chained { "tested against the baselines frozen before the previous release, which is still being judged" } else { "fresh baselines" }
            ),
            Marked::Repeated { first_at } => tracing::info!(
                target_name = %target, version = %version,
                "detector: repeated marker for the version whose window opened at {}: the same release",
                crate::util::rfc3339::format_unix(first_at, 0)
            ),
            Marked::Armed { .. } | Marked::Ignored => {}
        }
        marked
    }

    /// Ticks the detector, exports every row and logs state changes.
    pub fn publish(&self, now: f64) {
        let (rows, events, over_key_cap, max_keys) = {
            let mut det = self.lock();
            det.tick(now);
            (det.report(), det.drain_events(), det.ignored().over_key_cap, det.settings().max_keys)
        };
        self.count_over_key_cap(over_key_cap, max_keys);
        let rows: Vec<SignalReport> = {
            let targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
            rows.into_iter().filter(|r| targets.contains(&r.target)).collect()
        };
        for e in events {
            let scenario = e.scenario.as_deref().unwrap_or(POOLED);
            let row = rows.iter().find(|r| r.target == e.target && r.scenario == e.scenario && r.signal == e.signal);
            let text = event_text(&e, row);
            let (signal, source) = (e.signal.as_str(), e.source.as_str());
            match e.state {
                State::Regressed => tracing::warn!(target_name = %e.target, scenario, signal, source, "{text}"),
                State::Recovered | State::Watching => tracing::info!(target_name = %e.target, scenario, signal, source, "{text}"),
            }
        }
        for row in rows.iter().filter(|r| r.scenario.is_none() && r.signal == Signal::Goodput) {
            self.families.set_release_pending(&row.target, row.pending);
            self.families.set_reading_daily_amplitude(&row.target, row.reading_daily_amplitude);
        }
        let mut now_exported = HashSet::new();
        for row in &rows {
            let scenario = row.scenario.clone().unwrap_or_else(|| POOLED.to_owned());
            self.export(row, &scenario);
            now_exported.insert((row.target.clone(), scenario, row.signal.as_str()));
        }
        let mut exported = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        let gone: HashSet<(&String, &String)> = exported.difference(&now_exported).map(|(t, s, _)| (t, s)).collect();
        for (target, scenario) in gone {
            if !now_exported.iter().any(|(t, s, _)| t == target && s == scenario) {
                self.families.forget_row(target, scenario);
            }
        }
        *exported = now_exported;
    }

    /// Exports the probes dropped beyond `max_keys` since the last call (`total`: the detector's
    /// own count), and warns once, the first time there are any.
    fn count_over_key_cap(&self, total: u64, max_keys: usize) {
        let before = self.over_key_cap.swap(total, Ordering::Relaxed);
        self.families.over_key_cap.inc_by(total.saturating_sub(before));
        if total > 0 && !self.warned_key_cap.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "detector: more target and scenario pairs than detect.max_keys ({max_keys}): the probes of the pairs beyond it are not watched \
                 (llmprobe_detect_over_key_cap_total counts them)"
            );
        }
    }

    /// Writes the state file (atomically) when a state directory is configured. The snapshot is
    /// taken under the detector's lock and written after it is released, so recording probes
    /// never waits for the disk. It blocks on the disk: call it from a blocking thread.
    pub fn save(&self) {
        let dir = self.state_dir.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(dir) = dir else { return };
        let snapshot = self.lock().snapshot();
        if let Err(e) = persist::write(&dir, &snapshot) {
            tracing::warn!(dir = %dir.display(), "detector state not saved: {e}");
        }
    }

    /// The detector's settings now (a reload may change them).
    pub fn settings(&self) -> crate::config::DetectSettings {
        self.lock().settings().clone()
    }

    /// The rows as exported now (for tests and `/debug`).
    pub fn report(&self) -> Vec<SignalReport> {
        self.lock().report()
    }

    fn export(&self, row: &SignalReport, scenario: &str) {
        let f = &self.families;
        let signal = row.signal.as_str();
        f.set_state(&row.target, scenario, signal, row.state.as_str(), state_source(row));
        let sig = DetectSignalLabels { target: row.target.clone(), scenario: scenario.to_owned(), signal };
        f.evidence.get_or_create(&sig).set(row.log_evidence);
        f.threshold.get_or_create(&sig).set(row.threshold);
        f.samples.get_or_create(&sig).set(i64::try_from(row.samples).unwrap_or(i64::MAX));
        f.load_slope.get_or_create(&sig).set(row.load_slope);
        f.daily_amplitude.get_or_create(&sig).set(row.daily_amplitude);
        f.swing_scale.get_or_create(&sig).set(row.swing_scale);
        f.load_sensitivity.get_or_create(&sig).set(row.load_sensitivity);
        if row.signal == Signal::Goodput {
            for (bound, v) in bounds(row.bad_delta) {
                f.bad_delta.get_or_create(&DetectDeltaLabels { target: row.target.clone(), scenario: scenario.to_owned(), bound }).set(v);
            }
        } else {
            for (percentile, est) in [("p50", row.median_ratio), ("p95", row.p95_ratio)] {
                for (bound, v) in bounds(est) {
                    let labels = DetectRatioLabels { target: row.target.clone(), scenario: scenario.to_owned(), signal, percentile, bound };
                    f.latency_ratio.get_or_create(&labels).set(v);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Detector> {
        self.detector.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `(bound label, value)`; NaN while there is no estimate (before a marker, too few probes).
fn bounds(e: Option<Estimate>) -> [(&'static str, f64); 3] {
    let e = e.unwrap_or(Estimate { value: f64::NAN, low: f64::NAN, high: f64::NAN });
    [("estimate", e.value), ("low", e.low), ("high", e.high)]
}

/// The `source` label of a row's exported state: the detector that set it (`release`,
/// `continuous`), `none` while watching.
fn state_source(r: &SignalReport) -> &'static str {
    match (r.state, r.source) {
        (State::Watching, _) | (_, None) => "none",
        (_, Some(source)) => source.as_str(),
    }
}

/// A number for a log line: `n/a` rather than NaN or infinity.
fn num(x: f64, digits: usize) -> String {
    if x.is_finite() { format!("{x:.digits$}") } else { "n/a".to_owned() }
}

/// The effect against the baseline frozen at the release marker, with its 95% interval.
fn effect_text(r: &SignalReport) -> String {
    let finite = |e: &Estimate| [e.value, e.low, e.high].iter().all(|x| x.is_finite());
    let ratio = |name: &str, e: Option<Estimate>| e.filter(finite).map(|e| format!("{name} ratio {:.3} (95% {:.3}..{:.3})", e.value, e.low, e.high));
    let parts: Vec<String> = if r.signal == Signal::Goodput {
        let delta = |name: &str, e: Option<Estimate>| e.filter(finite).map(|d| format!("{name} {:+.4} (95% {:+.4}..{:+.4})", d.value, d.low, d.high));
        [delta("bad fraction", r.bad_delta), delta("errors", r.error_delta), delta("SLO misses", r.slo_miss_delta)].into_iter().flatten().collect()
    } else {
        [ratio("median", r.median_ratio), ratio("p95", r.p95_ratio)].into_iter().flatten().collect()
    };
    if parts.is_empty() { "no effect estimate yet".to_owned() } else { parts.join(", ") }
}

/// The log text of one state change; `row` is the row as exported now (`None`: not exported, its
/// target left the config). It says "regression detected" only with the test's evidence and
/// threshold in the text and the evidence at or above the threshold. Where the row's numbers no
/// longer show that (the row is exported a few seconds after the change: a statistic may have
/// restarted at the alarm or fallen back since) it says what is known instead.
fn event_text(e: &StateChange, row: Option<&SignalReport>) -> String {
    let test = match e.source {
        Cause::Release => "the release-armed test",
        Cause::Continuous => "the continuous test (no release marker)",
    };
    let Some(r) = row else {
        return match e.state {
            State::Regressed => format!("marked regressed by {test}; the row is not exported (its target is not configured)"),
            State::Recovered => format!("regression recovered (it was set by {test})"),
            State::Watching => "detector back to watching".to_owned(),
        };
    };
    match (e.state, e.source) {
        (State::Regressed, Cause::Release) => {
            let marker = match r.marker_s {
                Some(m) => format!("{:.0} s after the release marker of {}", (e.at - m).max(0.0), crate::util::rfc3339::format_unix(m, 0)),
                None => "after the release marker".to_owned(),
            };
            let (evidence, threshold) = (r.log_evidence, r.threshold);
            let head = if evidence >= threshold {
                format!("regression detected by {test}, {marker}: evidence {evidence:.1} >= threshold {threshold:.1}")
            } else {
                format!("marked regressed by {test}, {marker}; its evidence is now {} against the threshold {} it passed", num(evidence, 1), num(threshold, 1))
            };
            let cache = match r.warmup.filter(|w| w.explains_slowdown() && r.signal != Signal::Goodput) {
                Some(w) => format!(
                    "; the engine's prefix-cache hit rate is {:.2} since the release against {:.2} before: a cache still cold after the warm-up allowance, or one the release broke",
                    w.hit_rate_after.unwrap_or(0.0),
                    w.hit_rate_before
                ),
                None => String::new(),
            };
            format!("{head}; {}; {} probes since the marker{cache}", effect_text(r), r.samples)
        }
        (State::Regressed, Cause::Continuous) => {
            let (evidence, threshold) = (r.continuous_evidence, r.continuous_threshold);
            if threshold > 0.0 && evidence >= threshold {
                format!(
                    "regression detected by {test}: evidence {evidence:.1} >= threshold {threshold:.1}, slower or worse in its recent window than in its reference window before it"
                )
            } else {
                format!(
                    "marked regressed by {test}: slower or worse in its recent window than in its reference window before it (its evidence is now {} against the threshold {} it passed)",
                    num(evidence, 1),
                    num(threshold, 1)
                )
            }
        }
        (State::Recovered, Cause::Release) => format!("regression recovered (it was set by {test}): {}", effect_text(r)),
        (State::Recovered, Cause::Continuous) => format!("regression recovered (it was set by {test}): back within the tolerance of its recent baseline"),
        (State::Watching, _) => "detector back to watching".to_owned(),
    }
}

/// What one probe tells the detector. The prober's own failures (dropped at the in-flight cap,
/// cancelled at shutdown, an internal error) say nothing about the server and never count.
pub fn observation(outcome: &Outcome, sample: Option<&Sample>) -> Observation {
    match (outcome.error_class(), sample) {
        (Some(ErrorClass::InFlightCap | ErrorClass::Cancelled | ErrorClass::Internal), _) => Observation::default(),
        (None, Some(s)) => Observation {
            ttft: s.streamed.then_some(s.ttft.as_secs_f64()),
            tpot: s.tpot.map(|d| d.as_secs_f64()),
            e2e: Some(s.e2e.as_secs_f64()),
            good: Some(s.goodput),
            ..Observation::default()
        },
        (Some(ErrorClass::InvalidOutput | ErrorClass::WrongAnswer), _) => Observation { good: Some(false), check_failed: true, ..Observation::default() },
        _ => Observation { good: Some(false), ..Observation::default() },
    }
}

impl DetectSink {
    /// Of `replica` of `target`: whether it came up during the watch less than the release
    /// grace ago, and the detector's key for it (its node's, where discovery read one). One
    /// look at the replica ages for both.
    fn replica(&self, target: &str, replica: &str, now: f64) -> (bool, std::num::NonZeroU32) {
        let grace = self.lock().settings().release_grace_s;
        let ages = self.ages.lock().unwrap_or_else(|e| e.into_inner());
        let a = ages.get(target);
        (a.is_some_and(|a| a.warming(replica, now, grace)), replica_id(a.map_or(replica, |a| a.offset_key(replica))))
    }
}

impl Sink for DetectSink {
    fn event(&self, event: &super::Event) {
        let ages = || self.ages.lock().unwrap_or_else(|e| e.into_inner());
        match *event {
            super::Event::Release { target, version, at, time, .. } => {
                self.mark_release(target, version, at, time);
            }
            super::Event::ReplicaVersion { target, replica, version, node, .. } => {
                let mut ages = ages();
                let a = ages.entry(target.to_owned()).or_default();
                a.seen(replica, version, unix_now());
                a.set_node(replica, node);
            }
            super::Event::ReplicaGone { target, replica, .. } => {
                if let Some(a) = ages().get_mut(target) {
                    a.forget(replica);
                }
            }
            _ => {}
        }
    }

    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let (load, cache_hit) = match self.readings.lock().unwrap_or_else(|e| e.into_inner()).at(&outcome.target, outcome.timeline.sent) {
            Some(j) => (j.reading.offered_load(), j.reading.prefix_cache_hit_rate.filter(|h| (0.0..=1.0).contains(h))),
            None => (None, None),
        };
        let now = unix_now();
        let found = outcome.replica.as_deref().map(|r| self.replica(&outcome.target, r, now));
        let (replica_warming, replica) = (found.is_some_and(|f| f.0), found.map(|f| f.1));
        let obs = Observation { load, cache_hit, replica_warming, replica, ..observation(outcome, sample) };
        self.lock().observe(&outcome.target, &outcome.scenario, obs, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(signal: Signal, state: State, source: Option<Cause>) -> SignalReport {
        SignalReport {
            target: "vllm".to_owned(),
            scenario: None,
            signal,
            state,
            source,
            armed: true,
            pending: false,
            incident_hold: false,
            late_onset: false,
            version: None,
            detectable: None,
            marker_s: Some(1_767_225_600.0),
            changed_s: Some(1_767_225_912.0),
            samples: 118,
            load_slope: 0.0,
            daily_amplitude: 0.0,
            reading_daily_amplitude: 0.0,
            swing_scale: 1.0,
            load_sensitivity: 1.0,
            checks: None,
            warmup: None,
            trend_per_hour: None,
            baseline_samples: 400,
            median_ratio: Some(Estimate { value: 1.31, low: 1.18, high: 1.45 }),
            p95_ratio: Some(Estimate { value: 1.52, low: 1.3, high: 1.8 }),
            bad_delta: None,
            error_delta: None,
            slo_miss_delta: None,
            log_evidence: 7.25,
            p_value: 0.0007,
            threshold: 5.99,
            continuous_evidence: 0.0,
            continuous_threshold: 16.2,
        }
    }

    fn event(state: State, source: Cause) -> StateChange {
        StateChange { target: "vllm".to_owned(), scenario: None, signal: Signal::Ttft, state, source, at: 1_767_225_912.0 }
    }

    #[test]
    fn the_state_source_label_names_the_detector_and_is_none_while_watching() {
        assert_eq!(state_source(&row(Signal::Ttft, State::Regressed, Some(Cause::Release))), "release");
        assert_eq!(state_source(&row(Signal::Ttft, State::Regressed, Some(Cause::Continuous))), "continuous");
        assert_eq!(state_source(&row(Signal::Ttft, State::Recovered, Some(Cause::Continuous))), "continuous");
        assert_eq!(state_source(&row(Signal::Ttft, State::Watching, None)), "none");
        assert_eq!(state_source(&row(Signal::Ttft, State::Watching, Some(Cause::Release))), "none");
    }

    #[test]
    fn a_release_regression_is_logged_with_evidence_threshold_marker_and_effect() {
        let r = row(Signal::Ttft, State::Regressed, Some(Cause::Release));
        let text = event_text(&event(State::Regressed, Cause::Release), Some(&r));
        assert!(text.starts_with("regression detected by the release-armed test, 312 s after the release marker of 2026-01-01T00:00:00Z"), "{text}");
        assert!(text.contains("evidence 7.2 >= threshold 6.0"), "{text}");
        assert!(text.contains("median ratio 1.310 (95% 1.180..1.450)") && text.contains("118 probes since the marker"), "{text}");
    }

    #[test]
    fn regression_detected_needs_the_evidence_at_the_threshold() {
        // The release test's evidence fell back below its threshold before the export.
        let mut r = row(Signal::Ttft, State::Regressed, Some(Cause::Release));
        r.log_evidence = 5.2;
        let text = event_text(&event(State::Regressed, Cause::Release), Some(&r));
        assert!(!text.contains("regression detected") && text.contains("5.2") && text.contains("6.0"), "{text}");
        // The continuous test's statistic restarted at its alarm: 0 against 16.2 is not "detected".
        let r = row(Signal::Ttft, State::Regressed, Some(Cause::Continuous));
        let text = event_text(&event(State::Regressed, Cause::Continuous), Some(&r));
        assert!(!text.contains("regression detected") && text.contains("continuous test (no release marker)"), "{text}");
        assert!(!text.contains("ratio"), "a continuous row has no release effect to show: {text}");
        let mut r = row(Signal::Ttft, State::Regressed, Some(Cause::Continuous));
        r.continuous_evidence = 17.0;
        let text = event_text(&event(State::Regressed, Cause::Continuous), Some(&r));
        assert!(text.starts_with("regression detected by the continuous test (no release marker): evidence 17.0 >= threshold 16.2"), "{text}");
        // No row, no numbers: never "detected".
        let text = event_text(&event(State::Regressed, Cause::Release), None);
        assert!(!text.contains("regression detected"), "{text}");
    }

    #[test]
    fn probes_beyond_max_keys_are_counted_and_the_saved_state_reads_back() {
        let dir = std::env::temp_dir().join(format!("llmprobe-detect-sink-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let yaml = format!(
            "targets:\n  - {{name: a, base_url: 'http://127.0.0.1:1', api: openai-chat}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n\
             detect:\n  state_dir: {}\n  tuning: {{max_keys: 1}}\n",
            dir.display()
        );
        let config = crate::app::loader::parse(&yaml, "t.yaml").unwrap();
        let metrics = crate::sink::prometheus::Metrics::new(&config);
        let (sink, _) = DetectSink::new(&config.detect, ["a".to_owned()].into(), metrics.detect.clone());
        let obs = Observation { ttft: Some(0.1), tpot: Some(0.01), e2e: Some(0.5), good: Some(true), ..Default::default() };
        let now = unix_now();
        for (i, target) in ["a", "b", "b", "c"].iter().enumerate() {
            sink.lock().observe(target, "s", obs, now + i as f64);
        }
        sink.publish(now + 5.0);
        assert_eq!(metrics.detect.over_key_cap.get(), 3, "b twice and c: beyond the one key");
        sink.publish(now + 6.0);
        assert_eq!(metrics.detect.over_key_cap.get(), 3, "counted once");
        sink.lock().observe("d", "s", obs, now + 7.0);
        sink.publish(now + 8.0);
        assert_eq!(metrics.detect.over_key_cap.get(), 4);

        sink.save();
        let mut restored = Detector::new(config.detect.tuning.clone());
        assert_eq!(persist::load(&dir, &mut restored, now + 9.0, 3600.0), None, "the written state reads back");
        assert_eq!(restored.keys(), 1);
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Replica discovery's events reach the detector's sink: a replica that comes up during the
    /// watch is warming up for the release grace (its probes are held out of the release tests).
    #[test]
    fn a_replica_that_came_up_is_warming_for_the_grace() {
        let config = crate::app::loader::parse(
            "targets:\n  - {name: a, base_url: 'http://127.0.0.1:1', api: openai-chat}\nscenarios:\n  - {name: s, input_tokens: 8, output_tokens: 4}\n",
            "t.yaml",
        )
        .unwrap();
        let metrics = crate::sink::prometheus::Metrics::new(&config);
        let (sink, _) = DetectSink::new(&config.detect, ["a".to_owned()].into(), metrics.detect.clone());
        let seen = |replica: &str, version: &str, at: f64| sink.ages.lock().unwrap().entry("a".to_owned()).or_default().seen(replica, version, at);
        seen("r1", "v1", 0.0);
        seen("r2", "v2", 100.0);
        let grace = config.detect.tuning.release_grace_s;
        assert!(!sink.replica("a", "r1", 10.0).0 && sink.replica("a", "r2", 100.0 + grace - 1.0).0);
        assert!(!sink.replica("a", "r2", 100.0 + grace).0 && !sink.replica("b", "r2", 150.0).0);
        sink.event(&crate::sink::Event::ReplicaGone { config: &config, target: "a", replica: "r2" });
        assert!(!sink.replica("a", "r2", 150.0).0, "a replica gone is forgotten");
        sink.event(&crate::sink::Event::ReplicaVersion { target: "a", replica: "r3", version: "v2", node: "", zone: "" });
        assert!(sink.ages.lock().unwrap()["a"].number("r3").is_some(), "the event is seen");
        // The release tests key a replica by its node where discovery read one: the pod that
        // replaces it on the same node keeps its offset.
        assert_eq!(sink.replica("a", "r3", 0.0).1, replica_id("r3"));
        sink.event(&crate::sink::Event::ReplicaVersion { target: "a", replica: "r4", version: "v2", node: "gpu-7", zone: "" });
        assert_eq!(sink.replica("a", "r4", 0.0).1, replica_id("gpu-7"));
        sink.event(&crate::sink::Event::ReplicaGone { config: &config, target: "a", replica: "r4" });
        assert_eq!(sink.replica("a", "r4", 0.0).1, replica_id("r4"), "a replica gone is forgotten with its node");
    }

    #[test]
    fn log_text_never_prints_nan() {
        let mut r = row(Signal::Goodput, State::Regressed, Some(Cause::Release));
        r.bad_delta = Some(Estimate { value: f64::NAN, low: f64::NAN, high: f64::NAN });
        r.log_evidence = f64::NAN;
        let text = event_text(&event(State::Regressed, Cause::Release), Some(&r));
        assert!(!text.contains("NaN") && text.contains("no effect estimate yet"), "{text}");
        r.bad_delta = Some(Estimate { value: 0.045, low: 0.021, high: 0.069 });
        r.log_evidence = 5.1;
        r.threshold = 4.89;
        let text = event_text(&event(State::Regressed, Cause::Release), Some(&r));
        assert!(text.contains("evidence 5.1 >= threshold 4.9") && text.contains("bad fraction +0.0450 (95% +0.0210..+0.0690)"), "{text}");
    }
}
