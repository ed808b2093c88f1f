//! The metric contract (`METRICS.md`): every exported name, help text, label set and bucket layout
//! lives here and nowhere else. `Metrics` owns the registry, pre-creates every series whose labels
//! are known from config, records probes as a `Sink`, and encodes OpenMetrics or Prometheus text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, prometheus_text, text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry, Unit};

use super::Sink;
use super::expo::sort_series;
use crate::config::{Config, Slo};
use crate::measure::{Sample, TokenSource};
use crate::outcome::{ErrorClass, Outcome};
use crate::protocol::coding::ContentCoding;

// ---- Families: exported names and help texts ----------------------------------------------------

/// One exported family: its name exactly as scraped (counters with `_total`) and its help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilySpec {
    pub name: &'static str,
    pub help: &'static str,
}

pub const REQUESTS_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_requests_total", help: "Scheduled probes by outcome and error class; every probe lands here once" };
pub const PROBES_SCHEDULED_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_probes_scheduled_total", help: "Probes scheduled; scheduled minus requests_total is what is in flight (or lost)" };
pub const INTERNAL_ERRORS_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_internal_errors_total", help: "Internal errors the prober caught in one of its own components (a bug; probing went on)" };
pub const GOODPUT_REQUESTS_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_goodput_requests_total", help: "Probes that succeeded and met every configured SLO threshold" };
pub const SLO_VIOLATIONS_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_slo_violations_total", help: "Successful probes that missed the given SLO threshold" };
pub const TTFT_SECONDS: FamilySpec =
    FamilySpec { name: "llmprobe_ttft_seconds", help: "Time from request sent to the first generated text (content or reasoning)" };
pub const TPOT_SECONDS: FamilySpec =
    FamilySpec { name: "llmprobe_tpot_seconds", help: "Time per output token after the first: (E2E - TTFT) / (output tokens - 1)" };
pub const ITL_SECONDS: FamilySpec = FamilySpec { name: "llmprobe_itl_seconds", help: "Gaps between consecutive text-bearing frames" };
pub const E2E_SECONDS: FamilySpec = FamilySpec { name: "llmprobe_e2e_seconds", help: "Time from request sent to the end of the stream" };
pub const INPUT_TOKENS_TOTAL: FamilySpec = FamilySpec { name: "llmprobe_input_tokens_total", help: "Prompt tokens reported by the server's usage" };
pub const OUTPUT_TOKENS_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_output_tokens_total", help: "Output tokens of successful probes (usage, else counted frames)" };
pub const TOKEN_COUNT_FALLBACK_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_token_count_fallback_total", help: "Successful probes without usage whose tokens were counted from frames" };
pub const TTFC_SECONDS: FamilySpec = FamilySpec {
    name: "llmprobe_ttfc_seconds",
    help: "Time from request sent to the first answer content (after any reasoning); equals TTFT without reasoning",
};
pub const TOKENS_PER_FRAME: FamilySpec =
    FamilySpec { name: "llmprobe_tokens_per_frame", help: "Output tokens per text-bearing frame (per frame where the API says, else the probe's mean)" };
pub const MULTI_TOKEN_FRAMES_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_multi_token_frames_total", help: "Text-bearing frames that carried more than one token (ITL is per frame)" };
pub const STREAM_BUFFERED_TOTAL: FamilySpec =
    FamilySpec { name: "llmprobe_stream_buffered_total", help: "Successful streams whose text arrived in one burst at the end (fake streaming)" };
pub const SERVER_TIME_SECONDS: FamilySpec =
    FamilySpec { name: "llmprobe_server_time_seconds", help: "Time the server reported for a phase of the request (queue, prefill, decode, total, load)" };
pub const SCHEDULE_LAG_SECONDS: FamilySpec =
    FamilySpec { name: "llmprobe_schedule_lag_seconds", help: "Delay from a probe's scheduled time to its send time (prober health)" };
pub const IN_FLIGHT_REQUESTS: FamilySpec = FamilySpec { name: "llmprobe_in_flight_requests", help: "Probes currently in flight" };
pub const TARGET_RATE_PER_SECOND: FamilySpec = FamilySpec { name: "llmprobe_target_rate_per_second", help: "Configured arrival rate in probes per second" };
pub const SLO_THRESHOLD_SECONDS: FamilySpec = FamilySpec { name: "llmprobe_slo_threshold_seconds", help: "Configured SLO threshold" };
pub const SLO_OBJECTIVE_RATIO: FamilySpec = FamilySpec { name: "llmprobe_slo_objective_ratio", help: "Configured goodput objective" };
pub const TARGET_INFO: FamilySpec = FamilySpec { name: "llmprobe_target_info", help: "Model and engine discovered on the target; a change marks a release" };
pub const BUILD_INFO: FamilySpec = FamilySpec { name: "llmprobe_build_info", help: "llmprobe build" };
pub const PROMPT_TOKEN_ERROR_RATIO: FamilySpec = FamilySpec {
    name: "llmprobe_prompt_token_error_ratio",
    help: "Signed relative error of server-counted prompt tokens vs requested, (usage - requested) / requested",
};
pub const WORKLOAD_INFO: FamilySpec = FamilySpec { name: "llmprobe_workload_info", help: "SHA-256 of the whole workload spec and of each scenario's" };
pub const CONFIG_LAST_RELOAD_SUCCESSFUL: FamilySpec =
    FamilySpec { name: "llmprobe_config_last_reload_successful", help: "Whether the last configuration (re)load succeeded" };
pub const TARGET_INFO_CHANGE_TIMESTAMP_SECONDS: FamilySpec = FamilySpec {
    name: "llmprobe_target_info_change_timestamp_seconds",
    help: "Unix time the target's model or engine version last changed (a release marker)",
};
pub const SOURCE_UP: FamilySpec = FamilySpec { name: "llmprobe_source_up", help: "Whether the last scrape of a telemetry source succeeded" };
pub const SOURCE_SCRAPE_DURATION_SECONDS: FamilySpec =
    FamilySpec { name: "llmprobe_source_scrape_duration_seconds", help: "Duration of the last scrape of a telemetry source" };
pub const STREAM_ENCODING_TOTAL: FamilySpec = FamilySpec {
    name: "llmprobe_stream_encoding_total",
    help: "2xx responses by the content coding their body came in (identity, gzip, deflate), asked for or not",
};

pub const DETECT_STATE: FamilySpec = FamilySpec {
    name: "llmprobe_detect_state",
    help: "Release-regression detector state per target, scenario (* = all pooled) and signal: 1 for the current state",
};
pub const DETECT_LATENCY_RATIO: FamilySpec = FamilySpec {
    name: "llmprobe_detect_latency_ratio",
    help: "Detector effect estimate: post/pre-release ratio of the latency median or p95, with its 95% interval",
};
pub const DETECT_BAD_FRACTION_DELTA: FamilySpec = FamilySpec {
    name: "llmprobe_detect_bad_fraction_delta",
    help: "Detector effect estimate: post minus pre-release share of probes that missed goodput, with its 95% interval",
};
pub const DETECT_EVIDENCE: FamilySpec = FamilySpec {
    name: "llmprobe_detect_evidence",
    help: "Detector evidence: ln of the release test's likelihood ratio (regressed at llmprobe_detect_threshold)",
};
pub const DETECT_THRESHOLD: FamilySpec =
    FamilySpec { name: "llmprobe_detect_threshold", help: "Detector evidence threshold, ln(1/alpha) of the signal's share of the false-alarm budget" };
pub const DETECT_SAMPLES: FamilySpec =
    FamilySpec { name: "llmprobe_detect_samples", help: "Probes since the last release marker that entered the detector's test" };
pub const RELEASE_INFO: FamilySpec =
    FamilySpec { name: "llmprobe_release_info", help: "The target's last release marker: version and where it came from (discovery, api)" };
pub const RELEASE_TIMESTAMP_SECONDS: FamilySpec =
    FamilySpec { name: "llmprobe_release_timestamp_seconds", help: "Unix time of the target's last release marker (discovery change, POST /api/v1/releases)" };

pub const REPLICA_INFO: FamilySpec =
    FamilySpec { name: "llmprobe_replica_info", help: "A probed replica of a target: its version (pod label or its own discovery), node and zone" };
pub const REPLICAS: FamilySpec = FamilySpec { name: "llmprobe_replicas", help: "Replicas of a target by state: discovered, or probed (at most replicas.max)" };
pub const CANARY_STATE: FamilySpec = FamilySpec {
    name: "llmprobe_canary_state",
    help: "During a rollout, the newest version against the others over the same window: 1 for the current state (ok, regressed)",
};
pub const CANARY_EFFECT: FamilySpec = FamilySpec {
    name: "llmprobe_canary_effect",
    help: "Canary effect: new/old latency ratio (geometric mean) or bad-fraction difference, with its 95% interval",
};
pub const CANARY_EVIDENCE: FamilySpec =
    FamilySpec { name: "llmprobe_canary_evidence", help: "Canary evidence: ln likelihood ratio of the comparison; regressed at ln(1/alpha)" };
pub const REPLICA_OUTLIER: FamilySpec = FamilySpec {
    name: "llmprobe_replica_outlier",
    help: "1 when a replica is significantly worse than its peers of the same version over the last 15 minutes",
};

/// Every family this module exports, in exposition order (for docs and dashboard/alert checks).
pub const ALL_FAMILIES: [FamilySpec; 45] = [
    REQUESTS_TOTAL,
    PROBES_SCHEDULED_TOTAL,
    GOODPUT_REQUESTS_TOTAL,
    SLO_VIOLATIONS_TOTAL,
    TTFT_SECONDS,
    TTFC_SECONDS,
    TPOT_SECONDS,
    ITL_SECONDS,
    E2E_SECONDS,
    INPUT_TOKENS_TOTAL,
    OUTPUT_TOKENS_TOTAL,
    TOKEN_COUNT_FALLBACK_TOTAL,
    TOKENS_PER_FRAME,
    MULTI_TOKEN_FRAMES_TOTAL,
    STREAM_BUFFERED_TOTAL,
    STREAM_ENCODING_TOTAL,
    SERVER_TIME_SECONDS,
    SCHEDULE_LAG_SECONDS,
    IN_FLIGHT_REQUESTS,
    TARGET_RATE_PER_SECOND,
    SLO_THRESHOLD_SECONDS,
    SLO_OBJECTIVE_RATIO,
    TARGET_INFO,
    BUILD_INFO,
    CONFIG_LAST_RELOAD_SUCCESSFUL,
    PROMPT_TOKEN_ERROR_RATIO,
    WORKLOAD_INFO,
    TARGET_INFO_CHANGE_TIMESTAMP_SECONDS,
    SOURCE_UP,
    SOURCE_SCRAPE_DURATION_SECONDS,
    INTERNAL_ERRORS_TOTAL,
    DETECT_STATE,
    DETECT_LATENCY_RATIO,
    DETECT_BAD_FRACTION_DELTA,
    DETECT_EVIDENCE,
    DETECT_THRESHOLD,
    DETECT_SAMPLES,
    RELEASE_INFO,
    RELEASE_TIMESTAMP_SECONDS,
    REPLICA_INFO,
    REPLICAS,
    CANARY_STATE,
    CANARY_EFFECT,
    CANARY_EVIDENCE,
    REPLICA_OUTLIER,
];

// ---- Buckets (seconds) -------------------------------------------------------------------------

pub const TTFT_BUCKETS: [f64; 23] =
    [0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
/// Shared by TPOT and ITL.
pub const TPOT_BUCKETS: [f64; 19] = [0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5];
pub const E2E_BUCKETS: [f64; 20] = [0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 240.0, 480.0];
/// Tokens per frame: 1 is plain token-by-token streaming; more is speculative decoding or
/// server-side batching of frames.
pub const TOKENS_PER_FRAME_BUCKETS: [f64; 10] = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0];
/// The server phases in `llmprobe_server_time_seconds{phase}`.
pub const SERVER_PHASES: [&str; 5] = ["queue", "prefill", "decode", "total", "load"];
pub const SCHEDULE_LAG_BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

/// Signed ratio buckets, symmetric around 0: ±0.5%, ±1%, ±2% (the accuracy target), ±5%, ±10%, ±25%.
pub const PROMPT_TOKEN_ERROR_BUCKETS: [f64; 13] = [-0.25, -0.1, -0.05, -0.02, -0.01, -0.005, 0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25];

// ---- Build identity ------------------------------------------------------------------------------

use crate::version::{BUILD_REVISION, BUILD_VERSION};

// ---- Label sets ----------------------------------------------------------------------------------

/// target × scenario, and for a target whose replicas are discovered the `replica` (pod name or
/// `ip:port`). Without discovery there is no `replica` label at all, so those series keep the
/// shape they always had; with it, every per-probe series is per replica and the target's
/// aggregate is their sum.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct TsLabels {
    target: String,
    scenario: String,
    replica: Option<String>,
}

/// Encodes `target`, `scenario`, `replica` (only when set), then `extra`.
fn encode_ts(ts: &TsLabels, extra: &[(&str, &str)], encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
    use prometheus_client::encoding::EncodeLabel;
    ("target", ts.target.as_str()).encode(encoder.encode_label())?;
    ("scenario", ts.scenario.as_str()).encode(encoder.encode_label())?;
    if let Some(r) = &ts.replica {
        ("replica", r.as_str()).encode(encoder.encode_label())?;
    }
    for label in extra {
        label.encode(encoder.encode_label())?;
    }
    Ok(())
}

impl EncodeLabelSet for TsLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(self, &[], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct RequestLabels {
    ts: TsLabels,
    outcome: &'static str,
    error: &'static str,
}

impl EncodeLabelSet for RequestLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("outcome", self.outcome), ("error", self.error)], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct SloLabels {
    ts: TsLabels,
    slo: &'static str,
}

impl EncodeLabelSet for SloLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("slo", self.slo)], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct PhaseLabels {
    ts: TsLabels,
    phase: &'static str,
}

impl EncodeLabelSet for PhaseLabels {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelSetEncoder) -> std::fmt::Result {
        encode_ts(&self.ts, &[("phase", self.phase)], encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabels {
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EncodingLabels {
    target: String,
    encoding: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetInfoLabels {
    target: String,
    model: String,
    engine: String,
    engine_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkloadLabels {
    scenario: String,
    sha256: String,
    scenario_sha256: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComponentLabels {
    component: String,
}

/// Longest label value taken from a server (model id, engine, version); longer ones are cut,
/// so a hostile or buggy server cannot blow up series size.
pub const MAX_SERVER_LABEL_CHARS: usize = 128;

fn server_label(value: &str) -> String {
    value.chars().take(MAX_SERVER_LABEL_CHARS).collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

/// Exemplar labels linking a latency observation to its trace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceExemplar {
    trace_id: String,
    span_id: String,
}

/// OpenMetrics caps an exemplar's label names and values at 128 UTF-8 characters in all.
pub const EXEMPLAR_MAX_CHARS: usize = 128;

impl TraceExemplar {
    /// Builds the exemplar, cutting values so names plus values stay within the limit (W3C ids
    /// use 63 characters, so this only bites for foreign id formats).
    pub fn new(trace_id: &str, span_id: &str) -> TraceExemplar {
        let names = "trace_id".len() + "span_id".len();
        let budget = EXEMPLAR_MAX_CHARS - names;
        let trace_id: String = trace_id.chars().take(budget).collect();
        let span_id: String = span_id.chars().take(budget - trace_id.chars().count()).collect();
        TraceExemplar { trace_id, span_id }
    }

    pub fn chars(&self) -> usize {
        "trace_id".len() + "span_id".len() + self.trace_id.chars().count() + self.span_id.chars().count()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    revision: &'static str,
}

impl TsLabels {
    fn new(target: &str, scenario: &str) -> Self {
        TsLabels { target: target.to_owned(), scenario: scenario.to_owned(), replica: None }
    }

    fn with_replica(self, replica: Option<&str>) -> Self {
        TsLabels { replica: replica.map(str::to_owned), ..self }
    }

    fn request(&self, outcome: &'static str, error: &'static str) -> RequestLabels {
        RequestLabels { ts: self.clone(), outcome, error }
    }

    fn phase(&self, phase: &'static str) -> PhaseLabels {
        PhaseLabels { ts: self.clone(), phase }
    }

    fn slo(&self, slo: &'static str) -> SloLabels {
        SloLabels { ts: self.clone(), slo }
    }
}

/// `(outcome, error)` label values of a finished probe.
fn outcome_labels(class: Option<ErrorClass>) -> (&'static str, &'static str) {
    match class {
        None => ("success", "none"),
        Some(c) => (c.outcome_label(), c.as_str()),
    }
}

/// The `slo` label values with their configured thresholds, only those that are set.
fn configured_slos(slo: &Slo) -> impl Iterator<Item = (&'static str, f64)> + '_ {
    [("ttft", slo.ttft), ("tpot", slo.tpot), ("e2e", slo.e2e)].into_iter().filter_map(|(name, limit)| limit.map(|l| (name, l.as_secs_f64())))
}

// ---- Families ------------------------------------------------------------------------------------

/// The latency histogram type: observations of traced probes carry a `trace_id`/`span_id` exemplar.
type LatencyHistogram = HistogramWithExemplars<TraceExemplar>;
type HistogramFamily<L> = Family<L, LatencyHistogram, fn() -> LatencyHistogram>;
type FloatGauge = Gauge<f64, AtomicU64>;
/// An `info` family: OpenMetrics `# TYPE x info` with samples `x_info{...} 1`; Prometheus text
/// 0.0.4 has no info type and gets a gauge named `x_info`, so the scraped series name is the same
/// in both. The labels are the family's; the info value itself carries none. Series come and go
/// with the family (a release replaces `target_info`, a reload `workload_info`).
type InfoFamily<L> = Family<L, Info<Vec<(String, String)>>, fn() -> Info<Vec<(String, String)>>>;

fn info() -> Info<Vec<(String, String)>> {
    Info::new(Vec::new())
}

fn info_family<L: Clone + std::hash::Hash + Eq>() -> InfoFamily<L> {
    Family::new_with_constructor(info)
}

fn ttft_histogram() -> LatencyHistogram {
    LatencyHistogram::new(TTFT_BUCKETS.into_iter())
}
fn tpot_histogram() -> LatencyHistogram {
    LatencyHistogram::new(TPOT_BUCKETS.into_iter())
}
fn e2e_histogram() -> LatencyHistogram {
    LatencyHistogram::new(E2E_BUCKETS.into_iter())
}
fn tokens_per_frame_histogram() -> Histogram {
    Histogram::new(TOKENS_PER_FRAME_BUCKETS)
}
fn schedule_lag_histogram() -> Histogram {
    Histogram::new(SCHEDULE_LAG_BUCKETS)
}
fn prompt_error_histogram() -> Histogram {
    Histogram::new(PROMPT_TOKEN_ERROR_BUCKETS)
}

fn histogram_family<L>(make: fn() -> LatencyHistogram) -> HistogramFamily<L>
where
    L: Clone + std::hash::Hash + Eq,
{
    Family::new_with_constructor(make)
}

/// Creates a series at its zero value without touching it otherwise.
fn touch<L, M, C>(family: &Family<L, M, C>, labels: &L)
where
    L: Clone + std::hash::Hash + Eq,
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    drop(family.get_or_create(labels));
}

/// Exemplars go without a timestamp (optional in OpenMetrics; Prometheus uses the scrape time),
/// which keeps the exposition deterministic.
fn observe_latency(family: &HistogramFamily<TsLabels>, labels: &TsLabels, seconds: f64, exemplar: Option<&TraceExemplar>) {
    family.get_or_create(labels).observe(seconds, exemplar.cloned(), None);
}

/// Registers under the exported name: prometheus-client appends `_total` to counters and the unit
/// suffix itself, so both are stripped here to keep the constants above the single source of truth.
fn register(registry: &mut Registry, spec: FamilySpec, metric: impl Metric) {
    let FamilySpec { name, help } = spec;
    if matches!(metric.metric_type(), MetricType::Info) {
        // The encoder appends `_info` to an info family's samples.
        registry.register(name.strip_suffix("_info").unwrap_or(name), help, metric);
    } else if let Some(base) = name.strip_suffix("_seconds") {
        registry.register_with_unit(base, help, Unit::Seconds, metric);
    } else {
        registry.register(name.strip_suffix("_total").unwrap_or(name), help, metric);
    }
}

// ---- Detector families ---------------------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetectStateLabels {
    pub target: String,
    pub scenario: String,
    pub signal: &'static str,
    pub state: &'static str,
}

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
    pub state: Family<DetectStateLabels, Gauge>,
    pub latency_ratio: Family<DetectRatioLabels, FloatGauge>,
    pub bad_delta: Family<DetectDeltaLabels, FloatGauge>,
    pub evidence: Family<DetectSignalLabels, FloatGauge>,
    pub threshold: Family<DetectSignalLabels, FloatGauge>,
    pub samples: Family<DetectSignalLabels, Gauge>,
    release_info: InfoFamily<ReleaseLabels>,
    release_current: std::sync::Arc<Mutex<HashMap<String, ReleaseLabels>>>,
    release_timestamp: Family<TargetLabels, FloatGauge>,
}

impl DetectFamilies {
    fn new() -> Self {
        DetectFamilies {
            state: Family::default(),
            latency_ratio: Family::default(),
            bad_delta: Family::default(),
            evidence: Family::default(),
            threshold: Family::default(),
            samples: Family::default(),
            release_info: info_family(),
            release_current: Default::default(),
            release_timestamp: Family::default(),
        }
    }

    fn register(&self, r: &mut Registry) {
        register(r, DETECT_STATE, self.state.clone());
        register(r, DETECT_LATENCY_RATIO, self.latency_ratio.clone());
        register(r, DETECT_BAD_FRACTION_DELTA, self.bad_delta.clone());
        register(r, DETECT_EVIDENCE, self.evidence.clone());
        register(r, DETECT_THRESHOLD, self.threshold.clone());
        register(r, DETECT_SAMPLES, self.samples.clone());
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

    /// Every detector row a config can have, at its starting value (watching, no evidence, no
    /// estimate yet), so rules and dashboards see the series before the first probe. Rows
    /// are the target's pooled one (`scenario="*"`) and one per scenario, for each signal.
    fn precreate(&self, config: &Config) {
        if !config.detect.enabled {
            return;
        }
        for target in &config.targets {
            let rows = std::iter::once("*").chain(config.scenarios.iter().map(|s| s.name.as_str()));
            for scenario in rows {
                for signal in ["ttft", "tpot", "e2e", "goodput"] {
                    for state in ["watching", "regressed", "recovered"] {
                        let labels = DetectStateLabels { target: target.name.clone(), scenario: scenario.to_owned(), signal, state };
                        self.state.get_or_create(&labels).set(i64::from(state == "watching"));
                    }
                    let sig = DetectSignalLabels { target: target.name.clone(), scenario: scenario.to_owned(), signal };
                    touch(&self.evidence, &sig);
                    touch(&self.samples, &sig);
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
        for signal in ["ttft", "tpot", "e2e", "goodput"] {
            for state in ["watching", "regressed", "recovered"] {
                self.state.remove(&DetectStateLabels { target: target.to_owned(), scenario: scenario.to_owned(), signal, state });
            }
            let sig = DetectSignalLabels { target: target.to_owned(), scenario: scenario.to_owned(), signal };
            self.evidence.remove(&sig);
            self.threshold.remove(&sig);
            self.samples.remove(&sig);
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
    }
}

// ---- Replica families ----------------------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaInfoLabels {
    pub target: String,
    pub replica: String,
    pub version: String,
    pub node: String,
    pub zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaCountLabels {
    pub target: String,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryLabels {
    pub target: String,
    pub version: String,
    pub signal: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryStateLabels {
    pub target: String,
    pub version: String,
    pub signal: String,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryEffectLabels {
    pub target: String,
    pub version: String,
    pub signal: String,
    pub bound: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutlierLabels {
    pub target: String,
    pub replica: String,
    pub signal: String,
}

/// Replica state: info, counts, canary verdicts and outliers (`replicas.rs`, `sink/replicas.rs`).
#[derive(Debug, Clone)]
pub struct ReplicaFamilies {
    info: InfoFamily<ReplicaInfoLabels>,
    info_current: std::sync::Arc<Mutex<HashMap<(String, String), ReplicaInfoLabels>>>,
    counts: Family<ReplicaCountLabels, Gauge>,
    canary_state: Family<CanaryStateLabels, Gauge>,
    canary_effect: Family<CanaryEffectLabels, FloatGauge>,
    canary_evidence: Family<CanaryLabels, FloatGauge>,
    /// Canary series per target, to clear them when the rollout ends.
    canary_current: std::sync::Arc<Mutex<HashMap<String, Vec<CanaryLabels>>>>,
    outlier: Family<OutlierLabels, Gauge>,
}

impl ReplicaFamilies {
    fn new() -> Self {
        ReplicaFamilies {
            info: info_family(),
            info_current: Default::default(),
            counts: Family::default(),
            canary_state: Family::default(),
            canary_effect: Family::default(),
            canary_evidence: Family::default(),
            canary_current: Default::default(),
            outlier: Family::default(),
        }
    }

    fn register(&self, r: &mut Registry) {
        register(r, REPLICA_INFO, self.info.clone());
        register(r, REPLICAS, self.counts.clone());
        register(r, CANARY_STATE, self.canary_state.clone());
        register(r, CANARY_EFFECT, self.canary_effect.clone());
        register(r, CANARY_EVIDENCE, self.canary_evidence.clone());
        register(r, REPLICA_OUTLIER, self.outlier.clone());
    }

    /// The canary verdict of `version` on `signal`.
    pub fn set_canary(&self, target: &str, version: &str, signal: &str, v: &crate::detect::compare::Verdict) {
        let (regressed, effect, evidence) = (v.regressed, v.effect, v.log_evidence);
        let labels = CanaryLabels { target: target.to_owned(), version: server_label(version), signal: signal.to_owned() };
        for state in ["ok", "regressed"] {
            let l = CanaryStateLabels { target: labels.target.clone(), version: labels.version.clone(), signal: labels.signal.clone(), state };
            self.canary_state.get_or_create(&l).set(i64::from((state == "regressed") == regressed));
        }
        let e = effect.unwrap_or(crate::detect::Estimate { value: f64::NAN, low: f64::NAN, high: f64::NAN });
        for (bound, v) in [("estimate", e.value), ("low", e.low), ("high", e.high)] {
            let l = CanaryEffectLabels { target: labels.target.clone(), version: labels.version.clone(), signal: labels.signal.clone(), bound };
            self.canary_effect.get_or_create(&l).set(v);
        }
        self.canary_evidence.get_or_create(&labels).set(evidence);
        let mut current = self.canary_current.lock().unwrap_or_else(|e| e.into_inner());
        let list = current.entry(target.to_owned()).or_default();
        if !list.contains(&labels) {
            list.push(labels);
        }
    }

    /// The rollout ended: the target's canary series go.
    pub fn clear_canary(&self, target: &str) {
        let Some(list) = self.canary_current.lock().unwrap_or_else(|e| e.into_inner()).remove(target) else { return };
        for l in list {
            for state in ["ok", "regressed"] {
                self.canary_state.remove(&CanaryStateLabels { target: l.target.clone(), version: l.version.clone(), signal: l.signal.clone(), state });
            }
            for bound in ["estimate", "low", "high"] {
                self.canary_effect.remove(&CanaryEffectLabels { target: l.target.clone(), version: l.version.clone(), signal: l.signal.clone(), bound });
            }
            self.canary_evidence.remove(&l);
        }
    }

    pub fn set_outlier(&self, target: &str, replica: &str, signal: &str, outlier: bool) {
        self.outlier
            .get_or_create(&OutlierLabels { target: target.to_owned(), replica: replica.to_owned(), signal: signal.to_owned() })
            .set(i64::from(outlier));
    }

    pub fn forget_outlier(&self, target: &str, replica: &str) {
        for signal in ["ttft", "e2e", "goodput"] {
            self.outlier.remove(&OutlierLabels { target: target.to_owned(), replica: replica.to_owned(), signal: signal.to_owned() });
        }
    }

    fn set_info(&self, target: &str, replica: &str, version: &str, node: &str, zone: &str) {
        let labels = ReplicaInfoLabels {
            target: target.to_owned(),
            replica: replica.to_owned(),
            version: server_label(version),
            node: server_label(node),
            zone: server_label(zone),
        };
        let mut current = self.info_current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = current.insert((target.to_owned(), replica.to_owned()), labels.clone()) {
            if old != labels {
                self.info.remove(&old);
            }
        }
        touch(&self.info, &labels);
    }

    fn forget_info(&self, target: &str, replica: &str) {
        if let Some(old) = self.info_current.lock().unwrap_or_else(|e| e.into_inner()).remove(&(target.to_owned(), replica.to_owned())) {
            self.info.remove(&old);
        }
    }
}

/// Owns the registry and every family of the metric contract.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    scheduled: Family<TsLabels, Counter>,
    internal_errors: Family<ComponentLabels, Counter>,
    /// The release-regression detector's state and the release markers.
    pub detect: DetectFamilies,
    /// Discovered replicas: info, counts, canary verdicts, outliers.
    pub replicas: ReplicaFamilies,
    goodput: Family<TsLabels, Counter>,
    slo_violations: Family<SloLabels, Counter>,
    ttft: HistogramFamily<TsLabels>,
    ttfc: HistogramFamily<TsLabels>,
    tpot: HistogramFamily<TsLabels>,
    itl: HistogramFamily<TsLabels>,
    e2e: HistogramFamily<TsLabels>,
    input_tokens: Family<TsLabels, Counter>,
    output_tokens: Family<TsLabels, Counter>,
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
        for component in crate::health::COMPONENTS {
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
            detect: DetectFamilies::new(),
            replicas: ReplicaFamilies::new(),
            goodput: Family::default(),
            slo_violations: Family::default(),
            ttft: histogram_family(ttft_histogram),
            ttfc: histogram_family(ttft_histogram),
            tpot: histogram_family(tpot_histogram),
            itl: histogram_family(tpot_histogram),
            e2e: histogram_family(e2e_histogram),
            input_tokens: Family::default(),
            output_tokens: Family::default(),
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
        register(r, GOODPUT_REQUESTS_TOTAL, m.goodput.clone());
        register(r, SLO_VIOLATIONS_TOTAL, m.slo_violations.clone());
        register(r, TTFT_SECONDS, m.ttft.clone());
        register(r, TTFC_SECONDS, m.ttfc.clone());
        register(r, TPOT_SECONDS, m.tpot.clone());
        register(r, ITL_SECONDS, m.itl.clone());
        register(r, E2E_SECONDS, m.e2e.clone());
        register(r, INPUT_TOKENS_TOTAL, m.input_tokens.clone());
        register(r, OUTPUT_TOKENS_TOTAL, m.output_tokens.clone());
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
                    self.forget_pair(&ts, target.api);
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
        self.detect.precreate(config);
        self.set_config_gauges(config);
    }

    /// Removes every series of one target×scenario pair.
    fn forget_pair(&self, ts: &TsLabels, api: crate::protocol::ProtocolKind) {
        for class in std::iter::once(None).chain(ErrorClass::ALL.into_iter().map(Some)) {
            let (outcome, error) = outcome_labels(class);
            self.requests.remove(&ts.request(outcome, error));
        }
        for name in ["ttft", "tpot", "e2e"] {
            self.slo_violations.remove(&ts.slo(name));
            self.slo_threshold.remove(&ts.slo(name));
        }
        for family in
            [&self.scheduled, &self.goodput, &self.input_tokens, &self.output_tokens, &self.token_fallback, &self.multi_token_frames, &self.stream_buffered]
        {
            family.remove(ts);
        }
        for family in [&self.ttft, &self.ttfc, &self.tpot, &self.itl, &self.e2e] {
            family.remove(ts);
        }
        self.tokens_per_frame.remove(ts);
        self.prompt_error.remove(ts);
        self.target_rate.remove(ts);
        self.slo_objective.remove(ts);
        for phase in api.server_phases() {
            self.server_time.remove(&ts.phase(phase));
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
            self.forget_pair(&TsLabels::new(target, &scenario.name).with_replica(Some(replica)), t.api);
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
        for family in
            [&self.scheduled, &self.goodput, &self.input_tokens, &self.output_tokens, &self.token_fallback, &self.multi_token_frames, &self.stream_buffered]
        {
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
        if s.token_source == TokenSource::Events {
            self.token_fallback.get_or_create(ts).inc();
        }
    }
}

impl Sink for Metrics {
    fn scheduled(&self, target: &str, scenario: &str, replica: Option<&str>) {
        self.scheduled.get_or_create(&TsLabels::new(target, scenario).with_replica(replica)).inc();
    }

    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let ts = TsLabels::new(&outcome.target, &outcome.scenario).with_replica(outcome.replica.as_deref());
        let class = outcome.error_class();
        if class == Some(ErrorClass::Internal) {
            crate::health::ErrorCounter::count_internal_error(self, "probe");
        }
        let (outcome_label, error_label) = outcome_labels(class);
        self.requests.get_or_create(&ts.request(outcome_label, error_label)).inc();
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
        if let (Some(usage), true) = (outcome.usage, outcome.requested_input_tokens > 0 && outcome.is_success()) {
            let requested = f64::from(outcome.requested_input_tokens);
            let error = (usage.prompt_tokens as f64 - requested) / requested;
            self.prompt_error.get_or_create(&ts).observe(error);
        }
    }
}

impl crate::health::ErrorCounter for Metrics {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exemplar_labels_fit_the_openmetrics_limit() {
        let w3c = TraceExemplar::new(&"a".repeat(32), &"b".repeat(16));
        assert_eq!(w3c.chars(), 63);
        assert_eq!(w3c.trace_id.len(), 32);
        let long = TraceExemplar::new(&"x".repeat(200), &"y".repeat(50));
        assert_eq!(long.chars(), EXEMPLAR_MAX_CHARS);
        let mixed = TraceExemplar::new(&"é".repeat(100), "s");
        assert!(mixed.chars() <= EXEMPLAR_MAX_CHARS);
    }
}
