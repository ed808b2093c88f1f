//! The lean HTTP/1.1 probe client and the general one (reqwest) read the same answers alike:
//! the same outcome class, HTTP status, text frames and usage for a stream, a stream that breaks
//! off, an error status, a wrong content type and a refused connection; and, against the mock
//! with every one of its faults drawn at a rate, the same class probe by probe, so the same share
//! of errors (a client that sent a dropped request again would hide the drops). The
//! general client is chosen by `follow_redirects` (which the lean client does not do), as a
//! config would; no answer here redirects. Where they differ (a head with bare-LF line ends, endless
//! interim answers) is pinned per client, as docs/outcomes.md documents it.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::config::{Target, Timeouts};
use llmprobe::mock::{self, Fault, FaultParams, MockOptions, Profile};
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::Outcome;
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio::io::AsyncWriteExt;
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
    let reply = Arc::new(reply);
    common::raw_server(move |mut sock| {
        let reply = reply.clone();
        async move {
            for piece in reply.as_bytes().chunks(40) {
                if sock.write_all(piece).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    })
    .await
}

/// A target at `addr` sending through the general client, or else the lean one.
fn runtime(addr: SocketAddr, general: bool, model: &str, timeouts: Timeouts) -> Arc<TargetRuntime> {
    let mut target = Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model(model).with_timeouts(timeouts);
    target.follow_redirects = general;
    Arc::new(TargetRuntime::new(target).unwrap())
}

async fn run(runtime: &Arc<TargetRuntime>, seq: u64) -> Outcome {
    let draw = Draw { input_tokens: 8, output_tokens: 8, prompt: "hello".into(), ..Draw::default() };
    execute(Probe { target: runtime.clone(), scenario: Arc::from("s"), seq, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new())
        .await
}

async fn probe(addr: SocketAddr, general: bool) -> Outcome {
    let timeouts = Timeouts { connect: Duration::from_secs(1), ttft: Duration::from_secs(2), idle: Duration::from_secs(2), total: Duration::from_secs(5) };
    run(&runtime(addr, general, "m", timeouts), 0).await
}

/// What both clients must agree on: error class, HTTP status, text frames, usage.
type Reading = (Option<&'static str>, Option<u16>, u64, Option<(u64, u64)>);

fn reading(o: &Outcome) -> Reading {
    (o.error_class().map(|c| c.as_str()), o.http_status, o.timeline.text_frame_count(), o.usage.map(|u| (u.prompt_tokens, u.completion_tokens)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
    faults_are_counted_alike().await;
}

/// Two answers the clients read differently, as docs/outcomes.md says per client: the general
/// client's HTTP/1 parser (hyper's) takes header lines ended by a bare LF and skips interim
/// (`1xx`) answers without a bound, and the prober cannot reach into it; the lean client refuses
/// both (`parse`, at most `MAX_INTERIM_ANSWERS` interim answers). Pinned here so that a change
/// on either side shows, and the documentation with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bare_lf_heads_and_endless_interim_answers_are_read_as_documented_per_client() {
    let bare_lf = format!("HTTP/1.1 200 OK\ncontent-type: text/event-stream\ncontent-length: {}\n\n{CHUNK}{LAST}", CHUNK.len() + LAST.len());
    let addr = server(bare_lf).await;
    let (lean, general) = (probe(addr, false).await, probe(addr, true).await);
    assert_eq!(lean.error_class().map(|c| c.as_str()), Some("parse"), "lean: {:?}", lean.result);
    assert!(lean.result.as_ref().unwrap_err().detail.contains("bare LF"), "{:?}", lean.result);
    assert_eq!(reading(&general), (None, Some(200), 1, Some((7, 3))), "general: {:?}", general.result);

    let endless = common::raw_server(|mut sock| async move {
        let burst = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(64);
        while sock.write_all(&burst).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    let (lean, general) = (probe(endless, false).await, probe(endless, true).await);
    assert_eq!(lean.error_class().map(|c| c.as_str()), Some("parse"), "lean: {:?}", lean.result);
    assert!(lean.result.as_ref().unwrap_err().detail.contains("interim"), "{:?}", lean.result);
    assert_eq!(general.error_class().map(|c| c.as_str()), Some("timeout_ttft"), "general: {:?}", general.result);
}

/// Every fault the mock has, by name (its list in `src/mock/faults.rs`, read here so that a
/// fault added there is checked too).
fn mock_faults() -> Vec<&'static str> {
    let source = include_str!("../../src/mock/faults.rs");
    let names: Vec<&str> = source.lines().filter_map(|l| l.trim().strip_prefix("(Fault::")?.split('"').nth(1)).collect();
    assert!(names.len() >= 20 && names.iter().all(|n| Fault::parse(n).is_some()), "{names:?}");
    names
}

/// Each fault drawn at rate 1/2 by a mock of its own per client: the mock draws its faults in
/// a seeded sequence, one draw per request, so two clients sending the same sequential probes
/// get the same faults in the same order, and must read them as the same classes. A request
/// sent twice takes a second draw and shifts the sequence. All faults and both clients run at
/// once (a few seconds in all); the slow ones (a stall or drip runs into a timeout) get fewer
/// probes.
async fn faults_are_counted_alike() {
    let timeouts =
        Timeouts { connect: Duration::from_secs(1), ttft: Duration::from_millis(600), idle: Duration::from_millis(600), total: Duration::from_secs(5) };
    let params = FaultParams { stall: Duration::from_secs(3), drip: Duration::from_millis(10), ..FaultParams::default() };
    let mut runs = Vec::new();
    let mut stops = Vec::new();
    for name in mock_faults() {
        let fault = Fault::parse(name).unwrap();
        let probes: u64 = if matches!(name, "stall_ttft" | "stall_mid_stream" | "slow_drip") { 4 } else { 16 };
        let mut pair = Vec::new();
        for general in [false, true] {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let stop = CancellationToken::new();
            let opts = MockOptions { profile: Profile::large_gpu(), fault_rates: vec![(fault, 0.5)], fault_params: params.clone(), ..MockOptions::default() };
            tokio::spawn(mock::serve(listener, opts, stop.clone()));
            stops.push(stop);
            pair.push(runtime(addr, general, "mock-llama", timeouts));
        }
        let sequence = |target: Arc<TargetRuntime>| async move {
            let mut classes = Vec::new();
            for seq in 0..probes {
                classes.push(run(&target, seq).await.error_class().map(|c| c.as_str()));
            }
            classes
        };
        let (lean, general) = (tokio::spawn(sequence(pair[0].clone())), tokio::spawn(sequence(pair[1].clone())));
        runs.push(async move { (name, [lean.await.unwrap(), general.await.unwrap()]) });
    }
    let mut wrong = Vec::new();
    for run in runs {
        let (name, [lean, general]) = run.await;
        let errors = |c: &[Option<&str>]| c.iter().filter(|c| c.is_some()).count();
        if lean != general {
            wrong.push(format!("{name}: lean {} errors {lean:?}\n  general {} errors {general:?}", errors(&lean), errors(&general)));
        }
        if matches!(name, "refuse" | "close_before_response") && !(0 < errors(&general) && errors(&general) < general.len()) {
            wrong.push(format!("{name}: the draws should fail some probes, not all: {general:?}"));
        }
    }
    stops.iter().for_each(CancellationToken::cancel);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
