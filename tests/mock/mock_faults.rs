//! Every fault kind produces its documented wire behaviour (triggered by `x-mock-fault`).

use crate::mock_wire;

use std::time::Duration;

use llmprobe::mock::{MockOptions, serve};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use mock_wire::Got;

async fn start() -> (String, CancellationToken) {
    let mut o = MockOptions::default();
    o.profile.step_base_us = 10_000.0;
    o.profile.decode_us_per_seq = 10.0;
    o.profile.prefill_us_per_token = 1.0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    (base, stop)
}

impl Got {
    fn text(&self) -> String {
        String::from_utf8(self.body()).unwrap()
    }
    fn events(&self) -> Vec<String> {
        self.text().split("\n\n").filter(|e| !e.is_empty()).map(|e| e.strip_prefix("data: ").unwrap().to_string()).collect()
    }
}

async fn chat(base: &str, fault: &str, extra: &[(&str, &str)], max_tokens: u32) -> Result<Got, reqwest::Error> {
    let body = serde_json::json!({"messages":[{"role":"user","content":"hi"}],"max_tokens":max_tokens,
        "ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}});
    let mut rb = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .header("x-mock-fault", fault)
        .body(body.to_string());
    for (k, v) in extra {
        rb = rb.header(*k, *v);
    }
    mock_wire::collect(rb).await
}

#[tokio::test]
async fn connection_faults() {
    let (b, stop) = start().await;
    assert!(chat(&b, "refuse", &[], 4).await.is_err());
    assert!(chat(&b, "close_before_response", &[], 4).await.is_err());
    let g = chat(&b, "reset_mid_stream", &[("x-mock-fault-after", "3")], 20).await.unwrap();
    assert_eq!(g.status, 200);
    assert!(g.error, "body aborted");
    assert!(!g.body().is_empty());
    assert!(!String::from_utf8_lossy(&g.body()).contains("[DONE]"));
    stop.cancel();
}

#[tokio::test]
async fn status_faults() {
    let (b, stop) = start().await;
    let g = chat(&b, "http_429", &[], 4).await.unwrap();
    assert_eq!(g.status, 429);
    assert_eq!(g.headers["retry-after"], "1");
    for (f, s) in [("http_500", 500), ("http_503", 503), ("http_400", 400)] {
        let g = chat(&b, f, &[], 4).await.unwrap();
        assert_eq!(g.status, s);
        let v: Value = serde_json::from_slice(&g.body()).unwrap();
        assert_eq!(v["error"]["code"], s);
    }
    stop.cancel();
}

#[tokio::test]
async fn stall_faults() {
    let (b, stop) = start().await;
    let g = chat(&b, "stall_ttft", &[("x-mock-stall-ms", "400")], 3).await.unwrap();
    assert!(g.chunks[0].0 >= Duration::from_millis(400), "{:?}", g.chunks[0].0);
    let g = chat(&b, "stall_mid_stream", &[("x-mock-stall-ms", "400"), ("x-mock-fault-after", "2")], 6).await.unwrap();
    assert!(g.chunks[0].0 < Duration::from_millis(300));
    assert!(g.chunks.last().unwrap().0 >= Duration::from_millis(400));
    assert!(g.text().ends_with("data: [DONE]\n\n"));
    stop.cancel();
}

#[tokio::test]
async fn slow_drip_and_buffered() {
    let (b, stop) = start().await;
    let g = chat(&b, "slow_drip", &[("x-mock-drip-ms", "1")], 1).await.unwrap();
    assert!(g.chunks.len() > 100, "byte by byte: {} chunks", g.chunks.len());
    assert!(g.text().ends_with("data: [DONE]\n\n"));
    let g = chat(&b, "buffered", &[], 10).await.unwrap();
    assert!(String::from_utf8_lossy(&g.chunks[0].1).contains("[DONE]"), "one burst at the end");
    assert!(g.chunks[0].0 >= Duration::from_millis(100));
    assert_eq!(g.events().len(), 1 + 10 + 1 + 1);
    stop.cancel();
}

#[tokio::test]
async fn stream_content_faults() {
    let (b, stop) = start().await;
    let ev = chat(&b, "error_in_stream", &[("x-mock-fault-after", "2")], 10).await.unwrap().events();
    let err: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    assert!(err["error"]["message"].is_string());
    assert_eq!(ev.last().unwrap(), "[DONE]");
    assert_eq!(chat(&b, "empty_stream", &[], 5).await.unwrap().text(), "data: [DONE]\n\n");
    let ev = chat(&b, "no_done", &[], 3).await.unwrap().events();
    assert!(ev.last().unwrap().contains("\"usage\""));
    assert!(!ev.iter().any(|e| e == "[DONE]"));
    let ev = chat(&b, "malformed_json", &[("x-mock-fault-after", "2")], 4).await.unwrap().events();
    assert_eq!(ev.iter().filter(|e| *e != "[DONE]" && serde_json::from_str::<Value>(e).is_err()).count(), 1);
    let g = chat(&b, "invalid_utf8", &[], 4).await.unwrap();
    assert!(std::str::from_utf8(&g.body()).is_err());
    let ev = chat(&b, "oversized_frame", &[], 4).await.unwrap().events();
    assert!(ev.iter().any(|e| e.len() > 1 << 20));
    let g = chat(&b, "wrong_content_type", &[], 2).await.unwrap();
    assert!(g.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    stop.cancel();
}

#[tokio::test]
async fn token_grouping_faults() {
    let (b, stop) = start().await;
    let ev = chat(&b, "multi_token_frames", &[], 8).await.unwrap().events();
    assert_eq!(ev.len(), 1 + 2 + 1 + 1, "role, two 4-token frames, usage, done");
    let v: Value = serde_json::from_str(&ev[1]).unwrap();
    assert_eq!(v["choices"][0]["delta"]["content"].as_str().unwrap().split_whitespace().count(), 4);
    let u: Value = serde_json::from_str(&ev[3]).unwrap();
    assert_eq!(u["usage"]["completion_tokens"], 8);
    let ev = chat(&b, "truncate_after_one", &[], 8).await.unwrap().events();
    assert_eq!(ev.len(), 3, "role, one token, [DONE]");
    let v: Value = serde_json::from_str(&ev[1]).unwrap();
    assert!(v["choices"][0]["finish_reason"].is_null());
    assert_eq!(ev[2], "[DONE]");
    stop.cancel();
}

#[tokio::test]
async fn timestamps_are_opt_in_and_increase() {
    let (b, stop) = start().await;
    let ev = chat(&b, "none", &[("x-mock-timestamps", "1")], 4).await.unwrap().events();
    let ts: Vec<u64> = ev[..ev.len() - 1].iter().map(|e| serde_json::from_str::<Value>(e).unwrap()["mock_emitted_ns"].as_u64().unwrap()).collect();
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    assert!(ts[2] - ts[1] >= 9_000_000, "one 10 ms step apart");
    let ev = chat(&b, "none", &[], 2).await.unwrap().events();
    assert!(!ev[1].contains("mock_emitted_ns"));
    stop.cancel();
}

/// The frame stamps count from the request's arrival on the host: a request that waits for a
/// busy mock has the wait in them (a client timed against them is not charged with it).
#[cfg(target_os = "linux")]
#[test]
fn timestamps_count_from_the_requests_arrival_not_from_when_the_mock_took_it() {
    use std::io::{Read, Write};
    use std::sync::mpsc::channel;
    use std::time::Instant;

    // The mock on its own one-thread runtime, so that the test can keep it busy.
    let (tx, rx) = channel();
    let mock = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (base, stop) = start().await;
            tx.send((base, tokio::runtime::Handle::current(), stop.clone())).unwrap();
            stop.cancelled().await;
        });
    });
    let (base, mock_rt, stop) = rx.recv().unwrap();
    // Connected while the mock is idle, so that only the request waits.
    let mut conn = std::net::TcpStream::connect(base.strip_prefix("http://").unwrap()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"ignore_eos":true,"stream":true}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-mock-fault: none\r\nx-mock-timestamps: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // Busy for 300 ms; the request is sent once the busy spell has begun, and the times the
    // request was written and the mock was free again bound the wait it must report.
    let (busy_tx, busy_rx) = channel();
    let (free_tx, free_rx) = channel();
    mock_rt.spawn(async move {
        busy_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        free_tx.send(Instant::now()).unwrap();
    });
    busy_rx.recv().unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let written = Instant::now();
    let mut got = Vec::new();
    let key = b"\"mock_emitted_ns\":";
    let first: u64 = loop {
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "the answer ended without a stamped frame: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        if let Some(at) = got.windows(key.len()).position(|w| w == key) {
            let digits: String = got[at + key.len()..].iter().take_while(|b| b.is_ascii_digit()).map(|b| *b as char).collect();
            if got.len() > at + key.len() + digits.len() {
                break digits.parse().unwrap();
            }
        }
    };
    let waited = free_rx.recv().unwrap().saturating_duration_since(written);
    assert!(waited >= Duration::from_millis(100), "the request went out late in the busy spell ({waited:?} left); nothing to measure");
    // 1 ms for putting the kernel's wall-clock stamp on the monotonic clock.
    assert!(
        first as u128 + 1_000_000 >= waited.as_nanos(),
        "the first frame's stamp ({first} ns) holds the request's wait for the busy mock ({} ns)",
        waited.as_nanos()
    );
    stop.cancel();
    mock.join().unwrap();
}

/// The prefix cache: a repeated prompt is served from it (cached tokens reported), within one
/// `cache_salt` only, and never under `cache_disabled`.
#[tokio::test]
async fn prefix_cache_salts_and_cache_disabled() {
    let mut o = MockOptions { prompt_tokens_details: true, ..MockOptions::default() };
    o.profile.step_base_us = 1_000.0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    let prompt = (0..200).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let cached = |fault: &'static str, salt: Option<&'static str>| {
        let (base, prompt) = (base.clone(), prompt.clone());
        async move {
            let mut body = serde_json::json!({"messages":[{"role":"user","content":prompt}],"max_tokens":2,"stream":false});
            if let Some(s) = salt {
                body["cache_salt"] = serde_json::json!(s);
            }
            let answer = reqwest::Client::new()
                .post(format!("{base}/v1/chat/completions"))
                .header("content-type", "application/json")
                .header("x-mock-fault", fault)
                .body(body.to_string())
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let v: Value = serde_json::from_slice(&answer).unwrap();
            v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap()
        }
    };
    assert_eq!(cached("none", None).await, 0, "the first time the prompt is new");
    assert!(cached("none", None).await >= 128, "then it is cached");
    assert_eq!(cached("cache_disabled", None).await, 0, "no reuse under the fault");
    assert_eq!(cached("none", Some("team-a")).await, 0, "another salt shares nothing");
    assert!(cached("none", Some("team-a")).await >= 128, "the same salt does");
    stop.cancel();
}
