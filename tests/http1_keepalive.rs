//! The lean HTTP/1.1 probe client over real loopback sockets: kept-alive connections are
//! reused, a connection the server drops between requests costs no probe, and the request on
//! the wire is what the general client sends (host, key, headers, length).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llmprobe::config::{SecretRef, Target};
use llmprobe::exec::{Probe, execute};
use llmprobe::outcome::Outcome;
use llmprobe::protocol::ProtocolKind;
use llmprobe::target::TargetRuntime;
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const SSE: &str = "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// Reads one request (head and `content-length` body); `None` at the end of the connection.
async fn read_request(sock: &mut TcpStream) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&seen[..end]).to_string();
            let length: usize =
                head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
            while seen.len() < end + 4 + length {
                let n = sock.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            return Some(head);
        }
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

async fn answer(sock: &mut TcpStream) -> std::io::Result<()> {
    sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n").await?;
    for line in SSE.split_inclusive("\n\n") {
        sock.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).await?;
    }
    sock.write_all(b"0\r\n\r\n").await
}

/// A keep-alive server answering every request; with `drop_second`, each connection's
/// second request is read and the connection closed unanswered (an idle-timeout race).
/// Returns its address, the connections accepted and the request heads seen.
async fn server(drop_second: bool) -> (SocketAddr, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (conns, heads) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
    let (c, h) = (conns.clone(), heads.clone());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let h = h.clone();
            tokio::spawn(async move {
                let mut served = 0;
                while let Some(head) = read_request(&mut sock).await {
                    if drop_second && served == 1 {
                        return;
                    }
                    h.lock().unwrap().push(head);
                    answer(&mut sock).await.unwrap();
                    served += 1;
                }
            });
        }
    });
    (addr, conns, heads)
}

async fn probe(runtime: &Arc<TargetRuntime>, seq: u64) -> Outcome {
    let draw = Draw { input_tokens: 16, output_tokens: 16, prompt: "hello there".into(), ..Draw::default() };
    let probe = Probe { target: runtime.clone(), scenario: Arc::from("s"), seq, draw, intended: Instant::now() };
    execute(probe, &CancellationToken::new()).await
}

fn runtime(addr: SocketAddr) -> Arc<TargetRuntime> {
    Arc::new(TargetRuntime::new(Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model("m")).unwrap())
}

#[tokio::test]
async fn kept_alive_connections_are_reused() {
    let (addr, conns, heads) = server(false).await;
    let target = runtime(addr);
    for seq in 0..5 {
        let outcome = probe(&target, seq).await;
        assert!(outcome.result.is_ok(), "probe {seq}: {:?}", outcome.result);
    }
    assert_eq!(conns.load(Ordering::SeqCst), 1, "one connection for five sequential probes");
    assert_eq!(heads.lock().unwrap().len(), 5);
}

#[tokio::test]
async fn a_connection_dropped_between_requests_costs_no_probe() {
    let (addr, conns, heads) = server(true).await;
    let target = runtime(addr);
    for seq in 0..4 {
        let outcome = probe(&target, seq).await;
        assert!(outcome.result.is_ok(), "probe {seq}: {:?}", outcome.result);
        // Let the server's close reach us on some rounds and race it on others.
        if seq % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(heads.lock().unwrap().len(), 4, "every probe answered");
    assert!(conns.load(Ordering::SeqCst) >= 4, "each connection served one request");
}

#[tokio::test]
async fn the_request_on_the_wire_carries_host_key_headers_and_length() {
    let (addr, _, heads) = server(false).await;
    // SAFETY: this test binary's only variable, set before any thread reads it.
    unsafe { std::env::set_var("HTTP1_TEST_KEY", "sk-wire-secret") };
    let mut config = Target::new("t", &format!("http://{addr}/prefix"), ProtocolKind::OpenaiChat).unwrap().with_model("m");
    config.api_key = Some(SecretRef::Env("HTTP1_TEST_KEY".into()));
    config.headers = vec![("X-Team".into(), "search".into())];
    let target = Arc::new(TargetRuntime::new(config).unwrap());
    let outcome = probe(&target, 0).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    let head = heads.lock().unwrap()[0].clone();
    let lines: Vec<&str> = head.lines().collect();
    assert_eq!(lines[0], "POST /prefix/v1/chat/completions HTTP/1.1");
    for want in [format!("host: {addr}"), "authorization: Bearer sk-wire-secret".into(), "x-team: search".into(), "content-type: application/json".into()] {
        assert!(lines.contains(&want.as_str()), "{want:?} in {lines:?}");
    }
    assert!(lines.iter().any(|l| l.starts_with("x-request-id: ") && l.len() > 20), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("content-length: ")), "{lines:?}");
}
