//! A gzip bomb (1 GiB of zeros, compressed as it is sent, never held) is refused as `parse` by
//! both clients, streamed and whole, after about a MiB decoded: this binary counts its heap, and
//! the probe's peak stays far under the 64 MiB `max_response_bytes` the bomb would otherwise be
//! decoded up to (272 MiB peak before the ratio cap). Raw loopback server; one test in this
//! binary, so nothing else allocates while it measures.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use llmprobe::client::TargetRuntime;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::ErrorClass;
use llmprobe::workload::Draw;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size > layout.size() {
                let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// 1 GiB of zeros, gzip-compressed piece by piece (256 KiB) as it is written.
const BOMB_BYTES: usize = 1 << 30;
static ZEROS: [u8; 256 << 10] = [0; 256 << 10];

/// A server that answers every request with a gzip bomb (`200`, `content-encoding: gzip`, the
/// body to the end of the connection); it stops compressing once the client goes away.
async fn bomb_server(content_type: &'static str) -> std::net::SocketAddr {
    common::raw_server(move |mut socket| async move {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-encoding: gzip\r\nconnection: close\r\n\r\n");
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for _ in 0..BOMB_BYTES / ZEROS.len() {
            // Flushed per piece, so the bomb goes out as it is made (~1000:1 still).
            gz.write_all(&ZEROS).unwrap();
            gz.flush().unwrap();
            let wire = std::mem::take(gz.get_mut());
            if socket.write_all(&wire).await.is_err() {
                return;
            }
        }
        let _ = socket.write_all(&gz.finish().unwrap()).await;
    })
    .await
}

fn target(addr: std::net::SocketAddr, general: bool, stream: bool) -> Arc<TargetRuntime> {
    common::target_runtime(addr, &format!("api: openai-chat, model: m, follow_redirects: {general}, stream: {stream}, accept_encoding: [gzip]"))
}

#[tokio::test]
async fn a_gzip_bomb_is_refused_without_being_decoded() {
    let (sse, json) = (bomb_server("text/event-stream").await, bomb_server("application/json").await);
    for general in [false, true] {
        for stream in [true, false] {
            let t = target(if stream { sse } else { json }, general, stream);
            let started = Instant::now();
            let draw = Draw { input_tokens: 8, output_tokens: 4, prompt: "hi".into(), ..Draw::default() };
            let probe = Probe { target: t, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None };
            let before = CURRENT.load(Ordering::Relaxed);
            PEAK.store(before, Ordering::Relaxed);
            let o = execute(probe, &CancellationToken::new()).await;
            let grew = PEAK.load(Ordering::Relaxed).saturating_sub(before);
            let case = format!("general client {general}, stream {stream}");
            assert_eq!(o.error_class(), Some(ErrorClass::Parse), "{case}: {:?}", o.result);
            let detail = o.result.as_ref().unwrap_err().detail.clone();
            assert!(detail.contains("compression bomb"), "{case}: {detail}");
            assert!(grew < 16 << 20, "{case}: the probe's heap grew by {} MiB", grew >> 20);
            eprintln!("{case}: refused in {:?}, heap grew by {} KiB: {detail}", started.elapsed(), grew >> 10);
        }
    }
}
