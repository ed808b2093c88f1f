//! Answers whose head is not valid HTTP/1.1 (a CR or NUL in a header value, a bad or conflicting
//! content-length, a head too large, a status line that is not HTTP, a status outside
//! 100..=599, header lines ended by a bare LF) are an invalid answer, `parse`, from both probe
//! clients: never `connect` (the server did answer) and never `http_5xx` (999 is no server
//! error). A raw TCP server on 127.0.0.1 sends each head. The general client is
//! chosen by `follow_redirects` (which the lean client does not do); no head here redirects.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::config::{Target, Timeouts};
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::Outcome;
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// A server answering every connection with `reply` once the whole request is in, then
/// closing its side and waiting for the client's close (no reset that could eat the answer).
async fn server(reply: Vec<u8>) -> SocketAddr {
    let reply = Arc::new(reply);
    common::raw_server(move |mut sock| {
        let reply = reply.clone();
        async move {
            let _ = sock.write_all(&reply).await;
            let _ = sock.shutdown().await;
            let mut buf = [0u8; 4096];
            while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
        }
    })
    .await
}

async fn probe(addr: SocketAddr, general: bool) -> Outcome {
    let timeouts = Timeouts { connect: Duration::from_secs(1), ttft: Duration::from_secs(3), idle: Duration::from_secs(3), total: Duration::from_secs(5) };
    let mut target = Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model("m").with_timeouts(timeouts);
    target.follow_redirects = general;
    let runtime = Arc::new(TargetRuntime::new(target).unwrap());
    let draw = Draw { input_tokens: 8, output_tokens: 8, prompt: "hello".into(), ..Draw::default() };
    execute(Probe { target: runtime, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answer_heads_are_parse_errors_from_both_clients() {
    const SSE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let ok = |fields: &str| format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{fields}\r\n{SSE}").into_bytes();
    let huge_field = format!("x-big: {}\r\ncontent-length: {}\r\n", "a".repeat(512 << 10), SSE.len());
    let many_fields: String = (0..150).map(|i| format!("x-f{i}: v\r\n")).collect::<String>() + &format!("content-length: {}\r\n", SSE.len());
    let length = |v: &str| format!("content-length: {v}\r\n");
    // (what, the answer, whether the general client refuses it too: hyper takes a bare LF).
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("CR inside a header value", ok(&format!("x-a: b\rc\r\n{}", length(&SSE.len().to_string()))), true),
        ("NUL inside a header value", ok(&format!("x-a: b\0c\r\n{}", length(&SSE.len().to_string()))), true),
        ("a content-length that is not a number", ok(&length("12abc")), true),
        ("a signed content-length", ok(&length(&format!("+{}", SSE.len()))), true),
        ("conflicting content-lengths", ok(&format!("{}{}", length(&SSE.len().to_string()), length("3"))), true),
        ("a head of over 512 KiB", ok(&huge_field), true),
        ("150 header fields", ok(&many_fields), true),
        ("a status line that is not HTTP", b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec(), true),
        ("status 999", b"HTTP/1.1 999 Whatever\r\ncontent-length: 4\r\n\r\nnope".to_vec(), true),
        (
            "header lines ended by a bare LF",
            format!("HTTP/1.1 200 OK\ncontent-type: text/event-stream\ncontent-length: {}\n\n{SSE}", SSE.len()).into_bytes(),
            false,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, reply, general_refuses) in cases {
        let addr = server(reply).await;
        let (lean, general) = (probe(addr, false).await, probe(addr, true).await);
        let class = |o: &Outcome| o.error_class().map(|c| c.as_str());
        if class(&lean) != Some("parse") {
            wrong.push(format!("{what}: lean {:?}", lean.result));
        }
        if general_refuses && class(&general) != Some("parse") {
            wrong.push(format!("{what}: general {:?}", general.result));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
