//! Every API family end to end over loopback against the mock engine's front-ends: tokens equal
//! the server's count, the TTFT/TTFC/ITL definitions hold (reasoning first, several tokens per
//! frame, buffered streams), non-streaming mode measures E2E only, and every fault kind maps to
//! its documented class on every family.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{config, metric, start_mock};
use llmprobe::app::{self, RunOptions};
use llmprobe::client::TargetRuntime;
use llmprobe::config::Slo;
use llmprobe::mock::MockOptions;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::measure::{Sample, TokenSource, measure};
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::workload::Draw;
use tokio_util::sync::CancellationToken;

const APIS: [&str; 8] = ["openai-completions", "openai-chat", "ollama-generate", "ollama-chat", "llamacpp", "tgi", "sglang", "openai-responses"];

fn slo() -> Slo {
    Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 }
}

/// One probe of `api` asking for 12 tokens, with extra mock headers and target YAML.
async fn probe(addr: std::net::SocketAddr, api: &str, headers: &str, extra: &str) -> Outcome {
    probe_with(addr, api, headers, extra, Draw { input_tokens: 32, output_tokens: 12, prompt: "why is the sky blue".into(), ..Draw::default() }).await
}

/// One probe of `api` with this draw (its lengths, reasoning and checks).
async fn probe_with(addr: std::net::SocketAddr, api: &str, headers: &str, extra: &str, draw: Draw) -> Outcome {
    let yaml = format!(
        "    model: mock-llama\n    headers: {{x-mock-stall-ms: \"3000\", x-mock-drip-ms: \"10\"{headers}}}\n    timeouts: {{connect: 1s, ttft: 700ms, idle: 700ms, total: 10s}}\n{extra}"
    );
    let cfg = config(&format!("http://{addr}"), api, "{rate: 1}", &yaml, 12);
    let target = Arc::new(TargetRuntime::new(cfg.targets[0].clone()).unwrap());
    execute(Probe { target, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

fn sample(o: &Outcome) -> Sample {
    assert_eq!(o.result, Ok(()), "{:?}", o.result);
    measure(o, &slo()).unwrap()
}

fn expected_source(api: &str) -> TokenSource {
    if api.starts_with("openai") { TokenSource::Usage } else { TokenSource::ApiCounter }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_counts_the_servers_tokens_and_times_each_frame() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    for api in APIS {
        let o = probe(addr, api, "", "").await;
        let s = sample(&o);
        assert_eq!((s.output_tokens, s.token_source), (12, expected_source(api)), "{api}");
        assert_eq!(o.timeline.text_frames.len(), 12, "{api}: one token per frame");
        assert_eq!(s.itl.len(), 11, "{api}: ITL per frame");
        assert_eq!(s.ttfc, Some(s.ttft), "{api}: no reasoning, TTFC = TTFT");
        assert!(s.ttft <= s.e2e && s.tpot.is_some(), "{api}");
        assert_eq!(s.multi_token_frames, 0, "{api}");
        assert!(!s.buffered, "{api}: a real stream is not buffered");
        assert!(s.tokens_per_frame.iter().all(|n| *n == 1.0), "{api}: {:?}", s.tokens_per_frame);
        if !api.starts_with("openai") {
            assert_eq!(o.finish_reason.as_deref(), Some("length"), "{api}");
        }
        // Ollama and llama.cpp report server phase times in the body.
        let phases: Vec<&str> = o.server_timing.phases().map(|(p, _)| p).collect();
        match api {
            "ollama-generate" | "ollama-chat" => {
                assert_eq!(phases, ["prefill", "decode", "total", "load"], "{api}")
            }
            "llamacpp" => assert_eq!(phases, ["prefill", "decode", "total"]),
            _ => assert!(phases.is_empty(), "{api}: {phases:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_first_moves_ttfc_not_ttft() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let o = probe(addr, "openai-chat", ", x-mock-reasoning-tokens: \"4\"", "").await;
    let s = sample(&o);
    let frames = &o.timeline.text_frames;
    assert!(frames[..4].iter().all(|f| f.reasoning_bytes > 0 && f.content_bytes == 0));
    assert_eq!(s.ttft, frames[0].at - o.timeline.sent, "TTFT on the first reasoning frame");
    assert_eq!(s.ttfc, Some(frames[4].at - o.timeline.sent), "TTFC on the first content frame");
    assert!(s.ttfc.unwrap() > s.ttft);
    assert_eq!(s.output_tokens, 12, "reasoning tokens are output tokens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_token_frames_are_seen_on_every_api() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    for api in APIS {
        let o = probe(addr, api, ", x-mock-fault: multi_token_frames", "").await;
        let s = sample(&o);
        assert_eq!(s.output_tokens, 12, "{api}");
        assert_eq!(o.timeline.text_frames.len(), 3, "{api}: 4 tokens per frame");
        assert_eq!(s.itl.len(), 2, "{api}: ITL per frame, not per token");
        assert_eq!(s.multi_token_frames, 3, "{api}");
        assert_eq!(s.tokens_per_frame, [4.0, 4.0, 4.0], "{api}");
        assert_eq!(s.tpot, Some((s.e2e - s.ttft) / 11), "{api}: TPOT stays per token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_streams_are_detected_on_every_api() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    for api in APIS {
        let o = probe(addr, api, ", x-mock-fault: buffered", "").await;
        let s = sample(&o);
        assert!(s.buffered, "{api}: frames in one burst, TTFT {:?} E2E {:?}", s.ttft, s.e2e);
        assert_eq!(s.output_tokens, 12);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_measures_e2e_and_tokens_only() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    // TGI's non-streaming `/generate` is not served by the mock; the replay tests cover it.
    for api in ["openai-completions", "openai-chat", "ollama-generate", "ollama-chat", "llamacpp", "sglang", "openai-responses"] {
        let o = probe(addr, api, "", "    stream: false").await;
        let s = sample(&o);
        assert!(!s.streamed, "{api}");
        assert_eq!((s.output_tokens, s.token_source), (12, expected_source(api)), "{api}");
        assert_eq!((s.tpot, s.ttfc, s.itl.len(), s.tokens_per_frame.len()), (None, None, 0, 0), "{api}");
        assert!(s.e2e > Duration::ZERO);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_maps_to_its_class_on_every_api() {
    use ErrorClass::*;
    // The APIs side by side, each one's faults in turn: the three timeouts cost 2 s per API.
    // Each on a thread and runtime of its own with its own mock, so that building one API's
    // clients (TLS roots, a few milliseconds of CPU) never holds up another's answers.
    let per_api = APIS.map(|api| async move {
        let (addr, _mock) = start_mock(MockOptions::default()).await;
        let mut wrong = Vec::new();
        // OpenAI and SGLang end with `[DONE]`; the others end on their last event.
        let ends_with_done = api.starts_with("openai") || api == "sglang";
        let table = [
            ("refuse", Some(Connect)),
            ("close_before_response", Some(Connect)),
            ("reset_mid_stream", Some(Truncated)),
            ("stall_ttft", Some(TimeoutTtft)),
            ("stall_mid_stream", Some(TimeoutIdle)),
            ("http_429", Some(Http429)),
            ("http_500", Some(Http5xx)),
            ("http_503", Some(Http5xx)),
            ("http_400", Some(Http4xx)),
            ("error_in_stream", Some(StreamError)),
            ("empty_stream", Some(EmptyStream)),
            // Only streams with a `[DONE]` have one to leave out; the others end on their last
            // event, which `no_done` keeps.
            ("no_done", if ends_with_done { Some(Truncated) } else { None }),
            ("malformed_json", Some(Parse)),
            ("invalid_utf8", Some(Parse)),
            ("oversized_frame", Some(Parse)),
            ("wrong_content_type", Some(Parse)),
            ("truncate_after_one", Some(Truncated)),
            // Bytes trickling in (10 ms each) do not extend the TTFT deadline.
            ("slow_drip", Some(TimeoutTtft)),
            ("buffered", None),
            ("multi_token_frames", None),
            // Compressed without being asked: decoded, and measured like the plain stream.
            ("gzip_stream", None),
        ];
        for (fault, expected) in table {
            let o = probe(addr, api, &format!(", x-mock-fault: {fault}"), "").await;
            if o.error_class() != expected {
                wrong.push(format!("{api} {fault}: expected {expected:?}, got {:?}", o.result));
            }
        }
        wrong
    });
    let threads = per_api.map(|run| std::thread::spawn(move || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(run)));
    let wrong: Vec<String> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_frame_shape_buffering_and_server_time() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let run = |api: &'static str, fault: &'static str| {
        let extra = format!("    model: mock-llama\n    headers: {{x-mock-fault: {fault}}}");
        config(&format!("http://{addr}"), api, "{rate: 15, seed: 5, shutdown_grace: 10s}", &extra, 12)
    };
    for (api, fault) in [("ollama-chat", "multi_token_frames"), ("tgi", "buffered")] {
        let stop = CancellationToken::new();
        let running = app::start(run(api, fault), RunOptions::default(), stop.clone()).await.unwrap();
        common::wait_for_metrics(running.metrics_addr, "5 successes", |t| metric(t, "llmprobe_requests_total", &["outcome=\"success\""]) >= 5.0).await;
        stop.cancel();
        let text = running.wait().await.unwrap().metrics.encode_openmetrics();
        let ok = metric(&text, "llmprobe_requests_total", &["outcome=\"success\""]);
        assert!(ok >= 5.0, "{api}: {ok}\n{text}");
        assert_eq!(metric(&text, "llmprobe_output_tokens_total", &[]), ok * 12.0, "{api}");
        assert_eq!(metric(&text, "llmprobe_token_count_fallback_total", &[]), 0.0);
        if fault == "multi_token_frames" {
            assert_eq!(metric(&text, "llmprobe_multi_token_frames_total", &[]), ok * 3.0, "{text}");
            assert_eq!(metric(&text, "llmprobe_tokens_per_frame_sum", &[]), ok * 12.0);
            assert_eq!(metric(&text, "llmprobe_server_time_seconds_count", &["phase=\"decode\""]), ok);
            assert!(text.contains("engine=\"ollama\",engine_version=\"0.12.0\""), "{text}");
        } else {
            assert_eq!(metric(&text, "llmprobe_stream_buffered_total", &[]), ok, "{text}");
            assert_eq!(metric(&text, "llmprobe_ttfc_seconds_count", &[]), ok);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_native_discovery_reads_model_and_version() {
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let cfg = config(&format!("http://{addr}"), "sglang", "{rate: 1}", "", 12);
    let target = TargetRuntime::new(cfg.targets[0].clone()).unwrap();
    let found = target.discover().await.unwrap();
    assert_eq!((found.model.as_str(), found.engine.as_str(), found.engine_version.as_str()), ("mock-llama", "sglang", "0.5.4"));
}

/// A reasoning effort goes out in each API's own field; the mock reasons first (24 tokens at
/// `low`) within the budget added to the length limit, then answers. Reasoning tokens come from
/// usage, TTFT is the first reasoning delta, TTFC the first answer delta, as on chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_effort_and_budget_on_chat_and_responses() {
    use llmprobe::config::{Checks, Reasoning, ReasoningEffort};
    let (addr, _mock) = start_mock(MockOptions::default()).await;
    let checks = std::sync::Arc::new(Checks { reasoning_exhausted: true, ..Checks::default() });
    for api in ["openai-chat", "openai-responses"] {
        let reasoning = Reasoning { effort: Some(ReasoningEffort::Low), budget_tokens: 32 };
        let draw =
            Draw { output_tokens: 12, prompt: "why is the sky blue".into(), reasoning: Some(reasoning), checks: Some(checks.clone()), ..Draw::default() };
        let o = probe_with(addr, api, "", "", draw).await;
        let s = sample(&o);
        assert_eq!(o.requested_output_tokens, 44, "{api}: the budget is added to the length limit");
        assert_eq!((s.output_tokens, s.reasoning_tokens), (44, Some(24)), "{api}");
        let frames = &o.timeline.text_frames;
        assert!(frames[..24].iter().all(|f| f.reasoning_bytes > 0 && f.content_bytes == 0), "{api}");
        assert!(frames[24..].iter().all(|f| f.content_bytes > 0 && f.reasoning_bytes == 0), "{api}");
        assert_eq!(s.ttft, frames[0].at - o.timeline.sent, "{api}: TTFT on the first reasoning delta");
        assert_eq!(s.ttfc, Some(frames[24].at - o.timeline.sent), "{api}: TTFC on the first answer delta");
        assert_eq!(o.finish_reason.as_deref(), Some("length"), "{api}");
        let report = o.checks.as_deref().unwrap();
        assert!(report.failed.is_empty() && report.ran == [llmprobe::checks::Check::ReasoningExhausted], "{api}: {report:?}");

        // Too small a budget: reasoning takes the whole limit, no answer. A classified failure.
        let small = Reasoning { effort: Some(ReasoningEffort::Low), budget_tokens: 4 };
        let draw = Draw { output_tokens: 12, prompt: "why".into(), reasoning: Some(small), checks: Some(checks.clone()), ..Draw::default() };
        let o = probe_with(addr, api, "", "", draw).await;
        let failure = o.result.as_ref().unwrap_err();
        assert_eq!(failure.class, ErrorClass::InvalidOutput, "{api}: {failure:?}");
        assert!(failure.detail.starts_with("reasoning_exhausted: reasoning used the whole length limit (16 tokens"), "{api}: {}", failure.detail);

        // Reasoning that never ends (the mock's fault), whatever the effort.
        let draw = Draw { output_tokens: 12, prompt: "why".into(), checks: Some(checks.clone()), ..Draw::default() };
        let o = probe_with(addr, api, ", x-mock-fault: endless_reasoning", "", draw).await;
        assert_eq!(o.error_class(), Some(ErrorClass::InvalidOutput), "{api}: {:?}", o.result);
        assert!(o.timeline.text_frames.iter().all(|f| f.content_bytes == 0), "{api}");
    }
}

/// The mock's prefix cache, reported as each engine reports it (vLLM's usage, llama.cpp's
/// `timings.cache_n`, SGLang's `meta_info.cached_tokens`): the same long prompt twice, the
/// second time its full blocks come from the cache (whole 16-token blocks, never the last token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_prompt_tokens_from_usage() {
    // Chat and completions report them as vLLM does with `--enable-prompt-tokens-details`.
    let (addr, _mock) = start_mock(MockOptions { prompt_tokens_details: true, ..MockOptions::default() }).await;
    for api in ["openai-chat", "openai-completions", "openai-responses", "llamacpp", "sglang"] {
        let prompt: String = (0..100).map(|i| format!("{api}{i} ")).collect();
        let draw = || Draw { output_tokens: 4, prompt: prompt.clone(), ..Draw::default() };
        let first = sample(&probe_with(addr, api, "", "", draw()).await);
        let again = probe_with(addr, api, "", "", draw()).await;
        let second = sample(&again);
        let input = second.input_tokens.unwrap();
        let cached = second.cached_tokens.unwrap();
        assert!(first.cached_tokens.unwrap() < cached, "{api}: {first:?} then {second:?}");
        assert!(cached % 16 == 0 && cached > 0 && cached < input, "{api}: {cached} of {input}");
        assert_eq!(again.usage.or(again.api_counter).unwrap().cached_tokens, Some(cached), "{api}");
    }
}
