//! The HTTP surface in-process: content negotiation on /metrics, health, readiness (including a
//! component that is down), debug JSON, the lifecycle switch of `/-/reload`, and over a real
//! listener: graceful shutdown. Deadlines, the connection cap and hostile clients:
//! `tests/prober/server_limits.rs`.

use crate::metrics_common;

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode, header};
use llmprobe::app::server::{OPENMETRICS_CONTENT_TYPE, PROMETHEUS_TEXT_CONTENT_TYPE, ServerState, router, serve};
use llmprobe::sink::{History, Metrics, Sink};
use llmprobe::util::health::Health;
use metrics_common::{config, golden_outcomes, sample};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

fn state() -> ServerState {
    let metrics = Arc::new(Metrics::new(&config()));
    let history = Arc::new(History::default());
    for o in golden_outcomes(Instant::now()) {
        let s = sample(&o);
        metrics.record(&o, s.as_ref());
        history.record(&o, s.as_ref());
    }
    let health = Arc::new(Health::new(metrics.clone()));
    ServerState { metrics, history, health, reload: None, lifecycle: false, releases: None, detect: None, replicas: None }
}

/// GET `path` with an optional Accept header; returns status, content type and body.
async fn get(state: &ServerState, path: &str, accept: Option<&str>) -> (StatusCode, String, String) {
    let mut req = Request::get(path);
    if let Some(a) = accept {
        req = req.header(header::ACCEPT, a);
    }
    let resp = router(state.clone()).oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let status = resp.status();
    let ct = resp.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    let body = to_bytes(resp.into_body(), 1 << 24).await.unwrap();
    (status, ct, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn metrics_serves_openmetrics_when_accepted() {
    let st = state();
    // What Prometheus 2.x/3.x sends.
    let accept = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";
    let (status, ct, body) = get(&st, "/metrics", Some(accept)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ct, OPENMETRICS_CONTENT_TYPE);
    assert!(body.ends_with("# EOF\n"));
    assert!(body.contains("# TYPE llmprobe_requests counter\n"));
    assert_eq!(body, st.metrics.encode_openmetrics());
}

#[tokio::test]
async fn metrics_falls_back_to_prometheus_text() {
    let st = state();
    for accept in [None, Some("text/plain"), Some("*/*")] {
        let (status, ct, body) = get(&st, "/metrics", accept).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ct, PROMETHEUS_TEXT_CONTENT_TYPE);
        assert!(!body.contains("# EOF"));
        assert!(body.contains("# TYPE llmprobe_requests_total counter\n"));
        assert!(body.contains("outcome=\"success\",error=\"none\"} 2\n"));
    }
}

#[tokio::test]
async fn healthz_is_always_ok() {
    let (status, _, body) = get(&state(), "/healthz", None).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
}

#[tokio::test]
async fn readyz_is_ready_only_when_started_and_no_component_is_down() {
    let st = state();
    assert_eq!(get(&st, "/readyz", None).await.0, StatusCode::SERVICE_UNAVAILABLE);
    st.health.set_started(true);
    assert_eq!(get(&st, "/readyz", None).await.0, StatusCode::OK);
    st.health.set_down("scheduler", "stopped after an internal error");
    let (status, _, body) = get(&st, "/readyz", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("scheduler down: stopped after an internal error"), "{body}");
    st.health.set_up("scheduler");
    assert_eq!(get(&st, "/readyz", None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn internal_errors_are_counted_by_component() {
    let st = state();
    st.health.internal_error("recorder", "test panic");
    let text = st.metrics.encode_prometheus_text();
    assert!(text.contains("llmprobe_internal_errors_total{component=\"recorder\"} 1\n"), "{text}");
    assert!(text.contains("llmprobe_internal_errors_total{component=\"scheduler\"} 0\n"), "pre-created at zero");
}

#[tokio::test]
async fn reload_endpoint_is_off_unless_the_lifecycle_flag_is_set() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut st = state();
    st.reload = Some(tx);
    let post = |st: ServerState| async move { router(st).oneshot(Request::post("/-/reload").body(Body::empty()).unwrap()).await.unwrap().status() };
    assert_eq!(post(st.clone()).await, StatusCode::FORBIDDEN);
    assert!(rx.try_recv().is_err(), "no reload requested");
    st.lifecycle = true;
    assert_eq!(post(st.clone()).await, StatusCode::ACCEPTED);
    assert!(rx.try_recv().is_ok());
}

#[tokio::test]
async fn debug_probes_is_json_with_recent_and_failures() {
    let (status, ct, body) = get(&state(), "/debug/probes", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ct, "application/json");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["recent"].as_array().unwrap().len(), 4);
    let failure = &json["failures"][0];
    assert_eq!(failure["error"], "timeout_ttft");
    for field in [
        "target",
        "scenario",
        "seq",
        "request_id",
        "outcome",
        "error_detail",
        "http_status",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "output_tokens",
        "token_source",
        "schedule_lag_ms",
        "age_ms",
    ] {
        assert!(failure.get(field).is_some(), "missing {field}");
    }
}

#[tokio::test]
async fn unknown_path_is_404() {
    assert_eq!(get(&state(), "/nope", None).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn serve_answers_over_tcp_and_stops_on_cancel() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve(listener, state(), shutdown.clone()));
    let client = reqwest::Client::new();
    let resp = client.get(format!("http://{addr}/metrics")).header("accept", "application/openmetrics-text; version=1.0.0").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], OPENMETRICS_CONTENT_TYPE);
    assert!(resp.text().await.unwrap().ends_with("# EOF\n"));
    shutdown.cancel();
    let done = tokio::time::timeout(std::time::Duration::from_secs(5), server).await;
    done.expect("server stops after cancel").unwrap().unwrap();
}

#[tokio::test]
async fn runbook_is_served_with_an_anchor_for_every_section() {
    let (status, ct, body) = get(&state(), "/runbook", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ct, "text/html; charset=utf-8");
    // Every section heading of the runbook is an anchor a runbook_url can name.
    let headings: Vec<&str> = llmprobe::app::server::RUNBOOK_MARKDOWN.lines().filter(|l| l.starts_with("## ")).collect();
    assert!(headings.len() > 20, "{headings:?}");
    for h in headings {
        let anchor = llmprobe::app::server::heading_anchor(&h[3..]);
        assert!(body.contains(&format!("<h2 id=\"{anchor}\">")), "no anchor {anchor} for {h}");
    }
    assert!(body.contains("<h2 id=\"llmprobeproberdown\">LLMProbeProberDown</h2>"), "{}", &body[..400]);
    assert!(!body.contains("<h1 id=\"alertmanageryml\">"), "a comment inside a code block is not a heading");
    let (status, ct, md) = get(&state(), "/runbook.md", None).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/markdown; charset=utf-8"));
    assert_eq!(md, llmprobe::app::server::RUNBOOK_MARKDOWN);
}
