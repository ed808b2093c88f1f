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
//! ({request}; `llmprobe.slo` = ttft | tpot | e2e). Agent loops (`agent:`): `llmprobe.agent.loops`
//! ({loop}; `llmprobe.agent.result` = answered | step_limit | failed | stopped) and
//! `llmprobe.agent.loop.duration` (s; answered loops, first send to the answer's end). Each step
//! is a probe, so it is in the GenAI metrics above like any other.
//!
//! Switch (`settings.rs`): `tracing.metrics`, else `OTEL_METRICS_EXPORTER` (`otlp` on, `none` or unset off);
//! `OTEL_SDK_DISABLED=true` turns it off. Transport and endpoint as for traces (`tracing.protocol`
//! / `tracing.endpoint`, then `OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL` and
//! `OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`); `OTEL_METRIC_EXPORT_INTERVAL` (ms, default 60000).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::settings::{MetricSettings, OtlpSettings};
use super::targets::Targets;
use super::transport;
use crate::config::{Config, OtlpProtocol, SloTable};
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};

/// The GenAI client metric names.
const OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
const TIME_TO_FIRST_CHUNK: &str = "gen_ai.client.operation.time_to_first_chunk";
const TIME_PER_OUTPUT_CHUNK: &str = "gen_ai.client.operation.time_per_output_chunk";
const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// llmprobe's own counters.
const REQUESTS: &str = "llmprobe.requests";
const GOODPUT_REQUESTS: &str = "llmprobe.goodput.requests";
const SLO_VIOLATIONS: &str = "llmprobe.slo.violations";
const AGENT_LOOPS: &str = "llmprobe.agent.loops";
const AGENT_LOOP_DURATION: &str = "llmprobe.agent.loop.duration";

/// Recommended explicit buckets for the GenAI durations (s): 0.01 doubling to 81.92.
const DURATION_BUCKETS: [f64; 14] = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/// Recommended explicit buckets for token usage: powers of 4 from 1 to 4^13.
const TOKEN_BUCKETS: [f64; 14] = [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0, 67108864.0];

/// The metric export of a run: the instruments behind a periodic reader. Its shutdown exports
/// what the last interval collected.
pub(super) struct MetricExport {
    provider: SdkMeterProvider,
    duration: Histogram<f64>,
    ttfc: Histogram<f64>,
    tpoc: Histogram<f64>,
    tokens: Histogram<u64>,
    requests: Counter<u64>,
    goodput: Counter<u64>,
    slo_violations: Counter<u64>,
    agent_loops: Counter<u64>,
    agent_loop_duration: Histogram<f64>,
    targets: Arc<Targets>,
    slo: SloTable,
}

impl MetricExport {
    /// Builds the exporter and the periodic reader. Blocking (the HTTP exporter's client is a
    /// blocking one).
    pub(super) fn start(config: &Config, settings: &OtlpSettings, metrics: &MetricSettings, targets: Arc<Targets>) -> anyhow::Result<MetricExport> {
        let builder = opentelemetry_otlp::MetricExporter::builder();
        let exporter = match metrics.transport.protocol {
            OtlpProtocol::Grpc => transport::grpc(builder.with_tonic(), &metrics.transport, &settings.headers)?.build(),
            OtlpProtocol::HttpProtobuf => transport::http(builder.with_http(), &metrics.transport, &settings.headers).build(),
        }
        .context("building the OTLP metric exporter")?;
        let reader = PeriodicReader::builder(exporter).with_interval(metrics.interval).build();
        let provider = SdkMeterProvider::builder().with_reader(reader).with_resource(transport::resource(settings.service_name.as_deref())).build();
        let meter = provider.meter("llmprobe");
        let seconds = |name: &'static str, description: &'static str| {
            meter.f64_histogram(name).with_unit("s").with_description(description).with_boundaries(DURATION_BUCKETS.to_vec()).build()
        };
        let requests = |name: &'static str, description: &'static str| meter.u64_counter(name).with_unit("{request}").with_description(description).build();
        let sink = MetricExport {
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
            agent_loops: meter.u64_counter(AGENT_LOOPS).with_unit("{loop}").with_description("Agent loops ended, by result").build(),
            agent_loop_duration: seconds(AGENT_LOOP_DURATION, "Answered agent loops, first send to the answer's end"),
            targets,
            slo: config.slo_table(),
            provider,
        };
        Ok(sink)
    }

    /// Exports what the reader collected so far. Blocking.
    pub(super) fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!("metric export flush: {e}");
        }
    }

    /// Exports what is left and stops the reader. Blocking; the SDK bounds it by the exporter's
    /// own timeout, not by `within`.
    pub(super) fn shutdown(&self, within: Duration) {
        if let Err(e) = self.provider.shutdown_with_timeout(within) {
            tracing::warn!("metric export shutdown: {e}");
        }
    }

    /// An agent loop ended.
    pub(super) fn agent_loop(&self, target: &str, scenario: &str, result: &'static str, seconds: f64) {
        let ts = [KeyValue::new("llmprobe.target", target.to_owned()), KeyValue::new("llmprobe.scenario", scenario.to_owned())];
        if result == crate::probe::step::LOOP_ANSWERED {
            self.agent_loop_duration.record(seconds, &ts);
        }
        let mut a = ts.to_vec();
        a.push(KeyValue::new("llmprobe.agent.result", result));
        self.agent_loops.add(1, &a);
    }

    fn genai_attributes(&self, o: &Outcome) -> Vec<KeyValue> {
        let mut a = self.targets.genai_attributes(o);
        a.push(KeyValue::new("llmprobe.target", o.target.to_string()));
        a.push(KeyValue::new("llmprobe.scenario", o.scenario.to_string()));
        if let Some(c) = o.error_class() {
            a.push(KeyValue::new("error.type", c.as_str()));
        }
        a
    }

    pub(super) fn record(&self, o: &Outcome, sample: Option<&Sample>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_the_recommended_ones() {
        assert!(DURATION_BUCKETS.windows(2).all(|w| (w[1] / w[0] - 2.0).abs() < 1e-9));
        assert!(TOKEN_BUCKETS.windows(2).all(|w| w[1] == w[0] * 4.0));
        assert_eq!((DURATION_BUCKETS[0], DURATION_BUCKETS[13], TOKEN_BUCKETS[13]), (0.01, 81.92, 67108864.0));
    }
}
