//! What the OTLP attributes say about each target: its operation and server address (from the
//! config) and the engine discovery found, shared by spans and metrics.

use std::collections::HashMap;
use std::sync::Mutex;

use opentelemetry::KeyValue;

use crate::config::Config;
use crate::probe::outcome::Outcome;

/// Attributes of a target that do not change between probes.
#[derive(Debug, Clone)]
struct TargetMeta {
    operation: &'static str,
    address: String,
    port: Option<u16>,
}

pub(super) struct Targets {
    meta: HashMap<String, TargetMeta>,
    /// Engine name per target from discovery (`gen_ai.provider.name`).
    engines: Mutex<HashMap<String, String>>,
}

impl Targets {
    pub(super) fn new(config: &Config) -> Targets {
        Targets { meta: config.targets.iter().map(|t| (t.name.clone(), target_meta(t))).collect(), engines: Mutex::new(HashMap::new()) }
    }

    /// Records the engine a target runs (from discovery) as its `gen_ai.provider.name`.
    pub(super) fn set_engine(&self, target: &str, engine: &str) {
        self.engines.lock().unwrap_or_else(|e| e.into_inner()).insert(target.to_owned(), engine.to_owned());
    }

    /// `gen_ai.operation.name` of a target's probes.
    pub(super) fn operation(&self, target: &str) -> &'static str {
        self.meta.get(target).map_or("text_completion", |m| m.operation)
    }

    /// The GenAI attributes every span and metric of a probe carries: operation, provider,
    /// requested model and the server's address.
    pub(super) fn genai_attributes(&self, o: &Outcome) -> Vec<KeyValue> {
        let provider = self.engines.lock().unwrap_or_else(|e| e.into_inner()).get(&*o.target).cloned().unwrap_or_else(|| "openai".into());
        let mut a = vec![
            KeyValue::new("gen_ai.operation.name", self.operation(&o.target)),
            KeyValue::new("gen_ai.provider.name", provider),
            KeyValue::new("gen_ai.request.model", o.model.to_string()),
        ];
        if let Some(m) = self.meta.get(&*o.target) {
            a.push(KeyValue::new("server.address", m.address.clone()));
            if let Some(p) = m.port {
                a.push(KeyValue::new("server.port", i64::from(p)));
            }
        }
        a
    }
}

fn target_meta(t: &crate::config::Target) -> TargetMeta {
    let operation = if t.api.family().chat { "chat" } else { "text_completion" };
    let (address, port) = split_host_port(&t.base_url);
    TargetMeta { operation, address, port }
}

/// `http://host:port/prefix` -> (`host`, port), with the scheme's default port.
fn split_host_port(url: &str) -> (String, Option<u16>) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split('/').next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default = match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']').unwrap_or((v6, ""));
        return (host.to_owned(), after.strip_prefix(':').and_then(|p| p.parse().ok()).or(default));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host.to_owned(), port.parse().ok().or(default)),
        None => (authority.to_owned(), default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_from_base_urls() {
        assert_eq!(split_host_port("http://127.0.0.1:8000"), ("127.0.0.1".into(), Some(8000)));
        assert_eq!(split_host_port("https://api.example.com/v1proxy"), ("api.example.com".into(), Some(443)));
        assert_eq!(split_host_port("http://[::1]:9000/x"), ("::1".into(), Some(9000)));
        assert_eq!(split_host_port("http://user:pw@h:81"), ("h".into(), Some(81)));
    }
}
