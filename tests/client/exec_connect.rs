//! Connect-phase classes on real loopback sockets: a refused port is `connect`, and a listener
//! whose accept queue is full is `timeout_connect`.
//!
//! How the hang is made: a listening socket with backlog 1 that never accepts. Linux queues
//! backlog + 1 finished handshakes; once that queue is full it drops further SYNs (and, with
//! `net.ipv4.tcp_abort_on_overflow = 0`, the default, never answers with RST), so the next
//! `connect()` waits for SYN retransmits — exactly a server that is up but not answering.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::config::{Target, Timeouts};
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

fn target(addr: SocketAddr, connect: Duration) -> Target {
    let timeouts = Timeouts { connect, ttft: Duration::from_secs(3), idle: Duration::from_secs(3), total: Duration::from_secs(5) };
    Target::new("connect", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model("tiny-llama").with_timeouts(timeouts)
}

async fn probe(target: Target) -> Outcome {
    let runtime = Arc::new(TargetRuntime::new(target).unwrap());
    let draw = Draw { input_tokens: 16, output_tokens: 16, prompt: "hello".into(), ..Draw::default() };
    execute(Probe { target: runtime, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

/// A listener that never accepts, with its accept queue filled until a connect hangs. Returns
/// the address and the connections holding the queue (dropping them would free it).
async fn full_listener() -> (SocketAddr, tokio::net::TcpListener, Vec<TcpStream>) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..16 {
        match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await {
            Ok(Ok(s)) => held.push(s),
            Ok(Err(e)) => panic!("filling the accept queue: {e}"),
            Err(_) => return (addr, listener, held),
        }
    }
    panic!("the accept queue of a backlog-1 listener took 16 connections without dropping a SYN");
}

#[tokio::test]
async fn full_accept_queue_is_timeout_connect() {
    let (addr, _listener, held) = full_listener().await;
    assert!(!held.is_empty());
    let started = Instant::now();
    let outcome = probe(target(addr, Duration::from_millis(200))).await;
    let failure = outcome.result.unwrap_err();
    assert_eq!(failure.class, ErrorClass::TimeoutConnect, "{}", failure.detail);
    let took = started.elapsed();
    // The connect limit (200 ms) ended it, well before the TTFT limit (3 s).
    assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(2), "{took:?}");
    assert_eq!(outcome.http_status, None);
}

#[tokio::test]
async fn refused_port_is_connect_not_a_timeout() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let outcome = probe(target(addr, Duration::from_millis(200))).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Connect), "{:?}", outcome.result);
}
