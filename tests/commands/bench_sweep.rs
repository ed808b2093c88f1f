//! Bench sweeps over real loopback HTTP against the mock engine (port 0): a closed-loop
//! concurrency sweep and an open-arrival rate sweep with a cap, checked for accounting
//! (every scheduled request is a record: success + failed + dropped), nearest-rank percentiles
//! recomputed from the records, the manifest and the report; a bursty gamma-arrival sweep; and
//! the input tokens of every API family's records.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprobe::bench::records::{self, Phase, Record};
use llmprobe::bench::summary::SummaryFile;
use llmprobe::bench::{self, BenchOptions, BenchPlan};
use llmprobe::mock::{MockOptions, Profile};
use llmprobe::util::stats::{percentile, sort_f64};

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llmprobe-{tag}-{}", uuid::Uuid::new_v4()))
}

fn plan(base_url: &str, bench_yaml: &str, output_tokens: u32) -> BenchPlan {
    plan_for("openai-chat", base_url, bench_yaml, output_tokens)
}

/// A plan for a target of API family `api` (native families name their model: they have no
/// model list to discover it from).
fn plan_for(api: &str, base_url: &str, bench_yaml: &str, output_tokens: u32) -> BenchPlan {
    let model = if api.starts_with("openai") { "" } else { "    model: mock-llama\n" };
    let text = format!(
        "probe: {{seed: 3}}\ntargets:\n  - name: t\n    base_url: {base_url}\n    api: {api}\n{model}    timeouts: {{connect: 1s, ttft: 5s, idle: 5s, total: 10s}}\nscenarios:\n  - {{name: a, weight: 3, input_tokens: 32, output_tokens: {output_tokens}}}\n  - {{name: b, weight: 1, input_tokens: 64, output_tokens: {output_tokens}}}\nslo: {{ttft: 2s, tpot: 500ms, objective: 0.9}}\nbench:\n{bench_yaml}"
    );
    let cfg = llmprobe::app::loader::parse(&text, "bench-test.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    BenchPlan::new(cfg, "bench-test.yaml", &text).unwrap()
}

fn opts(dir: &Path) -> BenchOptions {
    BenchOptions { output: dir.to_path_buf(), target: None, server_pid: Some(std::process::id()), sample_every: Duration::from_millis(50), quiet: true }
}

fn nearest(mut v: Vec<f64>, q: f64) -> Option<f64> {
    sort_f64(&mut v);
    percentile(&v, q)
}

/// Every repeat's counts and percentiles equal what the records say.
fn check_against_records(summary: &SummaryFile, recs: &[Record]) {
    for p in &summary.points {
        for r in &p.repeats {
            let mine: Vec<&Record> = recs.iter().filter(|x| x.point == p.point && x.repeat == r.repeat && x.phase == Phase::Measure).collect();
            assert_eq!(r.requests as usize, mine.len());
            assert_eq!(r.requests, r.success + r.failed + r.dropped, "accounting at point {} repeat {:?}", p.point, r.repeat);
            assert_eq!(r.success as usize, mine.iter().filter(|x| x.is_success()).count());
            assert_eq!(r.dropped as usize, mine.iter().filter(|x| x.is_dropped()).count());
            assert_eq!(r.errors.values().sum::<u64>(), r.failed + r.dropped);
            let ok = || mine.iter().filter(|x| x.is_success());
            for (q, got) in [(0.5, r.ttft_p50_ms), (0.95, r.ttft_p95_ms), (0.99, r.ttft_p99_ms)] {
                assert_eq!(got, nearest(ok().filter_map(|x| x.ttft_ms).collect(), q));
            }
            assert_eq!(r.tpot_p99_ms, nearest(ok().filter_map(|x| x.tpot_ms).collect(), 0.99));
            assert_eq!(r.e2e_p95_ms, nearest(ok().filter_map(|x| x.e2e_ms).collect(), 0.95));
            assert_eq!(r.itl_p95_ms, nearest(ok().flat_map(|x| x.itl_gaps_ms.clone()).collect(), 0.95));
            let tokens: u64 = ok().filter_map(|x| x.output_tokens).sum();
            assert!((r.output_token_throughput_per_s - tokens as f64 / r.duration_s).abs() < 1e-6);
            assert_eq!(r.goodput_requests as usize, mine.iter().filter(|x| x.is_goodput()).count());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_sweep_writes_consistent_evidence() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    let plan = plan(&format!("http://{addr}"), "  mode: concurrency\n  concurrency: [1, 3]\n  warmup_requests: 2\n  repeats: 2\n  requests: 6\n", 4);
    let dir = temp_dir("bench-conc");
    let summary = bench::run(&plan, &opts(&dir)).await.unwrap();
    stop.cancel();

    let recs = records::read(&dir).unwrap();
    assert_eq!(recs.len(), 2 * (2 + 2 * 6), "warm-up + repeats × requests per point");
    assert_eq!(recs.iter().filter(|r| r.phase == Phase::Warmup).count(), 4);
    assert!(recs.iter().all(|r| r.is_success() && r.output_tokens == Some(4) && r.token_source.as_deref() == Some("usage")));
    assert!(recs.iter().all(|r| r.sent_s >= r.intended_s && r.end_s >= r.sent_s && r.first_token_s.unwrap() >= r.sent_s));
    assert!(recs.iter().any(|r| r.scenario == "b"), "the mix draws both scenarios");
    let ids: std::collections::HashSet<&str> = recs.iter().map(|r| r.request_id.as_str()).collect();
    assert_eq!(ids.len(), recs.len(), "request IDs are unique");
    assert_eq!(summary.points.iter().map(|p| p.load).collect::<Vec<_>>(), vec![1.0, 3.0]);
    assert_eq!(summary.points[0].repeats.len(), 2);
    assert_eq!(summary.points[0].warmup_requests, 2);
    assert!(summary.points[0].spread["ttft_p95_ms"].n == 2);
    check_against_records(&summary, &recs);
    let on_disk: SummaryFile = bench::read_json(&dir.join("summary.json")).unwrap();
    assert_eq!(on_disk, summary);

    let m = bench::manifest::read(&dir).unwrap();
    assert_eq!(m.config_sha256.len(), 64);
    assert_eq!(m.target.model.as_deref(), Some("mock-llama"));
    assert_eq!(m.target.engine_version.as_deref(), Some("0.32.0"));
    assert!(m.ended_unix_s.unwrap() >= m.started_unix_s);
    assert!(m.machine.available_parallelism >= 1);
    // The process sampler, and the engine page the mock serves (found on the target's /metrics).
    assert_eq!(m.side_samples.iter().map(|f| f.file.as_str()).collect::<Vec<_>>(), vec!["process.jsonl", "engine.jsonl"]);
    let samples = std::fs::read_to_string(dir.join("process.jsonl")).unwrap();
    assert!(samples.lines().count() >= 1 && samples.contains("\"rss_bytes\""));
    let engine = std::fs::read_to_string(dir.join("engine.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(engine.lines().next().expect("an engine sample")).unwrap();
    assert_eq!(first["run_id"], m.run_id.as_str());
    assert!(first["requests_running"].is_number() && first["kv_cache_usage"].is_number() && first["t_s"].is_number());

    // Engine agreement: every measured repeat has one, and the mock's counters saw exactly the
    // repeat's requests and tokens (warm-up stays outside the windows).
    assert_eq!(m.engine_metrics_url.as_deref(), Some(format!("http://{addr}/metrics").as_str()));
    for p in &summary.points {
        assert!(p.pooled.engine_agreement.is_none());
        for r in &p.repeats {
            let a = r.engine_agreement.as_ref().expect("agreement for every repeat");
            assert_eq!((a.engine_requests, a.client_requests), (6, 6), "load {} repeat {:?}", p.load, r.repeat);
            assert_eq!((a.engine_generation_tokens, a.client_output_tokens), (24, 24));
            assert!(a.tokens_equal);
            let (c, e) = (a.client_ttft_mean_ms.unwrap(), a.engine_ttft_mean_ms.unwrap());
            assert!((a.delta_ms.unwrap() - (c - e)).abs() < 1e-9 && e > 0.0);
        }
    }
    assert!(std::fs::read_to_string(dir.join("report.md")).unwrap().contains("## Engine agreement"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("TTFT CDF") && !html.contains("http://www.w3.org/1999") && !html.contains("<script"));
    assert!(std::fs::read_to_string(dir.join("report.md")).unwrap().contains("Candidate knee"));
    // Evidence is never overwritten.
    assert!(bench::run(&plan, &opts(&dir)).await.is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_sweep_counts_drops_at_the_cap() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::small_gpu(), ..Default::default() }).await;
    // 60 req/s against requests that take ~0.3 s with at most 2 in flight: most are dropped.
    let plan = plan(
        &format!("http://{addr}"),
        "  mode: rate\n  rates: [5, 60]\n  max_concurrency: 2\n  arrival: constant\n  repeats: 1\n  requests: 12\n  duration: 2s\n",
        16,
    );
    let dir = temp_dir("bench-rate");
    let summary = bench::run(&plan, &opts(&dir)).await.unwrap();
    stop.cancel();
    let recs = records::read(&dir).unwrap();
    check_against_records(&summary, &recs);
    let heavy = &summary.points[1].repeats[0];
    assert_eq!(heavy.requests, 12);
    assert!(heavy.dropped > 0, "{heavy:?}");
    assert_eq!(heavy.errors.get("in_flight_cap").copied().unwrap_or(0), heavy.dropped);
    assert_eq!(heavy.target_rate_rps, Some(60.0));
    let offered = heavy.offered_rate_rps.unwrap();
    assert!((offered - 60.0).abs() < 1.0, "constant arrivals at 60/s, offered {offered}");
    assert!(recs.iter().filter(|r| r.is_dropped()).all(|r| r.ttft_ms.is_none() && r.slo.is_none()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_timeout_cancels_and_still_accounts() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::small_gpu(), ..Default::default() }).await;
    // 200 output tokens take ~2.5 s; the point may last 400 ms.
    let plan = plan(&format!("http://{addr}"), "  mode: concurrency\n  concurrency: [2]\n  repeats: 1\n  requests: 4\n  point_timeout: 400ms\n", 200);
    let dir = temp_dir("bench-timeout");
    let summary = bench::run(&plan, &opts(&dir)).await.unwrap();
    stop.cancel();
    let r = &summary.points[0].repeats[0];
    assert_eq!((r.requests, r.success, r.failed), (2, 0, 2), "{r:?}");
    assert_eq!(r.errors.get("cancelled"), Some(&2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `arrival: {kind: gamma, cv: 2}` drives the sweep open-loop: the intended send times are as
/// bursty as asked (gaps with CV near 2, seeded so the figure is fixed) and never wait for a
/// response (bursts put several requests in flight at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gamma_arrivals_drive_a_bursty_open_loop() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    let plan = plan(
        &format!("http://{addr}"),
        "  mode: open\n  rates: [50]\n  arrival: {kind: gamma, cv: 2}\n  repeats: 1\n  requests: 150\n  duration: 20s\n  point_timeout: 25s\n",
        4,
    );
    assert_eq!(plan.bench.mode, llmprobe::config::BenchMode::Rate, "mode open is mode rate");
    let dir = temp_dir("bench-gamma");
    let summary = bench::run(&plan, &opts(&dir)).await.unwrap();
    stop.cancel();
    let recs = records::read(&dir).unwrap();
    check_against_records(&summary, &recs);
    assert_eq!(recs.len(), 150);
    assert!(recs.iter().all(|r| r.is_success()), "no cap reached at the default max_concurrency");
    let m = bench::manifest::read(&dir).unwrap();
    assert_eq!(m.arrival.as_deref(), Some("gamma (burstiness 0.25, cv 2)"));
    let mut intended: Vec<f64> = recs.iter().map(|r| r.intended_s).collect();
    sort_f64(&mut intended);
    let gaps: Vec<f64> = intended.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let cv = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt() / mean;
    assert!(cv > 1.5, "gamma gaps with cv 2 drawn, measured cv {cv}");
    let overlapping = recs.iter().filter(|r| recs.iter().any(|o| o.intended_s < r.intended_s && o.end_s > r.sent_s)).count();
    assert!(overlapping > 10, "open loop: requests are sent while earlier ones run ({overlapping})");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ollama, TGI, llama.cpp and SGLang report the prompt's tokens in their own counters, not in usage: the
/// records carry them all the same (as the prober's samples do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_api_records_carry_input_tokens() {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    for api in ["ollama-generate", "ollama-chat", "tgi", "llamacpp", "sglang"] {
        let plan = plan_for(api, &format!("http://{addr}"), "  mode: concurrency\n  concurrency: [2]\n  repeats: 1\n  requests: 4\n", 4);
        let dir = temp_dir("bench-native");
        bench::run(&plan, &opts(&dir)).await.unwrap();
        let recs = records::read(&dir).unwrap();
        assert_eq!(recs.len(), 4, "{api}");
        for r in &recs {
            assert!(r.is_success(), "{api}: {r:?}");
            assert_eq!(r.token_source.as_deref(), Some("api_counter"), "{api}");
            let input = r.input_tokens.unwrap_or_else(|| panic!("{api}: no input tokens in {r:?}"));
            assert!(input >= u64::from(r.requested_input_tokens) / 2 && input > 0, "{api}: {input} input tokens for {} requested", r.requested_input_tokens);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    stop.cancel();
}
