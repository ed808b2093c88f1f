//! A release's verdict for pipelines (`GET /api/v1/verdict`, `llmprobe release wait`): the
//! pooled rows of one target read as one answer — `grace`, `watching`, `passed`, `regressed` or
//! `inconclusive` — with each signal's effect, the probes used and the smallest effect the window
//! could have found. Pure: it reads the detector's report. docs/detection.md, "Release verdicts".

use serde::Serialize;

use super::covariates::CacheWarmup;
use super::math::{Z95, proportion_delta};
use super::state::{Cause, Estimate, Signal, SignalReport, State};
use crate::config::DetectSettings;

/// The verdict of a target's last release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub target: String,
    pub version: Option<String>,
    /// When the release happened (Unix seconds; RFC 3339 in `marker_time`).
    pub marker_s: f64,
    pub marker_time: String,
    pub state: VerdictState,
    /// What `passed` needs the window to have been able to find (with 80% power).
    pub required: Required,
    pub signals: Vec<SignalVerdict>,
    /// The prefix cache's warm-up after the release, where the engine reports its hit rate:
    /// latency probes held out while it was colder than before (docs/detection.md, "Cold caches
    /// after a rollout"). `null` without a hit-rate reading in the baseline.
    pub cache_warmup: Option<CacheWarmup>,
    /// An incident (latency far off its level) was running at the marker, whose time was stated,
    /// and has not ended: the release's latency tests wait for it, since it began before the
    /// release (docs/detection.md, "Markers: their own time, repeats, and alarms they cannot
    /// erase").
    pub incident_hold: bool,
    /// At the latest look a test found a change that began after the marker, well into the
    /// window (an incident that started later, not the release), and raised no alarm for it
    /// (docs/detection.md, "The change began at the marker").
    pub late_onset: bool,
    /// While the release rolls out and its replicas serve beside the old version's: the new
    /// version's probes against the old ones' at the same time and load (`null` otherwise).
    /// A regression there is the verdict's first word: it needs no baseline from before.
    pub canary: Option<Canary>,
}

/// A rollout's side-by-side comparison: the newest version's replicas against the others'.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Canary {
    /// The newest version the replicas report.
    pub version: String,
    /// When several versions began to serve (Unix seconds).
    pub started_s: f64,
    pub signals: Vec<CanarySignal>,
}

impl Canary {
    pub fn regressed(&self) -> bool {
        self.signals.iter().any(|s| s.regressed)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CanarySignal {
    pub signal: &'static str,
    /// Both sides had enough probes to be judged.
    pub judged: bool,
    pub regressed: bool,
    /// Latency: the new/old ratio of geometric means; goodput: new − old bad fraction; with a
    /// 95% interval.
    pub effect: Option<Estimate>,
    pub probes: usize,
    pub reference_probes: usize,
    /// ln of the evidence and the threshold it must reach.
    pub evidence: f64,
    pub threshold: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VerdictState {
    /// The release is being judged; the tests have not looked yet.
    Grace,
    /// The window is open and nothing regressed so far.
    Watching,
    /// The window closed without a regression, and it could have found the required effect.
    Passed,
    /// A signal regressed after this release.
    Regressed,
    /// The window closed without a regression, but too few probes (or too much load noise) to
    /// rule out the required effect; or a signal was regressed already before the release.
    Inconclusive,
}

impl VerdictState {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictState::Grace => "grace",
            VerdictState::Watching => "watching",
            VerdictState::Passed => "passed",
            VerdictState::Regressed => "regressed",
            VerdictState::Inconclusive => "inconclusive",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Required {
    pub latency_ratio: f64,
    pub goodput_delta: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalVerdict {
    pub signal: &'static str,
    /// `watching`, `regressed` or `recovered`, and the test that set it.
    pub state: &'static str,
    pub source: Option<&'static str>,
    /// Latency: post/pre ratio of the median and p95; goodput: the bad fraction's change.
    pub median_ratio: Option<Estimate>,
    pub p95_ratio: Option<Estimate>,
    pub bad_fraction_delta: Option<Estimate>,
    /// Goodput: the bad fraction's change split into errors (failed probes, failed checks
    /// included) and SLO misses (answered, too slow); `null` for latency.
    pub error_fraction_delta: Option<Estimate>,
    pub slo_miss_fraction_delta: Option<Estimate>,
    /// Probes since the grace window, and in the baseline.
    pub probes: u64,
    pub baseline_probes: u64,
    pub evidence: f64,
    pub threshold: f64,
    /// The smallest effect the last look could have found with 80% power (`null` before it).
    pub detectable: Option<f64>,
    /// `detectable` is at most the required effect.
    pub rules_out_required: bool,
    /// Latency: the trend before the release taken out of the comparison (factor per hour).
    pub trend_per_hour: Option<f64>,
}

/// Why there is no verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoVerdict {
    /// The target is not one the prober knows.
    UnknownTarget,
    /// The target has had no release marker.
    NoRelease,
    /// The last release is of another version (the one named).
    OtherVersion(String),
}

/// The verdict of `target`'s last release from the detector's rows (`version`: the release the
/// caller asks about; `None`: the last one).
pub fn verdict(rows: &[SignalReport], target: &str, version: Option<&str>, settings: &DetectSettings) -> Result<Verdict, NoVerdict> {
    let pooled: Vec<&SignalReport> = rows.iter().filter(|r| r.target == target && r.scenario.is_none()).collect();
    let first = pooled.first().ok_or(NoVerdict::UnknownTarget)?;
    let marker = first.marker_s.ok_or(NoVerdict::NoRelease)?;
    if let Some(v) = version
        && first.version.as_deref() != Some(v)
    {
        return Err(NoVerdict::OtherVersion(first.version.clone().unwrap_or_default()));
    }
    let required = Required { latency_ratio: settings.verdict_latency_effect, goodput_delta: settings.verdict_goodput_effect };
    let mut signals: Vec<SignalVerdict> = pooled
        .iter()
        .map(|r| {
            let goodput = r.signal == Signal::Goodput;
            let needed = if goodput { required.goodput_delta } else { required.latency_ratio };
            SignalVerdict {
                signal: r.signal.as_str(),
                state: r.state.as_str(),
                source: r.source.map(Cause::as_str),
                median_ratio: r.median_ratio,
                p95_ratio: r.p95_ratio,
                bad_fraction_delta: r.bad_delta,
                error_fraction_delta: r.error_delta,
                slo_miss_fraction_delta: r.slo_miss_delta,
                probes: r.samples,
                baseline_probes: r.baseline_samples,
                evidence: r.log_evidence,
                threshold: r.threshold,
                detectable: r.detectable.filter(|d| d.is_finite()),
                rules_out_required: r.detectable.is_some_and(|d| d <= needed),
                trend_per_hour: r.trend_per_hour,
            }
        })
        .collect();
    // Behaviour checks: their failures are goodput failures too, but a release that breaks
    // answers is named as such (structured output, tool calls, known answers).
    let checks = pooled.iter().find_map(|r| r.checks);
    if let Some(c) = checks {
        let delta = proportion_delta(c.baseline_failed, c.baseline_probes, c.failed, c.probes).map(|(point, centre, var)| {
            let half = Z95 * var.sqrt();
            Estimate { value: point, low: centre - half, high: centre + half }
        });
        signals.push(SignalVerdict {
            signal: "checks",
            state: if c.regressed { "regressed" } else { "watching" },
            source: c.regressed.then_some("release"),
            median_ratio: None,
            p95_ratio: None,
            bad_fraction_delta: delta,
            error_fraction_delta: None,
            slo_miss_fraction_delta: None,
            probes: c.probes,
            baseline_probes: c.baseline_probes,
            evidence: -(c.p_value.max(1e-300)).ln(),
            threshold: c.threshold,
            detectable: None,
            rules_out_required: !c.regressed && delta.is_some_and(|d| d.high < required.goodput_delta),
            trend_per_hour: None,
        });
    }
    // Regressed by this release: set at or after its marker. A row regressed before it (the
    // continuous test) stays regressed (a marker never clears it) but is not this release's.
    let by_this = |r: &&&SignalReport| r.state == State::Regressed && r.changed_s.is_some_and(|c| c >= marker);
    let regressed_before = pooled.iter().any(|r| r.state == State::Regressed && !by_this(&r));
    let state = if pooled.iter().any(|r| by_this(&r)) || checks.is_some_and(|c| c.regressed) {
        VerdictState::Regressed
    } else if first.pending {
        VerdictState::Grace
    } else if first.armed {
        VerdictState::Watching
    } else if !regressed_before && signals.iter().all(|s| s.rules_out_required) {
        VerdictState::Passed
    } else {
        VerdictState::Inconclusive
    };
    Ok(Verdict {
        target: target.to_owned(),
        version: first.version.clone(),
        marker_s: marker,
        marker_time: crate::util::rfc3339::format_unix(marker, 0),
        state,
        required,
        signals,
        cache_warmup: pooled.iter().find(|r| r.signal != Signal::Goodput).and_then(|r| r.warmup),
        incident_hold: pooled.iter().any(|r| r.incident_hold),
        late_onset: pooled.iter().any(|r| r.late_onset),
        canary: None,
    })
}

impl Verdict {
    /// Joins the rollout's canary comparison when it belongs to this release (several versions
    /// began to serve no earlier than `marker_max_delay_s` before the marker). While both
    /// versions serve it comes first: a canary regression makes the release `regressed` whatever
    /// the before/after tests say so far; a clean canary decides nothing alone (the rollout is
    /// not over, and the before/after window still judges it).
    pub fn with_canary(mut self, canary: Option<Canary>, settings: &DetectSettings) -> Verdict {
        let Some(c) = canary.filter(|c| c.started_s >= self.marker_s - settings.marker_max_delay_s) else { return self };
        if c.regressed() {
            self.state = VerdictState::Regressed;
        }
        self.canary = Some(c);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(signal: Signal) -> SignalReport {
        SignalReport {
            target: "vllm".to_owned(),
            scenario: None,
            signal,
            state: State::Watching,
            source: None,
            armed: false,
            pending: false,
            incident_hold: false,
            late_onset: false,
            version: Some("v2".to_owned()),
            detectable: Some(if signal == Signal::Goodput { 0.01 } else { 1.1 }),
            marker_s: Some(1000.0),
            changed_s: None,
            samples: 500,
            baseline_samples: 1800,
            median_ratio: None,
            p95_ratio: None,
            bad_delta: None,
            error_delta: None,
            slo_miss_delta: None,
            log_evidence: 0.0,
            p_value: 1.0,
            threshold: 6.0,
            continuous_evidence: 0.0,
            continuous_threshold: 0.0,
            load_slope: 0.0,
            daily_amplitude: 0.0,
            reading_daily_amplitude: 0.0,
            swing_scale: 1.0,
            load_sensitivity: 1.0,
            checks: None,
            warmup: None,
            trend_per_hour: None,
        }
    }

    fn rows() -> Vec<SignalReport> {
        Signal::ALL.iter().map(|s| row(*s)).collect()
    }

    fn state(rows: &[SignalReport]) -> VerdictState {
        verdict(rows, "vllm", None, &DetectSettings::default()).expect("verdict").state
    }

    #[test]
    fn a_closed_window_that_could_see_the_effect_passed() {
        assert_eq!(state(&rows()), VerdictState::Passed);
        let mut thin = rows();
        thin[0].detectable = Some(1.4);
        assert_eq!(state(&thin), VerdictState::Inconclusive, "ttft could only have seen 1.4x");
        thin[0].detectable = None;
        assert_eq!(state(&thin), VerdictState::Inconclusive, "no look at all");
    }

    #[test]
    fn states_follow_the_window() {
        let mut r = rows();
        r.iter_mut().for_each(|r| (r.armed, r.pending) = (true, true));
        assert_eq!(state(&r), VerdictState::Grace);
        r.iter_mut().for_each(|r| r.pending = false);
        assert_eq!(state(&r), VerdictState::Watching);
        r[3] = SignalReport { state: State::Regressed, source: Some(Cause::Release), changed_s: Some(1400.0), ..r[3].clone() };
        assert_eq!(state(&r), VerdictState::Regressed, "a regression decides at once");
        // Regressed before this release (by the continuous test): not this release's, and it
        // cannot pass.
        let mut before = rows();
        before[0] = SignalReport { state: State::Regressed, source: Some(Cause::Continuous), changed_s: Some(900.0), ..before[0].clone() };
        assert_eq!(state(&before), VerdictState::Inconclusive);
    }

    #[test]
    fn unknown_targets_releases_and_versions_are_told_apart() {
        let s = DetectSettings::default();
        assert_eq!(verdict(&rows(), "nope", None, &s), Err(NoVerdict::UnknownTarget));
        assert_eq!(verdict(&rows(), "vllm", Some("v3"), &s), Err(NoVerdict::OtherVersion("v2".into())));
        let mut none = rows();
        none.iter_mut().for_each(|r| r.marker_s = None);
        assert_eq!(verdict(&none, "vllm", None, &s), Err(NoVerdict::NoRelease));
        assert_eq!(verdict(&rows(), "vllm", Some("v2"), &s).map(|v| v.state), Ok(VerdictState::Passed));
    }

    #[test]
    fn a_canary_regression_comes_first_while_the_versions_serve_side_by_side() {
        let s = DetectSettings::default();
        let mut watching = rows();
        watching.iter_mut().for_each(|r| r.armed = true);
        let base = verdict(&watching, "vllm", Some("v2"), &s).expect("a verdict");
        assert_eq!(base.state, VerdictState::Watching);
        let canary = |regressed: bool, started_s: f64| Canary {
            version: "v2".into(),
            started_s,
            signals: vec![CanarySignal {
                signal: "ttft",
                judged: true,
                regressed,
                effect: Some(Estimate { value: 1.3, low: 1.2, high: 1.4 }),
                probes: 120,
                reference_probes: 300,
                evidence: if regressed { 9.0 } else { 0.1 },
                threshold: 6.0,
            }],
        };
        let v = base.clone().with_canary(Some(canary(true, 1000.0)), &s);
        assert_eq!(v.state, VerdictState::Regressed);
        assert!(v.canary.as_ref().is_some_and(Canary::regressed));
        // A clean canary decides nothing alone; one from a rollout long before the marker is
        // another release's and is left out.
        assert_eq!(base.clone().with_canary(Some(canary(false, 1000.0)), &s).state, VerdictState::Watching);
        let old = base.clone().with_canary(Some(canary(true, 1000.0 - s.marker_max_delay_s - 1.0)), &s);
        assert_eq!((old.state, old.canary), (VerdictState::Watching, None));
        assert_eq!(base.clone().with_canary(None, &s), base);
    }
}
