//! OTLP metric export (opt-in): the OTel GenAI client metrics and llmprobe's own request, goodput
//! and SLO-violation counters, pushed by the SDK's periodic reader to the collector that traces go
//! to. The Prometheus `/metrics` endpoint is unaffected; this is for OTel-native backends.
//!
//! Names, units and buckets follow the GenAI semantic conventions (Development status):
//! - `gen_ai.client.operation.duration` (s): send -> end of every sent probe, failures included.
//! - `gen_ai.client.operation.time_to_first_chunk` (s): send -> first generated text (streaming).
//! - `gen_ai.client.operation.time_per_output_chunk` (s): each gap between text chunks (streaming).
//! - `gen_ai.client.token.usage` ({token}): input (server usage) and output tokens of successes,
//!   told apart by `gen_ai.token.type`.
//!
//! Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
//! `server.address`, `server.port`, `error.type` (failures), `llmprobe.target`, `llmprobe.scenario`.
//! Own counters: `llmprobe.requests` ({request}; `llmprobe.outcome`, `error.type`; every scheduled
//! probe, dropped ones too), `llmprobe.goodput.requests` ({request}) and `llmprobe.slo.violations`
//! ({request}; `llmprobe.slo` = ttft | tpot | e2e).
//!
//! Switch: `tracing.metrics`, else `OTEL_METRICS_EXPORTER` (`otlp` on, `none` or unset off);
//! `OTEL_SDK_DISABLED=true` turns it off. Transport and endpoint as for traces (`tracing.protocol`
//! / `tracing.endpoint`, then `OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL` and
//! `OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`); `OTEL_METRIC_EXPORT_INTERVAL` (ms, default 60000).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::Sink;
use crate::config::{Config, OtlpProtocol, SloTable, Tracing};
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};

/// The GenAI client metric names.
pub const OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
pub const TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
pub const TIME_PER_OUTPUT_CHUNK: &str = "gen_ai.client.operation.time_per_output_chunk";
pub const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// llmprobe's own counters.
pub const REQUESTS: &str = "llmprobe.requests";
pub const GOODPUT_REQUESTS: &str = "llmprobe.goodput.requests";
pub const SLO_VIOLATIONS: &str = "llmprobe.slo.violations";

/// Recommended explicit buckets for the GenAI durations (s): 0.01 doubling to 81.92.
pub const DURATION_BUCKETS: [f64; 14] = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/// Recommended explicit buckets for token usage: powers of 4 from 1 to 4^13.
pub const TOKEN_BUCKETS: [f64; 14] = [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0, 67108864.0];

/// Default `OTEL_METRIC_EXPORT_INTERVAL`.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// Resolved metric export settings; `None` from `resolve` means metric export is off.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpMetricsSettings {
    pub protocol: OtlpProtocol,
    /// Full metrics URL from config (`/v1/metrics` added for HTTP); `None` = the exporter reads
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    pub headers: Vec<(String, String)>,
    /// `None` = `OTEL_SERVICE_NAME` is set and used by the resource.
    pub service_name: Option<String>,
    pub interval: Duration,
    /// Problems worth a log line.
    pub notes: Vec<String>,
}

impl OtlpMetricsSettings {
    /// Applies the precedence (config, then `OTEL_*`, then defaults). `env` reads a variable.
    pub fn resolve(cfg: &Tracing, env: impl Fn(&str) -> Option<String>) -> Option<OtlpMetricsSettings> {
        let var = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut notes = Vec::new();
        let sdk_disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let from_env = match var("OTEL_METRICS_EXPORTER").as_deref() {
            None | Some("none") => false,
            Some("otlp") => true,
            Some(other) => {
                notes.push(format!("OTEL_METRICS_EXPORTER={other} is not supported (otlp or none): not exporting metrics"));
                false
            }
        };
        if !cfg.metrics.unwrap_or(from_env && !sdk_disabled) {
            return None;
        }
        let protocol = cfg.protocol.unwrap_or_else(|| match var("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL")) {
            None => OtlpProtocol::HttpProtobuf,
            Some(p) => OtlpProtocol::parse(&p).unwrap_or_else(|| {
                notes.push(format!("OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported (grpc or http/protobuf): using http/protobuf"));
                OtlpProtocol::HttpProtobuf
            }),
        });
        let endpoint = cfg.endpoint.as_deref().map(|e| match protocol {
            OtlpProtocol::Grpc => e.to_owned(),
            OtlpProtocol::HttpProtobuf => http_metrics_url(e),
        });
        let interval = match var("OTEL_METRIC_EXPORT_INTERVAL") {
            None => DEFAULT_INTERVAL,
            Some(ms) => match ms.parse::<u64>() {
                Ok(n) if n > 0 => Duration::from_millis(n),
                _ => {
                    notes.push(format!("OTEL_METRIC_EXPORT_INTERVAL={ms} is not a positive number of milliseconds: using 60000"));
                    DEFAULT_INTERVAL
                }
            },
        };
        let service_name = cfg.service_name.clone().or_else(|| var("OTEL_SERVICE_NAME").is_none().then(|| "llmprobe".to_owned()));
        Some(OtlpMetricsSettings { protocol, endpoint, headers: cfg.headers.clone(), service_name, interval, notes })
    }
}

/// The OTLP/HTTP metrics URL for a base endpoint; one already ending in `/v1/metrics` is kept.
fn http_metrics_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/metrics") { base.to_owned() } else { format!("{base}/v1/metrics") }
}

/// Attributes of a target that do not change between probes.
#[derive(Debug, Clone)]
struct TargetMeta {
    operation: &'static str,
    address: String,
    port: Option<u16>,
}

/// The metric sink. Build with `start` (blocking); call `shutdown` (blocking) at the end of a run,
/// which exports what the last interval collected.
pub struct OtlpMetricsSink {
    provider: SdkMeterProvider,
    duration: Histogram<f64>,
    ttfc: Histogram<f64>,
    tpoc: Histogram<f64>,
    tokens: Histogram<u64>,
    requests: Counter<u64>,
    goodput: Counter<u64>,
    slo_violations: Counter<u64>,
    targets: HashMap<String, TargetMeta>,
    /// Engine per target from discovery (`gen_ai.provider.name`).
    engines: Mutex<HashMap<String, String>>,
    slo: SloTable,
}

impl OtlpMetricsSink {
    /// Builds the exporter and the periodic reader. Blocking (the HTTP exporter's client is a
    /// blocking one): call it from `spawn_blocking` inside the runtime.
    pub fn start(config: &Config, settings: &OtlpMetricsSettings) -> anyhow::Result<OtlpMetricsSink> {
        let exporter = build_exporter(settings)?;
        let reader = PeriodicReader::builder(exporter).with_interval(settings.interval).build();
        let mut resource = Resource::builder().with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
        if let Some(name) = &settings.service_name {
            resource = resource.with_service_name(name.clone());
        }
        let provider = SdkMeterProvider::builder().with_reader(reader).with_resource(resource.build()).build();
        let meter = provider.meter("llmprobe");
        let seconds = |name: &'static str, description: &'static str| {
            meter.f64_histogram(name).with_unit("s").with_description(description).with_boundaries(DURATION_BUCKETS.to_vec()).build()
        };
        let requests = |name: &'static str, description: &'static str| meter.u64_counter(name).with_unit("{request}").with_description(description).build();
        let sink = OtlpMetricsSink {
            duration: seconds(OPERATION_DURATION, "GenAI operation duration"),
            ttfc: seconds(TIME_TO_FIRST_CHUNK, "Time to receive the first chunk in a streaming operation"),
            tpoc: seconds(TIME_PER_OUTPUT_CHUNK, "Time between consecutive chunks after the first in a streaming operation"),
            tokens: meter
                .u64_histogram(TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            requests: requests(REQUESTS, "Scheduled probes by outcome and error type; every probe lands here once"),
            goodput: requests(GOODPUT_REQUESTS, "Probes that succeeded and met every SLO threshold of their target and scenario"),
            slo_violations: requests(SLO_VIOLATIONS, "Successful probes that missed the given SLO threshold"),
            targets: config.targets.iter().map(|t| (t.name.clone(), target_meta(t))).collect(),
            engines: Mutex::new(HashMap::new()),
            slo: config.slo_table(),
            provider,
        };
        Ok(sink)
    }

    /// Records the engine a target runs (from discovery) as its `gen_ai.provider.name`.
    pub fn set_engine(&self, target: &str, engine: &str) {
        self.engines.lock().unwrap_or_else(|e| e.into_inner()).insert(target.to_owned(), engine.to_owned());
    }

    /// Exports what is left and stops the reader. Blocking.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("metric export shutdown: {e}");
        }
    }

    fn genai_attributes(&self, o: &Outcome) -> Vec<KeyValue> {
        let meta = self.targets.get(&*o.target);
        let provider = self.engines.lock().unwrap_or_else(|e| e.into_inner()).get(&*o.target).cloned().unwrap_or_else(|| "openai".into());
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", meta.map_or("text_completion", |m| m.operation)),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new("gen_ai.request.model", o.model.to_string()),
            KeyValue::new("llmprobe.target", o.target.to_string()),
            KeyValue::new("llmprobe.scenario", o.scenario.to_string()),
        ];
        if let Some(m) = meta {
            a.push(KeyValue::new("server.address", m.address.clone()));
            if let Some(p) = m.port {
                a.push(KeyValue::new("server.port", i64::from(p)));
            }
        }
        if let Some(c) = o.error_class() {
            a.push(KeyValue::new("error.type", c.as_str()));
        }
        a
    }
}

impl Sink for OtlpMetricsSink {
    fn event(&self, event: &super::Event) {
        if let super::Event::Identity { target, engine, .. } = *event {
            self.set_engine(target, engine);
        }
    }

    fn record(&self, o: &Outcome, sample: Option<&Sample>) {
        let class = o.error_class();
        let ts = [KeyValue::new("llmprobe.target", o.target.to_string()), KeyValue::new("llmprobe.scenario", o.scenario.to_string())];
        let mut outcome = ts.to_vec();
        outcome.push(KeyValue::new("llmprobe.outcome", class.map_or("success", |c| c.outcome_label())));
        if let Some(c) = class {
            outcome.push(KeyValue::new("error.type", c.as_str()));
        }
        self.requests.add(1, &outcome);
        // A dropped probe was never sent: no operation to time.
        if class == Some(ErrorClass::InFlightCap) {
            return;
        }
        let attrs = self.genai_attributes(o);
        let tl = &o.timeline;
        self.duration.record(tl.end.saturating_duration_since(tl.sent).as_secs_f64(), &attrs);
        let Some(s) = sample.filter(|_| o.is_success()) else { return };
        if s.streamed {
            self.ttfc.record(s.ttft.as_secs_f64(), &attrs);
            for gap in &s.itl {
                self.tpoc.record(gap.as_secs_f64(), &attrs);
            }
        }
        let with_type = |kind: &'static str| {
            let mut a = attrs.clone();
            a.push(KeyValue::new("gen_ai.token.type", kind));
            a
        };
        if let Some(input) = s.input_tokens {
            self.tokens.record(input, &with_type("input"));
        }
        self.tokens.record(s.output_tokens, &with_type("output"));
        if s.goodput {
            self.goodput.add(1, &ts);
        }
        let slo = self.slo.get(&o.target, &o.scenario);
        for (name, set, missed) in [("ttft", slo.ttft, s.slo_missed.ttft), ("tpot", slo.tpot, s.slo_missed.tpot), ("e2e", slo.e2e, s.slo_missed.e2e)] {
            if set.is_some() && missed {
                let mut a = ts.to_vec();
                a.push(KeyValue::new("llmprobe.slo", name));
                self.slo_violations.add(1, &a);
            }
        }
    }
}

fn target_meta(t: &crate::config::Target) -> TargetMeta {
    let operation = if t.api.family().chat { "chat" } else { "text_completion" };
    let (address, port) = super::otlp::split_host_port(&t.base_url);
    TargetMeta { operation, address, port }
}

fn build_exporter(s: &OtlpMetricsSettings) -> anyhow::Result<opentelemetry_otlp::MetricExporter> {
    let builder = opentelemetry_otlp::MetricExporter::builder();
    let exporter = match s.protocol {
        OtlpProtocol::Grpc => {
            let mut b = builder.with_tonic().with_metadata(super::otlp::grpc_metadata(&s.headers)?);
            if let Some(e) = &s.endpoint {
                b = b.with_endpoint(e.clone());
            }
            b.build()
        }
        OtlpProtocol::HttpProtobuf => {
            let mut b = builder.with_http().with_protocol(opentelemetry_otlp::Protocol::HttpBinary).with_headers(s.headers.iter().cloned().collect());
            if let Some(e) = &s.endpoint {
                b = b.with_endpoint(e.clone());
            }
            b.build()
        }
    };
    exporter.context("building the OTLP metric exporter")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(cfg: &Tracing, vars: &[(&str, &str)]) -> Option<OtlpMetricsSettings> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        OtlpMetricsSettings::resolve(cfg, |k| map.get(k).cloned())
    }

    #[test]
    fn off_unless_asked_for() {
        assert_eq!(resolve(&Tracing::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]), None, "an endpoint alone exports traces only");
        assert_eq!(resolve(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "none")]), None);
        let on = resolve(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "otlp")]).unwrap();
        assert_eq!((on.protocol, on.endpoint.as_deref(), on.interval), (OtlpProtocol::HttpProtobuf, None, DEFAULT_INTERVAL));
        assert_eq!(resolve(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "otlp"), ("OTEL_SDK_DISABLED", "true")]), None);
        let bad = resolve(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "prometheus")]);
        assert_eq!(bad, None);
        let cfg = Tracing { metrics: Some(true), endpoint: Some("http://c:4318/".into()), ..Tracing::default() };
        assert_eq!(resolve(&cfg, &[]).unwrap().endpoint.as_deref(), Some("http://c:4318/v1/metrics"));
        let cfg_off = Tracing { metrics: Some(false), ..Tracing::default() };
        assert_eq!(resolve(&cfg_off, &[("OTEL_METRICS_EXPORTER", "otlp")]), None, "config wins over the environment");
    }

    #[test]
    fn interval_and_protocol_from_the_environment() {
        let on = [("OTEL_METRICS_EXPORTER", "otlp")];
        let with = |extra: &[(&str, &str)]| resolve(&Tracing::default(), &[on.as_slice(), extra].concat()).unwrap();
        assert_eq!(with(&[("OTEL_METRIC_EXPORT_INTERVAL", "5000")]).interval, Duration::from_secs(5));
        let bad = with(&[("OTEL_METRIC_EXPORT_INTERVAL", "soon")]);
        assert_eq!((bad.interval, bad.notes.len()), (DEFAULT_INTERVAL, 1));
        assert_eq!(with(&[("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]).protocol, OtlpProtocol::Grpc);
        assert_eq!(with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).protocol, OtlpProtocol::Grpc);
    }

    #[test]
    fn buckets_are_the_recommended_ones() {
        assert!(DURATION_BUCKETS.windows(2).all(|w| (w[1] / w[0] - 2.0).abs() < 1e-9));
        assert!(TOKEN_BUCKETS.windows(2).all(|w| w[1] == w[0] * 4.0));
        assert_eq!((DURATION_BUCKETS[0], DURATION_BUCKETS[13], TOKEN_BUCKETS[13]), (0.01, 81.92, 67108864.0));
    }
}
