//! A target at run time: its HTTP client, resolved API key, and discovered model/engine.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::config::Target;
use crate::outcome::{ErrorClass, Failure};
use crate::secret::{self, Secret};

/// What `/v1/models` and `/version` told us about a target.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    pub model: String,
    pub engine: String,
    pub engine_version: String,
}

pub struct TargetRuntime {
    pub config: Target,
    pub name: Arc<str>,
    client: reqwest::Client,
    api_key: Option<Secret>,
    model: RwLock<Option<Arc<str>>>,
    /// Probes of this target currently running (the in-flight cap reads it).
    pub in_flight: AtomicUsize,
}

impl TargetRuntime {
    /// Builds the client and resolves the API key. Errors name the key's source, never its value.
    pub fn new(config: Target) -> anyhow::Result<Self> {
        let api_key = match &config.api_key {
            Some(r) => Some(secret::resolve(r).with_context(|| format!("target {}", config.name))?),
            None => None,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeouts.connect)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("llmprobe/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("building HTTP client")?;
        let model = RwLock::new(config.model.as_deref().map(Arc::from));
        Ok(TargetRuntime { name: Arc::from(config.name.as_str()), config, client, api_key, model, in_flight: AtomicUsize::new(0) })
    }

    /// Scrubs the API key from text that may be logged or exported.
    pub fn redact(&self, text: &str) -> String {
        match &self.api_key {
            Some(k) => k.redact(text),
            None => text.to_string(),
        }
    }

    /// A request to `base_url + path` with the key and the configured extra headers.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.client.request(method, format!("{}{}", self.config.base_url, path));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key.expose());
        }
        for (name, value) in &self.config.headers {
            req = req.header(name, value);
        }
        req
    }

    /// The configured model, else the one discovered earlier, else discovers it now.
    pub async fn model(&self) -> Result<Arc<str>, Failure> {
        if let Some(m) = self.model.read().expect("model lock").clone() {
            return Ok(m);
        }
        let found = self.discover().await?;
        Ok(self.model.write().expect("model lock").get_or_insert_with(|| Arc::from(found.model)).clone())
    }

    /// Asks `/v1/models` (first model) and `/version` (engine version, when served).
    pub async fn discover(&self) -> Result<Discovery, Failure> {
        let models: ModelList = self.get_json("/v1/models").await?;
        let first = models.data.into_iter().next().ok_or_else(|| Failure::new(ErrorClass::Parse, "/v1/models listed no model"))?;
        let model = self.config.model.clone().unwrap_or(first.id);
        let engine_version = match self.get_json::<Version>("/version").await {
            Ok(v) => v.version,
            Err(_) => String::new(),
        };
        let engine = first.owned_by.filter(|o| !o.is_empty()).unwrap_or_else(|| "unknown".into());
        Ok(Discovery { model, engine, engine_version })
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(&self, path: &str) -> Result<T, Failure> {
        let timeout = self.config.timeouts.connect + Duration::from_secs(5);
        let resp = tokio::time::timeout(timeout, self.request(reqwest::Method::GET, path).send())
            .await
            .map_err(|_| Failure::new(ErrorClass::TimeoutTotal, format!("GET {path} timed out")))?
            .map_err(|e| classify_send_error(&e, self))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(Failure::new(ErrorClass::from_status(status.as_u16()), format!("GET {path}: HTTP {status}")));
        }
        let body = tokio::time::timeout(timeout, resp.bytes())
            .await
            .map_err(|_| Failure::new(ErrorClass::TimeoutTotal, format!("GET {path} body timed out")))?
            .map_err(|e| Failure::new(ErrorClass::Truncated, self.redact(&error_chain(&e))))?;
        serde_json::from_slice(&body).map_err(|e| Failure::new(ErrorClass::Parse, format!("GET {path}: {e}")))
    }
}

#[derive(Deserialize)]
struct ModelList {
    data: Vec<ModelEntry>,
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
    owned_by: Option<String>,
}

#[derive(Deserialize)]
struct Version {
    version: String,
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
    let lower = chain.to_ascii_lowercase();
    let class = if err.is_connect() && err.is_timeout() {
        ErrorClass::TimeoutConnect
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        ErrorClass::Tls
    } else if err.is_connect() {
        ErrorClass::Connect
    } else {
        // Connection closed or reset before a response: the server never answered.
        ErrorClass::Connect
    };
    Failure::new(class, chain)
}
