//! The prober's own HTTP surface: `/metrics` (OpenMetrics or Prometheus text by `Accept`),
//! `/healthz` (process alive), `/readyz` (probing runs and no component is down),
//! `/debug/probes` (recent probes), `POST /-/reload` (re-read the config file, as SIGHUP does;
//! only with `--web.enable-lifecycle`, like Prometheus).
//!
//! The accept loop is our own so that a slow or hostile client cannot hold the server: request
//! headers must arrive within `HEADER_READ_TIMEOUT`, and at most `MAX_CONNECTIONS` are open
//! at once (more are closed on accept).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::health::Health;
use crate::sink::{History, Metrics};

pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const JSON_CONTENT_TYPE: &str = "application/json";

/// A client must send its request headers within this time.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Open connections at most; Prometheus and a few humans need far fewer.
pub const MAX_CONNECTIONS: usize = 128;
/// On shutdown, open connections get this long to finish their request.
const DRAIN: Duration = Duration::from_secs(5);

/// What the handlers read; cheap to clone.
#[derive(Clone)]
pub struct ServerState {
    pub metrics: Arc<Metrics>,
    pub history: Arc<History>,
    /// `/readyz` answers 200 only while this says ready.
    pub health: Arc<Health>,
    /// Where `POST /-/reload` asks for a config reload; `None` when the run has no config file.
    pub reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    /// Whether `POST /-/reload` is enabled (`--web.enable-lifecycle`).
    pub lifecycle: bool,
    /// Where `POST /api/v1/releases` markers go; the endpoint answers 404 while it has no token.
    pub releases: Option<Arc<crate::release::Releases>>,
}

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/debug/probes", get(debug_probes))
        .route("/-/reload", post(reload))
        .route("/api/v1/releases", post(post_release))
        .with_state(state)
}

/// Serves until `shutdown` is cancelled, then lets open requests finish (up to a few seconds).
pub async fn serve(listener: TcpListener, state: ServerState, shutdown: CancellationToken) -> std::io::Result<()> {
    let service = TowerToHyperService::new(router(state));
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let connections = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // e.g. out of file descriptors: wait a moment rather than spin or give up.
                Err(e) => {
                    tracing::warn!("metrics server: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(stream); // over the limit: close at once
            continue;
        };
        let (service, stop) = (service.clone(), shutdown.clone());
        connections.spawn(async move {
            let _slot = slot;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(DRAIN, conn).await;
                }
            }
        });
    }
    connections.close();
    let _ = tokio::time::timeout(DRAIN, connections.wait()).await;
    Ok(())
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
    if !state.lifecycle {
        return (StatusCode::FORBIDDEN, "lifecycle API is not enabled: start with --web.enable-lifecycle\n").into_response();
    }
    match state.reload.as_ref().map(|tx| tx.send(())) {
        Some(Ok(())) => (StatusCode::ACCEPTED, "reloading\n").into_response(),
        _ => (StatusCode::NOT_IMPLEMENTED, "this run has no config file to reload\n").into_response(),
    }
}

/// Largest release-marker request read.
const MAX_RELEASE_BODY: usize = 4096;

async fn post_release(State(state): State<ServerState>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    use crate::release::Refused;
    let Some(releases) = &state.releases else {
        return (StatusCode::NOT_FOUND, "release markers are not enabled\n").into_response();
    };
    if body.len() > MAX_RELEASE_BODY {
        return (StatusCode::PAYLOAD_TOO_LARGE, "release marker body too large\n").into_response();
    }
    let auth = headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match releases.mark_from_api(auth, &body) {
        Ok(()) => (StatusCode::ACCEPTED, "release marked\n").into_response(),
        Err(Refused::Disabled) => (StatusCode::NOT_FOUND, "release markers are not enabled: set detect.release_token_file\n").into_response(),
        Err(Refused::Unauthorized) => (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response(),
        Err(Refused::Bad(why)) => (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    if state.health.is_ready() {
        (StatusCode::OK, "ready").into_response()
    } else {
        let mut text = String::from("not ready");
        for reason in state.health.not_ready_reasons() {
            text.push('\n');
            text.push_str(&reason);
        }
        (StatusCode::SERVICE_UNAVAILABLE, text).into_response()
    }
}

async fn debug_probes(State(state): State<ServerState>) -> Response {
    ([(CONTENT_TYPE, JSON_CONTENT_TYPE)], state.history.to_json()).into_response()
}
