//! A target at run time: its HTTP clients (the general one: TLS, HTTP version, proxies from the
//! standard `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` variables; and, for plain `http`, the lean
//! probe client of `http1`), its API key, and the model and engine discovered from the
//! endpoints its API family serves.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::client::general::{General, Reusable};
use crate::client::idle::SETTLE_TIME;
use crate::client::secret::KeySource;
use crate::config::Target;
use crate::probe::handover::{Write, Written};
use crate::probe::outcome::{ErrorClass, Failure};
use crate::protocol::ModelSource;

/// What `/v1/models` and `/version` told us about a target.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerIdentity {
    pub model: String,
    pub engine: String,
    pub engine_version: String,
}

pub struct TargetRuntime {
    pub config: Target,
    pub name: Arc<str>,
    /// The general client: sends the probes where the lean one does not apply, and discovery,
    /// `/tokenize` and everything else.
    general: Arc<General>,
    /// Sends the probes where it applies (`http1::Client::for_target`).
    lean: Option<Arc<crate::client::http1::Client>>,
    api_key: Option<Arc<KeySource>>,
    /// `headers_from` values (name, source), sent on every request and redacted like the key.
    secret_headers: Arc<Vec<(String, KeySource)>>,
    model: RwLock<Option<Arc<str>>>,
    /// Held while a model discovery runs, so concurrent probes share one request.
    discovering: tokio::sync::Mutex<()>,
    /// Probes of this target currently running (the in-flight cap reads it); shared by the
    /// target's replicas, since the cap is per target.
    pub in_flight: Arc<AtomicUsize>,
    /// The replica this runtime probes (pod name or `ip:port`), when replicas are discovered.
    pub replica: Option<Arc<str>>,
    /// The last output fingerprint per scenario and prompt (`checks.fingerprint`).
    pub fingerprints: Arc<crate::checks::fingerprint::Fingerprints>,
}

impl TargetRuntime {
    /// Builds the client and resolves the API key. Errors name the key's source, never its value.
    pub fn new(config: Target) -> anyhow::Result<Self> {
        let api_key = match &config.api_key {
            Some(r) => {
                let field = match r {
                    crate::config::SecretRef::Env(_) => "api_key_env",
                    crate::config::SecretRef::File(_) => "api_key_file",
                };
                Some(Arc::new(KeySource::new(r).with_context(|| format!("target {}: {field}", config.name))?))
            }
            None => None,
        };
        let mut secret_headers = Vec::new();
        for (name, reference) in &config.headers_from {
            let source = KeySource::new(reference).with_context(|| format!("target {}: headers_from.{name}", config.name))?;
            secret_headers.push((name.clone(), source));
        }
        let general = General::new(&config, USER_AGENT).with_context(|| format!("target {}: building HTTP client", config.name))?;
        let model = RwLock::new(config.model.as_deref().map(Arc::from));
        let lean = crate::client::http1::Client::for_target(&config, USER_AGENT).map(Arc::new);
        Ok(TargetRuntime {
            name: Arc::from(config.name.as_str()),
            config,
            general,
            lean,
            api_key,
            secret_headers: Arc::new(secret_headers),
            model,
            discovering: tokio::sync::Mutex::new(()),
            in_flight: Arc::new(AtomicUsize::new(0)),
            replica: None,
            fingerprints: Arc::default(),
        })
    }

    /// The runtime of one discovered replica: the same client, key, headers and in-flight
    /// counter (the cap is per target), `base_url` pointed at the replica's address (path prefix
    /// kept), and a model discovery of its own.
    pub fn for_replica(&self, id: &str, addr: std::net::SocketAddr) -> TargetRuntime {
        let mut config = self.config.clone();
        if let Ok(mut url) = reqwest::Url::parse(&self.config.base_url) {
            let _ = url.set_ip_host(addr.ip());
            let _ = url.set_port(Some(addr.port()));
            config.base_url = url.as_str().trim_end_matches('/').to_owned();
        }
        let model = RwLock::new(config.model.as_deref().map(Arc::from));
        // Its own pool, at the replica's address; the same choice of client as the target's.
        let lean = self.lean.as_ref().and_then(|_| crate::client::http1::Client::for_target(&config, USER_AGENT)).map(Arc::new);
        let general = self.general.for_replica(config.clone());
        TargetRuntime {
            name: self.name.clone(),
            config,
            general,
            lean,
            api_key: self.api_key.clone(),
            secret_headers: self.secret_headers.clone(),
            model,
            discovering: tokio::sync::Mutex::new(()),
            in_flight: self.in_flight.clone(),
            replica: Some(Arc::from(id)),
            // Each replica against its own history: replicas that differ are not a change.
            fingerprints: Arc::default(),
        }
    }

    /// Scrubs the API key and every `headers_from` value from text that may be logged or exported.
    pub fn redact(&self, text: &str) -> String {
        let mut text = match &self.api_key {
            Some(k) => k.redact(text),
            None => text.to_string(),
        };
        for (_, source) in self.secret_headers.iter() {
            text = source.redact(&text);
        }
        text
    }

    /// The headers every request of this target carries: the key as `Authorization: Bearer`,
    /// `headers`, and the `headers_from` values (the secret ones marked sensitive).
    fn own_headers(&self) -> Result<HeaderMap, Failure> {
        let mut map = HeaderMap::new();
        if let Some(key) = &self.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.current().expose()))
                .map_err(|_| Failure::new(ErrorClass::Connect, "the API key is not a valid header value"))?;
            value.set_sensitive(true);
            map.append(reqwest::header::AUTHORIZATION, value);
        }
        // Names and values were checked with the config; nothing is skipped here.
        for (name, value) in &self.config.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
                map.append(name, value);
            }
        }
        for (name, source) in self.secret_headers.iter() {
            let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else { continue };
            let mut value = HeaderValue::from_str(source.current().expose()).unwrap_or_else(|_| HeaderValue::from_static(""));
            value.set_sensitive(true);
            map.append(name, value);
        }
        Ok(map)
    }

    /// Sends a request through the general client, following redirects itself when the target
    /// sets `follow_redirects` (the client follows none): at most `MAX_REDIRECTS`, then the last
    /// `3xx` answer is the answer. On a hop to another origin (scheme, host, port) every secret
    /// header is dropped first: the API key, `Cookie`/`Proxy-Authorization`, each `headers_from`
    /// header and any value marked sensitive, as browsers and curl do. `headers` stay.
    pub async fn send_general(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, Failure> {
        Ok(self.send_general_noting(request).await?.0)
    }

    /// `send_general`, with the answer's connection where it can carry another request once the
    /// answer ends (`Reusable::ended`: what the client learns the server's idle close from).
    async fn send_general_noting(&self, request: reqwest::RequestBuilder) -> Result<(reqwest::Response, Option<Reusable>), Failure> {
        let mut request = request.build().map_err(|e| classify_send_error(&e, self))?;
        let origin = Origin::of(request.url());
        let mut hops = 0;
        loop {
            let next = if self.config.follow_redirects && hops < MAX_REDIRECTS { request.try_clone() } else { None };
            // The pool's connection task reads a kept-alive connection (and so sees a close the
            // server sent while it was idle) before it writes the request, but only once the
            // runtime's reactor has seen the close: yielding once lets the reactor run first, so
            // a close that has arrived sends the request on a new connection instead of into the
            // closed one.
            tokio::task::yield_now().await;
            let sending = self.general.sending();
            let response = sending.client.execute(request).await.map_err(|e| classify_send_error(&e, self))?;
            let reusable = self.general.answered(&sending, &response, hops == 0);
            let status = response.status();
            let Some(mut next) = next.filter(|_| REDIRECTS.contains(&status.as_u16())) else { return Ok((response, reusable)) };
            let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
            let Some(url) = location.and_then(|l| response.url().join(l).ok()).filter(|u| matches!(u.scheme(), "http" | "https")) else {
                return Ok((response, reusable));
            };
            // 303, and 301/302 after a POST, are followed with a GET and no body (as reqwest did).
            let to_get = status == reqwest::StatusCode::SEE_OTHER && next.method() != reqwest::Method::HEAD
                || matches!(status.as_u16(), 301 | 302) && next.method() == reqwest::Method::POST;
            if to_get {
                *next.method_mut() = reqwest::Method::GET;
                *next.body_mut() = None;
                for name in [reqwest::header::CONTENT_TYPE, reqwest::header::CONTENT_LENGTH, reqwest::header::CONTENT_ENCODING] {
                    next.headers_mut().remove(name);
                }
            }
            if Origin::of(&url) != origin {
                self.drop_secret_headers(next.headers_mut());
            }
            *next.url_mut() = url;
            request = next;
            hops += 1;
        }
    }

    /// Removes every secret header: the API key (`Authorization`), cookies, proxy credentials,
    /// the `headers_from` headers, and any value marked sensitive.
    fn drop_secret_headers(&self, headers: &mut HeaderMap) {
        for name in [reqwest::header::AUTHORIZATION, reqwest::header::COOKIE, reqwest::header::PROXY_AUTHORIZATION] {
            headers.remove(name);
        }
        headers.remove("cookie2");
        for (name, _) in self.secret_headers.iter() {
            if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
                headers.remove(name);
            }
        }
        let sensitive: Vec<HeaderName> = headers.iter().filter(|(_, v)| v.is_sensitive()).map(|(n, _)| n.clone()).collect();
        for name in sensitive {
            headers.remove(name);
        }
    }

    /// A request to `base_url + path` through the general client, with the target's headers.
    pub fn request(&self, method: reqwest::Method, path: &str) -> Result<reqwest::RequestBuilder, Failure> {
        Ok(self.general.client().request(method, format!("{}{}", self.config.base_url, path)).headers(self.own_headers()?))
    }

    /// A probe request, ready to send: `POST base_url + path` with the target's headers, then
    /// `headers`, and `body`. Through the lean client where it applies.
    pub fn prepare(&self, path: &str, headers: HeaderMap, body: Vec<u8>) -> Result<PreparedRequest, Failure> {
        let Some(lean) = &self.lean else {
            let mut req = self.request(reqwest::Method::POST, path)?;
            for (name, value) in headers.iter() {
                req = req.header(name, value);
            }
            return Ok(PreparedRequest::General(req.body(body)));
        };
        let mut all = self.own_headers()?;
        for (name, value) in headers.iter() {
            all.append(name, value.clone());
        }
        Ok(PreparedRequest::Lean(lean.prepare(path, &all, &body)))
    }

    /// Sends a prepared probe request (the rest of it, when the dispatcher wrote the first
    /// `written` bytes) and returns once the answer's head is in.
    pub async fn send(&self, request: PreparedRequest, written: Option<Written>) -> Result<Answer, Failure> {
        let request = match request {
            PreparedRequest::Lean(request) => request,
            PreparedRequest::General(req) => {
                let (response, reusable) = self.send_general_noting(req).await?;
                return Ok(Answer::General { response, piece: bytes::Bytes::new(), reusable });
            }
        };
        match request.send(written).await {
            Ok(response) => Ok(Answer::Lean(response)),
            Err(crate::client::http1::SendError::ConnectTimeout(detail)) => Err(Failure::new(ErrorClass::TimeoutConnect, detail)),
            Err(crate::client::http1::SendError::Connect(detail)) => Err(Failure::new(ErrorClass::Connect, detail)),
            Err(crate::client::http1::SendError::InvalidAnswer(detail)) => Err(Failure::new(ErrorClass::Parse, detail)),
        }
    }

    /// The configured model, else the one discovered earlier, else discovers it now.
    /// Single-flight: while one discovery runs, the other probes wait for its answer instead of
    /// each sending its own `/v1/models`.
    pub async fn model(&self) -> Result<Arc<str>, Failure> {
        if let Some(m) = self.known_model() {
            return Ok(m);
        }
        let _turn = self.discovering.lock().await;
        if let Some(m) = self.known_model() {
            return Ok(m);
        }
        let found = self.discover().await?;
        Ok(self.model.write().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| Arc::from(found.model)).clone())
    }

    fn known_model(&self) -> Option<Arc<str>> {
        self.model.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Probes send `model` from now on, unless the config names one: after a release that
    /// renamed the model, the old name would only get 404s.
    pub fn use_discovered_model(&self, model: &str) {
        if self.config.model.is_none() {
            *self.model.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::from(model));
        }
    }

    /// Asks the endpoints the target's API family names (`Family::discovery`) for its model,
    /// engine and version: OpenAI `/v1/models` + `/version`, Ollama `/api/tags` + `/api/version`,
    /// llama.cpp `/props`, TGI `/info`, SGLang `/get_model_info` + `/get_server_info`. A
    /// configured model wins over a discovered one; a version that cannot be read is empty.
    pub async fn discover(&self) -> Result<ServerIdentity, Failure> {
        let family = self.config.api.family();
        let d = &family.discovery;
        let listed_none = || Failure::new(ErrorClass::Parse, format!("{} listed no model", d.model_path));
        let (doc, model) = match (d.model, &self.config.model) {
            (ModelSource::Listed, configured) => {
                let doc: serde_json::Value = self.get_json(d.model_path).await?;
                let first = (d.model_of)(&doc).ok_or_else(listed_none)?;
                (doc, configured.clone().unwrap_or(first))
            }
            (ModelSource::ListedUnlessConfigured, Some(m)) => (serde_json::Value::Null, m.clone()),
            (ModelSource::ListedUnlessConfigured, None) => {
                let doc: serde_json::Value = self.get_json(d.model_path).await?;
                let first = (d.model_of)(&doc).ok_or_else(listed_none)?;
                (doc, first)
            }
            (ModelSource::Info, configured) => {
                let doc = self.info_json(d.model_path).await?;
                let model = configured.clone().or_else(|| (d.model_of)(&doc)).unwrap_or_else(|| "unknown".into());
                (doc, model)
            }
        };
        let own_page = if d.version_path == d.model_path { None } else { self.get_json::<serde_json::Value>(d.version_path).await.ok() };
        let version_doc = if d.version_path == d.model_path { Some(&doc) } else { own_page.as_ref() };
        let engine_version = version_doc.and_then(d.version_of).unwrap_or_default();
        let engine = (d.engine_of)(&doc).or_else(|| family.implied_engine.map(str::to_owned)).unwrap_or_else(|| "unknown".into());
        Ok(ServerIdentity { model, engine, engine_version })
    }

    /// An info endpoint of an API whose requests need no model name: a configured model, or an
    /// endpoint the server does not serve (4xx), leaves the details unknown instead of failing.
    async fn info_json(&self, path: &str) -> Result<serde_json::Value, Failure> {
        match self.get_json(path).await {
            Ok(v) => Ok(v),
            Err(e) if self.config.model.is_some() || e.class == ErrorClass::Http4xx => Ok(serde_json::Value::Null),
            Err(e) => Err(e),
        }
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(&self, path: &str) -> Result<T, Failure> {
        let timeout = self.config.timeouts.connect.saturating_add(Duration::from_secs(5));
        let resp = tokio::time::timeout(timeout, self.send_general(self.request(reqwest::Method::GET, path)?))
            .await
            .map_err(|_| Failure::new(ErrorClass::TimeoutTotal, format!("GET {path} timed out")))??;
        let status = resp.status();
        if !status.is_success() {
            return Err(Failure::new(ErrorClass::from_status(status.as_u16()), format!("GET {path}: HTTP {status}")));
        }
        let body = tokio::time::timeout(timeout, read_limited(resp, MAX_INFO_BYTES))
            .await
            .map_err(|_| Failure::new(ErrorClass::TimeoutTotal, format!("GET {path} body timed out")))?
            .map_err(|f| Failure { detail: self.redact(&format!("GET {path}: {}", f.detail)), ..f })?;
        serde_json::from_slice(&body).map_err(|e| Failure::new(ErrorClass::Parse, format!("GET {path}: {e}")))
    }
}

/// The project's user agent on every request it makes.
pub const USER_AGENT: &str = concat!("llmprobe/", env!("CARGO_PKG_VERSION"));

/// Redirects followed when a target sets `follow_redirects: true`.
const MAX_REDIRECTS: usize = 5;

/// The statuses followed as redirects.
const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

/// A URL's origin: scheme, host and port (the scheme's default port when none is written).
#[derive(PartialEq)]
struct Origin(String, Option<String>, Option<u16>);

impl Origin {
    fn of(url: &reqwest::Url) -> Origin {
        Origin(url.scheme().to_owned(), url.host_str().map(str::to_ascii_lowercase), url.port_or_known_default())
    }
}

/// A client for pages that are not a target's API (engine and GPU sources): no redirects, so
/// a request never goes to a host the config did not name.
pub fn plain_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder().user_agent(USER_AGENT).redirect(reqwest::redirect::Policy::none()).build()
}

/// Largest discovery or info answer read (`/v1/models`, `/version`, `/props`, `/info`, ...,
/// `/tokenize`): real ones are a few KiB; a larger one is a `parse` error, not a memory spike.
pub const MAX_INFO_BYTES: usize = 1 << 20;

/// Reads a whole body, refusing it (`parse`) once it exceeds `max` bytes.
pub async fn read_limited(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, Failure> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(Failure::new(ErrorClass::Parse, format!("answer exceeded {max} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => {
                return Err(Failure::new(ErrorClass::Truncated, format!("body broke off: {}", error_chain(&e))));
            }
        }
    }
}

/// A probe request ready to send, for the lean client or the general one.
pub enum PreparedRequest {
    Lean(crate::client::http1::Request),
    General(reqwest::RequestBuilder),
}

impl PreparedRequest {
    /// Opens the lean client's connection for the request before `by`, when it has none.
    pub async fn connect_before(&mut self, by: std::time::Instant) {
        if let PreparedRequest::Lean(request) = self {
            request.connect_before(by).await;
        }
    }

    /// Opens the lean client's connection for a request sent at once, when it has none (see
    /// `http1::Request::connect_first`).
    pub async fn connect_first(&mut self) {
        if let PreparedRequest::Lean(request) = self {
            request.connect_first().await;
        }
    }

    /// Gives back the lean client's connection of a request that will not be sent.
    pub fn withdraw(&mut self) {
        if let PreparedRequest::Lean(request) = self {
            request.withdraw();
        }
    }

    /// The dispatcher's write of the request at its send time, where it can do it (the lean
    /// client with a connection).
    pub fn handover(&self) -> Option<Write> {
        match self {
            PreparedRequest::Lean(request) => request.handover(),
            PreparedRequest::General(_) => None,
        }
    }
}

/// A probe's answer, from the lean client or the general one, read alike.
pub enum Answer {
    Lean(crate::client::http1::Response),
    /// `piece` holds the last body piece handed out; `reusable`, the connection, until the
    /// answer's end is read.
    General {
        response: reqwest::Response,
        piece: bytes::Bytes,
        reusable: Option<Reusable>,
    },
}

impl Answer {
    pub fn status(&self) -> reqwest::StatusCode {
        match self {
            Answer::Lean(r) => r.head.status,
            Answer::General { response, .. } => response.status(),
        }
    }

    pub fn headers(&self) -> &HeaderMap {
        match self {
            Answer::Lean(r) => &r.head.headers,
            Answer::General { response, .. } => response.headers(),
        }
    }

    /// When the head or the body piece last handed out reached the host, where the client
    /// knows (the lean client, from the kernel's receive stamps); else the caller's read time
    /// stands.
    pub fn arrived(&self) -> Option<std::time::Instant> {
        match self {
            Answer::Lean(r) => r.arrived(),
            Answer::General { .. } => None,
        }
    }

    /// After a stream's end marker: reads the body's own end briefly, so that a kept-alive
    /// connection is free for the next request (past that, the lean client drains the rest in
    /// the background; hyper reads it on its own).
    pub async fn settle(&mut self) {
        match self {
            Answer::Lean(r) => r.settle().await,
            Answer::General { response, reusable, .. } => {
                if let Ok(Ok(None)) = tokio::time::timeout(SETTLE_TIME, response.chunk()).await {
                    if let Some(connection) = reusable.take() {
                        connection.ended();
                    }
                }
            }
        }
    }

    /// The next piece of the body (`None` at its end); `Err` says why it broke off. Cancel
    /// safe: a piece is either handed out or left to the next call.
    pub async fn chunk(&mut self) -> Result<Option<&[u8]>, String> {
        match self {
            Answer::Lean(r) => r.chunk().await,
            Answer::General { response, piece, reusable } => match response.chunk().await {
                Ok(Some(bytes)) => {
                    *piece = bytes;
                    Ok(Some(&piece[..]))
                }
                Ok(None) => {
                    if let Some(connection) = reusable.take() {
                        connection.ended();
                    }
                    Ok(None)
                }
                Err(e) => Err(error_chain(&e)),
            },
        }
    }
}

/// The error and all its sources, joined, for logs.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Classifies a failure to get response headers.
pub fn classify_send_error(err: &reqwest::Error, target: &TargetRuntime) -> Failure {
    let chain = target.redact(&error_chain(err));
    // Classify from the error's sources only: reqwest's own message names the URL, and a host
    // called `vllm-tls` must not make a refused connection a TLS error.
    let mut causes = String::new();
    let mut invalid_answer = false;
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        causes.push_str(&s.to_string().to_ascii_lowercase());
        causes.push(' ');
        invalid_answer |= s.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_parse);
        source = s.source();
    }
    let lower = causes;
    let class = if err.is_connect() && err.is_timeout() {
        ErrorClass::TimeoutConnect
    } else if ["certificate", "tls", "handshake", "fatal alert"].iter().any(|w| lower.contains(w)) {
        // rustls errors reach us as text inside hyper's: e.g. `invalid peer certificate:
        // UnknownIssuer`, or `received fatal alert: CertificateRequired` (mTLS, no client cert).
        ErrorClass::Tls
    } else if invalid_answer {
        // The server answered with a head that is not valid HTTP/1.x (hyper's parse errors:
        // status line, a field, framing, a head too large): an invalid answer, not a failed
        // connection.
        ErrorClass::Parse
    } else {
        // The connect failed (`is_connect`), or the connection was closed or reset before a
        // response head (hyper's incomplete message): either way no answer came.
        ErrorClass::Connect
    };
    Failure::new(class, chain)
}
