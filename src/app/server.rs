//! The prober's own HTTP surface: `/metrics` (OpenMetrics or Prometheus text by `Accept`),
//! `/healthz` (process alive), `/readyz` (probing runs and no component is down),
//! `/debug/probes` (recent probes), `/runbook` (the alert runbook, so an alert's `runbook_url`
//! resolves without internet; `/runbook.md` its Markdown), `POST /-/reload` (re-read the config file, as SIGHUP does;
//! only with `--web.enable-lifecycle`, like Prometheus), `POST /api/v1/releases` (a release
//! marker, with the bearer token of `detect.release_token_file`), `GET /api/v1/releases` and
//! `GET /api/v1/verdict` (with that token or the read-only one of `detect.release_read_token_file`).
//!
//! The accept loop is our own so that no client, slow or hostile, can keep a scraper out:
//! - every phase of a connection has a deadline ([`Limits`]): the request head (from its first
//!   byte; from accept for the first request), the request itself (reading a body included) and
//!   the wait between kept-alive requests;
//! - at most `max_connections` are open. When a connection arrives and all are taken, the open
//!   one that has waited longest without finishing a request is closed to make room (never one
//!   that is answering a scrape). A scrape needs its slot for milliseconds and an attacker needs
//!   it for seconds, so the attacker's connections are always the oldest and a scrape always
//!   gets in; this needs no guess at what a connection will ask before its head has arrived.
//!   Requests that are not scrapes go first, then kept-alive and half-sent heads, then connections
//!   that have not sent a byte. The limit: when more than `max_connections` connect within the
//!   milliseconds before a scrape's head arrives and none has sent a byte, the scrape may be the
//!   oldest of them;
//! - memory is bounded per connection: a head over 16 KiB is refused, and the one endpoint that
//!   reads a body checks the token and `Content-Length` from the head before reading a byte of it.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::sink::{History, Metrics};
use crate::util::health::Health;

pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const JSON_CONTENT_TYPE: &str = "application/json";

/// A request head must arrive within this, counted from its first byte (from accept for a
/// connection's first request).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A request, its body included, must be read and answered within this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A kept-alive connection with no request for this long is closed (Prometheus reconnects).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Open connections at most; Prometheus and a few humans need far fewer.
const MAX_CONNECTIONS: usize = 256;
/// The largest request head (hyper answers 431 beyond it); also bounds a connection's read buffer.
const MAX_HEAD_BYTES: usize = 16 * 1024;
/// On shutdown, open connections get this long to finish their request.
const DRAIN: Duration = Duration::from_secs(5);

/// The server's deadlines and connection cap (the defaults are the constants above).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections at most (when full, the one waiting longest is closed for a new one).
    pub max_connections: usize,
    /// A request head, from its first byte (from accept for a connection's first request).
    pub head: Duration,
    /// A request, from its head to its answer: reading the body and the handler.
    pub request: Duration,
    /// The wait between kept-alive requests.
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_connections: MAX_CONNECTIONS, head: HEADER_READ_TIMEOUT, request: REQUEST_TIMEOUT, idle: IDLE_TIMEOUT }
    }
}

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
    pub releases: Option<Arc<crate::app::release::Releases>>,
    /// The detector `GET /api/v1/verdict` reads (`None`: `detect.enabled: false`).
    pub detect: Option<Arc<crate::sink::detect::DetectSink>>,
    /// The replica comparisons whose canary joins the verdict while a rollout runs.
    pub replicas: Option<Arc<crate::sink::replicas::ReplicaSink>>,
}

pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/debug/probes", get(debug_probes))
        .route("/runbook", get(runbook))
        .route("/runbook.md", get(runbook_markdown))
        .route("/-/reload", post(reload))
        .route("/api/v1/releases", post(post_release).get(get_releases))
        .route("/api/v1/verdict", get(get_verdict))
        .with_state(state)
}

/// Serves with the default [`Limits`] until `shutdown` is cancelled, then lets open requests
/// finish (up to a few seconds).
pub async fn serve(listener: TcpListener, state: ServerState, shutdown: CancellationToken) -> io::Result<()> {
    serve_with(listener, state, shutdown, Limits::default()).await
}

/// [`serve`] with other limits (the tests use short deadlines and a small cap).
pub async fn serve_with(listener: TcpListener, state: ServerState, shutdown: CancellationToken, limits: Limits) -> io::Result<()> {
    let service = TowerToHyperService::new(router(state));
    let open = Arc::new(Open { slots: Mutex::new(Vec::new()), cap: limits.max_connections.max(1), next_id: AtomicU64::new(0) });
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
        let Some(slot) = open.admit() else {
            drop(stream); // every slot is answering a scrape: close at once
            continue;
        };
        connections.spawn(connection(stream, slot, open.clone(), service.clone(), limits, shutdown.clone()));
    }
    connections.close();
    let _ = tokio::time::timeout(DRAIN, connections.wait()).await;
    Ok(())
}

/// One connection: hyper serves it while a watchdog closes it when its phase's deadline passes,
/// when it is evicted, or (after a drain) on shutdown.
async fn connection(stream: TcpStream, slot: Arc<Slot>, open: Arc<Open>, service: TowerToHyperService<Router>, limits: Limits, stop: CancellationToken) {
    let _ = stream.set_nodelay(true);
    let phases = slot.clone();
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let during = Busy::begin(phases.clone(), is_scrape(&req));
        let answer = service.call(req);
        async move {
            let _during = during;
            answer.await
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our watchdog enforces the head deadline; hyper's (counted from the end of the previous
    // answer) is a backstop, and its buffer limit bounds a connection's memory.
    builder.timer(TokioTimer::new()).header_read_timeout(limits.idle + limits.head).max_buf_size(MAX_HEAD_BYTES);
    let conn = builder.serve_connection(TokioIo::new(Tracked { inner: stream, slot: slot.clone() }), service);
    tokio::pin!(conn);
    loop {
        let deadline = slot.phase().deadline(&limits);
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = slot.evict.cancelled() => break,
            _ = slot.moved.notified() => {}
            _ = tokio::time::sleep_until(deadline) => {
                if slot.phase().deadline(&limits) <= Instant::now() {
                    break;
                }
            }
            _ = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(DRAIN, conn.as_mut()).await;
                break;
            }
        }
    }
    open.remove(slot.id);
}

/// Requests that must always get through: what Prometheus and orchestrators poll.
fn is_scrape<B>(req: &Request<B>) -> bool {
    matches!(*req.method(), Method::GET | Method::HEAD) && matches!(req.uri().path(), "/metrics" | "/readyz" | "/healthz")
}

/// The open connections.
struct Open {
    slots: Mutex<Vec<Arc<Slot>>>,
    cap: usize,
    next_id: AtomicU64,
}

impl Open {
    /// A slot for a new connection; when all are taken, the connection that has waited longest
    /// without finishing a request is closed to make room. `None` only when every open
    /// connection is answering a scrape.
    fn admit(&self) -> Option<Arc<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() >= self.cap {
            let (_, oldest) = slots.iter().enumerate().filter_map(|(i, s)| s.phase().eviction_order().map(|t| (t, i))).min()?;
            let evicted = slots.swap_remove(oldest);
            evicted.evict.cancel();
            tracing::debug!("metrics server: all {} connections taken, closed the one idle longest", self.cap);
        }
        let slot = Arc::new(Slot {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            phase: Mutex::new(Phase::Waiting { since: Instant::now(), head: None, first: true }),
            moved: Notify::new(),
            evict: CancellationToken::new(),
        });
        slots.push(slot.clone());
        Some(slot)
    }

    fn remove(&self, id: u64) {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).retain(|s| s.id != id);
    }
}

/// One open connection, shared by its task, its reader and its service.
struct Slot {
    id: u64,
    phase: Mutex<Phase>,
    /// The phase changed, so the deadline may have moved.
    moved: Notify,
    /// Cancelled when the connection is closed to make room.
    evict: CancellationToken,
}

impl Slot {
    fn phase(&self) -> Phase {
        *self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, change: impl FnOnce(&mut Phase)) {
        change(&mut self.phase.lock().unwrap_or_else(|e| e.into_inner()));
        self.moved.notify_one();
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No request in hand since `since` (accept or the previous answer); `head` is when the
    /// next head's first byte came.
    Waiting { since: Instant, head: Option<Instant>, first: bool },
    /// A request is being read and answered since `since`.
    Request { since: Instant, scrape: bool },
}

impl Phase {
    fn deadline(&self, limits: &Limits) -> Instant {
        match *self {
            Phase::Waiting { head: Some(first_byte), .. } => first_byte + limits.head,
            Phase::Waiting { since, head: None, first: true } => since + limits.head,
            Phase::Waiting { since, head: None, first: false } => since + limits.idle,
            Phase::Request { since, .. } => since + limits.request,
        }
    }

    /// Eviction order, lowest first: requests that are not scrapes (a slow body), then kept-alive
    /// or half-sent heads, then connections that have not sent a byte yet (a scrape about to
    /// send its head must not lose to a flood of newer connections); oldest first within each.
    /// `None` while answering a scrape, which is never evicted.
    fn eviction_order(&self) -> Option<(u8, Instant)> {
        match *self {
            Phase::Request { scrape: true, .. } => None,
            Phase::Request { since, .. } => Some((0, since)),
            Phase::Waiting { since, head: None, first: true } => Some((2, since)),
            Phase::Waiting { since, .. } => Some((1, since)),
        }
    }
}

/// Holds a connection in `Phase::Request` while its service runs.
struct Busy(Arc<Slot>);

impl Busy {
    fn begin(slot: Arc<Slot>, scrape: bool) -> Busy {
        slot.set(|p| *p = Phase::Request { since: Instant::now(), scrape });
        Busy(slot)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.set(|p| *p = Phase::Waiting { since: Instant::now(), head: None, first: false });
    }
}

/// The socket, noting when the first byte of a request head arrives (which starts its deadline).
struct Tracked {
    inner: TcpStream,
    slot: Arc<Slot>,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before && matches!(self.slot.phase(), Phase::Waiting { head: None, .. }) {
            self.slot.set(|p| {
                if let Phase::Waiting { head: head @ None, .. } = p {
                    *head = Some(Instant::now());
                }
            });
        }
        read
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
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

/// The token and the length are checked from the head, so a client without the token never has
/// a byte of its body read (nor gets a `100 Continue`); the body is read only up to
/// `MAX_RELEASE_BODY`, within the request deadline.
async fn post_release(State(state): State<ServerState>, headers: HeaderMap, body: Body) -> Response {
    let Some(releases) = &state.releases else {
        return (StatusCode::NOT_FOUND, "release markers are not enabled\n").into_response();
    };
    let auth = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    if let Err(why) = releases.authorize_mark(auth) {
        return refused(why);
    }
    let too_large = || (StatusCode::PAYLOAD_TOO_LARGE, format!("release marker body over {MAX_RELEASE_BODY} bytes\n")).into_response();
    let length = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    if length.is_some_and(|n| n > MAX_RELEASE_BODY as u64) {
        return too_large();
    }
    // Without a length (chunked) the limit stops the read; hyper has already refused a bad length.
    let Ok(body) = axum::body::to_bytes(body, MAX_RELEASE_BODY).await else {
        return too_large();
    };
    match releases.mark_from_api(auth, &body) {
        Ok(()) => (StatusCode::ACCEPTED, "release marked\n").into_response(),
        Err(why) => refused(why),
    }
}

/// The last release markers of every configured target (at most `MARKERS_KEPT` each), behind
/// the marker token or the read-only token.
async fn get_releases(State(state): State<ServerState>, headers: HeaderMap) -> Response {
    let Some(releases) = &state.releases else {
        return (StatusCode::NOT_FOUND, "release markers are not enabled\n").into_response();
    };
    if let Err(why) = releases.authorize_read(headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok())) {
        return refused(why);
    }
    let body = serde_json::json!({ "releases": releases.markers() });
    (StatusCode::OK, [(CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// The answer to a refused release or verdict request.
fn refused(why: crate::app::release::Refused) -> Response {
    use crate::app::release::Refused;
    match why {
        Refused::Disabled(why) => (StatusCode::NOT_FOUND, format!("{why}\n")).into_response(),
        Refused::Unauthorized => (StatusCode::UNAUTHORIZED, "missing or wrong bearer token\n").into_response(),
        Refused::Forbidden => {
            (StatusCode::FORBIDDEN, "the read-only token cannot post release markers: use the marker token (detect.release_token_file)\n").into_response()
        }
        Refused::Bad(why) => (StatusCode::BAD_REQUEST, format!("{why}\n")).into_response(),
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictQuery {
    target: String,
    version: Option<String>,
}

/// The verdict of a target's last release (docs/detection.md, "Release verdicts"), behind the
/// marker token or the read-only token. One release per target is held: the answer is bounded.
async fn get_verdict(
    State(state): State<ServerState>,
    headers: HeaderMap,
    query: Result<axum::extract::Query<VerdictQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    use crate::detect::verdict::{NoVerdict, verdict};
    let text = |code: StatusCode, why: String| (code, format!("{why}\n")).into_response();
    let (Some(releases), Some(detect)) = (&state.releases, &state.detect) else {
        return text(StatusCode::NOT_FOUND, "release verdicts are not enabled (detect.enabled)".into());
    };
    if let Err(why) = releases.authorize_read(headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok())) {
        return refused(why);
    }
    let Ok(axum::extract::Query(q)) = query else {
        return text(StatusCode::BAD_REQUEST, "expected ?target=NAME[&version=V]".into());
    };
    let name = |s: &str| crate::protocol::truncate_chars(s, 64).escape_debug().to_string();
    let settings = detect.settings();
    let canary = state.replicas.as_ref().and_then(|r| r.canary(&q.target));
    match verdict(&detect.report(), &q.target, q.version.as_deref(), &settings).map(|v| v.with_canary(canary, &settings)) {
        Ok(v) => (StatusCode::OK, [(CONTENT_TYPE, "application/json")], serde_json::to_string(&v).unwrap_or_default()).into_response(),
        Err(NoVerdict::UnknownTarget) => text(StatusCode::NOT_FOUND, format!("unknown target \"{}\"", name(&q.target))),
        Err(NoVerdict::NoRelease) => text(StatusCode::NOT_FOUND, format!("target \"{}\" has had no release marker", name(&q.target))),
        Err(NoVerdict::OtherVersion(last)) => text(
            StatusCode::CONFLICT,
            format!("the last release of \"{}\" is \"{}\", not \"{}\"", name(&q.target), name(&last), name(q.version.as_deref().unwrap_or_default())),
        ),
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

/// The alert runbook, built into the binary: every alert's `runbook_url` can point here.
pub const RUNBOOK_MARKDOWN: &str = include_str!("../../alerts/RUNBOOK.md");

async fn runbook() -> Response {
    static HTML: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| runbook_html(RUNBOOK_MARKDOWN));
    ([(CONTENT_TYPE, "text/html; charset=utf-8")], HTML.as_str()).into_response()
}

async fn runbook_markdown() -> Response {
    ([(CONTENT_TYPE, "text/markdown; charset=utf-8")], RUNBOOK_MARKDOWN).into_response()
}

/// The runbook as a plain HTML page: every Markdown heading an `<hN>` with the anchor GitHub would
/// give it (what the alerts' `runbook_url#section` links name), the text between them as
/// preformatted Markdown. Headings inside code blocks stay text.
fn runbook_html(markdown: &str) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>llmprobe alert runbook</title>\n\
         <style>body{font-family:sans-serif;max-width:60em;margin:auto}pre{white-space:pre-wrap}</style></head><body>\n",
    );
    let mut text = String::new();
    let mut in_code = false;
    let flush = |out: &mut String, text: &mut String| {
        if !text.trim().is_empty() {
            out.push_str("<pre>");
            out.push_str(&escape_html(text.trim_matches('\n')));
            out.push_str("</pre>\n");
        }
        text.clear();
    };
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        let level = line.bytes().take_while(|b| *b == b'#').count();
        if !in_code && (1..=6).contains(&level) && line.as_bytes().get(level) == Some(&b' ') {
            flush(&mut out, &mut text);
            let title = line[level..].trim();
            out.push_str(&format!("<h{level} id=\"{}\">{}</h{level}>\n", heading_anchor(title), escape_html(title)));
        } else {
            text.push_str(line);
            text.push('\n');
        }
    }
    flush(&mut out, &mut text);
    out.push_str("</body></html>\n");
    out
}

/// GitHub's anchor of a heading: lower case, characters other than letters, digits, `_`, `-` and
/// spaces dropped, spaces as `-`.
pub fn heading_anchor(title: &str) -> String {
    title.to_lowercase().chars().filter(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' ')).map(|c| if c == ' ' { '-' } else { c }).collect()
}

fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}
