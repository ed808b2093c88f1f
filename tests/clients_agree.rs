//! The lean HTTP/1.1 probe client and the general one (reqwest) read the same answers alike:
//! the same outcome class, HTTP status, text frames and usage for a stream, a stream that breaks
//! off, an error status, a wrong content type and a refused connection. One test function, since
//! it switches the client through the process environment (`HTTP_PROXY`, with `NO_PROXY` keeping
//! the requests direct), which only a target built afterwards reads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::config::{Target, Timeouts};
use llmprobe::exec::{Probe, execute};
use llmprobe::outcome::Outcome;
use llmprobe::protocol::ProtocolKind;
use llmprobe::target::TargetRuntime;
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const CHUNK: &str = "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n";
const LAST: &str = "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";

fn chunked(parts: &[&str]) -> String {
    parts.iter().map(|p| format!("{:x}\r\n{p}\r\n", p.len())).collect()
}

/// A server answering every connection with `reply` (after reading the request head), then
/// closing it.
async fn server(reply: String) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                for piece in reply.as_bytes().chunks(40) {
                    if sock.write_all(piece).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            });
        }
    });
    addr
}

async fn probe(addr: SocketAddr, general: bool) -> Outcome {
    // SAFETY: the only test of this binary; no other thread reads the environment meanwhile.
    unsafe {
        if general {
            std::env::set_var("HTTP_PROXY", "http://127.0.0.1:9");
            std::env::set_var("NO_PROXY", "127.0.0.1");
        } else {
            std::env::remove_var("HTTP_PROXY");
            std::env::remove_var("NO_PROXY");
        }
    }
    let timeouts = Timeouts { connect: Duration::from_secs(1), ttft: Duration::from_secs(2), idle: Duration::from_secs(2), total: Duration::from_secs(5) };
    let target = Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model("m").with_timeouts(timeouts);
    let runtime = Arc::new(TargetRuntime::new(target).unwrap());
    let draw = Draw { input_tokens: 8, output_tokens: 8, prompt: "hello".into(), ..Draw::default() };
    execute(Probe { target: runtime, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now() }, &CancellationToken::new()).await
}

/// What both clients must agree on: error class, HTTP status, text frames, usage.
type Reading = (Option<&'static str>, Option<u16>, u64, Option<(u64, u64)>);

fn reading(o: &Outcome) -> Reading {
    (o.error_class().map(|c| c.as_str()), o.http_status, o.timeline.text_frame_count(), o.usage.map(|u| (u.prompt_tokens, u.completion_tokens)))
}

#[tokio::test]
async fn lean_and_general_clients_read_answers_alike() {
    let sse = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    let cases = [
        ("stream", format!("{sse}{}0\r\n\r\n", chunked(&[CHUNK, CHUNK, LAST]))),
        ("broken off", format!("{sse}{}1f\r\npartial", chunked(&[CHUNK]))),
        (
            "length-delimited stream",
            format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{CHUNK}{LAST}", CHUNK.len() + LAST.len()),
        ),
        ("to the end of the connection", format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{CHUNK}{LAST}")),
        ("http 503", "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 9\r\n\r\nbusy now!".to_owned()),
        ("wrong content type", "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: 5\r\n\r\nhello".to_owned()),
    ];
    for (name, reply) in cases {
        let addr = server(reply).await;
        let (lean, general) = (probe(addr, false).await, probe(addr, true).await);
        assert_eq!(reading(&lean), reading(&general), "{name}: lean {:?} / general {:?}", lean.result, general.result);
        if name == "stream" {
            assert_eq!(reading(&lean), (None, Some(200), 2, Some((7, 3))), "{name}");
        }
    }
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (lean, general) = (probe(refused, false).await, probe(refused, true).await);
    assert_eq!(reading(&lean), reading(&general), "refused: lean {:?} / general {:?}", lean.result, general.result);
    assert_eq!(lean.error_class().map(|c| c.as_str()), Some("connect"));
}
