//! The `tracing:` and `sources:` sections: stage-1 serde structs and their stage-2 checks, kept
//! apart from the core sections. The `///` comments on the raw fields are user documentation
//! (see `config/README.md`).

use std::time::Duration;

use serde::Deserialize;

use super::check::{Checker, check_name, check_unique};
use super::duration::RawDuration;
use super::kinds::{EngineKind, SourceKind};
use super::target::{RawHeaders, RawTarget};

/// `tracing:` section. Every field falls back to the standard `OTEL_*` variable, then a default.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with enabled, endpoint, protocol, headers, service_name, sample_ratio, exemplars, metrics")]
pub struct RawTracing {
    /// Export traces. Default: on when `endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
    pub enabled: Option<bool>,
    /// OTLP endpoint, e.g. `http://127.0.0.1:4317` (gRPC) or `http://127.0.0.1:4318` (HTTP; the
    /// `/v1/traces` path is added). Default `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `grpc` or `http/protobuf`. Default `OTEL_EXPORTER_OTLP_PROTOCOL`, else `http/protobuf`.
    pub protocol: Option<String>,
    /// Extra export headers (e.g. an auth token), added to `OTEL_EXPORTER_OTLP_HEADERS`.
    #[serde(default)]
    pub headers: RawHeaders,
    /// `service.name` of the exported resource. Default `OTEL_SERVICE_NAME`, else `llmprobe`.
    pub service_name: Option<String>,
    /// Fraction of probes traced, 0..1. Default from `OTEL_TRACES_SAMPLER`(`_ARG`), else 1.
    pub sample_ratio: Option<f64>,
    /// Attach `trace_id`/`span_id` exemplars to the latency histograms. Default true.
    #[serde(default = "yes")]
    pub exemplars: bool,
    /// Also export OTLP metrics (GenAI client metrics and `llmprobe.*` counters) to the same
    /// collector. Default: on when `OTEL_METRICS_EXPORTER=otlp`, else off.
    pub metrics: Option<bool>,
}

fn yes() -> bool {
    true
}

/// An absent section is the same as an empty one: `exemplars` defaults to true in both
/// (a derived `Default` would make it false when the section is left out).
impl Default for RawTracing {
    fn default() -> Self {
        RawTracing {
            enabled: None,
            endpoint: None,
            protocol: None,
            headers: RawHeaders::default(),
            service_name: None,
            sample_ratio: None,
            exemplars: yes(),
            metrics: None,
        }
    }
}

/// One entry of `sources:`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a source mapping with kind, url, target, interval, ...")]
pub struct RawSource {
    /// `engine`, `dcgm` or `nvml`.
    pub kind: String,
    /// The `source` label. Default: `kind`, or `kind-target` when `target` is set.
    pub name: Option<String>,
    /// Page to scrape. Required for `dcgm`; for `engine` it defaults to the target's
    /// `base_url` + `/metrics`. Not used by `nvml`.
    pub url: Option<String>,
    /// The target whose probes this source describes; omit for every target.
    pub target: Option<String>,
    /// For `engine`: `auto` (detect from the metric names), `vllm`, `sglang`, `llamacpp`, `tgi`.
    pub engine: Option<String>,
    /// Time between scrapes. Default `5s`.
    #[serde(default = "default_interval")]
    pub interval: RawDuration,
    /// Scrape time limit, at most `interval`. Default `2s`, or `interval` when shorter.
    pub timeout: Option<RawDuration>,
    /// GPU selection for `dcgm` and `nvml`; empty selects every GPU on the page or machine.
    #[serde(default)]
    pub filters: RawFilters,
}

fn default_interval() -> RawDuration {
    RawDuration("5s".to_owned())
}

/// Default scrape timeout (capped at the interval).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// `filters:` of a source. A GPU is selected when it matches every list that is set.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with gpu, uuid, pod, namespace")]
pub struct RawFilters {
    /// GPU indexes (dcgm's `gpu` label; NVML device index).
    #[serde(default)]
    pub gpu: Vec<u32>,
    /// GPU UUIDs (`GPU-...`).
    #[serde(default)]
    pub uuid: Vec<String>,
    /// Kubernetes pods (dcgm-exporter's `pod` label).
    #[serde(default)]
    pub pod: Vec<String>,
    /// Kubernetes namespace (dcgm-exporter's `namespace` label).
    pub namespace: Option<String>,
}

/// Validated `tracing:` (env variables are applied later, at start; see `crate::sink::otlp`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tracing {
    pub enabled: Option<bool>,
    pub endpoint: Option<String>,
    pub protocol: Option<OtlpProtocol>,
    pub headers: Vec<(String, String)>,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
    pub exemplars: bool,
    /// OTLP metric export; `None` = `OTEL_METRICS_EXPORTER` decides (see `crate::sink::otlp`).
    pub metrics: Option<bool>,
}

impl Default for Tracing {
    fn default() -> Self {
        Tracing { enabled: None, endpoint: None, protocol: None, headers: Vec::new(), service_name: None, sample_ratio: None, exemplars: true, metrics: None }
    }
}

/// OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    Grpc,
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The `OTEL_EXPORTER_OTLP_PROTOCOL` spelling.
    pub fn parse(text: &str) -> Option<OtlpProtocol> {
        match text {
            "grpc" => Some(OtlpProtocol::Grpc),
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            _ => None,
        }
    }
}

pub(super) fn tracing(raw: &RawTracing, c: &mut Checker) -> Tracing {
    if let Some(e) = &raw.endpoint {
        c.http_url("tracing.endpoint", e);
    }
    let protocol = raw.protocol.as_deref().and_then(|p| {
        let parsed = OtlpProtocol::parse(p);
        if parsed.is_none() {
            c.error("tracing.protocol", format!("unknown protocol \"{p}\": expected grpc or http/protobuf"));
        }
        parsed
    });
    if let Some(r) = raw.sample_ratio.filter(|r| !(0.0..=1.0).contains(r)) {
        c.error("tracing.sample_ratio", format!("must be between 0 and 1, got {r}"));
    }
    if raw.service_name.as_deref() == Some("") {
        c.error("tracing.service_name", "must not be empty");
    }
    Tracing {
        enabled: raw.enabled,
        endpoint: raw.endpoint.clone(),
        protocol,
        headers: raw.headers.0.clone(),
        service_name: raw.service_name.clone(),
        sample_ratio: raw.sample_ratio,
        exemplars: raw.exemplars,
        metrics: raw.metrics,
    }
}

pub(super) fn sources(raw: &[RawSource], targets: &[RawTarget], c: &mut Checker) -> Vec<SourceSpec> {
    let specs: Vec<SourceSpec> = raw.iter().enumerate().map(|(i, s)| source(&format!("sources[{i}]"), s, targets, c)).collect();
    check_unique("sources", "source", specs.iter().map(|s| s.name.as_str()), c);
    specs
}

fn source(path: &str, raw: &RawSource, targets: &[RawTarget], c: &mut Checker) -> SourceSpec {
    let kind = match (raw.kind.as_str(), raw.engine.as_deref()) {
        ("engine", engine) => SourceKind::Engine(engine_kind(&format!("{path}.engine"), engine, c)),
        ("dcgm", None) => SourceKind::Dcgm,
        ("nvml", None) => SourceKind::Nvml,
        ("dcgm" | "nvml", Some(_)) => {
            c.error(format!("{path}.engine"), "only an engine source has an engine");
            SourceKind::Dcgm
        }
        (other, _) => {
            c.error(format!("{path}.kind"), format!("unknown kind \"{other}\": expected engine, dcgm or nvml"));
            SourceKind::Dcgm
        }
    };
    if let Some(t) = &raw.target {
        if !targets.iter().any(|x| &x.name == t) {
            c.error(format!("{path}.target"), format!("no target named \"{t}\""));
        }
    }
    check_url(path, raw, &kind, c);
    let name = raw.name.clone().unwrap_or_else(|| match &raw.target {
        Some(t) => format!("{}-{t}", raw.kind),
        None => raw.kind.clone(),
    });
    check_name(&format!("{path}.name"), &name, c);
    let interval = c.positive_duration(&format!("{path}.interval"), &raw.interval);
    let timeout = match &raw.timeout {
        Some(t) => c.positive_duration(&format!("{path}.timeout"), t),
        None => DEFAULT_TIMEOUT.min(interval),
    };
    if timeout > interval && interval > Duration::ZERO {
        c.error(format!("{path}.timeout"), "must not exceed interval");
    }
    let f = &raw.filters;
    let filter = GpuFilter { gpus: f.gpu.iter().map(u32::to_string).collect(), uuids: f.uuid.clone(), pods: f.pod.clone(), namespace: f.namespace.clone() };
    if matches!(kind, SourceKind::Engine(_)) && filter != GpuFilter::default() {
        c.error(format!("{path}.filters"), "filters select GPUs: only dcgm and nvml sources take them");
    }
    if kind == SourceKind::Nvml && (!filter.pods.is_empty() || filter.namespace.is_some()) {
        c.error(format!("{path}.filters"), "nvml selects GPUs by gpu or uuid only (pods are dcgm-exporter labels)");
    }
    SourceSpec { name, kind, url: raw.url.clone(), interval, timeout, target: raw.target.clone(), filter }
}

fn engine_kind(path: &str, engine: Option<&str>, c: &mut Checker) -> Option<EngineKind> {
    match engine.unwrap_or("auto") {
        "auto" => None,
        "vllm" => Some(EngineKind::Vllm),
        "sglang" => Some(EngineKind::Sglang),
        "llamacpp" => Some(EngineKind::LlamaCpp),
        "tgi" => Some(EngineKind::Tgi),
        other => {
            c.error(path, format!("unknown engine \"{other}\": expected auto, vllm, sglang, llamacpp or tgi"));
            None
        }
    }
}

fn check_url(path: &str, raw: &RawSource, kind: &SourceKind, c: &mut Checker) {
    match (&raw.url, kind) {
        (Some(_), SourceKind::Nvml) => c.error(format!("{path}.url"), "an nvml source reads the local driver and takes no url"),
        (Some(u), _) => {
            c.http_url(&format!("{path}.url"), u);
        }
        (None, SourceKind::Dcgm) => c.error(path, "a dcgm source needs a url (dcgm-exporter's /metrics, usually on port 9400)"),
        (None, SourceKind::Engine(_)) if raw.target.is_none() => {
            c.error(path, "an engine source needs a url or a target (whose base_url + /metrics is scraped)")
        }
        _ => {}
    }
}

/// One validated `sources:` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// The `source` label; unique.
    pub name: String,
    pub kind: SourceKind,
    /// Page to scrape (engine, dcgm). For an engine with a `target` it defaults to the target's
    /// `base_url` + `/metrics` (`Target::metrics_url`), resolved when the config is validated.
    pub url: Option<String>,
    pub interval: Duration,
    pub timeout: Duration,
    /// The target whose probes this source describes; `None` = every target.
    pub target: Option<String>,
    /// GPU selection (dcgm, nvml).
    pub filter: GpuFilter,
}

/// Which GPUs of a dcgm-exporter page belong to the target. Empty lists select everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuFilter {
    /// `gpu` label values (indexes as strings).
    pub gpus: Vec<String>,
    /// `UUID` label values.
    pub uuids: Vec<String>,
    /// `pod` label values (the pods of the served model).
    pub pods: Vec<String>,
    pub namespace: Option<String>,
}
