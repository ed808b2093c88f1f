//! The keep-alive idle race over real loopback sockets: a server closes each kept-alive
//! connection once it has been idle for its keep-alive timeout, and probes are sent at gaps
//! swept around that timeout, parked at their gate before the close and sent after it. A
//! request the server cannot have seen (its connection found closed before a byte was written)
//! goes on a new connection and is not an error; a request the server read and then dropped
//! without a byte is still `connect`, sent once. A server that names its timeout
//! (`Keep-Alive: timeout=N`), or was seen to close idle connections, has its connections retired
//! before it, on both clients; a server that keeps them open teaches nothing.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::config::Target;
use llmprobe::pipeline::exec::{Probe, SendAt, execute_when};
use llmprobe::probe::handover;
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio_util::sync::CancellationToken;

const SSE: &str = "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// The length of a whole request (head and `content-length` body) at the front of `seen`.
fn whole_request(seen: &[u8]) -> Option<usize> {
    let end = seen.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
    let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")?.trim().parse().ok()).unwrap_or(0);
    (seen.len() >= end + 4 + length).then_some(end + 4 + length)
}

/// What the idle-closing server does and counts.
#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    requests: AtomicUsize,
    idle_closes: AtomicUsize,
    /// Idle closes that came late: the next request had already arrived (the server's thread
    /// ran after its timeout, on a busy machine). Its probe is lost to the server, as with any
    /// server that closes with a request unread; no client can see that close coming.
    late_closes: AtomicUsize,
}

/// A server on threads of its own (its timing does not depend on the test's runtime) that
/// answers every request on a connection and closes the connection once it has been idle for
/// `idle`, as uvicorn does at its keep-alive timeout. `hint`: the `Keep-Alive` header it sends.
/// With `drop_after`, the connection's request number `drop_after` is read and the connection
/// closed without a byte.
fn idle_closing_server(idle: Duration, hint: Option<&'static str>, drop_after: Option<usize>) -> (SocketAddr, Arc<Counts>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { return };
            c.connections.fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            std::thread::spawn(move || {
                let _ = sock.set_nodelay(true);
                let (mut seen, mut buf, mut served) = (Vec::new(), [0u8; 8192], 0);
                loop {
                    if let Some(len) = whole_request(&seen) {
                        seen.drain(..len);
                        c.requests.fetch_add(1, Ordering::SeqCst);
                        if drop_after == Some(served) {
                            return;
                        }
                        let body: String = SSE.split_inclusive("\n\n").map(|e| format!("{:x}\r\n{e}\r\n", e.len())).collect();
                        let hint = hint.map(|h| format!("keep-alive: {h}\r\n")).unwrap_or_default();
                        let answer = format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{hint}transfer-encoding: chunked\r\n\r\n{body}0\r\n\r\n");
                        if sock.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                        served += 1;
                        continue;
                    }
                    // Idle after an answer (no part of the next request read): wait at most `idle`,
                    // then close. A new connection waits for its first request.
                    let idle_wait = served > 0 && seen.is_empty();
                    let _ = sock.set_read_timeout(Some(if idle_wait { idle } else { Duration::from_secs(10) }));
                    match sock.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) && idle_wait => {
                            c.idle_closes.fetch_add(1, Ordering::SeqCst);
                            let _ = sock.set_nonblocking(true);
                            if sock.peek(&mut buf).is_ok_and(|n| n > 0) {
                                c.late_closes.fetch_add(1, Ordering::SeqCst);
                            }
                            return;
                        }
                        Err(_) => return,
                    }
                }
            });
        }
    });
    (addr, counts)
}

fn runtime(addr: SocketAddr, general: bool) -> Arc<TargetRuntime> {
    let mut target = Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model("m");
    // The general client is chosen by `follow_redirects` (the lean client does not follow them).
    target.follow_redirects = general;
    Arc::new(TargetRuntime::new(target).unwrap())
}

/// A probe parked at its gate at once and sent when another thread opens the gate `after` from
/// now, as the scheduler's dispatcher does (on the lean client it writes the request itself).
async fn probe_at_gate(runtime: &Arc<TargetRuntime>, seq: u64, after: Duration) -> Outcome {
    let (opener, gate) = handover::gate();
    let intended = Instant::now() + after;
    let draw = Draw { input_tokens: 8, output_tokens: 8, prompt: "hello".into(), ..Draw::default() };
    let probe = Probe { target: runtime.clone(), scenario: Arc::from("s"), seq, draw, intended, trace_ratio: None };
    let opening = std::thread::spawn(move || {
        std::thread::sleep(intended.saturating_duration_since(Instant::now()));
        opener.open();
    });
    let outcome = execute_when(probe, &CancellationToken::new(), SendAt::Gate(gate)).await;
    opening.join().unwrap();
    outcome
}

/// 100 probes, each sent `idle` ± up to 4 ms after the previous one ended (the server's idle
/// close lands between the hand-over and the send in about half of them); returns the errors.
async fn sweep(general: bool) -> (Vec<String>, Arc<Counts>) {
    let idle = Duration::from_millis(40);
    let (addr, counts) = idle_closing_server(idle, None, None);
    let target = runtime(addr, general);
    let mut errors = Vec::new();
    for seq in 0..100u64 {
        // -4.00 ms ... +3.92 ms in steps of 80 µs, interleaved so both sides of the close come early.
        let step = if seq % 2 == 0 { seq / 2 } else { 99 - seq / 2 };
        let gap = if seq == 0 { Duration::ZERO } else { idle - Duration::from_millis(4) + Duration::from_micros(80 * step) };
        let outcome = probe_at_gate(&target, seq, gap).await;
        if let Err(f) = &outcome.result {
            errors.push(format!("probe {seq} (gap {gap:?}): {} {}", f.class.as_str(), f.detail));
        }
    }
    (errors, counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_timed_around_the_servers_idle_close_are_not_errors() {
    let ((lean, lean_counts), (general, general_counts)) = tokio::join!(sweep(false), sweep(true));
    for (name, counts, errors) in [("lean", &lean_counts, &lean), ("general", &general_counts, &general)] {
        let (conns, closes, requests) =
            (counts.connections.load(Ordering::SeqCst), counts.idle_closes.load(Ordering::SeqCst), counts.requests.load(Ordering::SeqCst));
        let late = counts.late_closes.load(Ordering::SeqCst);
        eprintln!("{name}: {} errors, {conns} connections, {closes} closed idle by the server ({late} late), {requests} requests", errors.len());
        // The sweep met the race: the server closed kept-alive connections while idle.
        assert!(closes >= 1, "{name}: the server never closed an idle connection");
        // Never a resend: the server saw each probe's request at most once.
        assert!(requests <= 100, "{name}: {requests} requests for 100 probes");
        // The lean client checks the connection at the write itself; both clients retire
        // connections before the idle time after which the server was seen to close one (the
        // general one learns it from a request that found its idle connection gone): no probe
        // is lost but to a close the server made after the request had reached it (a busy
        // machine's late timer: on a quiet one there are none).
        assert!(errors.len() <= late, "{name}: {} errors, {late} late closes: {errors:#?}", errors.len());
    }
}

/// The connection is checked out alive, the server closes it while the probe waits at its
/// gate, and the gate opens only once the server has closed it (a count, not a clock): the
/// request goes on a new connection, once.
#[tokio::test]
async fn a_connection_closed_between_the_hand_over_and_the_send_time_costs_no_probe_on_either_client() {
    for general in [false, true] {
        let (addr, counts) = idle_closing_server(Duration::from_millis(200), None, None);
        let target = runtime(addr, general);
        assert!(probe_at_gate(&target, 0, Duration::ZERO).await.result.is_ok());
        let (opener, gate) = handover::gate();
        let draw = Draw { input_tokens: 8, output_tokens: 8, prompt: "hello".into(), ..Draw::default() };
        let probe =
            Probe { target: target.clone(), scenario: Arc::from("s"), seq: 1, draw, intended: Instant::now() + Duration::from_secs(5), trace_ratio: None };
        let c = counts.clone();
        let opening = std::thread::spawn(move || {
            while c.idle_closes.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            opener.open();
        });
        let outcome = execute_when(probe, &CancellationToken::new(), SendAt::Gate(gate)).await;
        opening.join().unwrap();
        assert!(outcome.result.is_ok(), "general={general}: {:?}", outcome.result);
        assert_eq!(counts.requests.load(Ordering::SeqCst), 2, "general={general}");
        assert_eq!(counts.connections.load(Ordering::SeqCst), 2, "general={general}: the closed connection was replaced");
    }
}

/// A server that names its keep-alive timeout (`Keep-Alive: timeout=1`) has its connections
/// retired before it: a probe after 0.6 s idle goes on a new connection, one after a moment on
/// the kept-alive one. The general client takes the timeout into a new pool after the first
/// answer, so it is counted from the third probe.
#[tokio::test]
async fn a_named_keep_alive_timeout_retires_the_connection_before_it_on_either_client() {
    for general in [false, true] {
        let (addr, counts) = idle_closing_server(Duration::from_secs(10), Some("timeout=1, max=100"), None);
        let target = runtime(addr, general);
        // The general client builds that pool on a blocking thread after the first answer; on a
        // busy machine it may come after the third probe. Probe until one probe opened no new
        // connection (the new pool in use), at least three and at most 20.
        let mut seq = 0;
        let mut last = usize::MAX;
        while seq < 20 {
            assert!(probe_at_gate(&target, seq, Duration::from_millis(1)).await.result.is_ok(), "general={general}");
            seq += 1;
            let now = counts.connections.load(Ordering::SeqCst);
            if seq >= 3 && now == last {
                break;
            }
            last = now;
        }
        let before = counts.connections.load(Ordering::SeqCst);
        assert!(probe_at_gate(&target, seq, Duration::from_millis(1)).await.result.is_ok());
        assert_eq!(counts.connections.load(Ordering::SeqCst), before, "general={general}: reused within the server's timeout");
        // An idle gap, not a collection window: longer than the retirement (0.5 s), shorter than the server's 1 s.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(probe_at_gate(&target, seq + 1, Duration::ZERO).await.result.is_ok());
        assert_eq!(counts.connections.load(Ordering::SeqCst), before + 1, "general={general}: retired before the server's 1 s");
        assert_eq!(counts.idle_closes.load(Ordering::SeqCst), 0, "general={general}");
    }
}

/// A server that keeps its connections open teaches no idle close, however the probes overlap:
/// rounds of 8 concurrent probes 30 ms apart (each round's answers end close together, and the
/// next round finds them idle in any order) keep reusing the connections of the first rounds.
/// Had the general client learned a close from them, its pool would retire connections idle
/// for 15 ms and every round would open new ones (about 8 a round).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_probes_on_a_server_that_keeps_connections_open_teach_no_idle_close() {
    for general in [false, true] {
        let (addr, counts) = idle_closing_server(Duration::from_secs(10), None, None);
        let target = runtime(addr, general);
        let mut after_warm_up = 0;
        for round in 0..10u64 {
            let probes = (0..8).map(|i| probe_at_gate(&target, round * 8 + i, Duration::from_millis(30)));
            for outcome in futures_util::future::join_all(probes).await {
                assert!(outcome.result.is_ok(), "general={general}: {:?}", outcome.result);
            }
            if round == 2 {
                after_warm_up = counts.connections.load(Ordering::SeqCst);
            }
        }
        let connections = counts.connections.load(Ordering::SeqCst);
        eprintln!("general={general}: {connections} connections for 80 probes, {after_warm_up} after three rounds");
        // Seven more rounds open at most what one round needs (on a busy machine the first
        // rounds may overlap less and open fewer): learning a close would open about 56.
        assert!(connections <= after_warm_up + 8, "general={general}: {connections} connections, {after_warm_up} after three rounds");
    }
}

#[tokio::test]
async fn a_request_read_and_dropped_without_a_byte_is_connect_and_sent_once_on_either_client() {
    for general in [false, true] {
        let (addr, counts) = idle_closing_server(Duration::from_secs(10), None, Some(1));
        let target = runtime(addr, general);
        assert!(probe_at_gate(&target, 0, Duration::ZERO).await.result.is_ok());
        let outcome = probe_at_gate(&target, 1, Duration::from_millis(20)).await;
        assert_eq!(outcome.error_class(), Some(ErrorClass::Connect), "general={general}: {:?}", outcome.result);
        assert_eq!(counts.requests.load(Ordering::SeqCst), 2, "general={general}: the dropped request was not sent again");
        assert_eq!(counts.connections.load(Ordering::SeqCst), 1, "general={general}");
    }
}
