//! The prober end to end over real loopback HTTP against the built-in mock engine: metrics move,
//! tokens equal the server's usage, a dead target is counted, and every scheduled probe is
//! accounted for. (Every fault kind mapped to its class, per API: `probe_protocols.rs`.)

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use common::{config, metric, run_until, start_mock, wait_for_metrics};
use llmprobe::app::{self, RunOptions};
use llmprobe::client::TargetRuntime;
use llmprobe::mock::MockOptions;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::measure::{TokenSource, measure};
use llmprobe::probe::outcome::Outcome;
use llmprobe::workload::Draw;
use tokio_util::sync::CancellationToken;

fn successes(text: &str) -> f64 {
    metric(text, "llmprobe_requests_total", &["outcome=\"success\""])
}

fn scheduled(text: &str) -> f64 {
    metric(text, "llmprobe_probes_scheduled_total", &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn success_path_counts_tokens_from_usage_and_agrees_with_the_engine() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let base = format!("http://{addr}");
    let cfg = config(&base, "openai-chat", "{rate: 20, seed: 1, shutdown_grace: 10s}", "    model: mock-llama", 24);
    let (text, report) = run_until(cfg, "15 successes", |t| successes(t) >= 15.0).await;

    let ok = metric(&text, "llmprobe_requests_total", &["outcome=\"success\""]);
    assert!(ok >= 15.0, "successes {ok}\n{text}");
    assert_eq!(metric(&text, "llmprobe_requests_total", &["outcome=\"error\""]), 0.0);
    assert_eq!(metric(&text, "llmprobe_ttft_seconds_count", &[]), ok);
    assert_eq!(metric(&text, "llmprobe_goodput_requests_total", &[]), ok);
    assert_eq!(metric(&text, "llmprobe_output_tokens_total", &[]), ok * 24.0, "ignore_eos: every probe gets exactly 24 tokens");
    assert_eq!(metric(&text, "llmprobe_token_count_fallback_total", &[]), 0.0);
    assert_eq!(metric(&text, "llmprobe_itl_seconds_count", &[]), ok * 23.0);
    assert_eq!(metric(&text, "llmprobe_schedule_lag_seconds_count", &[]), ok);
    assert_eq!(report.accounting.scheduled(), ok as u64);

    // The engine's own counter agrees with what the prober read from usage.
    let engine = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    assert_eq!(metric(&engine, "vllm:generation_tokens_total", &[]), ok * 24.0);
    assert!(text.contains("llmprobe_target_info{target=\"t\",model=\"mock-llama\",engine=\"vllm\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_is_discovered_when_omitted() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let cfg = config(&format!("http://{addr}"), "openai-completions", "{rate: 10, seed: 2}", "", 8);
    let (text, _) = run_until(cfg, "3 successes", |t| successes(t) >= 3.0).await;
    assert!(metric(&text, "llmprobe_requests_total", &["outcome=\"success\""]) >= 3.0, "{text}");
}

/// One probe through the executor with `x-mock-fault: <fault>` and small timeouts.
async fn probe_with_fault(addr: std::net::SocketAddr, fault: &str) -> Outcome {
    let extra = format!(
        "    model: mock-llama\n    headers: {{x-mock-fault: {fault}, x-mock-stall-ms: \"3000\", x-mock-drip-ms: \"1\"}}\n    timeouts: {{connect: 1s, ttft: 700ms, idle: 700ms, total: 10s}}"
    );
    let cfg = config(&format!("http://{addr}"), "openai-chat", "{rate: 1}", &extra, 12);
    let target = Arc::new(TargetRuntime::new(cfg.targets[0].clone()).unwrap());
    let draw = Draw { input_tokens: 32, output_tokens: 12, prompt: "a b c d".into(), ..Draw::default() };
    execute(Probe { target, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_token_frames_keep_tpot_per_token() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let outcome = probe_with_fault(addr, "multi_token_frames").await;
    let slo = llmprobe::config::Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 };
    let sample = measure(&outcome, &slo).unwrap();
    assert_eq!((sample.output_tokens, sample.token_source), (12, TokenSource::Usage));
    assert!(outcome.timeline.text_frames.len() < 12, "frames carry several tokens");
    assert_eq!(sample.itl.len(), outcome.timeline.text_frames.len() - 1);
    let per_token = (sample.e2e - sample.ttft) / 11;
    assert_eq!(sample.tpot, Some(per_token));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_target_is_counted_as_connect_errors_while_metrics_stay_up() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let cfg = config(&format!("http://{dead}"), "openai-chat", "{rate: 20, seed: 3}", "", 8);
    let stop = CancellationToken::new();
    let running = app::start(cfg, RunOptions::default(), stop.clone()).await.unwrap();
    // The metrics server answers while every probe fails.
    wait_for_metrics(running.metrics_addr, "10 connect errors", |t| metric(t, "llmprobe_requests_total", &["error=\"connect\""]) >= 10.0).await;
    stop.cancel();
    let report = running.wait().await.unwrap();
    let text = report.metrics.encode_openmetrics();
    assert_eq!(metric(&text, "llmprobe_requests_total", &[]), report.accounting.scheduled() as f64);
    assert_eq!(metric(&text, "llmprobe_requests_total", &["outcome=\"success\""]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounting_holds_with_drops_and_cancellations() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let extra = "    model: mock-llama\n    headers: {x-mock-fault: stall_ttft, x-mock-stall-ms: \"20000\"}\n    timeouts: {connect: 1s, ttft: 10s, idle: 10s, total: 20s}";
    let cfg = config(&format!("http://{addr}"), "openai-chat", "{rate: 40, seed: 4, max_in_flight: 5, shutdown_grace: 200ms}", extra, 8);
    let (text, report) = run_until(cfg, "20 scheduled probes", |t| scheduled(t) >= 20.0).await;
    let scheduled = report.accounting.scheduled() as f64;
    assert!(scheduled >= 20.0);
    assert_eq!(metric(&text, "llmprobe_requests_total", &[]), scheduled, "{text}");
    assert_eq!(metric(&text, "llmprobe_requests_total", &["outcome=\"error\"", "error=\"cancelled\""]), 5.0);
    assert_eq!(metric(&text, "llmprobe_requests_total", &["outcome=\"dropped\"", "error=\"in_flight_cap\""]), scheduled - 5.0);
    assert_eq!(report.accounting.recorded(), report.accounting.scheduled());
}

/// A probe counts against the in-flight cap from its send time, not from when it is handed to
/// the runtime (20 ms earlier): at 50/s (20 ms apart) with a cap of 1 and answers of a few
/// milliseconds, a probe never overlaps the one before it, so none is dropped. Counting from
/// the hand-over would find the previous probe just sent, and drop about every other one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_cap_counts_from_the_send_time() {
    let profile = llmprobe::mock::Profile { step_base_us: 1_000.0, ..llmprobe::mock::Profile::small_gpu() };
    let (addr, _mock) = start_mock(MockOptions { profile, ..MockOptions::default() }).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 50, seed: 5, max_in_flight: 1}}\ntargets:\n  - name: t\n    base_url: http://{addr}\n    api: openai-completions\n    model: mock-llama\n    ignore_eos: true\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 1, arrival: {{kind: constant}}}}\n"
    );
    let cfg = llmprobe::app::loader::parse(&yaml, "test.yaml").unwrap();
    let (text, report) = run_until(cfg, "60 scheduled probes", |t| scheduled(t) >= 60.0).await;
    let scheduled = report.accounting.scheduled() as f64;
    let dropped = metric(&text, "llmprobe_requests_total", &["outcome=\"dropped\""]);
    assert!(scheduled >= 60.0, "scheduled {scheduled}");
    // A loaded machine (tests running side by side) may make an answer take longer than the
    // 20 ms between probes now and then; counting from the hand-over drops about half.
    assert!(dropped <= scheduled * 0.25, "dropped {dropped} of {scheduled}\n{text}");
    assert_eq!(metric(&text, "llmprobe_requests_total", &[]), scheduled);
    assert_eq!(report.accounting.recorded(), report.accounting.scheduled());
}
