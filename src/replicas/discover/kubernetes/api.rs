//! The API server as one Service's discovery uses it: in-cluster access, the EndpointSlice list
//! and watch requests and the Pod `get`, every answer read bounded and every request timed out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{StatusCode, Url};

use super::model::{self, EndpointSlice, Pod};
use crate::client::secret::KeySource;
use crate::config::SecretRef;
use crate::replicas::discover::KubernetesSpec;

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
/// How often the token file's modification time is looked at.
const TOKEN_RECHECK: Duration = Duration::from_secs(1);

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
            .user_agent(crate::client::USER_AGENT)
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(90));
        if let Some(ca) = ca_file {
            let pem = std::fs::read(&ca).map_err(|e| format!("reading CA file {}: {e}", ca.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("CA file {} is not PEM certificates: {e}", ca.display()))?;
            builder = builder.tls_certs_merge(certs);
        }
        let client = builder.build().map_err(|e| format!("building the HTTP client: {}", crate::client::error_chain(&e)))?;
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
        let resp = req.send().await.map_err(|e| ApiError::Transport(self.redact(&crate::client::error_chain(&e))))?;
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
            Err(e) => return Err(ApiError::Transport(format!("answer broke off: {}", crate::client::error_chain(&e)))),
        }
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
