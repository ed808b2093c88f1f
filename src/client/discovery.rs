//! What a target serves: its model, engine and version, read from the endpoints its API family
//! names, and the bounded read of such an info answer.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::classify::error_chain;
use super::runtime::TargetRuntime;
use crate::probe::outcome::{ErrorClass, Failure};
use crate::protocol::ModelSource;

/// What `/v1/models` and `/version` told us about a target.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerIdentity {
    pub model: String,
    pub engine: String,
    pub engine_version: String,
}

impl TargetRuntime {
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
