//! Interim (`1xx`) answers on the lean client: up to `MAX_INTERIM_ANSWERS` are skipped before
//! the final answer; a server that sends `100 Continue` forever gets a malformed answer (`parse`)
//! after one more instead of keeping a core busy until the probe's deadline. Raw loopback server.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::client::TargetRuntime;
use llmprobe::client::http1::MAX_INTERIM_ANSWERS;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::ErrorClass;
use llmprobe::workload::Draw;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// A server that answers each connection's request with `interim` `100 Continue` heads (`None`:
/// forever, until the client goes away) and then `200` with a short body.
async fn server(interim: Option<usize>) -> std::net::SocketAddr {
    common::raw_server(move |mut socket| async move {
        match interim {
            Some(n) => {
                let mut answer = CONTINUE.repeat(n);
                answer.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
                let _ = socket.write_all(&answer).await;
                let mut buf = [0u8; 64];
                let _ = socket.read(&mut buf).await;
            }
            None => {
                let burst = CONTINUE.repeat(64);
                while socket.write_all(&burst).await.is_ok() {}
            }
        }
    })
    .await
}

fn target(addr: std::net::SocketAddr) -> Arc<TargetRuntime> {
    common::target_runtime(addr, "api: openai-chat, model: m")
}

#[tokio::test]
async fn up_to_the_cap_interim_answers_are_skipped() {
    let t = target(server(Some(MAX_INTERIM_ANSWERS)).await);
    let prepared = t.prepare("/v1/chat/completions", Default::default(), b"{}".to_vec()).unwrap();
    assert!(matches!(prepared, llmprobe::client::PreparedRequest::Lean(_)), "the lean client sends");
    let answer = t.send(prepared, None).await.unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(answer.status(), 200);
}

#[tokio::test]
async fn endless_100_continue_is_a_malformed_answer() {
    let t = target(server(None).await);
    let prepared = t.prepare("/v1/chat/completions", Default::default(), b"{}".to_vec()).unwrap();
    assert!(matches!(prepared, llmprobe::client::PreparedRequest::Lean(_)), "the lean client sends");
    // A guard so that a regression fails instead of hanging; not an assertion on time.
    let failure = match tokio::time::timeout(Duration::from_secs(60), t.send(prepared, None)).await.expect("send returned") {
        Ok(answer) => panic!("an answer with status {}", answer.status()),
        Err(f) => f,
    };
    assert_eq!(failure.class, ErrorClass::Parse, "{failure:?}");
    assert!(failure.detail.contains("interim"), "{failure:?}");

    // Through a whole probe too: `parse`, within the probe's own deadlines.
    let draw = Draw { input_tokens: 8, output_tokens: 4, prompt: "hi".into(), ..Draw::default() };
    let o = execute(Probe { target: t, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await;
    assert_eq!(o.error_class(), Some(ErrorClass::Parse), "{:?}", o.result);
}
