//! The release-regression detector in the prober: every recorded probe is an observation, and
//! a loop (`publish`, every few seconds) ticks the detector, exports its state as metrics, logs
//! each state change and saves the baselines to `detect.state_dir`. Release markers from every
//! source (a discovery change, `POST /api/v1/releases`, `llmprobe release mark`) arrive through
//! `mark_release`. The detector outlives config reloads: a reload does not lose the baselines.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Mutex;

use super::Sink;
use super::prometheus::{DetectDeltaLabels, DetectFamilies, DetectRatioLabels, DetectSignalLabels, DetectStateLabels};
use crate::config::Detect;
use crate::detect::{Detector, Estimate, Observation, Signal, SignalReport, State, persist};
use crate::measure::Sample;
use crate::outcome::{ErrorClass, Outcome};

/// The `scenario` label of a target's pooled rows (no scenario name can contain `*`).
pub const POOLED: &str = "*";

const STATES: [State; 3] = [State::Watching, State::Regressed, State::Recovered];

pub struct DetectSink {
    detector: Mutex<Detector>,
    families: DetectFamilies,
    state_dir: Mutex<Option<PathBuf>>,
    /// Label sets exported by the last `publish`, so rows that disappear are removed.
    exported: Mutex<HashSet<(String, String, &'static str)>>,
    /// The configured targets: a target a reload removed keeps its baselines in the detector
    /// (it may come back) but exports no rows.
    targets: Mutex<HashSet<String>>,
}

/// Unix time now, the detector's clock.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
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
        }
        *self.state_dir.lock().unwrap_or_else(|e| e.into_inner()) = cfg.state_dir.clone();
    }

    /// A release of `target` at `now`: arms the sequential tests against the baselines so far.
    pub fn mark_release(&self, target: &str, now: f64) {
        self.lock().mark_release(target, now);
    }

    /// Ticks the detector, exports every row and logs state changes.
    pub fn publish(&self, now: f64) {
        let (rows, events) = {
            let mut det = self.lock();
            det.tick(now);
            (det.report(), det.drain_events())
        };
        let rows: Vec<SignalReport> = {
            let targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
            rows.into_iter().filter(|r| targets.contains(&r.target)).collect()
        };
        for e in events {
            let scenario = e.scenario.as_deref().unwrap_or(POOLED);
            let row = rows.iter().find(|r| r.target == e.target && r.scenario == e.scenario && r.signal == e.signal);
            let effect = row.map(effect_text).unwrap_or_default();
            match e.state {
                State::Regressed => {
                    tracing::warn!(target_name = %e.target, scenario, signal = e.signal.as_str(), source = e.source.as_str(), "regression detected: {effect}")
                }
                State::Recovered => tracing::info!(target_name = %e.target, scenario, signal = e.signal.as_str(), "regression recovered: {effect}"),
                State::Watching => tracing::info!(target_name = %e.target, scenario, signal = e.signal.as_str(), "detector back to watching"),
            }
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

    /// Writes the state file (atomically) when a state directory is configured.
    pub fn save(&self) {
        let dir = self.state_dir.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(dir) = dir {
            if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| persist::save(&dir, &self.lock())) {
                tracing::warn!(dir = %dir.display(), "detector state not saved: {e}");
            }
        }
    }

    /// The rows as exported now (for tests and `/debug`).
    pub fn report(&self) -> Vec<SignalReport> {
        self.lock().report()
    }

    fn export(&self, row: &SignalReport, scenario: &str) {
        let f = &self.families;
        let signal = row.signal.as_str();
        for state in STATES {
            let labels = DetectStateLabels { target: row.target.clone(), scenario: scenario.to_owned(), signal, state: state.as_str() };
            f.state.get_or_create(&labels).set(i64::from(row.state == state));
        }
        let sig = DetectSignalLabels { target: row.target.clone(), scenario: scenario.to_owned(), signal };
        f.evidence.get_or_create(&sig).set(row.log_evidence);
        f.threshold.get_or_create(&sig).set(row.threshold);
        f.samples.get_or_create(&sig).set(i64::try_from(row.samples).unwrap_or(i64::MAX));
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

fn effect_text(r: &SignalReport) -> String {
    let fmt = |e: &Estimate| format!("{:.3} (95% {:.3}..{:.3})", e.value, e.low, e.high);
    match (r.signal, r.median_ratio, r.bad_delta) {
        (Signal::Goodput, _, Some(d)) => {
            format!("bad fraction {:+.4} (95% {:+.4}..{:+.4}), evidence {:.1}/{:.1}", d.value, d.low, d.high, r.log_evidence, r.threshold)
        }
        (_, Some(m), _) => format!("median ratio {}, evidence {:.1}/{:.1}", fmt(&m), r.log_evidence, r.threshold),
        _ => format!("evidence {:.1}/{:.1}", r.log_evidence.max(r.cusum), r.threshold.max(r.cusum_threshold)),
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
        },
        _ => Observation { good: Some(false), ..Observation::default() },
    }
}

impl Sink for DetectSink {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let obs = observation(outcome, sample);
        self.lock().observe(&outcome.target, &outcome.scenario, obs, unix_now());
    }
}
