//! The machine's own floor under the prober's figures: what small messages over loopback cost
//! a bare receiver, with no prober code at all.
//! - Idle and busy: one connection, messages 20 ms apart (the receiver blocked and idle before
//!   each, as the sidecar between streamed frames) or 0.1 ms apart. Latency runs from the
//!   sender's clock reading before `send` to the receiver's after `recv` returns (both
//!   `CLOCK_REALTIME`, one machine); a TTFT error measured against a server's own stamps
//!   includes two such crossings (the request, then the first frame).
//! - Bursts: one message on each of 1,000 connections every 20 ms, each read by a bare tokio
//!   task (readiness, then one read), as the prober reads a streamed frame at 1,000 streams
//!   without decoding, parsing or timing it.
//!
//! Receiver CPU per message comes from the kernel's per-thread run time
//! (`/proc/thread-self/schedstat`, nanoseconds): the least a client spends per streamed frame on
//! this machine. `cargo bench --bench floor` (or `benches/perf.py`, which runs it pinned): the
//! receiver runs where it is started, the sender (this binary, `--send`/`--send-bursts`) on
//! CPU 0 through `taskset` when that is installed. Without `--bench` (as `cargo test` runs it) a
//! short run checks that every figure can be taken.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MESSAGE_BYTES: usize = 200;

fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// This thread's time on a CPU so far, in nanoseconds.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// The sender: `count` messages `gap` apart, each starting with its send time.
fn send(port: u16, count: usize, gap: Duration) -> std::io::Result<()> {
    let mut socket = TcpStream::connect(("127.0.0.1", port))?;
    socket.set_nodelay(true)?;
    let mut message = [b'x'; MESSAGE_BYTES];
    for _ in 0..count {
        std::thread::sleep(gap);
        message[..8].copy_from_slice(&wall_ns().to_le_bytes());
        socket.write_all(&message)?;
    }
    Ok(())
}

struct Floor {
    messages: usize,
    latency_us: Vec<f64>,
    cpu_us_per_message: Option<f64>,
}

/// CPU microseconds per message between two readings of `thread_cpu_ns`.
fn per_message_us(before: Option<u64>, after: Option<u64>, messages: usize) -> Option<f64> {
    match (before, after) {
        (Some(b), Some(a)) if messages > 0 => Some(a.saturating_sub(b) as f64 / 1000.0 / messages as f64),
        _ => None,
    }
}

/// Starts this binary as a sender (`args[0]` is its path), on CPU 0 when `pin` is set.
fn spawn_sender(args: &[String], pin: bool) -> std::io::Result<std::process::Child> {
    if pin { std::process::Command::new("taskset").args(["-c", "0"]).args(args).spawn() } else { std::process::Command::new(&args[0]).args(&args[1..]).spawn() }
}

/// The burst sender: `steps` times, one message on each of `conns` connections, `gap` apart.
fn send_bursts(port: u16, conns: usize, steps: usize, gap: Duration) -> std::io::Result<()> {
    let mut sockets = Vec::with_capacity(conns);
    for _ in 0..conns {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        sockets.push(s);
    }
    let message = [b'x'; MESSAGE_BYTES];
    for _ in 0..steps {
        std::thread::sleep(gap);
        for s in &mut sockets {
            s.write_all(&message)?;
        }
    }
    Ok(())
}

/// Receives the bursts on a current-thread tokio runtime, a task per connection; returns the
/// messages received and this thread's CPU per message.
fn receive_bursts(conns: usize, steps: usize, gap: Duration, pin_sender: bool) -> std::io::Result<(usize, Option<f64>)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port().to_string();
        let exe = std::env::current_exe()?.to_string_lossy().into_owned();
        let args = [exe, "--send-bursts".into(), port, conns.to_string(), steps.to_string(), gap.as_micros().to_string()];
        let mut sender = spawn_sender(&args, pin_sender)?;
        let mut sockets = Vec::with_capacity(conns);
        for _ in 0..conns {
            sockets.push(listener.accept().await?.0);
        }
        let cpu_before = thread_cpu_ns();
        let readers: Vec<_> = sockets
            .into_iter()
            .map(|socket| {
                tokio::spawn(async move {
                    let (mut buf, mut bytes) = (vec![0u8; 16 << 10], 0usize);
                    while bytes < steps * MESSAGE_BYTES {
                        if socket.readable().await.is_err() {
                            break;
                        }
                        match socket.try_read(&mut buf) {
                            Ok(0) => break,
                            Ok(n) => bytes += n,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                            Err(_) => break,
                        }
                    }
                    bytes / MESSAGE_BYTES
                })
            })
            .collect();
        let mut messages = 0;
        for r in readers {
            messages += r.await.unwrap_or(0);
        }
        let cpu_after = thread_cpu_ns();
        let _ = sender.wait();
        let cpu = per_message_us(cpu_before, cpu_after, messages);
        Ok((messages, cpu))
    })
}

/// Receives `count` messages sent `gap` apart by a sender process.
fn receive(count: usize, gap: Duration, pin_sender: bool) -> std::io::Result<Floor> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port().to_string();
    let exe = std::env::current_exe()?;
    let args = [exe.to_string_lossy().into_owned(), "--send".into(), port, count.to_string(), gap.as_micros().to_string()];
    let mut sender = spawn_sender(&args, pin_sender)?;
    let (mut socket, _) = listener.accept()?;
    let mut buf = vec![0u8; 64 << 10];
    let (mut pending, mut latency_us) = (Vec::new(), Vec::with_capacity(count));
    let cpu_before = thread_cpu_ns();
    while latency_us.len() < count {
        let n = socket.read(&mut buf)?;
        let at = wall_ns();
        if n == 0 {
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        // Messages that came together in one read all arrived when it returned.
        while pending.len() >= MESSAGE_BYTES {
            let stamp = u64::from_le_bytes(pending[..8].try_into().expect("8 bytes"));
            latency_us.push(at.saturating_sub(stamp) as f64 / 1000.0);
            pending.drain(..MESSAGE_BYTES);
        }
    }
    let cpu_after = thread_cpu_ns();
    sender.wait()?;
    let messages = latency_us.len();
    let cpu_us_per_message = per_message_us(cpu_before, cpu_after, messages);
    latency_us.sort_by(f64::total_cmp);
    Ok(Floor { messages, latency_us, cpu_us_per_message })
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    sorted.get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1))).copied().unwrap_or(f64::NAN)
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--send") {
        let number = |i: usize| args.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        return send(number(2) as u16, number(3) as usize, Duration::from_micros(number(4)));
    }
    if args.get(1).map(String::as_str) == Some("--send-bursts") {
        let number = |i: usize| args.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        return send_bursts(number(2) as u16, number(3) as usize, number(4) as usize, Duration::from_micros(number(5)));
    }
    let full = args.iter().any(|a| a == "--bench");
    let pin_sender = full && std::process::Command::new("taskset").arg("-V").output().is_ok_and(|o| o.status.success());
    let cases: [(&str, usize, Duration); 2] = if full {
        [("idle (messages 20 ms apart)", 400, Duration::from_millis(20)), ("busy (messages 0.1 ms apart)", 20_000, Duration::from_micros(100))]
    } else {
        [("idle (messages 20 ms apart)", 10, Duration::from_millis(20)), ("busy (messages 0.1 ms apart)", 200, Duration::from_micros(100))]
    };
    for (name, count, gap) in cases {
        let floor = receive(count, gap, pin_sender)?;
        let l = &floor.latency_us;
        let mean = l.iter().sum::<f64>() / l.len().max(1) as f64;
        println!(
            "loopback floor, {name}: {} messages, latency mean {mean:.1} us, p50 {:.1}, p99 {:.1}; receiver CPU {} us per message",
            floor.messages,
            pct(l, 0.5),
            pct(l, 0.99),
            floor.cpu_us_per_message.map_or("n/a".into(), |c| format!("{c:.1}"))
        );
        if !full {
            assert_eq!(floor.messages, count, "every message received");
            assert!(l.iter().all(|v| v.is_finite() && *v < 10_000_000.0), "latencies are real durations: {l:?}");
        }
    }
    let (conns, steps) = if full { (1000, 64) } else { (20, 4) };
    let (messages, cpu) = receive_bursts(conns, steps, Duration::from_millis(20), pin_sender)?;
    println!(
        "loopback floor, bursts (one message on each of {conns} connections every 20 ms, a tokio task each): {messages} messages; receiver CPU {} us per message",
        cpu.map_or("n/a".into(), |c| format!("{c:.2}"))
    );
    if !full {
        assert_eq!(messages, conns * steps, "every burst message received");
    }
    Ok(())
}
