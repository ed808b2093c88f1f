//! The lean HTTP/1.1 probe client over real loopback sockets: kept-alive connections are
//! reused, a connection the server closes while idle costs no probe, a request the server took
//! and dropped unanswered is an error and is never sent again, the request on the
//! wire is what the general client sends (host, key, headers, length), and a request the
//! dispatcher writes at its send time (`handover`) arrives whole, once, however large.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::config::{SecretRef, Target};
use llmprobe::pipeline::exec::{Probe, SendAt, execute, execute_when};
use llmprobe::probe::handover;
use llmprobe::probe::outcome::Outcome;
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

const SSE: &str = "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n\
data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// The head and the length of a whole request (head and `content-length` body) at the front
/// of `seen`, once it has all come.
fn whole_request(seen: &[u8]) -> Option<(String, usize)> {
    let end = seen.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&seen[..end]).to_string();
    let length: usize = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
    (seen.len() >= end + 4 + length).then_some((head, end + 4 + length))
}

/// Reads one request; `None` at the end of the connection.
async fn read_request(sock: &mut TcpStream) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some((head, _)) = whole_request(&seen) {
            return Some(head);
        }
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        seen.extend_from_slice(&buf[..n]);
    }
}

/// The answer as written, piece by piece: the head, one chunk per SSE event, the last chunk.
fn answer_pieces() -> Vec<Vec<u8>> {
    let mut pieces = vec![b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec()];
    pieces.extend(SSE.split_inclusive("\n\n").map(|line| format!("{:x}\r\n{line}\r\n", line.len()).into_bytes()));
    pieces.push(b"0\r\n\r\n".to_vec());
    pieces
}

async fn answer(sock: &mut TcpStream) -> std::io::Result<()> {
    for piece in answer_pieces() {
        sock.write_all(&piece).await?;
    }
    Ok(())
}

/// A keep-alive server answering every request; with `drop_second`, each connection's
/// second request is read and the connection closed unanswered (a server that dropped it).
/// Returns its address, the connections accepted and the request heads seen (answered or not).
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
                    h.lock().unwrap().push(head);
                    if drop_second && served == 1 {
                        return;
                    }
                    answer(&mut sock).await.unwrap();
                    served += 1;
                }
            });
        }
    });
    (addr, conns, heads)
}

/// A server that closes each connection right after its first answer (as one whose keep-alive
/// idle timeout is short), reporting each close. Returns its address, the connections accepted,
/// the requests answered and the closes.
async fn closing_server() -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (conns, answered) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (closed, closes) = tokio::sync::mpsc::unbounded_channel();
    let (c, a) = (conns.clone(), answered.clone());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let (a, closed) = (a.clone(), closed.clone());
            tokio::spawn(async move {
                if read_request(&mut sock).await.is_some() && answer(&mut sock).await.is_ok() {
                    a.fetch_add(1, Ordering::SeqCst);
                }
                drop(sock);
                let _ = closed.send(());
            });
        }
    });
    (addr, conns, answered, closes)
}

fn draw(prompt: &str) -> Draw {
    Draw { input_tokens: 16, output_tokens: 16, prompt: prompt.into(), ..Draw::default() }
}

async fn probe(runtime: &Arc<TargetRuntime>, seq: u64) -> Outcome {
    let probe = Probe { target: runtime.clone(), scenario: Arc::from("s"), seq, draw: draw("hello there"), intended: Instant::now(), trace_ratio: None };
    execute(probe, &CancellationToken::new()).await
}

/// A probe parked at a gate that another thread opens `after` from now, as the dispatcher
/// does; returns the outcome and when the gate was opened.
async fn probe_at_gate(runtime: &Arc<TargetRuntime>, seq: u64, prompt: &str, after: Duration) -> (Outcome, Instant) {
    let (opener, gate) = handover::gate();
    let intended = Instant::now() + after;
    let probe = Probe { target: runtime.clone(), scenario: Arc::from("s"), seq, draw: draw(prompt), intended, trace_ratio: None };
    let opening = std::thread::spawn(move || {
        std::thread::sleep(after);
        let at = Instant::now();
        opener.open();
        at
    });
    let outcome = execute_when(probe, &CancellationToken::new(), SendAt::Gate(gate)).await;
    (outcome, opening.join().unwrap())
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
async fn a_connection_the_server_closed_while_idle_costs_no_probe() {
    let (addr, conns, answered, mut closes) = closing_server().await;
    let target = runtime(addr);
    for seq in 0..4 {
        let outcome = probe(&target, seq).await;
        assert!(outcome.result.is_ok(), "probe {seq}: {:?}", outcome.result);
        // The idle connection in the pool is closed now: the next probe must not lose itself on it.
        closes.recv().await.unwrap();
    }
    assert_eq!(answered.load(Ordering::SeqCst), 4, "every probe answered");
    assert_eq!(conns.load(Ordering::SeqCst), 4, "each connection served one request");
}

#[tokio::test]
async fn a_connection_closed_while_the_probe_waits_for_its_send_time_costs_no_probe() {
    let (addr, conns, answered, _closes) = closing_server().await;
    let target = runtime(addr);
    assert!(probe(&target, 0).await.result.is_ok());
    // Prepared at once (its connection checked out while the close may still be on its way),
    // sent when the gate opens, by which time the kept-alive connection is closed.
    let (outcome, _) = probe_at_gate(&target, 1, "hello there", Duration::from_millis(100)).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!((answered.load(Ordering::SeqCst), conns.load(Ordering::SeqCst)), (2, 2));
}

#[tokio::test]
async fn a_request_the_server_took_and_dropped_unanswered_is_an_error_not_sent_again() {
    let (addr, conns, heads) = server(true).await;
    let target = runtime(addr);
    assert!(probe(&target, 0).await.result.is_ok());
    // The kept-alive connection takes the whole request and closes without an answer: the
    // server may have acted on it, and a resend would hide that it drops requests.
    let outcome = probe(&target, 1).await;
    assert_eq!(outcome.error_class(), Some(llmprobe::probe::outcome::ErrorClass::Connect), "{:?}", outcome.result);
    assert_eq!(heads.lock().unwrap().len(), 2, "the dropped request was sent once");
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    assert!(probe(&target, 2).await.result.is_ok(), "the next probe goes on a new connection");
    assert_eq!(conns.load(Ordering::SeqCst), 2);
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

#[tokio::test]
async fn the_dispatcher_writes_a_request_on_a_kept_alive_connection() {
    let (addr, conns, heads) = server(false).await;
    let target = runtime(addr);
    assert!(probe(&target, 0).await.result.is_ok());
    let (outcome, opened) = probe_at_gate(&target, 1, "hello there", Duration::from_millis(50)).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(outcome.timeline.sent >= opened, "sent when the gate opened, not before");
    assert_eq!(conns.load(Ordering::SeqCst), 1, "the kept-alive connection carried it");
    assert_eq!(heads.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_gated_probe_without_an_idle_connection_opens_one_before_its_send_time() {
    let (addr, conns, heads) = server(false).await;
    let target = runtime(addr);
    let (outcome, opened) = probe_at_gate(&target, 0, "hello there", Duration::from_millis(100)).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(outcome.timeline.sent >= opened);
    assert_eq!(conns.load(Ordering::SeqCst), 1);
    assert_eq!(heads.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_probe_refused_at_its_gate_leaves_its_connection_for_the_next() {
    let (addr, conns, heads) = server(false).await;
    let target = runtime(addr);
    let (opener, gate) = handover::gate();
    let intended = Instant::now() + Duration::from_millis(100);
    let doomed = Probe { target: target.clone(), scenario: Arc::from("s"), seq: 0, draw: draw("refused"), intended, trace_ratio: None };
    let refusing = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        opener.refuse();
    });
    let refused = execute_when(doomed, &CancellationToken::new(), SendAt::Gate(gate)).await;
    refusing.join().unwrap();
    assert_eq!(refused.error_class(), Some(llmprobe::probe::outcome::ErrorClass::InFlightCap), "{:?}", refused.result);
    // The connection it opened before its send time serves the next probe.
    let outcome = probe(&target, 1).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert_eq!(conns.load(Ordering::SeqCst), 1, "the refused probe's connection was reused");
    assert_eq!(heads.lock().unwrap().len(), 1, "the refused request never reached the server");
}

#[tokio::test]
async fn a_request_larger_than_the_socket_takes_is_written_whole_once() {
    let (addr, conns, heads) = server(false).await;
    let target = runtime(addr);
    assert!(probe(&target, 0).await.result.is_ok());
    // Far beyond a socket's send buffer: the dispatcher writes what fits, the probe the rest.
    let prompt = "word ".repeat(4 << 20);
    let (outcome, _) = probe_at_gate(&target, 1, &prompt, Duration::from_millis(20)).await;
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    // The server reads exactly `content-length` bytes per request: a byte written twice or
    // missing would break the next request or hang this one.
    assert!(probe(&target, 2).await.result.is_ok());
    assert_eq!(heads.lock().unwrap().len(), 3);
    assert_eq!(conns.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_dispatcher_write_the_server_drops_unanswered_is_an_error_not_sent_again() {
    let (addr, conns, heads) = server(true).await;
    let target = runtime(addr);
    assert!(probe(&target, 0).await.result.is_ok());
    // The kept-alive connection takes the dispatcher's write and closes without an answer.
    let (outcome, _) = probe_at_gate(&target, 1, "hello there", Duration::from_millis(20)).await;
    assert_eq!(outcome.error_class(), Some(llmprobe::probe::outcome::ErrorClass::Connect), "{:?}", outcome.result);
    assert_eq!(conns.load(Ordering::SeqCst), 1, "no second connection: not sent again");
    assert_eq!(heads.lock().unwrap().len(), 2);
}

/// A server on a thread of its own (it keeps answering while the test's runtime is blocked):
/// answers every request on one connection and reports when each request had fully arrived.
fn thread_server() -> (SocketAddr, std::sync::mpsc::Receiver<Instant>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (arrived, arrivals) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut sock, _)) = listener.accept() else { return };
        let mut seen = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some((_, len)) = whole_request(&seen) {
                seen.drain(..len);
                let _ = arrived.send(Instant::now());
                if answer_pieces().iter().any(|piece| sock.write_all(piece).is_err()) {
                    return;
                }
                continue;
            }
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    });
    (addr, arrivals)
}

#[tokio::test(flavor = "current_thread")]
async fn the_dispatchers_write_goes_out_while_the_probes_runtime_is_busy() {
    let (addr, arrivals) = thread_server();
    let target = runtime(addr);
    assert!(probe(&target, 0).await.result.is_ok());
    arrivals.recv().unwrap();
    let (opener, gate) = handover::gate();
    let intended = Instant::now() + Duration::from_millis(30);
    let probe = Probe { target: target.clone(), scenario: Arc::from("s"), seq: 1, draw: draw("hello there"), intended, trace_ratio: None };
    let running = tokio::spawn(async move { execute_when(probe, &CancellationToken::new(), SendAt::Gate(gate)).await });
    // Let the probe park at its gate, then keep this (only) runtime thread busy past the send time.
    tokio::time::sleep(Duration::from_millis(10)).await;
    let opening = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        opener.open();
    });
    std::thread::sleep(Duration::from_millis(200));
    let busy_until = Instant::now();
    let arrived = arrivals.recv_timeout(Duration::from_secs(5)).expect("the request arrived");
    assert!(arrived < busy_until, "the request went out while the probe could not run");
    opening.join().unwrap();
    let outcome = running.await.unwrap();
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    assert!(outcome.timeline.sent < busy_until, "its send time is the write's, not when the probe ran");
}

#[tokio::test]
async fn a_probe_that_fails_before_its_send_time_ends_at_it() {
    // Nothing listens here: model discovery fails at once, long before the send time.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let target = Arc::new(TargetRuntime::new(Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap()).unwrap());
    let (outcome, opened) = probe_at_gate(&target, 0, "hello there", Duration::from_millis(100)).await;
    assert_eq!(outcome.error_class(), Some(llmprobe::probe::outcome::ErrorClass::Connect), "{:?}", outcome.result);
    // Its record must not come before the dispatcher counts it scheduled (at the gate).
    assert!(outcome.timeline.end >= opened, "ended {:?} before its gate opened", opened - outcome.timeline.end);

    let intended = Instant::now() + Duration::from_millis(100);
    let timed = Probe { target: target.clone(), scenario: Arc::from("s"), seq: 1, draw: draw("hello there"), intended, trace_ratio: None };
    let outcome = execute(timed, &CancellationToken::new()).await;
    assert_eq!(outcome.error_class(), Some(llmprobe::probe::outcome::ErrorClass::Connect), "{:?}", outcome.result);
    assert!(outcome.timeline.end >= intended, "ended before its send time");
}

#[tokio::test]
async fn a_closed_loop_probe_connects_before_it_is_sent_and_reports_a_failed_connect_once() {
    let (addr, conns, heads) = server(false).await;
    let target = runtime(addr);
    for seq in 0..2 {
        let probe = Probe { target: target.clone(), scenario: Arc::from("s"), seq, draw: draw("hello there"), intended: Instant::now(), trace_ratio: None };
        let outcome = execute_when(probe, &CancellationToken::new(), SendAt::Now).await;
        assert!(outcome.result.is_ok(), "probe {seq}: {:?}", outcome.result);
    }
    assert_eq!(conns.load(Ordering::SeqCst), 1, "opened once, then kept alive");
    assert_eq!(heads.lock().unwrap().len(), 2);

    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let probe = Probe { target: runtime(refused), scenario: Arc::from("s"), seq: 2, draw: draw("hello there"), intended: Instant::now(), trace_ratio: None };
    let outcome = execute_when(probe, &CancellationToken::new(), SendAt::Now).await;
    assert_eq!(outcome.error_class(), Some(llmprobe::probe::outcome::ErrorClass::Connect), "{:?}", outcome.result);
}

/// A one-request server on its own thread: the head and the first event `first` after the
/// request, the rest `rest` after that. Returns its address, word that the request came and
/// when it wrote the first event.
#[cfg(target_os = "linux")]
fn paced_server(first: Duration, rest: Duration) -> (SocketAddr, std::sync::mpsc::Receiver<()>, std::sync::mpsc::Receiver<Instant>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (wrote, writes) = std::sync::mpsc::channel();
    let (came, requests) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((mut sock, _)) = listener.accept() else { return };
        let _ = sock.set_nodelay(true);
        let (mut seen, mut buf) = (Vec::new(), [0u8; 8192]);
        while whole_request(&seen).is_none() {
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        let _ = came.send(());
        let pieces = answer_pieces();
        std::thread::sleep(first);
        let _ = sock.write_all(&[pieces[0].as_slice(), pieces[1].as_slice()].concat());
        let _ = wrote.send(Instant::now());
        std::thread::sleep(rest);
        let _ = sock.write_all(&pieces[2..].concat());
        // Until the client has read it all and closed.
        let _ = sock.read(&mut buf);
    });
    (addr, requests, writes)
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "current_thread")]
async fn a_frame_is_timed_at_its_arrival_when_the_probe_reads_it_late() {
    let (addr, requests, writes) = paced_server(Duration::from_millis(100), Duration::from_millis(400));
    let target = runtime(addr);
    let running = tokio::spawn(async move { probe(&target, 0).await });
    // Let the probe send, then keep this (only) runtime thread busy past the first event's arrival.
    let sent_by = Instant::now() + Duration::from_secs(5);
    while requests.try_recv().is_err() {
        assert!(Instant::now() < sent_by, "the probe sent its request");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    std::thread::sleep(Duration::from_millis(400));
    let busy_until = Instant::now();
    let written = writes.recv_timeout(Duration::from_secs(5)).expect("the server wrote the first event");
    assert!(written < busy_until, "the first event came while the probe could not read it");
    let outcome = running.await.unwrap();
    assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    let first = outcome.timeline.first_token().expect("a first token");
    assert!(first < busy_until, "the first token is timed at its arrival, not at the read after the busy spell");
    assert!(outcome.timeline.first_token_stamped, "and says so");
    assert!(first + Duration::from_millis(5) >= written, "and not before the server wrote it");
    assert!(outcome.timeline.first_byte.unwrap() <= first);
    let second = outcome.timeline.end;
    assert!(second.duration_since(first) >= Duration::from_millis(300), "the gap to the end is the server's 400 ms pause less the busy spell's overlap");
}
