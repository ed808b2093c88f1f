//! The prober's own HTTP surface: `/metrics` (OpenMetrics or Prometheus text by `Accept`),
//! `/healthz` (process alive), `/readyz` (probing has started), `/debug/probes` (recent probes),
//! `POST /-/reload` (re-read the config file, as SIGHUP does).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::sink::{History, Metrics};

pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const JSON_CONTENT_TYPE: &str = "application/json";

/// What the handlers read; cheap to clone.
#[derive(Clone)]
pub struct ServerState {
    pub metrics: Arc<Metrics>,
    pub history: Arc<History>,
    /// Set once the prober is running; `/readyz` answers 503 until then.
    pub ready: Arc<AtomicBool>,
    /// Where `POST /-/reload` asks for a config reload; `None` when the run has no config file.
    pub reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
}

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/debug/probes", get(debug_probes))
        .route("/-/reload", post(reload))
        .with_state(state)
}

/// Serves until `shutdown` is cancelled, then lets in-progress requests finish.
pub async fn serve(listener: TcpListener, state: ServerState, shutdown: CancellationToken) -> std::io::Result<()> {
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown.cancelled_owned()).await
}

/// Whether the scraper accepts OpenMetrics (Prometheus sends it first in its `Accept` list).
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("application/openmetrics-text"))
}

async fn metrics(State(state): State<ServerState>, headers: HeaderMap) -> Response {
    let (content_type, body) = if wants_openmetrics(&headers) {
        (OPENMETRICS_CONTENT_TYPE, state.metrics.encode_openmetrics())
    } else {
        (PROMETHEUS_TEXT_CONTENT_TYPE, state.metrics.encode_prometheus_text())
    };
    ([(CONTENT_TYPE, content_type)], body).into_response()
}

async fn reload(State(state): State<ServerState>) -> Response {
    match state.reload.as_ref().map(|tx| tx.send(())) {
        Some(Ok(())) => (StatusCode::ACCEPTED, "reloading\n").into_response(),
        _ => (StatusCode::NOT_IMPLEMENTED, "this run has no config file to reload\n").into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    if state.ready.load(Ordering::Acquire) { (StatusCode::OK, "ready").into_response() } else { (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response() }
}

async fn debug_probes(State(state): State<ServerState>) -> Response {
    ([(CONTENT_TYPE, JSON_CONTENT_TYPE)], state.history.to_json()).into_response()
}
