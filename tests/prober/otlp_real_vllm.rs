//! Against a real vLLM server (ignored unless asked for): the prober with OTLP export to an
//! in-process receiver and an engine source on vLLM's own `/metrics`. The probe spans carry the
//! engine snapshot read from vLLM's real metric names; with the sources pointed at a wrong URL,
//! probing goes on and `llmprobe_source_up` is 0.
//!
//! Run: `LLMPROBE_REAL_VLLM=http://127.0.0.1:8000 cargo test --test prober otlp_real_vllm -- --ignored --nocapture`

use crate::otlp_receiver;

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use tokio_util::sync::CancellationToken;

use otlp_receiver::{Received, http_receiver, spans};

fn vllm() -> String {
    std::env::var("LLMPROBE_REAL_VLLM").expect("set LLMPROBE_REAL_VLLM=http://HOST:PORT of a running vLLM server")
}

fn number(attrs: &[KeyValue], key: &str) -> Option<f64> {
    match attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()? {
        any_value::Value::DoubleValue(d) => Some(*d),
        any_value::Value::IntValue(i) => Some(*i as f64),
        _ => None,
    }
}

/// Runs the prober for `secs` against the vLLM server with the given `sources:` YAML; returns
/// the spans received and the final exposition.
async fn run(sources: &str, secs: u64) -> (Vec<Span>, String) {
    let received = Received::default();
    let endpoint = http_receiver(received.clone()).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 4, seed: 3, shutdown_grace: 20s, max_in_flight: 64}}\n\
         targets:\n  - {{name: vllm, base_url: \"{}\", api: openai-chat, timeouts: {{ttft: 20s, total: 60s}}}}\n\
         scenarios:\n  - {{name: s, input_tokens: 64, output_tokens: 32}}\n\
         tracing: {{endpoint: \"{endpoint}\", protocol: http/protobuf}}\n{sources}",
        vllm()
    );
    let config = llmprobe::app::loader::parse(&yaml, "real-vllm.yaml").unwrap_or_else(|e| panic!("{e}"));
    let stop = CancellationToken::new();
    let running = llmprobe::app::start(config, Default::default(), stop.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.cancel();
    let report = running.wait().await.unwrap();
    assert_eq!(report.accounting.scheduled(), report.accounting.recorded());
    (spans(&received), report.metrics.encode_openmetrics())
}

fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(prefix)).and_then(|v| v.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real vLLM server: set LLMPROBE_REAL_VLLM"]
async fn probe_spans_carry_the_vllm_engine_snapshot() {
    let (spans, metrics) = run("sources:\n  - {kind: engine, target: vllm, interval: 100ms, timeout: 100ms}\n", 8).await;
    let probes: Vec<&Span> = spans.iter().filter(|s| s.name == "chat tiny-llama").collect();
    assert!(probes.len() >= 10, "probe spans: {}", probes.len());
    assert_eq!(sample(&metrics, r#"llmprobe_source_up{source="engine-vllm"} "#), Some(1.0));
    let mut joined = 0;
    let (mut max_running, mut max_waiting, mut max_kv) = (0.0f64, 0.0f64, 0.0f64);
    for span in &probes {
        let a = &span.attributes;
        let Some(running) = number(a, "engine.requests_running") else {
            continue;
        };
        let waiting = number(a, "engine.requests_waiting").expect("engine.requests_waiting");
        let kv = number(a, "engine.kv_cache_usage").expect("engine.kv_cache_usage");
        assert!(running >= 0.0 && waiting >= 0.0 && (0.0..=1.0).contains(&kv), "{running} {waiting} {kv}");
        let age = number(a, "llmprobe.snapshot.age_seconds").expect("snapshot age");
        eprintln!(
            "span {}: engine.requests_running={running} engine.requests_waiting={waiting} engine.kv_cache_usage={kv} snapshot.age={age:.3}s",
            number(a, "llmprobe.seq").unwrap_or(-1.0)
        );
        joined += 1;
        max_running = max_running.max(running);
        max_waiting = max_waiting.max(waiting);
        max_kv = max_kv.max(kv);
    }
    eprintln!("{} probe spans, {joined} joined; max running {max_running}, waiting {max_waiting}, kv_cache_usage {max_kv}", probes.len());
    assert!(joined * 2 >= probes.len(), "only {joined} of {} spans joined", probes.len());
    // With probes overlapping on the server, some snapshot saw a running request using KV cache.
    assert!(max_running >= 1.0 && max_kv > 0.0, "running {max_running}, kv {max_kv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real vLLM server: set LLMPROBE_REAL_VLLM"]
async fn sources_down_leave_probing_running_and_source_up_zero() {
    let sources = "sources:\n  - {name: wrong-engine, kind: engine, url: \"http://127.0.0.1:9/metrics\", interval: 100ms, timeout: 100ms}\n  - {name: wrong-path, kind: engine, target: vllm, url: \"REAL/no-such-metrics\", interval: 100ms, timeout: 100ms}\n"
        .replace("REAL", &vllm());
    let (spans, metrics) = run(&sources, 4).await;
    let probes: Vec<&Span> = spans.iter().filter(|s| s.name == "chat tiny-llama").collect();
    let ok = probes.iter().filter(|s| s.status.as_ref().is_none_or(|st| st.code != 2)).count();
    eprintln!("{} probe spans ({ok} ok) with both sources down", probes.len());
    assert!(ok >= 5, "probing must go on: {ok} successful spans");
    assert!(probes.iter().all(|s| number(&s.attributes, "engine.requests_running").is_none()), "no snapshot to join");
    for source in ["wrong-engine", "wrong-path"] {
        let up = sample(&metrics, &format!("llmprobe_source_up{{source=\"{source}\"}} "));
        eprintln!("llmprobe_source_up{{source=\"{source}\"}} = {up:?}");
        assert_eq!(up, Some(0.0), "{source}");
    }
    let successes = sample(&metrics, r#"llmprobe_requests_total{target="vllm",scenario="s",outcome="success",error="none"} "#);
    assert!(successes.unwrap_or(0.0) >= 5.0, "successes counted: {successes:?}");
}
