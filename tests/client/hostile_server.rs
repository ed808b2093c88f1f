//! A server that answers with huge, negative, fractional and overflowing numbers in usage,
//! timings, durations and headers, on every API family, probed by a full prober run next to a
//! healthy mock target: each hostile probe is classified (`parse`, or success with capped
//! counts), the healthy target's metrics keep growing, `/readyz` stays 200 (no component
//! down), no internal error is counted, and every scheduled probe is recorded.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{metric, start_mock};
use llmprobe::app::{self, RunOptions};
use llmprobe::mock::MockOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Stream bodies per API path; each request gets the next one of its path, round robin.
fn bodies(path: &str) -> Vec<(String, String)> {
    let sse = "text/event-stream".to_owned();
    let nd = "application/x-ndjson".to_owned();
    let chat = |usage: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"hi\"}},\"finish_reason\":null}}]}}\n\n\
             data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{usage}}}\n\ndata: [DONE]\n\n"
        )
    };
    let responses = |usage: &str| {
        format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}}\n\n\
             event: response.completed\ndata: {{\"type\":\"response.completed\",\"response\":{{\"status\":\"completed\",\"usage\":{usage}}}}}\n\n"
        )
    };
    match path {
        "/v1/responses" => vec![
            (sse.clone(), responses(r#"{"input_tokens":1,"output_tokens":4294967297}"#)),
            (
                sse.clone(),
                responses(r#"{"input_tokens":18446744073709551615,"input_tokens_details":{"cached_tokens":18446744073709551615},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":18446744073709551615}}"#),
            ),
            (sse.clone(), responses(r#"{"input_tokens":2,"input_tokens_details":{"cached_tokens":-1},"output_tokens":2}"#)),
            (sse, responses(r#"{"input_tokens":2,"output_tokens":2,"output_tokens_details":{"reasoning_tokens":2.5}}"#)),
        ],
        "/v1/chat/completions" => vec![
            (sse.clone(), chat(r#"{"prompt_tokens":1,"completion_tokens":4294967297}"#)),
            (sse.clone(), chat(r#"{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551615}"#)),
            (sse.clone(), chat(r#"{"prompt_tokens":-1,"completion_tokens":-5}"#)),
            (sse.clone(), chat(r#"{"prompt_tokens":1.5,"completion_tokens":2.5}"#)),
            (sse, chat(r#"{"prompt_tokens":1e400,"completion_tokens":18446744073709551616}"#)),
        ],
        "/completion" => vec![
            (sse.clone(), "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true,\"stop_type\":\"limit\",\"timings\":{\"prompt_n\":1,\"prompt_ms\":1e308,\"predicted_n\":4294967297,\"predicted_ms\":1e308}}\n\n".into()),
            (sse.clone(), "data: {\"content\":\"a\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true,\"timings\":{\"prompt_ms\":-1,\"predicted_ms\":0.5}}\n\n".into()),
            (sse, "data: {\"content\":\"a\",\"stop\":false,\"tokens_predicted\":18446744073709551615}\n\ndata: {\"content\":\"\",\"stop\":true,\"timings\":{\"predicted_n\":18446744073709551615,\"prompt_ms\":1,\"predicted_ms\":2}}\n\n".into()),
        ],
        "/api/generate" => vec![
            (nd.clone(), "{\"response\":\"a\",\"done\":false}\n{\"response\":\"\",\"done\":true,\"eval_count\":18446744073709551615,\"total_duration\":18446744073709551615}\n".into()),
            (nd, "{\"response\":\"a\",\"done\":false}\n{\"response\":\"\",\"done\":true,\"eval_count\":3,\"prompt_eval_count\":4294967297,\"eval_duration\":1000}\n".into()),
        ],
        "/generate_stream" => vec![(sse, "data:{\"index\":18446744073709551615,\"token\":{\"id\":1,\"text\":\"a\",\"special\":false}}\n\ndata:{\"index\":0,\"token\":{\"id\":2,\"text\":\"b\",\"special\":false},\"generated_text\":\"ab\",\"details\":{\"finish_reason\":\"length\",\"generated_tokens\":18446744073709551615}}\n\n".into())],
        _ => Vec::new(),
    }
}

/// A raw HTTP/1.1 server: reads one request, writes one hostile answer, closes.
async fn start_hostile() -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let counter = Arc::new(AtomicUsize::new(0));
    let s = stop.clone();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = tokio::select! {
                c = listener.accept() => c.unwrap(),
                _ = s.cancelled() => return,
            };
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 1 << 16 {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&req).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let (ctype, body, extra) = if path.starts_with("/v1/models") {
                    ("application/json".to_owned(), r#"{"data":[{"id":"m","owned_by":"vllm"}]}"#.to_owned(), String::new())
                } else {
                    let options = bodies(&path);
                    if options.is_empty() {
                        ("application/json".to_owned(), "{}".to_owned(), String::new())
                    } else {
                        let (c, b) = options[n % options.len()].clone();
                        // TGI sends its timings as headers: absurd ones here.
                        let extra = if path == "/generate_stream" { "x-total-time: 1e308\r\nx-queue-time: -4\r\n".to_owned() } else { String::new() };
                        (c, b, extra)
                    }
                };
                let resp = format!("HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = conn.write_all(resp.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (addr, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_server_does_not_stop_the_prober() {
    let (hostile, _hstop) = start_hostile().await;
    let (mock, _mstop) = start_mock(MockOptions::default()).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 15, seed: 9, shutdown_grace: 3s}}\ntargets:\n\
         - {{name: healthy, base_url: \"http://{mock}\", api: openai-chat, model: mock-llama}}\n\
         - {{name: chat, base_url: \"http://{hostile}\", api: openai-chat}}\n\
         - {{name: llamacpp, base_url: \"http://{hostile}\", api: llamacpp, model: m}}\n\
         - {{name: ollama, base_url: \"http://{hostile}\", api: ollama-generate, model: m}}\n\
         - {{name: tgi, base_url: \"http://{hostile}\", api: tgi, model: m}}\n\
         - {{name: responses, base_url: \"http://{hostile}\", api: openai-responses, model: m}}\n\
         scenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n"
    );
    let config = llmprobe::app::loader::parse(&yaml, "test").unwrap();
    let shutdown = CancellationToken::new();
    let running = app::start(config, RunOptions::default(), shutdown.clone()).await.unwrap();
    let url = format!("http://{}", running.metrics_addr);
    // Four rounds: in each, every hostile target answers more probes and the healthy target's
    // successes keep growing, and the prober stays ready.
    let counts = |t: &str| {
        let healthy = metric(t, "llmprobe_requests_total", &["target=\"healthy\"", "outcome=\"success\""]);
        let hostile = ["chat", "llamacpp", "ollama", "tgi", "responses"].map(|name| metric(t, "llmprobe_requests_total", &[&format!("target=\"{name}\"")]));
        (healthy, hostile)
    };
    let mut before = (0.0, [0.0; 5]);
    for round in 0..4 {
        let grown = |t: &str| {
            let (healthy, hostile) = counts(t);
            healthy > before.0 && hostile.iter().zip(before.1).all(|(now, was)| *now > was)
        };
        let text = common::wait_for_metrics(running.metrics_addr, &format!("round {round}: more probes on every target"), grown).await;
        let ready = reqwest::get(format!("{url}/readyz")).await.unwrap();
        assert_eq!(ready.status(), 200, "round {round}: {}", ready.text().await.unwrap());
        before = counts(&text);
    }
    let health = running.health.clone();
    shutdown.cancel();
    let report = running.wait().await.unwrap();
    assert!(health.not_ready_reasons().iter().all(|r| !r.contains("down")), "{:?}", health.not_ready_reasons());
    assert_eq!(report.accounting.scheduled(), report.accounting.recorded(), "every probe accounted for");
    let text = report.metrics.encode_prometheus_text();
    assert_eq!(metric(&text, "llmprobe_internal_errors_total", &[]), 0.0, "no internal error");
    let scheduled = metric(&text, "llmprobe_probes_scheduled_total", &[]);
    assert_eq!(scheduled, metric(&text, "llmprobe_requests_total", &[]), "scheduled counter equals the per-outcome sum");
    for target in ["chat", "llamacpp", "ollama", "tgi", "responses"] {
        let t = format!("target=\"{target}\"");
        let all = metric(&text, "llmprobe_requests_total", &[&t]);
        let ok = metric(&text, "llmprobe_requests_total", &[&t, "error=\"none\""]);
        let parse = metric(&text, "llmprobe_requests_total", &[&t, "error=\"parse\""]);
        assert!(all > 0.0, "{target} was probed");
        assert_eq!(ok + parse, all, "{target}: every probe is a success or a parse error:\n{text}");
        assert!(parse > 0.0, "{target}: absurd values are parse errors");
        let tokens = metric(&text, "llmprobe_output_tokens_total", &[&t]);
        assert!(tokens <= ok * (1u64 << 24) as f64, "{target}: counts are capped ({tokens} for {ok} successes)");
        for details in ["llmprobe_prompt_cached_tokens_total", "llmprobe_reasoning_tokens_total"] {
            let n = metric(&text, details, &[&t]);
            assert!(n <= ok * (1u64 << 24) as f64, "{target}: {details} capped ({n} for {ok} successes)");
        }
    }
}
