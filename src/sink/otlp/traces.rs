//! OTLP trace export: one CLIENT span per sent probe, named `{gen_ai.operation.name}
//! {gen_ai.request.model}`, with OTel GenAI attributes, `llmprobe.*` measurements, timeline events,
//! and the engine/GPU snapshot current at send (span attributes) and at first token (event
//! attributes). The span's ids are the ones the probe sent as `traceparent`, so server-side spans
//! of the same request join the trace. Prompt text and error bodies are never exported.
//!
//! Settings come from `tracing:` first, then the standard `OTEL_*` variables (`settings.rs`).

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use opentelemetry::trace::{Span as _, SpanId, SpanKind, Status, TraceId, Tracer as _, TracerProvider as _};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, Sampler, SdkTracer, SdkTracerProvider};

use super::settings::{OtlpSettings, TraceSettings};
use super::targets::Targets;
use super::transport;
use crate::config::{Config, OtlpProtocol};
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};
use crate::probe::trace::TraceIds;
use crate::source::{Joined, SnapshotCache};

/// The trace export of a run: a batch span processor behind the OTLP span exporter.
pub(super) struct TraceExport {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    targets: Arc<Targets>,
    /// Filled by this run's sources; spans are joined with it.
    cache: Arc<SnapshotCache>,
    slo: crate::config::SloTable,
}

impl TraceExport {
    /// Builds the exporter and the batch span processor. Blocking (the HTTP exporter's client is
    /// a blocking one).
    pub(super) fn start(
        config: &Config,
        settings: &OtlpSettings,
        traces: &TraceSettings,
        targets: Arc<Targets>,
        cache: Arc<SnapshotCache>,
    ) -> anyhow::Result<TraceExport> {
        let builder = opentelemetry_otlp::SpanExporter::builder();
        let exporter = match traces.transport.protocol {
            OtlpProtocol::Grpc => transport::grpc(builder.with_tonic(), &traces.transport, &settings.headers)?.build(),
            OtlpProtocol::HttpProtobuf => transport::http(builder.with_http(), &traces.transport, &settings.headers).build(),
        }
        .context("building the OTLP trace exporter")?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(transport::resource(settings.service_name.as_deref()))
            .with_sampler(Sampler::AlwaysOn) // sampling is decided with the ids (crate::probe::trace)
            .with_id_generator(PresetIds(RandomIdGenerator::default()))
            .build();
        let tracer = provider.tracer("llmprobe");
        Ok(TraceExport { provider, tracer, targets, cache, slo: config.slo_table() })
    }

    /// Emits a release marker: an INTERNAL span `llmprobe.release` with a `release` event.
    pub(super) fn release(&self, target: &str, before: [&str; 2], after: [&str; 2]) {
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

    /// Exports the spans the batch holds. Blocking.
    pub(super) fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!("trace export flush: {e}");
        }
    }

    /// Flushes and stops the exporter, waiting at most `within`. Blocking.
    pub(super) fn shutdown(&self, within: Duration) {
        if let Err(e) = self.provider.shutdown_with_timeout(within) {
            tracing::warn!("trace export shutdown: {e}");
        }
    }

    /// One CLIENT span for a sent probe that its ids sample.
    pub(super) fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        // A dropped probe was never sent: no request, no span.
        if outcome.error_class() == Some(ErrorClass::InFlightCap) {
            return;
        }
        if let Some(ids) = outcome.trace.filter(|ids| ids.sampled) {
            self.span_for(outcome, sample, ids);
        }
    }

    fn span_for(&self, o: &Outcome, sample: Option<&Sample>, ids: TraceIds) {
        let clock = Clock::now();
        let tl = &o.timeline;
        let operation = self.targets.operation(&o.target);
        let mut attrs = self.targets.genai_attributes(o);
        attrs.extend(response_attributes(o));
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

/// The GenAI attributes a span has beyond those every signal carries (`Targets::genai_attributes`).
fn response_attributes(o: &Outcome) -> Vec<KeyValue> {
    let mut a = vec![KeyValue::new("gen_ai.request.max_tokens", i64::from(o.requested_output_tokens)), KeyValue::new("gen_ai.request.stream", o.streamed)];
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
            crate::probe::step::Step::Agent(k) => {
                a.push(KeyValue::new("llmprobe.agent.step", i64::from(k)));
                // The tools the step called, in order (the loop's tool calls, one span per step).
                if let Some(calls) = o.checks.as_ref().map(|c| &c.calls).filter(|c| !c.is_empty()) {
                    let names: Vec<opentelemetry::StringValue> = calls.iter().map(|n| n.clone().into()).collect();
                    a.push(KeyValue::new("llmprobe.agent.tool_calls", opentelemetry::Value::Array(names.into())));
                }
            }
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
    fn clock_maps_instants_around_now() {
        let c = Clock::now();
        let earlier = c.mono - std::time::Duration::from_millis(250);
        assert_eq!(c.wall.duration_since(c.at(earlier)).unwrap(), std::time::Duration::from_millis(250));
    }
}
