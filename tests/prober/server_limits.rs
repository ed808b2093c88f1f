//! The prober's HTTP server under hostile clients, over real loopback sockets: the release
//! endpoint answers 401/404/413 from the head alone (before a body byte is sent), slow-body
//! uploads and connection floods do not keep scrapes out, a full server closes its oldest
//! waiting connection to make room, and every phase of a connection has a deadline (the idle
//! wait between kept-alive requests, the head, the request and its body).

use crate::metrics_common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llmprobe::app::release::{ApiTokens, Releases};
use llmprobe::app::server::{Limits, ServerState, serve_with};
use llmprobe::config::SecretRef;
use llmprobe::sink::{History, Metrics};
use llmprobe::util::health::Health;
use metrics_common::config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "limits-test-token";
/// Generous bound for anything that should happen "at once" on a busy test machine.
const PROMPTLY: Duration = Duration::from_secs(10);

/// A server with release markers on (token `TOKEN`, target `t`) unless `releases` is false.
async fn start(limits: Limits, releases: bool) -> (SocketAddr, CancellationToken) {
    let metrics = Arc::new(Metrics::new(&config()));
    let health = Arc::new(Health::new(metrics.clone()));
    let releases = releases.then(|| {
        let dir = std::env::temp_dir().join(format!("llmprobe-server-limits-{}-{}", std::process::id(), rand_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, TOKEN).unwrap();
        let secret = llmprobe::client::secret::resolve(&SecretRef::File(file)).unwrap();
        let r = Arc::new(Releases::new(None));
        r.set_generation(llmprobe::sink::Sinks::new(vec![metrics.clone()]), vec!["t".into()], ApiTokens { marker: Some(secret), read: None }, None);
        r
    });
    let state = ServerState { metrics, history: Arc::new(History::default()), health, reload: None, lifecycle: false, releases, detect: None, replicas: None };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve_with(listener, state, shutdown.clone(), limits));
    (addr, shutdown)
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

/// Reads what the server sends until it closes the connection (or `PROMPTLY` passes: a panic).
async fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(PROMPTLY, s.read_to_end(&mut out)).await.expect("the server closes the connection");
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads one answer head (through the blank line); the body is not awaited.
async fn read_head(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(PROMPTLY, async {
        while !out.ends_with(b"\r\n\r\n") {
            if s.read(&mut byte).await.unwrap_or(0) == 0 {
                break;
            }
            out.push(byte[0]);
        }
    })
    .await
    .expect("an answer head");
    String::from_utf8_lossy(&out).into_owned()
}

/// One scrape on a new connection; the status line, or an error.
async fn scrape(addr: SocketAddr) -> Result<String, String> {
    let attempt = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out).into_owned();
        Ok(text.lines().next().unwrap_or("").to_owned())
    };
    tokio::time::timeout(PROMPTLY, attempt).await.map_err(|_| "timed out".to_string())?
}

fn release_head(auth: Option<&str>, length: usize, expect_continue: bool) -> String {
    let auth = auth.map(|a| format!("authorization: {a}\r\n")).unwrap_or_default();
    let expect = if expect_continue { "expect: 100-continue\r\n" } else { "" };
    format!("POST /api/v1/releases HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{auth}{expect}content-length: {length}\r\n\r\n")
}

fn long_limits() -> Limits {
    Limits { max_connections: 64, head: Duration::from_secs(60), request: Duration::from_secs(60), idle: Duration::from_secs(60) }
}

#[tokio::test]
async fn release_endpoint_refuses_from_the_head_without_reading_the_body() {
    let (addr, stop) = start(long_limits(), true).await;
    let bearer = format!("Bearer {TOKEN}");
    // (authorization, content-length, expected status): none of these sends a body byte, so an
    // answer at all shows the body was not waited for; the server then closes the connection.
    for (auth, length, status) in [
        (None, 1_000_000_000, "401"),
        (Some("Bearer wrong"), 1_000_000_000, "401"),
        (Some(TOKEN), 10, "401"), // no "Bearer "
        (Some(bearer.as_str()), 4097, "413"),
        (Some(bearer.as_str()), 1_000_000_000, "413"),
    ] {
        for expect_continue in [false, true] {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(release_head(auth, length, expect_continue).as_bytes()).await.unwrap();
            let answer = read_to_close(&mut s).await;
            assert!(answer.starts_with(&format!("HTTP/1.1 {status} ")), "{auth:?} {length}: {answer}");
            assert!(!answer.contains("100 Continue"), "no 100 Continue for a refused request: {answer}");
        }
    }
    // With the token and a small body: the body is read (after a 100 Continue when asked).
    let body = r#"{"target":"t","version":"v2"}"#;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(release_head(Some(&bearer), body.len(), true).as_bytes()).await.unwrap();
    assert!(read_head(&mut s).await.starts_with("HTTP/1.1 100 Continue"));
    s.write_all(body.as_bytes()).await.unwrap();
    assert!(read_head(&mut s).await.starts_with("HTTP/1.1 202 "));
    // Chunked without a length: the read stops at the limit.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!("POST /api/v1/releases HTTP/1.1\r\nhost: x\r\nauthorization: {bearer}\r\ntransfer-encoding: chunked\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(format!("{:x}\r\n{}\r\n", 5000, "x".repeat(5000)).as_bytes()).await.unwrap();
    assert!(read_head(&mut s).await.starts_with("HTTP/1.1 413 "));
    stop.cancel();

    // Off (no token file): 404, again from the head.
    let (addr, stop) = start(long_limits(), false).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(release_head(Some(&bearer), 1_000_000_000, false).as_bytes()).await.unwrap();
    assert!(read_to_close(&mut s).await.starts_with("HTTP/1.1 404 "));
    stop.cancel();
}

#[tokio::test]
async fn slow_body_uploads_and_floods_do_not_keep_scrapes_out() {
    let limits = Limits { max_connections: 16, head: Duration::from_secs(2), request: Duration::from_secs(3), idle: Duration::from_secs(3) };
    let (addr, stop) = start(limits, true).await;
    let done = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    // Twice the cap: a third with the token (the worst case: its body is read, a byte at a
    // time), the rest without (refused at once, so they reconnect in a loop: a flood).
    for i in 0..2 * limits.max_connections {
        let done = done.clone();
        let auth = match i % 3 {
            0 => Some(format!("Bearer {TOKEN}")),
            1 => Some("Bearer wrong".to_string()),
            _ => None,
        };
        attackers.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let Ok(mut s) = TcpStream::connect(addr).await else { continue };
                if s.write_all(release_head(auth.as_deref(), 4000, false).as_bytes()).await.is_err() {
                    continue;
                }
                while !done.load(Ordering::Relaxed) && s.write_all(b" ").await.is_ok() {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }));
    }
    // Scrapes during the sustained attack. In the first instants all 2 x cap attackers connect at
    // once and none has sent a byte, so a scrape connecting among them can still be the oldest
    // silent connection (the limit stated in src/app/server.rs); the attack's steady state is what
    // this test holds the server to.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut answered = Vec::new();
    for _ in 0..10 {
        answered.push(scrape(addr).await);
        tokio::time::sleep(Duration::from_millis(200)).await; // pacing, not an assertion
    }
    done.store(true, Ordering::Relaxed);
    for a in attackers {
        a.await.unwrap();
    }
    stop.cancel();
    assert!(answered.iter().all(|a| a.as_deref() == Ok("HTTP/1.1 200 OK")), "scrapes under attack: {answered:?}");
}

#[tokio::test]
async fn a_full_server_closes_its_oldest_waiting_connection_for_a_scrape() {
    let limits = Limits { max_connections: 8, ..long_limits() };
    let (addr, stop) = start(limits, true).await;
    // Every slot held: slowloris heads and idle connections (which never send a byte).
    let mut held = Vec::new();
    for i in 0..limits.max_connections {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        }
        held.push(s);
    }
    // The scrape gets in, and the oldest held connection was closed for it.
    assert_eq!(scrape(addr).await.as_deref(), Ok("HTTP/1.1 200 OK"));
    assert_eq!(read_to_close(&mut held[0]).await, "");
    stop.cancel();
}

/// How long after its start each kind of waiting connection was closed.
struct Closed {
    /// Kept alive, idle after its answer was read.
    idle: Duration,
    /// Never a byte.
    silent: Duration,
    /// A head trickling in.
    slow_head: Duration,
    /// A body trickling in, after its head.
    slow_body: Duration,
}

const DEADLINES: Limits =
    Limits { max_connections: 16, head: Duration::from_millis(300), request: Duration::from_millis(600), idle: Duration::from_millis(900) };

/// A kept-alive connection answers a second request, then idles; a connection that never
/// sends a byte; a head and a body that trickle in (a byte every 50 ms, never finished). Each
/// is closed (within `PROMPTLY`, else a panic).
async fn connections_at_their_deadlines() -> Closed {
    let (addr, stop) = start(DEADLINES, true).await;
    let healthz = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

    let mut s = TcpStream::connect(addr).await.unwrap();
    for _ in 0..2 {
        s.write_all(healthz).await.unwrap();
        assert!(read_head(&mut s).await.starts_with("HTTP/1.1 200 "));
        let mut body = [0u8; 2];
        s.read_exact(&mut body).await.unwrap();
        assert_eq!(&body, b"ok");
    }
    let from = Instant::now();
    assert_eq!(read_to_close(&mut s).await, "");
    let idle = from.elapsed();

    let mut s = TcpStream::connect(addr).await.unwrap();
    let from = Instant::now();
    assert_eq!(read_to_close(&mut s).await, "");
    let silent = from.elapsed();

    let mut s = TcpStream::connect(addr).await.unwrap();
    let from = Instant::now();
    let closed = async {
        for b in b"GET /metrics HTTP/1.1\r\nx-slow: ".iter().chain(std::iter::repeat(&b'a')) {
            if s.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(PROMPTLY, closed).await.expect("the slow head is cut off");
    let slow_head = from.elapsed();

    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(release_head(Some(&format!("Bearer {TOKEN}")), 4000, false).as_bytes()).await.unwrap();
    let from = Instant::now();
    let closed = async {
        while s.write_all(b" ").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(PROMPTLY, closed).await.expect("the slow body is cut off");
    let slow_body = from.elapsed();
    stop.cancel();
    Closed { idle, silent, slow_head, slow_body }
}

/// Idle, silent and slow connections are closed, however busy a trickle keeps them; a
/// kept-alive one first answers another request. When, against each deadline, is a printed
/// figure (`print_connection_deadlines`).
#[tokio::test]
async fn idle_and_slow_connections_are_closed_at_their_deadlines() {
    connections_at_their_deadlines().await;
}

#[tokio::test]
#[ignore = "prints when each kind of connection was closed; run with --ignored --nocapture"]
async fn print_connection_deadlines() {
    let closed = connections_at_their_deadlines().await;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("| connection | deadline (ms) | closed after (ms) |\n|---|---:|---:|");
    println!("| idle after an answer (from reading it) | {:.0} | {:.1} |", ms(DEADLINES.idle), ms(closed.idle));
    println!("| silent | {:.0} | {:.1} |", ms(DEADLINES.head), ms(closed.silent));
    println!("| head trickling in | {:.0} | {:.1} |", ms(DEADLINES.head), ms(closed.slow_head));
    println!("| body trickling in (from its head) | {:.0} | {:.1} |", ms(DEADLINES.request), ms(closed.slow_body));
}
