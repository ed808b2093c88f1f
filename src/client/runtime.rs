//! A target at run time: its configuration, its HTTP clients (the general one: TLS, HTTP
//! version, proxies from the standard `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` variables; and, for
//! plain `http`, the lean probe client of `http1`), its API key and secret headers, and the model
//! it probes. Sending, discovery and the probe's request and response are in the files beside.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::general::{General, USER_AGENT};
use super::secret::KeySource;
use crate::config::Target;
use crate::probe::outcome::{ErrorClass, Failure};

pub struct TargetRuntime {
    pub config: Target,
    pub name: Arc<str>,
    /// The general client: sends the probes where the lean one does not apply, and discovery,
    /// `/tokenize` and everything else.
    pub(super) general: Arc<General>,
    /// Sends the probes where it applies (`http1::Client::for_target`).
    pub(super) lean: Option<Arc<crate::client::http1::Client>>,
    pub(super) api_key: Option<Arc<KeySource>>,
    /// `headers_from` values (name, source), sent on every request and redacted like the key.
    pub(super) secret_headers: Arc<Vec<(String, KeySource)>>,
    pub(super) model: RwLock<Option<Arc<str>>>,
    /// Held while a model discovery runs, so concurrent probes share one request.
    pub(super) discovering: tokio::sync::Mutex<()>,
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
    pub(super) fn own_headers(&self) -> Result<HeaderMap, Failure> {
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

    /// A request to `base_url + path` through the general client, with the target's headers.
    pub fn request(&self, method: reqwest::Method, path: &str) -> Result<reqwest::RequestBuilder, Failure> {
        Ok(self.general.client().request(method, format!("{}{}", self.config.base_url, path)).headers(self.own_headers()?))
    }
}
