//! Redirects are not followed by default: a target that answers 307 to another host is the
//! error class `http_3xx`, and the other host never sees the prompt or the headers. With
//! `follow_redirects: true` the probe follows it.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::start_mock;
use llmprobe::client::TargetRuntime;
use llmprobe::mock::MockOptions;
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::outcome::ErrorClass;
use llmprobe::workload::Draw;
use tokio_util::sync::CancellationToken;

/// A server that redirects every request to `to` (307: method and body kept) and counts them.
async fn redirector(to: String) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let (to, h) = (to.clone(), h.clone());
        async move {
            h.fetch_add(1, Ordering::Relaxed);
            (axum::http::StatusCode::TEMPORARY_REDIRECT, [(axum::http::header::LOCATION, format!("{to}{uri}"))])
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, hits)
}

async fn probe(base: &str, follow: bool) -> llmprobe::probe::outcome::Outcome {
    let yaml = format!(
        "targets:\n  - {{name: t, base_url: \"{base}\", api: openai-chat, model: mock-llama, follow_redirects: {follow}, headers: {{X-Team: llm}}}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n"
    );
    let cfg = llmprobe::app::loader::parse(&yaml, "t.yaml").unwrap();
    let target = Arc::new(TargetRuntime::new(cfg.targets[0].clone()).unwrap());
    let draw = Draw { input_tokens: 8, output_tokens: 4, prompt: "a secret prompt".into(), ..Draw::default() };
    execute(Probe { target, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

#[tokio::test]
async fn redirects_are_an_error_unless_followed() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    // The mock stands for "another host"; count what reaches it through a second redirector.
    let (elsewhere, reached) = redirector(format!("http://{mock}")).await;
    let (target, hits) = redirector(format!("http://{elsewhere}")).await;
    let o = probe(&format!("http://{target}"), false).await;
    assert_eq!(o.error_class(), Some(ErrorClass::Http3xx), "{:?}", o.result);
    assert_eq!(o.http_status, Some(307));
    assert_eq!(hits.load(Ordering::Relaxed), 1);
    assert_eq!(reached.load(Ordering::Relaxed), 0, "nothing went to the other host");

    let o = probe(&format!("http://{target}"), true).await;
    assert_eq!(o.result, Ok(()), "followed through two redirects to the mock");
    assert_eq!(reached.load(Ordering::Relaxed), 1);
}
