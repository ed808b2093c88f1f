//! OTLP trace export: one CLIENT span per sent probe, named `{gen_ai.operation.name}
//! {gen_ai.request.model}`, with OTel GenAI attributes, `llmprobe.*` measurements, timeline events,
//! and the engine/GPU snapshot current at send (span attributes) and at first token (event
//! attributes). The span's ids are the ones the probe sent as `traceparent`, so server-side spans
//! of the same request join the trace. Prompt text and error bodies are never exported.
//!
//! Settings come from `tracing:` first, then the standard `OTEL_*` variables (`settings.rs`).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use anyhow::Context;
use opentelemetry::trace::{Span as _, SpanId, SpanKind, Status, TraceId, Tracer as _, TracerProvider as _};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, Sampler, SdkTracer, SdkTracerProvider};

use super::Sink;
use crate::config::{Config, OtlpProtocol};
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};
use crate::probe::trace::TraceIds;
use crate::source::{Joined, SnapshotCache};

pub use settings::OtlpSettings;

#[path = "otlp_settings.rs"]
mod settings;

/// What the span needs to know about a target beyond the outcome.
#[derive(Debug, Clone)]
struct TargetMeta {
    operation: &'static str,
    address: String,
    port: Option<u16>,
}

/// The trace sink. Build with `OtlpSink::start`; call `shutdown` (blocking) at the end of a run.
pub struct OtlpSink {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    targets: HashMap<String, TargetMeta>,
    /// Engine name per target from discovery (`gen_ai.provider.name`).
    engines: Mutex<HashMap<String, String>>,
    cache: Arc<SnapshotCache>,
    slo: crate::config::SloTable,
}

impl OtlpSink {
    /// Builds the exporter and the batch span processor. Blocking (the HTTP exporter's client is
    /// a blocking one): call it from `spawn_blocking` inside the runtime.
    /// The snapshot cache the sources of this run fill and spans are joined with.
    pub fn snapshots(&self) -> Arc<SnapshotCache> {
        self.cache.clone()
    }

    pub fn start(config: &Config, settings: &OtlpSettings, cache: Arc<SnapshotCache>) -> anyhow::Result<OtlpSink> {
        let exporter = build_exporter(settings)?;
        let mut resource = Resource::builder().with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
        if let Some(name) = &settings.service_name {
            resource = resource.with_service_name(name.clone());
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .with_sampler(Sampler::AlwaysOn) // sampling is decided with the ids (crate::probe::trace)
            .with_id_generator(PresetIds(RandomIdGenerator::default()))
            .build();
        let tracer = provider.tracer("llmprobe");
        let targets = config.targets.iter().map(|t| (t.name.clone(), target_meta(t))).collect();
        Ok(OtlpSink { provider, tracer, targets, engines: Mutex::new(HashMap::new()), cache, slo: config.slo_table() })
    }

    /// Records the engine a target runs (from discovery) as its `gen_ai.provider.name`.
    pub fn set_engine(&self, target: &str, engine: &str) {
        self.engines.lock().unwrap_or_else(|e| e.into_inner()).insert(target.to_owned(), engine.to_owned());
    }

    /// Emits a release marker: an INTERNAL span `llmprobe.release` with a `release` event.
    pub fn release(&self, target: &str, before: [&str; 2], after: [&str; 2]) {
        let attrs = vec![
            KeyValue::new("llmprobe.target", target.to_owned()),
            KeyValue::new("llmprobe.release.previous_model", before[0].to_owned()),
            KeyValue::new("llmprobe.release.previous_engine_version", before[1].to_owned()),
            KeyValue::new("llmprobe.release.model", after[0].to_owned()),
            KeyValue::new("llmprobe.release.engine_version", after[1].to_owned()),
        ];
        let mut span = self.tracer.span_builder("llmprobe.release").with_kind(SpanKind::Internal).with_attributes(attrs.clone()).start(&self.tracer);
        span.add_event("release", attrs);
        span.end();
    }

    /// Flushes and stops the exporter. Blocking.
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("trace export shutdown: {e}");
        }
    }

    fn span_for(&self, o: &Outcome, sample: Option<&Sample>, ids: TraceIds) {
        let clock = Clock::now();
        let tl = &o.timeline;
        let meta = self.targets.get(&*o.target);
        let operation = meta.map_or("text_completion", |m| m.operation);
        let provider = self.engines.lock().unwrap_or_else(|e| e.into_inner()).get(&*o.target).cloned().unwrap_or_else(|| "openai".into());
        let mut attrs = genai_attributes(o, operation, &provider, meta);
        attrs.extend(probe_attributes(o, sample, self.slo.get(&o.target, &o.scenario)));
        let at_send = self.cache.at(&o.target, tl.sent);
        attrs.extend(joined_attributes(at_send.as_ref()));
        attrs.extend(check_attributes(o));

        PRESET.with(|p| p.set(Some((ids.trace_id, ids.span_id))));
        let mut span = self
            .tracer
            .span_builder(format!("{operation} {}", o.model))
            .with_kind(SpanKind::Client)
            .with_start_time(clock.at(tl.sent))
            .with_attributes(attrs)
            .start(&self.tracer);
        PRESET.with(|p| p.set(None));

        if let Some(t) = tl.first_byte {
            span.add_event_with_timestamp("first_byte", clock.at(t), vec![]);
        }
        if let Some(t) = tl.first_token() {
            let joined = self.cache.at(&o.target, t);
            span.add_event_with_timestamp("first_token", clock.at(t), joined_attributes(joined.as_ref()));
        }
        if let Some(t) = tl.first_content() {
            span.add_event_with_timestamp("first_content_token", clock.at(t), vec![]);
        }
        span.add_event_with_timestamp("end", clock.at(tl.end), vec![]);
        if let Err(f) = &o.result {
            // The class only: a failure's detail may quote a server body.
            span.set_status(Status::error(f.class.as_str()));
        }
        span.end_with_timestamp(clock.at(tl.end));
    }
}

impl Sink for OtlpSink {
    fn event(&self, event: &super::Event) {
        match *event {
            super::Event::Identity { target, engine, .. } => self.set_engine(target, engine),
            super::Event::Release { target, before, after, .. } => self.release(target, before, after),
            _ => {}
        }
    }

    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        // A dropped probe was never sent: no request, no span.
        if outcome.error_class() == Some(ErrorClass::InFlightCap) {
            return;
        }
        if let Some(ids) = outcome.trace.filter(|ids| ids.sampled) {
            self.span_for(outcome, sample, ids);
        }
    }
}

/// What the behaviour checks found: the checks that ran and failed (comma-separated names), the
/// failures' detail (bounded, escaped and redacted like every failure detail: it quotes the
/// model's answer, which is the point), the fingerprint and whether it changed.
fn check_attributes(o: &Outcome) -> Vec<KeyValue> {
    let Some(r) = &o.checks else { return Vec::new() };
    let names = |checks: &mut dyn Iterator<Item = crate::checks::Check>| checks.map(|c| c.as_str()).collect::<Vec<_>>().join(",");
    let mut a = vec![
        KeyValue::new("llmprobe.checks.ran", names(&mut r.ran.iter().copied())),
        KeyValue::new("llmprobe.checks.failed", names(&mut r.failed.iter().map(|f| f.check))),
    ];
    if let Some(f) = r.failure() {
        a.push(KeyValue::new("llmprobe.checks.detail", crate::protocol::truncate_chars(&f.detail, 512)));
    }
    if let Some(fp) = &r.fingerprint {
        a.push(KeyValue::new("llmprobe.checks.fingerprint", fp.clone()));
        a.push(KeyValue::new("llmprobe.checks.behaviour_change", r.changed_from.is_some()));
    }
    a
}

/// Converts the probe's `Instant`s to wall-clock time, from one reading of both clocks.
struct Clock {
    wall: SystemTime,
    mono: Instant,
}

impl Clock {
    fn now() -> Clock {
        Clock { wall: SystemTime::now(), mono: Instant::now() }
    }

    fn at(&self, t: Instant) -> SystemTime {
        match self.mono.checked_duration_since(t) {
            Some(ago) => self.wall - ago,
            None => self.wall + t.duration_since(self.mono),
        }
    }
}

fn genai_attributes(o: &Outcome, operation: &'static str, provider: &str, meta: Option<&TargetMeta>) -> Vec<KeyValue> {
    let mut a = vec![
        KeyValue::new("gen_ai.operation.name", operation),
        KeyValue::new("gen_ai.provider.name", provider.to_owned()),
        KeyValue::new("gen_ai.request.model", o.model.to_string()),
        KeyValue::new("gen_ai.request.max_tokens", i64::from(o.requested_output_tokens)),
        KeyValue::new("gen_ai.request.stream", o.streamed),
    ];
    if let Some(m) = meta {
        a.push(KeyValue::new("server.address", m.address.clone()));
        if let Some(p) = m.port {
            a.push(KeyValue::new("server.port", i64::from(p)));
        }
    }
    if let Some(m) = &o.response_model {
        a.push(KeyValue::new("gen_ai.response.model", m.clone()));
    }
    if let Some(r) = &o.finish_reason {
        a.push(KeyValue::new("gen_ai.response.finish_reasons", Value::Array(Array::String(vec![r.clone().into()]))));
    }
    if let Some(u) = o.usage {
        a.push(KeyValue::new("gen_ai.usage.input_tokens", u.prompt_tokens as i64));
        a.push(KeyValue::new("gen_ai.usage.output_tokens", u.completion_tokens as i64));
        // The GenAI registry's names for the details, where the server reports them.
        if let Some(n) = u.cached_tokens {
            a.push(KeyValue::new("gen_ai.usage.cache_read.input_tokens", n as i64));
        }
        if let Some(n) = u.reasoning_tokens {
            a.push(KeyValue::new("gen_ai.usage.reasoning.output_tokens", n as i64));
        }
    }
    if let Some(t) = o.timeline.first_token() {
        a.push(KeyValue::new("gen_ai.response.time_to_first_chunk", t.saturating_duration_since(o.timeline.sent).as_secs_f64()));
    }
    if let Some(s) = o.http_status {
        a.push(KeyValue::new("http.response.status_code", i64::from(s)));
    }
    if let Some(c) = o.error_class() {
        a.push(KeyValue::new("error.type", c.as_str()));
    }
    a
}

fn probe_attributes(o: &Outcome, sample: Option<&Sample>, slo: &crate::config::Slo) -> Vec<KeyValue> {
    let mut a = vec![
        KeyValue::new("llmprobe.target", o.target.to_string()),
        KeyValue::new("llmprobe.scenario", o.scenario.to_string()),
        KeyValue::new("llmprobe.seq", o.seq as i64),
        KeyValue::new("llmprobe.request_id", o.request_id.clone()),
        KeyValue::new("llmprobe.request.input_tokens", i64::from(o.requested_input_tokens)),
        KeyValue::new("llmprobe.schedule_lag_seconds", o.timeline.schedule_lag().as_secs_f64()),
        KeyValue::new("llmprobe.outcome", o.error_class().map_or("success", |c| c.outcome_label())),
    ];
    if let Some(c) = o.error_class() {
        a.push(KeyValue::new("llmprobe.error_class", c.as_str()));
    }
    if let Some(step) = &o.step {
        // One conversation (or cache pair) is one trace, a span per probe.
        a.push(KeyValue::new("gen_ai.conversation.id", step.sequence.to_string()));
        match step.step {
            crate::probe::step::Step::Turn(k) => a.push(KeyValue::new("llmprobe.turn", i64::from(k))),
            side => a.extend(side.cache_label().map(|c| KeyValue::new("llmprobe.cache", c))),
        }
    }
    let Some(s) = sample else { return a };
    a.push(KeyValue::new("llmprobe.ttft_seconds", s.ttft.as_secs_f64()));
    if let Some(t) = s.tpot {
        a.push(KeyValue::new("llmprobe.tpot_seconds", t.as_secs_f64()));
    }
    a.push(KeyValue::new("llmprobe.e2e_seconds", s.e2e.as_secs_f64()));
    a.push(KeyValue::new("llmprobe.output_tokens", s.output_tokens as i64));
    a.push(KeyValue::new("llmprobe.token_source", s.token_source.as_str()));
    if let Some(n) = s.reasoning_tokens {
        a.push(KeyValue::new("llmprobe.reasoning_tokens", n as i64));
    }
    a.push(KeyValue::new("llmprobe.goodput", s.goodput));
    for (name, limit, missed) in [("ttft", slo.ttft, s.slo_missed.ttft), ("tpot", slo.tpot, s.slo_missed.tpot), ("e2e", slo.e2e, s.slo_missed.e2e)] {
        if limit.is_some() {
            a.push(KeyValue::new(format!("llmprobe.slo.{name}.met"), !missed));
        }
    }
    a
}

/// Engine/GPU values and the snapshot's age, or nothing when no fresh snapshot exists.
fn joined_attributes(joined: Option<&Joined>) -> Vec<KeyValue> {
    let Some(j) = joined else { return Vec::new() };
    let mut a: Vec<KeyValue> = j.reading.values().map(|(k, v)| KeyValue::new(k, v)).collect();
    a.push(KeyValue::new("llmprobe.snapshot.age_seconds", j.age.as_secs_f64()));
    a
}

fn target_meta(t: &crate::config::Target) -> TargetMeta {
    let operation = if t.api.family().chat { "chat" } else { "text_completion" };
    let (address, port) = split_host_port(&t.base_url);
    TargetMeta { operation, address, port }
}

/// `http://host:port/prefix` -> (`host`, port), with the scheme's default port.
pub(super) fn split_host_port(url: &str) -> (String, Option<u16>) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split('/').next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default = match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').unwrap_or((v6, ""));
        return (host.to_owned(), after.strip_prefix(':').and_then(|p| p.parse().ok()).or(default));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().ok().or(default)),
        None => (authority.to_owned(), default),
    }
}

/// `OTEL_EXPORTER_OTLP_HEADERS` / `tracing.headers` as gRPC metadata (traces and metrics).
pub(super) fn grpc_metadata(pairs: &[(String, String)]) -> anyhow::Result<opentelemetry_otlp::tonic_types::metadata::MetadataMap> {
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in pairs {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).context("tracing.headers: invalid header name")?;
        headers.insert(name, v.parse().context("tracing.headers: invalid header value")?);
    }
    Ok(opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(headers))
}

fn build_exporter(s: &OtlpSettings) -> anyhow::Result<opentelemetry_otlp::SpanExporter> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match s.protocol {
        OtlpProtocol::Grpc => {
            let mut b = builder.with_tonic().with_metadata(grpc_metadata(&s.headers)?);
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
    exporter.context("building the OTLP trace exporter")
}

thread_local! {
    /// Ids for the span being built on this thread (set and cleared around `start`).
    static PRESET: Cell<Option<([u8; 16], [u8; 8])>> = const { Cell::new(None) };
}

/// Hands the SDK the probe's own ids while a probe span is built, random ones otherwise.
#[derive(Debug)]
struct PresetIds(RandomIdGenerator);

impl IdGenerator for PresetIds {
    fn new_trace_id(&self) -> TraceId {
        PRESET.with(Cell::get).map_or_else(|| self.0.new_trace_id(), |(t, _)| TraceId::from_bytes(t))
    }

    fn new_span_id(&self) -> SpanId {
        PRESET.with(Cell::get).map_or_else(|| self.0.new_span_id(), |(_, s)| SpanId::from_bytes(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_from_base_urls() {
        assert_eq!(split_host_port("http://127.0.0.1:8000"), ("127.0.0.1".into(), Some(8000)));
        assert_eq!(split_host_port("https://api.example.com/v1proxy"), ("api.example.com".into(), Some(443)));
        assert_eq!(split_host_port("http://[::1]:9000/x"), ("::1".into(), Some(9000)));
        assert_eq!(split_host_port("http://user:pw@h:81"), ("h".into(), Some(81)));
    }

    #[test]
    fn clock_maps_instants_around_now() {
        let c = Clock::now();
        let earlier = c.mono - std::time::Duration::from_millis(250);
        assert_eq!(c.wall.duration_since(c.at(earlier)).unwrap(), std::time::Duration::from_millis(250));
    }
}
