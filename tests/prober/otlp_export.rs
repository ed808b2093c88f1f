//! The prober against the mock engine with OTLP export to an in-process receiver, over gRPC
//! (tonic `TraceServiceServer`) and HTTP/protobuf (axum `POST /v1/traces`): span name, kind,
//! GenAI attributes, events, the joined engine/GPU snapshot, exemplars on `/metrics` that point at
//! received spans, and no secret or prompt text anywhere in the exported bytes.

use crate::common;

use crate::otlp_receiver;

use std::collections::HashSet;
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use tokio_util::sync::CancellationToken;

use otlp_receiver::{Received, grpc_receiver, http_receiver, spans};

const SECRET: &str = "sk-do-not-print-me-7f3a";

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v: &AnyValue| v.value.as_ref())
}

fn string(attrs: &[KeyValue], key: &str) -> String {
    match attr(attrs, key) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => panic!("{key}: expected a string, got {other:?}"),
    }
}

fn int(attrs: &[KeyValue], key: &str) -> i64 {
    match attr(attrs, key) {
        Some(any_value::Value::IntValue(i)) => *i,
        other => panic!("{key}: expected an int, got {other:?}"),
    }
}

fn double(attrs: &[KeyValue], key: &str) -> f64 {
    match attr(attrs, key) {
        Some(any_value::Value::DoubleValue(d)) => *d,
        other => panic!("{key}: expected a double, got {other:?}"),
    }
}

/// Runs the prober for a while with tracing to `endpoint` and returns its final `/metrics`.
async fn run_prober(endpoint: &str, protocol: &str) -> String {
    let tracing = format!("tracing: {{endpoint: \"{endpoint}\", protocol: {protocol}, headers: {{x-collector-tenant: llmprobe-tests}}}}\n");
    run_prober_with(&tracing, protocol).await
}

/// The prober with `tracing` (a `tracing:` line or nothing) for 1.5 s; its /metrics at the end.
async fn run_prober_with(tracing: &str, name: &str) -> String {
    let (mock, mock_stop) =
        common::start_mock(llmprobe::mock::MockOptions { api_key: Some(SECRET.into()), prompt_tokens_details: true, ..Default::default() }).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-otlp-{}-{}", std::process::id(), name.replace('/', "_")));
    std::fs::create_dir_all(&dir).unwrap();
    let key_file = dir.join("key");
    std::fs::write(&key_file, SECRET).unwrap();
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 8, seed: 7, shutdown_grace: 5s}}\n\
         targets:\n  - name: t\n    base_url: http://{mock}\n    api: openai-chat\n    api_key_file: {}\n    headers: {{X-Custom: visible}}\n\
         scenarios:\n  - name: s\n    input_tokens: 32\n    output_tokens: 8\n    checks: {{finish_reasons: [stop, length], output_cap: true}}\n\
         slo: {{ttft: 2s, tpot: 200ms, e2e: 20s, objective: 0.99}}\n\
         {tracing}\
         sources:\n  - {{kind: engine, target: t, interval: 50ms, timeout: 50ms}}\n  - {{kind: dcgm, url: \"http://{mock}/dcgm/metrics\", interval: 50ms, timeout: 50ms}}\n",
        key_file.display()
    );
    let config = llmprobe::app::loader::parse(&yaml, "otlp.yaml").unwrap_or_else(|e| panic!("{e}"));
    let stop = CancellationToken::new();
    let running = llmprobe::app::start(config, Default::default(), stop.clone()).await.unwrap();
    // Both sources read, then probes that join their snapshot (at least 3, 5 in all).
    let up = |t: &str| t.contains("llmprobe_source_up{source=\"engine-t\"} 1") && t.contains("llmprobe_source_up{source=\"dcgm\"} 1");
    let successes = |t: &str| common::metric(t, "llmprobe_requests_total", &["outcome=\"success\""]);
    let before = successes(&common::wait_for_metrics(running.metrics_addr, "both sources up", up).await);
    common::wait_for_metrics(running.metrics_addr, "probes after the sources came up", |t| successes(t) >= (before + 3.0).max(5.0)).await;
    stop.cancel();
    let report = running.wait().await.unwrap();
    mock_stop.cancel();
    let _ = std::fs::remove_dir_all(&dir);
    report.metrics.encode_openmetrics()
}

fn check_spans(received: &Received, metrics: &str) {
    let raw: Vec<u8> = received.lock().unwrap().concat();
    assert!(!raw.is_empty(), "no OTLP export received");
    let text = String::from_utf8_lossy(&raw);
    assert!(!text.contains(SECRET), "the API key reached the exported traces");
    assert!(!text.contains("Bearer"), "an authorization header reached the exported traces");

    let spans = spans(received);
    let probes: Vec<&Span> = spans.iter().filter(|s| s.name == "chat mock-llama").collect();
    assert!(probes.len() >= 4, "expected several probe spans, got {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let mut joined = 0;
    for span in &probes {
        let a = &span.attributes;
        assert_eq!(span.kind, SpanKind::Client as i32);
        assert_eq!(span.trace_id.len(), 16);
        assert!(span.parent_span_id.is_empty(), "probe spans are roots");
        assert_eq!(string(a, "gen_ai.operation.name"), "chat");
        assert_eq!(string(a, "gen_ai.request.model"), "mock-llama");
        assert_eq!(int(a, "gen_ai.request.max_tokens"), 8);
        assert!(matches!(attr(a, "gen_ai.request.stream"), Some(any_value::Value::BoolValue(true))));
        assert_eq!(string(a, "server.address"), "127.0.0.1");
        assert!(int(a, "server.port") > 0);
        assert!(!string(a, "gen_ai.provider.name").is_empty());
        assert_eq!(string(a, "llmprobe.scenario"), "s");
        assert!(span.end_time_unix_nano > span.start_time_unix_nano);
        // Every string value is short: no prompt text rides along.
        for kv in a {
            assert!(!kv.key.contains("prompt") && !kv.key.contains("content"), "unexpected attribute {}", kv.key);
            if let Some(any_value::Value::StringValue(s)) = kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                assert!(s.len() < 100, "{} is suspiciously long: {s}", kv.key);
            }
        }
        if span.status.as_ref().is_some_and(|s| s.code == 2) {
            assert!(attr(a, "error.type").is_some());
            continue;
        }
        assert_eq!(int(a, "gen_ai.usage.output_tokens"), 8);
        // The behaviour checks that ran, and none failed.
        assert_eq!(string(a, "llmprobe.checks.ran"), "finish_reason,output_cap");
        assert_eq!(string(a, "llmprobe.checks.failed"), "");
        assert!(int(a, "gen_ai.usage.input_tokens") > 0);
        // The mock reports its prefix cache's share of the prompt (started as vLLM with
        // --enable-prompt-tokens-details); no reasoning was asked for, so none is reported.
        assert!(int(a, "gen_ai.usage.cache_read.input_tokens") <= int(a, "gen_ai.usage.input_tokens"));
        assert!(attr(a, "gen_ai.usage.reasoning.output_tokens").is_none());
        assert!(matches!(attr(a, "gen_ai.response.finish_reasons"), Some(any_value::Value::ArrayValue(_))));
        let ttft = double(a, "llmprobe.ttft_seconds");
        assert!((double(a, "gen_ai.response.time_to_first_chunk") - ttft).abs() < 1e-9);
        assert!(double(a, "llmprobe.e2e_seconds") >= ttft);
        assert!(matches!(attr(a, "llmprobe.slo.ttft.met"), Some(any_value::Value::BoolValue(_))));
        let events: Vec<&str> = span.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(events, ["first_byte", "first_token", "first_content_token", "end"]);
        assert!(span.events.windows(2).all(|w| w[0].time_unix_nano <= w[1].time_unix_nano));
        assert_eq!(span.events[3].time_unix_nano, span.end_time_unix_nano);
        let first_token = (span.events[1].time_unix_nano - span.start_time_unix_nano) as f64 / 1e9;
        assert!((first_token - ttft).abs() < 1e-5, "first_token event at {first_token}s vs ttft {ttft}s");
        if attr(a, "engine.requests_running").is_some() {
            joined += 1;
            assert!(double(a, "engine.kv_cache_usage") >= 0.0);
            assert!(double(a, "gpu.memory_used_bytes") > 0.0);
            assert!(double(a, "gpu.power_watts") > 0.0);
            assert!(double(a, "llmprobe.snapshot.age_seconds") < 0.2);
            assert!(attr(&span.events[1].attributes, "engine.requests_waiting").is_some(), "first_token event carries the snapshot");
        }
    }
    eprintln!("{} probe spans, {joined} joined with an engine/GPU snapshot", probes.len());
    assert!(joined >= 2, "too few spans joined with the engine snapshot: {joined}");

    // Exemplars on /metrics point at exported spans.
    let ids: HashSet<String> = probes.iter().map(|s| s.trace_id.iter().map(|b| format!("{b:02x}")).collect()).collect();
    let exemplar_ids: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("llmprobe_ttft_seconds_bucket"))
        .filter_map(|l| l.split("trace_id=\"").nth(1))
        .map(|rest| &rest[..32])
        .collect();
    assert!(!exemplar_ids.is_empty(), "no exemplars on the TTFT histogram:\n{metrics}");
    for id in exemplar_ids {
        assert!(ids.contains(id), "exemplar trace {id} was not exported");
    }
    assert!(metrics.contains("llmprobe_source_up{source=\"engine-t\"} 1"), "{metrics}");
    assert!(metrics.contains("llmprobe_source_up{source=\"dcgm\"} 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_over_grpc_and_http() {
    for protocol in ["grpc", "http/protobuf"] {
        let received = Received::default();
        let endpoint = match protocol {
            "grpc" => grpc_receiver(received.clone()).await,
            _ => http_receiver(received.clone()).await,
        };
        let metrics = run_prober(&endpoint, protocol).await;
        check_spans(&received, &metrics);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracing_is_per_run_not_per_process() {
    // Two probers in one process, one traced and one not, the traced one started second while
    // the other runs: it must not switch tracing on for the other.
    let received = Received::default();
    let endpoint = grpc_receiver(received.clone()).await;
    let untraced = run_prober_with("", "untraced");
    let traced = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        run_prober(&endpoint, "grpc").await
    };
    let (traced, untraced) = tokio::join!(traced, untraced);
    check_spans(&received, &traced);
    assert!(!untraced.contains("trace_id=\""), "the untraced prober exported exemplars:\n{untraced}");
}
