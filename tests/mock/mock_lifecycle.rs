//! Request lifecycle edges over real sockets: a client that leaves while queued is aborted before
//! its prefill; a graceful shutdown does not wait out stalled or dripping streams.

use std::time::Duration;

use crate::common::wait_for_metrics;

use llmprobe::mock::{MockOptions, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

async fn start(o: MockOptions) -> (std::net::SocketAddr, CancellationToken, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let h = tokio::spawn(serve(listener, o, stop.clone()));
    (addr, stop, h)
}

/// Writes a streaming completion request on a raw socket and returns the socket.
async fn raw_request(addr: std::net::SocketAddr, prompt: &str, max_tokens: u32, extra: &str) -> tokio::net::TcpStream {
    let body = format!(r#"{{"prompt":"{prompt}","max_tokens":{max_tokens},"ignore_eos":true,"stream":true}}"#);
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

fn value(page: &str, series: &str) -> f64 {
    page.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or_else(|| panic!("no {series}"))
}

#[tokio::test]
async fn client_leaving_the_queue_is_aborted_before_prefill() {
    let mut o = MockOptions::default();
    o.profile.max_num_seqs = 1; // the second request must queue behind the first
    o.profile.step_base_us = 10_000.0;
    let (addr, stop, _) = start(o).await;
    let mut first = raw_request(addr, "a b c", 40, "").await;
    let running = r#"vllm:num_requests_running{engine="0",model_name="mock-llama"}"#;
    wait_for_metrics(addr, "the first request running", |page| page.contains(running) && value(page, running) == 1.0).await;
    let second = raw_request(addr, "d e f g h i j k", 5, "").await;
    let waiting = r#"vllm:num_requests_waiting{engine="0",model_name="mock-llama"}"#;
    wait_for_metrics(addr, "the second request queued", |page| page.contains(waiting) && value(page, waiting) == 1.0).await;
    drop(second); // the client goes away while queued
    let mut body = Vec::new();
    first.read_to_end(&mut body).await.ok();
    let page = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    let l = r#"{engine="0",model_name="mock-llama"}"#;
    assert_eq!(value(&page, r#"vllm:request_success_total{engine="0",finished_reason="abort",model_name="mock-llama"}"#), 1.0);
    assert_eq!(value(&page, r#"vllm:request_success_total{engine="0",finished_reason="length",model_name="mock-llama"}"#), 1.0);
    assert_eq!(value(&page, &format!("vllm:prompt_tokens_total{l}")), 3.0, "the queued prompt was never prefilled");
    assert_eq!(value(&page, &format!("vllm:generation_tokens_total{l}")), 40.0);
    assert_eq!(value(&page, &format!("vllm:num_requests_waiting{l}")), 0.0);
    stop.cancel();
}

#[tokio::test]
async fn shutdown_cuts_stalled_and_dripping_streams() {
    let (addr, stop, server) = start(MockOptions::default()).await;
    let mut stalled = raw_request(addr, "a", 4, "x-mock-fault: stall_ttft\r\nx-mock-stall-ms: 600000\r\n").await;
    let mut mid = raw_request(addr, "a", 8, "x-mock-fault: stall_mid_stream\r\nx-mock-stall-ms: 600000\r\n").await;
    let mut drip = raw_request(addr, "a", 8, "x-mock-fault: slow_drip\r\nx-mock-drip-ms: 60000\r\n").await;
    let mut nonstream = {
        let body = r#"{"prompt":"a","max_tokens":2}"#;
        let req = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-mock-fault: stall_ttft\r\nx-mock-stall-ms: 600000\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        s
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.cancel();
    // The streams stall for 10 minutes: a shutdown that waited on them would not end in 5 s.
    let done = tokio::time::timeout(Duration::from_secs(5), server).await;
    assert!(done.is_ok(), "graceful shutdown waited on stalled streams");
    for s in [&mut stalled, &mut mid, &mut drip, &mut nonstream] {
        let mut buf = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf)).await;
        assert!(r.is_ok(), "connection still open after shutdown");
        assert!(!String::from_utf8_lossy(&buf).contains("[DONE]"), "a cut stream must not look complete");
    }
}
