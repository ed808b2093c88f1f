//! Replicas from a Kubernetes Service's EndpointSlices, with list/watch semantics: list (paged,
//! remembering `metadata.resourceVersion`), then watch from that version (bookmarks on),
//! re-watch from the last version seen when a stream ends, re-list on `410 Gone` (an HTTP
//! status or an `ERROR` event) and after any other error. Versions come from a pod label, one
//! Pod `get` per pod (cached by name and uid); a 403 there means "version unknown".
//!
//! Plain HTTP through the crate's reqwest/rustls stack: every answer is read bounded (a list
//! page, a watch line, a Pod), every request has a timeout, and errors back off 1 s doubling to
//! 30 s. In-cluster access uses the pod's service account (`KUBERNETES_SERVICE_HOST`/`_PORT`,
//! the token re-read when it rotates, the cluster CA, the pod's namespace).

pub mod model;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::{StatusCode, Url};

use self::model::{EndpointSlice, LineSplitter, Member, Pod, PodRef, SliceSet, WatchEvent};
use super::KubernetesSpec;
use super::replica::{Backoff, Replica, Streak};
use crate::client::secret::KeySource;
use crate::config::SecretRef;

/// Largest list page read; a larger one is an error (then a re-list after the backoff).
pub const MAX_LIST_BYTES: usize = 8 << 20;
/// Largest watch line (one event) read; a longer one is an error, then a re-list.
pub const MAX_WATCH_LINE: usize = 4 << 20;
/// Largest Pod answer read.
pub const MAX_POD_BYTES: usize = 2 << 20;
/// Largest error body read (for its `Status` message).
const MAX_ERROR_BYTES: usize = 64 << 10;
/// Items per list page.
const LIST_PAGE: usize = 500;
/// A list page or a Pod `get`, whole.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The server ends each watch after this long (`timeoutSeconds`); the client gives it a grace.
const WATCH_SECONDS: u64 = 290;
const WATCH_GRACE: Duration = Duration::from_secs(30);
/// A watch that ends this soon without an event counts as an error (no tight re-watch loop).
const WATCH_MIN: Duration = Duration::from_secs(1);
/// How often the token file's modification time is looked at.
const TOKEN_RECHECK: Duration = Duration::from_secs(1);
/// A Pod `get` that failed (other than 403/404) is retried after this long.
const POD_RETRY: Duration = Duration::from_secs(60);
/// Pod `get`s in flight at once.
const POD_CONCURRENCY: usize = 8;

/// The in-cluster service-account files.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// An API error, classified for the list/watch loop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// `410 Gone`: the resource version (or continue token) expired; re-list.
    #[error("410 Gone: {0}")]
    Gone(String),
    #[error("HTTP {code}: {message}")]
    Status { code: u16, message: String },
    #[error("{0}")]
    Transport(String),
    #[error("{0}")]
    Body(String),
}

/// The API server as one Service's discovery uses it.
pub struct Api {
    client: reqwest::Client,
    base: String,
    token: Option<KeySource>,
    namespace: String,
    service: String,
}

/// Base URL, token file and CA file of in-cluster access, from the service environment and the
/// service-account directory.
pub fn in_cluster(host: Option<&str>, port: Option<&str>, dir: &Path) -> Result<(String, PathBuf, PathBuf), String> {
    let host = host.filter(|h| !h.is_empty()).ok_or("not in a cluster: KUBERNETES_SERVICE_HOST is not set")?;
    let port = port.filter(|p| !p.is_empty()).unwrap_or("443");
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() };
    Ok((format!("https://{host}:{port}"), dir.join("token"), dir.join("ca.crt")))
}

impl Api {
    /// From a spec, reading the environment and `dir` (the service-account files) where the
    /// spec leaves access or the namespace to the cluster.
    pub fn new(spec: &KubernetesSpec, dir: &Path) -> Result<Api, String> {
        if !model::is_object_name(&spec.service) {
            return Err(format!("service {:?} is not a Kubernetes object name", spec.service));
        }
        let (base, token_file, ca_file) = match &spec.api {
            Some(a) => (a.url.trim_end_matches('/').to_string(), a.token_file.clone(), a.ca_file.clone()),
            None => {
                let host = std::env::var("KUBERNETES_SERVICE_HOST").ok();
                let port = std::env::var("KUBERNETES_SERVICE_PORT").ok();
                let (base, token, ca) = in_cluster(host.as_deref(), port.as_deref(), dir)?;
                (base, Some(token), Some(ca))
            }
        };
        match Url::parse(&base) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => return Err(format!("API server URL {base:?} is not an http(s) URL")),
        }
        let namespace = match &spec.namespace {
            Some(ns) => ns.clone(),
            None => match std::fs::read_to_string(dir.join("namespace")) {
                Ok(ns) => ns.trim().to_string(),
                Err(_) => "default".to_string(),
            },
        };
        if !model::is_object_name(&namespace) {
            return Err(format!("namespace {namespace:?} is not a Kubernetes object name"));
        }
        let token = match token_file {
            Some(path) => Some(KeySource::with_recheck(&SecretRef::File(path), TOKEN_RECHECK).map_err(|e| format!("service-account token: {e}"))?),
            None => None,
        };
        let mut builder = reqwest::Client::builder()
            .user_agent(crate::client::target::USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(90));
        if let Some(ca) = ca_file {
            let pem = std::fs::read(&ca).map_err(|e| format!("reading CA file {}: {e}", ca.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("CA file {} is not PEM certificates: {e}", ca.display()))?;
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(|e| format!("building the HTTP client: {}", crate::client::target::error_chain(&e)))?;
        Ok(Api { client, base, token, namespace, service: spec.service.clone() })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn url(&self, path: &str) -> Result<Url, ApiError> {
        Url::parse(&format!("{}{path}", self.base)).map_err(|e| ApiError::Transport(format!("bad URL: {e}")))
    }

    fn slices_url(&self) -> Result<Url, ApiError> {
        let mut url = self.url(&format!("/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices", self.namespace))?;
        url.query_pairs_mut().append_pair("labelSelector", &format!("{}={}", model::SERVICE_NAME_LABEL, self.service));
        Ok(url)
    }

    async fn send(&self, url: Url, timeout: Duration) -> Result<reqwest::Response, ApiError> {
        let mut req = self.client.get(url).header(reqwest::header::ACCEPT, "application/json").timeout(timeout);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token.current().expose());
        }
        let resp = req.send().await.map_err(|e| ApiError::Transport(self.redact(&crate::client::target::error_chain(&e))))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = read_bounded(resp, MAX_ERROR_BYTES).await.unwrap_or_default();
        let message = model::parse_status(&body).ok().and_then(|s| s.message).unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        let message = self.redact(&message.chars().take(300).collect::<String>());
        if status == StatusCode::GONE { Err(ApiError::Gone(message)) } else { Err(ApiError::Status { code: status.as_u16(), message }) }
    }

    fn redact(&self, text: &str) -> String {
        match &self.token {
            Some(t) => t.redact(text),
            None => text.to_string(),
        }
    }

    /// Every slice of the Service (all pages) and the list's resource version.
    pub async fn list(&self) -> Result<(Vec<EndpointSlice>, String), ApiError> {
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut url = self.slices_url()?;
            url.query_pairs_mut().append_pair("limit", &LIST_PAGE.to_string());
            if let Some(t) = &token {
                url.query_pairs_mut().append_pair("continue", t);
            }
            let resp = self.send(url, REQUEST_TIMEOUT).await?;
            let body = read_bounded(resp, MAX_LIST_BYTES).await?;
            let page = model::parse_list(&body).map_err(|e| ApiError::Body(format!("list: {e}")))?;
            items.extend(page.items);
            match page.metadata.continue_token.filter(|t| !t.is_empty()) {
                Some(t) if items.len() < 64 * LIST_PAGE => token = Some(t),
                Some(_) => return Err(ApiError::Body(format!("list: over {} slices", 64 * LIST_PAGE))),
                None => return Ok((items, page.metadata.resource_version.unwrap_or_default())),
            }
        }
    }

    /// Opens a watch from `resource_version` (empty: from now).
    pub async fn watch(&self, resource_version: &str) -> Result<reqwest::Response, ApiError> {
        let mut url = self.slices_url()?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("watch", "1");
            if !resource_version.is_empty() {
                q.append_pair("resourceVersion", resource_version);
            }
            q.append_pair("allowWatchBookmarks", "true");
            q.append_pair("timeoutSeconds", &WATCH_SECONDS.to_string());
        }
        self.send(url, Duration::from_secs(WATCH_SECONDS) + WATCH_GRACE).await
    }

    /// One Pod; `None` when it does not exist (any more).
    pub async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        let url = self.url(&format!("/api/v1/namespaces/{namespace}/pods/{name}"))?;
        let resp = match self.send(url, REQUEST_TIMEOUT).await {
            Ok(r) => r,
            Err(ApiError::Status { code: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let body = read_bounded(resp, MAX_POD_BYTES).await?;
        model::parse_pod(&body).map(Some).map_err(|e| ApiError::Body(format!("pod {name}: {e}")))
    }
}

/// A whole body, refused once it exceeds `max` bytes.
async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, ApiError> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(ApiError::Body(format!("answer exceeded {max} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(ApiError::Transport(format!("answer broke off: {}", crate::client::target::error_chain(&e)))),
        }
    }
}

/// How one watch ended.
#[derive(Debug)]
enum WatchEnd {
    /// The stream ended (server timeout, closed connection): re-watch from the last version.
    Ended { events: usize },
    /// 410: re-list.
    Gone,
    /// The stream broke off: re-watch after the backoff.
    Broken(String),
    /// A bad answer (error status, over-long line, unparsable event, ERROR event): re-list after
    /// the backoff.
    Failed(String),
}

/// What the pod `get` cache knows about one pod.
#[derive(Debug, Clone)]
enum Version {
    Known(Option<String>),
    Failed(Instant),
}

struct Watcher<'a> {
    spec: &'a KubernetesSpec,
    api: Api,
    slices: SliceSet,
    /// By `namespace/name`: the pod's uid when read and what its `get` gave.
    versions: HashMap<String, (Option<String>, Version)>,
    /// Slices whose port did not match, warned about once.
    warned_slices: BTreeSet<String>,
    pods_forbidden_logged: bool,
    pod_failure_logged: bool,
}

pub(super) async fn run(spec: &KubernetesSpec, out: &tokio::sync::watch::Sender<Vec<Replica>>) {
    let namespace = spec.namespace.as_deref().unwrap_or("(own namespace)");
    let mut streak = Streak::new(format!("kubernetes discovery of service {}/{}", namespace, spec.service));
    let mut backoff = Backoff::new();
    let api = loop {
        match Api::new(spec, Path::new(SERVICE_ACCOUNT_DIR)) {
            Ok(api) => break api,
            Err(e) => {
                streak.fail(&e);
                tokio::time::sleep(backoff.next()).await;
            }
        }
    };
    let mut w = Watcher {
        spec,
        api,
        slices: SliceSet::new(&spec.service),
        versions: HashMap::new(),
        warned_slices: BTreeSet::new(),
        pods_forbidden_logged: false,
        pod_failure_logged: false,
    };
    loop {
        let mut rv = match w.api.list().await {
            Ok((items, rv)) => {
                w.slices.replace(items);
                streak.ok();
                backoff.reset();
                w.publish(out).await;
                rv
            }
            Err(e) => {
                streak.fail(&format!("list: {e}"));
                tokio::time::sleep(backoff.next()).await;
                continue;
            }
        };
        loop {
            let started = Instant::now();
            match w.watch_once(&mut rv, out, &mut streak).await {
                WatchEnd::Ended { events } if events == 0 && started.elapsed() < WATCH_MIN => {
                    tracing::debug!(service = %spec.service, "watch ended at once; re-watching after the backoff");
                    tokio::time::sleep(backoff.next()).await;
                }
                WatchEnd::Ended { .. } => backoff.reset(),
                WatchEnd::Gone => {
                    tracing::debug!(service = %spec.service, "resource version expired: re-listing");
                    break;
                }
                WatchEnd::Broken(e) => {
                    streak.fail(&format!("watch: {e}"));
                    tokio::time::sleep(backoff.next()).await;
                }
                WatchEnd::Failed(e) => {
                    streak.fail(&format!("watch: {e}"));
                    tokio::time::sleep(backoff.next()).await;
                    break;
                }
            }
        }
    }
}

impl Watcher<'_> {
    async fn watch_once(&mut self, rv: &mut String, out: &tokio::sync::watch::Sender<Vec<Replica>>, streak: &mut Streak) -> WatchEnd {
        let mut resp = match self.api.watch(rv).await {
            Ok(r) => r,
            Err(ApiError::Gone(_)) => return WatchEnd::Gone,
            Err(ApiError::Transport(e)) => return WatchEnd::Broken(e),
            Err(e) => return WatchEnd::Failed(e.to_string()),
        };
        // An open watch ends a failure streak that a broken stream started.
        streak.ok();
        let mut lines = LineSplitter::new(MAX_WATCH_LINE);
        let mut events = 0;
        loop {
            let (batch, end) = match resp.chunk().await {
                Ok(Some(chunk)) => match lines.push(&chunk) {
                    Ok(batch) => (batch, None),
                    Err(e) => return WatchEnd::Failed(e.to_string()),
                },
                Ok(None) => (lines.finish().into_iter().collect(), Some(WatchEnd::Ended { events: 0 })),
                Err(e) if e.is_timeout() => (Vec::new(), Some(WatchEnd::Ended { events: 0 })),
                Err(e) => (Vec::new(), Some(WatchEnd::Broken(format!("stream broke off: {}", crate::client::target::error_chain(&e))))),
            };
            let mut changed = false;
            for line in batch {
                let event = match model::parse_watch_event(&line) {
                    Ok(ev) => ev,
                    Err(e) => return WatchEnd::Failed(format!("watch event: {e}")),
                };
                events += 1;
                match event {
                    WatchEvent::Added(s) | WatchEvent::Modified(s) => {
                        remember_version(rv, &s);
                        self.slices.upsert(s);
                        changed = true;
                    }
                    WatchEvent::Deleted(s) => {
                        remember_version(rv, &s);
                        self.slices.remove(&s);
                        changed = true;
                    }
                    WatchEvent::Bookmark(v) => {
                        if let Some(v) = v.filter(|v| !v.is_empty()) {
                            *rv = v;
                        }
                    }
                    WatchEvent::Error(status) if status.code == Some(410) => return WatchEnd::Gone,
                    WatchEvent::Error(status) => {
                        let message: String = status.message.unwrap_or_default().chars().take(300).collect();
                        return WatchEnd::Failed(format!("ERROR event (code {}): {message}", status.code.unwrap_or(0)));
                    }
                }
            }
            if changed {
                self.publish(out).await;
            }
            match end {
                Some(WatchEnd::Ended { .. }) => return WatchEnd::Ended { events },
                Some(other) => return other,
                None => {}
            }
        }
    }

    /// Publishes the current members, with versions when configured.
    async fn publish(&mut self, out: &tokio::sync::watch::Sender<Vec<Replica>>) {
        let (members, problems) = self.slices.members(&self.spec.port);
        let mut still = BTreeSet::new();
        for (slice, problem) in problems {
            if !self.warned_slices.contains(&slice) {
                let model::SliceProblem::NoSuchPort(ports) = &problem;
                tracing::warn!(service = %self.spec.service, slice, "no TCP port {} in this EndpointSlice (it lists {ports:?}); its endpoints are not probed", self.spec.port);
            }
            still.insert(slice);
        }
        self.warned_slices = still;
        let replicas = match &self.spec.version_label {
            None => members.into_iter().map(|m| m.replica).collect(),
            Some(label) => self.with_versions(label, members).await,
        };
        super::replica::publish(out, replicas);
    }

    fn pod_key(&self, pod: &PodRef) -> String {
        format!("{}/{}", pod.namespace.as_deref().unwrap_or(self.api.namespace()), pod.name)
    }

    async fn with_versions(&mut self, label: &str, members: Vec<Member>) -> Vec<Replica> {
        let now = Instant::now();
        let wanted: Vec<(String, PodRef)> = members
            .iter()
            .filter_map(|m| m.pod.clone())
            .map(|p| (self.pod_key(&p), p))
            .filter(|(key, pod)| match self.versions.get(key) {
                None => true,
                Some((uid, _)) if pod.uid.is_some() && *uid != pod.uid => true,
                Some((_, Version::Failed(at))) => now.duration_since(*at) >= POD_RETRY,
                Some((_, Version::Known(_))) => false,
            })
            .collect();
        let api = &self.api;
        let fetched: Vec<(String, PodRef, Result<Option<Pod>, ApiError>)> = futures_util::stream::iter(wanted)
            .map(|(key, pod)| async move {
                let ns = pod.namespace.clone().unwrap_or_else(|| api.namespace().to_string());
                let got = api.pod(&ns, &pod.name).await;
                (key, pod, got)
            })
            .buffer_unordered(POD_CONCURRENCY)
            .collect()
            .await;
        for (key, pod, got) in fetched {
            let entry = match got {
                Ok(Some(p)) if pod.uid.is_some() && p.metadata.uid.is_some() && p.metadata.uid != pod.uid => Version::Failed(now),
                Ok(Some(p)) => Version::Known(p.metadata.labels.get(label).and_then(|v| model::version_value(v))),
                Ok(None) => Version::Known(None),
                Err(ApiError::Status { code: 403, message }) => {
                    if !self.pods_forbidden_logged {
                        self.pods_forbidden_logged = true;
                        tracing::warn!(service = %self.spec.service, "may not get pods, so replica versions are unknown: {message}");
                    }
                    Version::Known(None)
                }
                Err(e) => {
                    if !self.pod_failure_logged {
                        self.pod_failure_logged = true;
                        tracing::warn!(service = %self.spec.service, pod = %pod.name, "reading the pod's version label failed (retried later): {e}");
                    }
                    Version::Failed(now)
                }
            };
            self.versions.insert(key, (pod.uid.clone(), entry));
        }
        let live: BTreeSet<String> = members.iter().filter_map(|m| m.pod.as_ref()).map(|p| self.pod_key(p)).collect();
        self.versions.retain(|k, _| live.contains(k));
        members
            .into_iter()
            .map(|m| {
                let mut r = m.replica;
                if let Some(p) = &m.pod {
                    if let Some((_, Version::Known(v))) = self.versions.get(&self.pod_key(p)) {
                        r.version = v.clone();
                    }
                }
                r
            })
            .collect()
    }
}

fn remember_version(rv: &mut String, slice: &EndpointSlice) {
    if let Some(v) = slice.metadata.resource_version.as_deref().filter(|v| !v.is_empty()) {
        *rv = v.to_string();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_cluster_access_from_the_service_environment() {
        let dir = Path::new("/sa");
        let (url, token, ca) = in_cluster(Some("10.96.0.1"), Some("443"), dir).unwrap();
        assert_eq!(url, "https://10.96.0.1:443");
        assert_eq!(token, Path::new("/sa/token"));
        assert_eq!(ca, Path::new("/sa/ca.crt"));
        assert_eq!(in_cluster(Some("fd00::1"), None, dir).unwrap().0, "https://[fd00::1]:443");
        assert!(in_cluster(None, Some("443"), dir).is_err());
    }

    #[test]
    fn namespace_from_the_service_account_files() {
        let dir = std::env::temp_dir().join(format!("llmprobe-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("namespace"), "inference\n").unwrap();
        let spec = KubernetesSpec {
            service: "vllm".into(),
            namespace: None,
            port: crate::replicas::discover::PortRef::Name("http".into()),
            version_label: None,
            api: Some(crate::replicas::discover::ApiAccess { url: "http://127.0.0.1:1/".into(), token_file: None, ca_file: None }),
        };
        let api = Api::new(&spec, &dir).unwrap();
        assert_eq!(api.namespace(), "inference");
        assert_eq!(
            api.slices_url().unwrap().as_str(),
            "http://127.0.0.1:1/apis/discovery.k8s.io/v1/namespaces/inference/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dvllm"
        );
        let bad = KubernetesSpec { service: "../x".into(), ..spec.clone() };
        assert!(Api::new(&bad, &dir).is_err());
        let bad = KubernetesSpec { api: Some(crate::replicas::discover::ApiAccess { url: "ftp://x".into(), token_file: None, ca_file: None }), ..spec };
        assert!(Api::new(&bad, &dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
