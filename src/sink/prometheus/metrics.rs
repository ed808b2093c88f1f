//! `Metrics`: owns the registry, pre-creates every series whose labels config determines,
//! records probes as a `Sink`, and encodes OpenMetrics or Prometheus text.

use super::contract::{
    BEHAVIOUR_CHANGES_TOTAL, BUILD_INFO, CHECK_FAILURES_TOTAL, CONFIG_LAST_RELOAD_SUCCESSFUL, E2E_SECONDS, GOODPUT_REQUESTS_TOTAL, IN_FLIGHT_REQUESTS,
    INPUT_TOKENS_TOTAL, INTERNAL_ERRORS_TOTAL, ITL_SECONDS, MULTI_TOKEN_FRAMES_TOTAL, OUTPUT_TOKENS_TOTAL, PROBES_SCHEDULED_TOTAL, PROMPT_CACHED_TOKENS_TOTAL,
    PROMPT_TOKEN_ERROR_RATIO, REASONING_TOKENS_TOTAL, REQUESTS_TOTAL, SCHEDULE_LAG_SECONDS, SERVER_TIME_SECONDS, SLO_OBJECTIVE_RATIO, SLO_THRESHOLD_SECONDS,
    SLO_VIOLATIONS_TOTAL, SOURCE_SCRAPE_DURATION_SECONDS, SOURCE_UP, STREAM_BUFFERED_TOTAL, STREAM_ENCODING_TOTAL, TARGET_INFO,
    TARGET_INFO_CHANGE_TIMESTAMP_SECONDS, TARGET_RATE_PER_SECOND, TOKEN_COUNT_FALLBACK_TOTAL, TOKENS_PER_FRAME, TPOT_SECONDS, TTFC_SECONDS, TTFT_SECONDS,
    WORKLOAD_INFO,
};
use super::detect::DetectFamilies;
use super::labels::{
    BuildLabels, CheckLabels, ComponentLabels, EncodingLabels, PhaseLabels, RequestLabels, SloLabels, SourceLabels, TargetInfoLabels, TargetLabels,
    TraceExemplar, TsLabels, WorkloadLabels, configured_slos, outcome_labels, server_label,
};
use super::registry::{
    FloatGauge, HistogramFamily, InfoFamily, e2e_histogram, histogram_family, info_family, observe_latency, prompt_error_histogram, register,
    schedule_lag_histogram, tokens_per_frame_histogram, touch, tpot_histogram, ttft_histogram,
};
use super::replicas::{ReplicaCountLabels, ReplicaFamilies};
use super::sequence::SequenceFamilies;
use crate::config::{Config, Slo};
use crate::probe::measure::{Sample, TokenSource};
use crate::probe::outcome::{ErrorClass, Outcome};
use crate::protocol::coding::ContentCoding;
use crate::sink::Sink;
use crate::sink::expo::sort_series;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::Mutex;

// ---- Build identity ------------------------------------------------------------------------------

use crate::util::version::{BUILD_REVISION, BUILD_VERSION};

/// Owns the registry and every family of the metric contract.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    scheduled: Family<TsLabels, Counter>,
    internal_errors: Family<ComponentLabels, Counter>,
    check_failures: Family<CheckLabels, Counter>,
    behaviour_changes: Family<TsLabels, Counter>,
    /// The release-regression detector's state and the release markers.
    pub detect: DetectFamilies,
    /// Discovered replicas: info, counts, canary verdicts, outliers.
    pub replicas: ReplicaFamilies,
    /// Conversations' turns and cache pairs.
    sequences: SequenceFamilies,
    goodput: Family<TsLabels, Counter>,
    slo_violations: Family<SloLabels, Counter>,
    ttft: HistogramFamily<TsLabels>,
    ttfc: HistogramFamily<TsLabels>,
    tpot: HistogramFamily<TsLabels>,
    itl: HistogramFamily<TsLabels>,
    e2e: HistogramFamily<TsLabels>,
    input_tokens: Family<TsLabels, Counter>,
    output_tokens: Family<TsLabels, Counter>,
    reasoning_tokens: Family<TsLabels, Counter>,
    cached_tokens: Family<TsLabels, Counter>,
    token_fallback: Family<TsLabels, Counter>,
    tokens_per_frame: Family<TsLabels, Histogram, fn() -> Histogram>,
    multi_token_frames: Family<TsLabels, Counter>,
    stream_buffered: Family<TsLabels, Counter>,
    stream_encoding: Family<EncodingLabels, Counter>,
    server_time: HistogramFamily<PhaseLabels>,
    schedule_lag: Family<TargetLabels, Histogram, fn() -> Histogram>,
    in_flight: Family<TargetLabels, Gauge>,
    target_rate: Family<TsLabels, FloatGauge>,
    slo_threshold: Family<SloLabels, FloatGauge>,
    slo_objective: Family<TsLabels, FloatGauge>,
    target_info: InfoFamily<TargetInfoLabels>,
    /// The current `target_info` label set per target, so a change replaces the old series.
    target_info_current: Mutex<HashMap<String, TargetInfoLabels>>,
    build_info: InfoFamily<BuildLabels>,
    reload_ok: Gauge,
    prompt_error: Family<TsLabels, Histogram, fn() -> Histogram>,
    workload_info: InfoFamily<WorkloadLabels>,
    target_info_change: Family<TargetLabels, FloatGauge>,
    source_up: Family<SourceLabels, Gauge>,
    source_scrape_duration: Family<SourceLabels, FloatGauge>,
    /// Whether traced probes leave exemplars (`tracing.exemplars`); a reload may change it.
    exemplars: std::sync::atomic::AtomicBool,
}

impl Metrics {
    /// Registers every family and pre-creates at zero every series whose labels config determines.
    pub fn new(config: &Config) -> Self {
        let metrics = Self::register_all(config.probe.prober.as_deref());
        metrics.apply_config(config);
        for component in crate::util::health::COMPONENTS {
            touch(&metrics.internal_errors, &ComponentLabels { component: component.to_owned() });
        }
        let build = BuildLabels { version: BUILD_VERSION, revision: BUILD_REVISION };
        touch(&metrics.build_info, &build);
        metrics.reload_ok.set(1);
        metrics
    }

    /// Every family, under the constant label `prober` when this prober has a name.
    fn register_all(prober: Option<&str>) -> Self {
        let labels = prober.map(|p| (std::borrow::Cow::Borrowed("prober"), std::borrow::Cow::Owned(p.to_owned())));
        let mut registry = Registry::with_labels(labels.into_iter());
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            scheduled: Family::default(),
            internal_errors: Family::default(),
            check_failures: Family::default(),
            behaviour_changes: Family::default(),
            detect: DetectFamilies::new(),
            replicas: ReplicaFamilies::new(),
            sequences: SequenceFamilies::new(),
            goodput: Family::default(),
            slo_violations: Family::default(),
            ttft: histogram_family(ttft_histogram),
            ttfc: histogram_family(ttft_histogram),
            tpot: histogram_family(tpot_histogram),
            itl: histogram_family(tpot_histogram),
            e2e: histogram_family(e2e_histogram),
            input_tokens: Family::default(),
            output_tokens: Family::default(),
            reasoning_tokens: Family::default(),
            cached_tokens: Family::default(),
            token_fallback: Family::default(),
            tokens_per_frame: Family::new_with_constructor(tokens_per_frame_histogram),
            multi_token_frames: Family::default(),
            stream_buffered: Family::default(),
            stream_encoding: Family::default(),
            server_time: histogram_family(ttft_histogram),
            schedule_lag: Family::new_with_constructor(schedule_lag_histogram),
            in_flight: Family::default(),
            target_rate: Family::default(),
            slo_threshold: Family::default(),
            slo_objective: Family::default(),
            target_info: info_family(),
            target_info_current: Mutex::new(HashMap::new()),
            build_info: info_family(),
            reload_ok: Gauge::default(),
            prompt_error: Family::new_with_constructor(prompt_error_histogram),
            workload_info: info_family(),
            target_info_change: Family::default(),
            source_up: Family::default(),
            source_scrape_duration: Family::default(),
            exemplars: std::sync::atomic::AtomicBool::new(true),
        };
        let r = &mut registry;
        register(r, REQUESTS_TOTAL, m.requests.clone());
        register(r, PROBES_SCHEDULED_TOTAL, m.scheduled.clone());
        register(r, CHECK_FAILURES_TOTAL, m.check_failures.clone());
        register(r, BEHAVIOUR_CHANGES_TOTAL, m.behaviour_changes.clone());
        register(r, GOODPUT_REQUESTS_TOTAL, m.goodput.clone());
        register(r, SLO_VIOLATIONS_TOTAL, m.slo_violations.clone());
        register(r, TTFT_SECONDS, m.ttft.clone());
        register(r, TTFC_SECONDS, m.ttfc.clone());
        register(r, TPOT_SECONDS, m.tpot.clone());
        register(r, ITL_SECONDS, m.itl.clone());
        register(r, E2E_SECONDS, m.e2e.clone());
        register(r, INPUT_TOKENS_TOTAL, m.input_tokens.clone());
        register(r, OUTPUT_TOKENS_TOTAL, m.output_tokens.clone());
        register(r, REASONING_TOKENS_TOTAL, m.reasoning_tokens.clone());
        register(r, PROMPT_CACHED_TOKENS_TOTAL, m.cached_tokens.clone());
        register(r, TOKEN_COUNT_FALLBACK_TOTAL, m.token_fallback.clone());
        register(r, TOKENS_PER_FRAME, m.tokens_per_frame.clone());
        register(r, MULTI_TOKEN_FRAMES_TOTAL, m.multi_token_frames.clone());
        register(r, STREAM_BUFFERED_TOTAL, m.stream_buffered.clone());
        register(r, STREAM_ENCODING_TOTAL, m.stream_encoding.clone());
        register(r, SERVER_TIME_SECONDS, m.server_time.clone());
        register(r, SCHEDULE_LAG_SECONDS, m.schedule_lag.clone());
        register(r, IN_FLIGHT_REQUESTS, m.in_flight.clone());
        register(r, TARGET_RATE_PER_SECOND, m.target_rate.clone());
        register(r, SLO_THRESHOLD_SECONDS, m.slo_threshold.clone());
        register(r, SLO_OBJECTIVE_RATIO, m.slo_objective.clone());
        register(r, TARGET_INFO, m.target_info.clone());
        register(r, BUILD_INFO, m.build_info.clone());
        register(r, CONFIG_LAST_RELOAD_SUCCESSFUL, m.reload_ok.clone());
        register(r, PROMPT_TOKEN_ERROR_RATIO, m.prompt_error.clone());
        register(r, WORKLOAD_INFO, m.workload_info.clone());
        register(r, TARGET_INFO_CHANGE_TIMESTAMP_SECONDS, m.target_info_change.clone());
        register(r, SOURCE_UP, m.source_up.clone());
        register(r, SOURCE_SCRAPE_DURATION_SECONDS, m.source_scrape_duration.clone());
        register(r, INTERNAL_ERRORS_TOTAL, m.internal_errors.clone());
        m.detect.register(r);
        m.replicas.register(r);
        m.sequences.register(r);
        Metrics { registry, ..m }
    }

    /// Makes the exposition match a (new) config: series of its target×scenario pairs and
    /// sources exist (at zero when new; an unchanged series keeps counting across a reload),
    /// the config gauges hold its values, and `old`'s series that the new config no longer
    /// has are removed.
    pub fn reconfigure(&self, old: &Config, new: &Config) {
        for target in &old.targets {
            let kept = new.targets.iter().find(|t| t.name == target.name);
            for scenario in &old.scenarios {
                let ts = TsLabels::new(&target.name, &scenario.name);
                if kept.is_none() || !new.scenarios.iter().any(|s| s.name == scenario.name) {
                    self.forget_pair(&ts, target.api, scenario);
                    self.detect.forget_row(&ts.target, &ts.scenario);
                } else if let Some(t) = kept {
                    // SLO thresholds or the API may have changed: drop what no longer applies.
                    let (old_slo, new_slo) = (old.slo_for(&target.name, &scenario.name), new.slo_for(&target.name, &scenario.name));
                    for (name, _) in configured_slos(&old_slo) {
                        if !configured_slos(&new_slo).any(|(n, _)| n == name) {
                            self.slo_violations.remove(&ts.slo(name));
                            self.slo_threshold.remove(&ts.slo(name));
                        }
                    }
                    for phase in target.api.server_phases().iter().filter(|p| !t.api.server_phases().contains(p)) {
                        self.server_time.remove(&ts.phase(phase));
                    }
                }
            }
            if kept.is_none() {
                let t = TargetLabels { target: target.name.clone() };
                self.schedule_lag.remove(&t);
                self.in_flight.remove(&t);
                self.target_info_change.remove(&t);
                for coding in ContentCoding::ALL {
                    self.stream_encoding.remove(&EncodingLabels { target: target.name.clone(), encoding: coding.as_str() });
                }
                let info = self.target_info_current.lock().unwrap_or_else(|e| e.into_inner()).remove(&target.name);
                if let Some(labels) = info {
                    self.target_info.remove(&labels);
                }
                self.detect.forget_row(&target.name, "*");
                self.detect.forget_target(&target.name);
            }
        }
        for source in old.sources.iter().filter(|s| !new.sources.iter().any(|n| n.name == s.name)) {
            let labels = SourceLabels { source: source.name.clone() };
            self.source_up.remove(&labels);
            self.source_scrape_duration.remove(&labels);
        }
        self.workload_info.clear();
        self.apply_config(new);
    }

    fn apply_config(&self, config: &Config) {
        self.exemplars.store(config.tracing.exemplars, std::sync::atomic::Ordering::Relaxed);
        for source in &config.sources {
            touch(&self.source_up, &SourceLabels { source: source.name.clone() });
        }
        self.precreate(config);
        self.sequences.precreate(config);
        self.detect.precreate(config);
        self.set_config_gauges(config);
    }

    /// Removes every series of one target×scenario pair.
    fn forget_pair(&self, ts: &TsLabels, api: crate::protocol::ProtocolKind, scenario: &crate::config::Scenario) {
        for class in std::iter::once(None).chain(ErrorClass::ALL.into_iter().map(Some)) {
            let (outcome, error) = outcome_labels(class);
            self.requests.remove(&ts.request(outcome, error));
        }
        for name in ["ttft", "tpot", "e2e"] {
            self.slo_violations.remove(&ts.slo(name));
            self.slo_threshold.remove(&ts.slo(name));
        }
        for family in self.series_counters() {
            family.remove(ts);
        }
        for family in [&self.ttft, &self.ttfc, &self.tpot, &self.itl, &self.e2e] {
            family.remove(ts);
        }
        self.tokens_per_frame.remove(ts);
        for check in crate::checks::Check::ALL {
            self.check_failures.remove(&ts.check(check.as_str()));
        }
        self.behaviour_changes.remove(ts);
        self.prompt_error.remove(ts);
        self.target_rate.remove(ts);
        self.slo_objective.remove(ts);
        for phase in api.server_phases() {
            self.server_time.remove(&ts.phase(phase));
        }
        if ts.replica.is_none() {
            self.sequences.forget(ts, scenario);
        }
    }

    /// Creates a discovered replica's series at zero (every scenario), like a configured pair's.
    pub fn add_replica(&self, config: &Config, target: &str, replica: &str) {
        let Some(t) = config.targets.iter().find(|t| t.name == target) else { return };
        for scenario in &config.scenarios {
            let ts = TsLabels::new(target, &scenario.name).with_replica(Some(replica));
            self.precreate_pair(&ts, config.slo_table().get(target, &scenario.name));
            for phase in t.api.server_phases() {
                touch(&self.server_time, &ts.phase(phase));
            }
        }
    }

    /// A replica's version (and node, zone) as discovered.
    pub fn set_replica_info(&self, target: &str, replica: &str, version: &str, node: &str, zone: &str) {
        self.replicas.set_info(target, replica, version, node, zone);
    }

    /// How many replicas discovery found and how many are probed.
    pub fn set_replica_counts(&self, target: &str, discovered: usize, probed: usize) {
        for (state, n) in [("discovered", discovered), ("probed", probed)] {
            self.replicas.counts.get_or_create(&ReplicaCountLabels { target: target.to_owned(), state }).set(n as i64);
        }
    }

    /// Removes every series of a replica that is gone (after its grace period).
    pub fn forget_replica(&self, config: &Config, target: &str, replica: &str) {
        self.replicas.forget_info(target, replica);
        let Some(t) = config.targets.iter().find(|t| t.name == target) else { return };
        for scenario in &config.scenarios {
            self.forget_pair(&TsLabels::new(target, &scenario.name).with_replica(Some(replica)), t.api, scenario);
        }
    }

    /// Creates at zero every series that can occur, so rates and ratios exist before the first event.
    fn precreate(&self, config: &Config) {
        for target in &config.targets {
            let t = TargetLabels { target: target.name.clone() };
            touch(&self.schedule_lag, &t);
            touch(&self.in_flight, &t);
            for coding in ContentCoding::ALL {
                touch(&self.stream_encoding, &EncodingLabels { target: target.name.clone(), encoding: coding.as_str() });
            }
            for scenario in &config.scenarios {
                let ts = TsLabels::new(&target.name, &scenario.name);
                self.precreate_pair(&ts, &config.slo_for(&target.name, &scenario.name));
                if let Some(checks) = &scenario.checks {
                    for check in crate::checks::configured(checks) {
                        touch(&self.check_failures, &ts.check(check.as_str()));
                    }
                    if checks.fingerprint {
                        touch(&self.behaviour_changes, &ts);
                    }
                }
                if let Some(crate::config::Sequence::Agent(_)) = &scenario.sequence {
                    for check in [crate::checks::Check::ToolCall, crate::checks::Check::AgentLoop] {
                        touch(&self.check_failures, &ts.check(check.as_str()));
                    }
                }
                // Replayed prompts have no requested length, so no error to measure.
                if scenario.dataset.is_none() {
                    touch(&self.prompt_error, &ts);
                }
                for phase in target.api.server_phases() {
                    touch(&self.server_time, &ts.phase(phase));
                }
            }
        }
    }

    fn precreate_pair(&self, ts: &TsLabels, slo: &Slo) {
        let classes = ErrorClass::ALL.into_iter().map(Some);
        for class in std::iter::once(None).chain(classes) {
            let (outcome, error) = outcome_labels(class);
            touch(&self.requests, &ts.request(outcome, error));
        }
        for (name, _) in configured_slos(slo) {
            touch(&self.slo_violations, &ts.slo(name));
        }
        for family in self.series_counters() {
            touch(family, ts);
        }
        for family in [&self.ttft, &self.ttfc, &self.tpot, &self.itl, &self.e2e] {
            touch(family, ts);
        }
        touch(&self.tokens_per_frame, ts);
    }

    fn set_config_gauges(&self, config: &Config) {
        let workload = crate::workload::fingerprint(config);
        for (scenario, scenario_sha256) in workload.scenarios {
            let labels = WorkloadLabels { scenario, sha256: workload.total.clone(), scenario_sha256 };
            touch(&self.workload_info, &labels);
        }
        for target in &config.targets {
            for scenario in &config.scenarios {
                let ts = TsLabels::new(&target.name, &scenario.name);
                self.target_rate.get_or_create(&ts).set(scenario.rate);
                let slo = config.slo_for(&target.name, &scenario.name);
                self.slo_objective.get_or_create(&ts).set(slo.objective);
                for (name, seconds) in configured_slos(&slo) {
                    self.slo_threshold.get_or_create(&ts.slo(name)).set(seconds);
                }
            }
        }
    }

    pub fn set_in_flight(&self, target: &str, n: i64) {
        self.in_flight.get_or_create(&TargetLabels { target: target.to_owned() }).set(n);
    }

    /// Sets `llmprobe_target_info` for a target, removing its previous label set if it differs.
    pub fn set_target_info(&self, target: &str, model: &str, engine: &str, engine_version: &str) {
        let labels = TargetInfoLabels {
            target: target.to_owned(),
            model: server_label(model),
            engine: server_label(engine),
            engine_version: server_label(engine_version),
        };
        let mut current = self.target_info_current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = current.insert(target.to_owned(), labels.clone()) {
            if old != labels {
                self.target_info.remove(&old);
            }
        }
        touch(&self.target_info, &labels);
    }

    /// Marks a release: the target's model or engine version changed at `unix_seconds`.
    pub fn set_target_info_change(&self, target: &str, unix_seconds: f64) {
        self.target_info_change.get_or_create(&TargetLabels { target: target.to_owned() }).set(unix_seconds);
    }

    pub fn set_config_reload_ok(&self, ok: bool) {
        self.reload_ok.set(i64::from(ok));
    }

    /// OpenMetrics text 1.0.0, series sorted within each family, ending with `# EOF`.
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        sort_series(&out)
    }

    /// Prometheus text format 0.0.4 (no `# EOF`, exemplars or `# UNIT`; counters typed under their
    /// `_total` name), from the same registry so both formats always carry the same series.
    pub fn encode_prometheus_text(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_text::encode(&mut out, &self.registry);
        sort_series(&out)
    }

    fn record_sample(&self, ts: &TsLabels, s: &Sample, ex: Option<&TraceExemplar>) {
        // A non-streaming probe has no first token to time: E2E and tokens only.
        if s.streamed {
            self.record_stream_shape(ts, s, ex);
        }
        observe_latency(&self.e2e, ts, s.e2e.as_secs_f64(), ex);
        self.record_tokens(ts, s);
        if s.goodput {
            self.goodput.get_or_create(ts).inc();
        }
        let missed = [("ttft", s.slo_missed.ttft), ("tpot", s.slo_missed.tpot), ("e2e", s.slo_missed.e2e)];
        for (name, _) in missed.into_iter().filter(|(_, m)| *m) {
            self.slo_violations.get_or_create(&ts.slo(name)).inc();
        }
    }

    fn record_stream_shape(&self, ts: &TsLabels, s: &Sample, ex: Option<&TraceExemplar>) {
        observe_latency(&self.ttft, ts, s.ttft.as_secs_f64(), ex);
        if let Some(ttfc) = s.ttfc {
            observe_latency(&self.ttfc, ts, ttfc.as_secs_f64(), ex);
        }
        if let Some(tpot) = s.tpot {
            observe_latency(&self.tpot, ts, tpot.as_secs_f64(), ex);
        }
        for gap in &s.itl {
            observe_latency(&self.itl, ts, gap.as_secs_f64(), ex);
        }
        let per_frame = self.tokens_per_frame.get_or_create(ts);
        for n in &s.tokens_per_frame {
            per_frame.observe(*n);
        }
        self.multi_token_frames.get_or_create(ts).inc_by(s.multi_token_frames);
        if s.buffered {
            self.stream_buffered.get_or_create(ts).inc();
        }
    }

    fn record_server_time(&self, ts: &TsLabels, outcome: &Outcome) {
        // Pre-created only for the phases the target's API reports (`ProtocolKind::server_phases`).
        for (phase, d) in outcome.server_timing.phases() {
            self.server_time.get_or_create(&ts.phase(phase)).observe(d.as_secs_f64(), None, None);
        }
    }

    fn record_tokens(&self, ts: &TsLabels, s: &Sample) {
        self.output_tokens.get_or_create(ts).inc_by(s.output_tokens);
        if let Some(input) = s.input_tokens {
            self.input_tokens.get_or_create(ts).inc_by(input);
        }
        if let Some(n) = s.reasoning_tokens {
            self.reasoning_tokens.get_or_create(ts).inc_by(n);
        }
        if let Some(n) = s.cached_tokens {
            self.cached_tokens.get_or_create(ts).inc_by(n);
        }
        if s.token_source == TokenSource::Events {
            self.token_fallback.get_or_create(ts).inc();
        }
    }
}

impl Metrics {
    /// The per-series counters made and forgotten together with a target × scenario's series.
    fn series_counters(&self) -> [&Family<TsLabels, Counter>; 9] {
        [
            &self.scheduled,
            &self.goodput,
            &self.input_tokens,
            &self.output_tokens,
            &self.reasoning_tokens,
            &self.cached_tokens,
            &self.token_fallback,
            &self.multi_token_frames,
            &self.stream_buffered,
        ]
    }
}

impl Sink for Metrics {
    fn event(&self, event: &super::super::Event) {
        use super::super::Event::*;
        match *event {
            Identity { target, model, engine, engine_version } => self.set_target_info(target, model, engine, engine_version),
            Release { target, version, source, at, .. } => {
                if source == "discovery" {
                    self.set_target_info_change(target, at);
                }
                self.detect.set_release(target, version, source, at);
            }
            ReplicaCounts { target, discovered, probed } => self.set_replica_counts(target, discovered, probed),
            ReplicaAdded { config, target, replica } => self.add_replica(config, target, replica),
            ReplicaVersion { target, replica, version, node, zone } => self.set_replica_info(target, replica, version, node, zone),
            ReplicaGone { config, target, replica } => self.forget_replica(config, target, replica),
            SequenceCut { target, scenario, reason, probes } => self.sequences.cut(target, scenario, reason, probes),
            ReplicaMoved { target, scenario } => self.sequences.moved(target, scenario),
            AgentLoop { target, scenario, result, seconds, .. } => self.sequences.agent_loop(target, scenario, result, seconds),
        }
    }

    fn scheduled(&self, target: &str, scenario: &str, replica: Option<&str>) {
        self.scheduled.get_or_create(&TsLabels::new(target, scenario).with_replica(replica)).inc();
    }

    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let ts = TsLabels::new(&outcome.target, &outcome.scenario).with_replica(outcome.replica.as_deref());
        let class = outcome.error_class();
        if class == Some(ErrorClass::Internal) {
            crate::util::health::ErrorCounter::count_internal_error(self, "probe");
        }
        let (outcome_label, error_label) = outcome_labels(class);
        self.requests.get_or_create(&ts.request(outcome_label, error_label)).inc();
        if let Some(report) = &outcome.checks {
            for failed in &report.failed {
                self.check_failures.get_or_create(&ts.check(failed.check.as_str())).inc();
            }
            if report.changed_from.is_some() {
                self.behaviour_changes.get_or_create(&ts).inc();
            }
        }
        if let Some(coding) = outcome.content_encoding {
            self.stream_encoding.get_or_create(&EncodingLabels { target: ts.target.clone(), encoding: coding.as_str() }).inc();
        }
        // A dropped probe was never sent, so it has no send time to lag.
        if class != Some(ErrorClass::InFlightCap) {
            let lag = outcome.timeline.schedule_lag().as_secs_f64();
            let target = TargetLabels { target: ts.target.clone() };
            self.schedule_lag.get_or_create(&target).observe(lag);
        }
        if let Some(s) = sample.filter(|_| outcome.is_success()) {
            // Only a sampled trace is exported, so only it is worth linking to.
            let exemplar = outcome
                .trace
                .filter(|ids| self.exemplars.load(std::sync::atomic::Ordering::Relaxed) && ids.sampled)
                .map(|ids| TraceExemplar::new(&ids.trace_hex(), &ids.span_hex()));
            self.record_sample(&ts, s, exemplar.as_ref());
            self.record_server_time(&ts, outcome);
        }
        if let Some(step) = &outcome.step {
            let exemplar = outcome
                .trace
                .filter(|ids| self.exemplars.load(std::sync::atomic::Ordering::Relaxed) && ids.sampled)
                .map(|ids| TraceExemplar::new(&ids.trace_hex(), &ids.span_hex()));
            self.sequences.record(outcome, step, sample, exemplar.as_ref());
        }
        if let (Some(usage), true) = (outcome.usage, outcome.requested_input_tokens > 0 && outcome.is_success()) {
            let requested = f64::from(outcome.requested_input_tokens);
            let error = (usage.prompt_tokens as f64 - requested) / requested;
            self.prompt_error.get_or_create(&ts).observe(error);
        }
    }
}

impl crate::util::health::ErrorCounter for Metrics {
    fn count_internal_error(&self, component: &str) {
        self.internal_errors.get_or_create(&ComponentLabels { component: component.to_owned() }).inc();
    }
}

impl crate::source::scrape::ScrapeReport for Metrics {
    fn scraped(&self, source: &str, up: bool, seconds: f64) {
        let labels = SourceLabels { source: source.to_owned() };
        self.source_up.get_or_create(&labels).set(i64::from(up));
        self.source_scrape_duration.get_or_create(&labels).set(seconds);
    }
}
