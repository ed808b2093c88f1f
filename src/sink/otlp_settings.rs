//! Which OTLP settings apply: the `tracing:` section first, then the standard variables
//! (`OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`,
//! `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`/`_ARG`), then defaults. The exporter itself also
//! reads `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`/`HEADERS`/`TIMEOUT` when the config leaves them
//! out, and the resource reads `OTEL_RESOURCE_ATTRIBUTES`.

use crate::config::{OtlpProtocol, Tracing};

/// Resolved export settings; `None` from `resolve` means tracing is off.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    pub protocol: OtlpProtocol,
    /// Full traces URL from config (`/v1/traces` added for HTTP); `None` = the exporter reads
    /// the environment.
    pub endpoint: Option<String>,
    pub headers: Vec<(String, String)>,
    /// `None` = `OTEL_SERVICE_NAME` is set and used by the resource.
    pub service_name: Option<String>,
    pub sample_ratio: f64,
    /// Problems worth a log line (an unknown sampler name, ...).
    pub notes: Vec<String>,
}

impl OtlpSettings {
    /// Applies the precedence. `env` reads a variable (tests pass a map).
    pub fn resolve(cfg: &Tracing, env: impl Fn(&str) -> Option<String>) -> Option<OtlpSettings> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let env_endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let sdk_disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let enabled = cfg.enabled.unwrap_or(!sdk_disabled && (cfg.endpoint.is_some() || env_endpoint.is_some()));
        if !enabled {
            return None;
        }
        let mut notes = Vec::new();
        let protocol = cfg.protocol.unwrap_or_else(|| match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL")) {
            None => OtlpProtocol::HttpProtobuf,
            Some(p) => OtlpProtocol::parse(p.trim()).unwrap_or_else(|| {
                notes.push(format!("OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported (grpc or http/protobuf): using http/protobuf"));
                OtlpProtocol::HttpProtobuf
            }),
        });
        let endpoint = cfg.endpoint.as_deref().map(|e| match protocol {
            OtlpProtocol::Grpc => e.to_owned(),
            OtlpProtocol::HttpProtobuf => http_traces_url(e),
        });
        let service_name = cfg.service_name.clone().or_else(|| var("OTEL_SERVICE_NAME").is_none().then(|| "llmprobe".to_owned()));
        let sample_ratio = cfg.sample_ratio.unwrap_or_else(|| sampler_ratio(var("OTEL_TRACES_SAMPLER"), var("OTEL_TRACES_SAMPLER_ARG"), &mut notes));
        Some(OtlpSettings { protocol, endpoint, headers: cfg.headers.clone(), service_name, sample_ratio, notes })
    }
}

/// The OTLP/HTTP traces URL for a base endpoint, as the spec builds it from
/// `OTEL_EXPORTER_OTLP_ENDPOINT`; a URL that already ends in `/v1/traces` is kept.
fn http_traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") { base.to_owned() } else { format!("{base}/v1/traces") }
}

/// `OTEL_TRACES_SAMPLER` as a ratio. Every llmprobe span is a root span, so the `parentbased_`
/// variants behave as their root samplers.
fn sampler_ratio(sampler: Option<String>, arg: Option<String>, notes: &mut Vec<String>) -> f64 {
    let mut ratio = || match arg.as_deref().map(str::trim).map(str::parse::<f64>) {
        None => 1.0,
        Some(Ok(r)) if (0.0..=1.0).contains(&r) => r,
        Some(_) => {
            notes.push(format!("OTEL_TRACES_SAMPLER_ARG={} is not a ratio in 0..1: using 1.0", arg.clone().unwrap_or_default()));
            1.0
        }
    };
    match sampler.as_deref().map(str::trim) {
        None | Some("always_on" | "parentbased_always_on") => 1.0,
        Some("always_off" | "parentbased_always_off") => 0.0,
        Some("traceidratio" | "parentbased_traceidratio") => ratio(),
        Some(other) => {
            notes.push(format!("OTEL_TRACES_SAMPLER={other} is not supported: sampling every probe"));
            1.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(cfg: &Tracing, vars: &[(&str, &str)]) -> Option<OtlpSettings> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        OtlpSettings::resolve(cfg, |k| map.get(k).cloned())
    }

    #[test]
    fn off_unless_an_endpoint_is_given() {
        assert_eq!(resolve(&Tracing::default(), &[]), None);
        let on = resolve(&Tracing::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]).unwrap();
        assert_eq!((on.protocol, on.endpoint.as_deref(), on.service_name.as_deref()), (OtlpProtocol::HttpProtobuf, None, Some("llmprobe")));
        assert_eq!(resolve(&Tracing::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"), ("OTEL_SDK_DISABLED", "true")]), None);
        let off = Tracing { enabled: Some(false), endpoint: Some("http://c".into()), ..Tracing::default() };
        assert_eq!(resolve(&off, &[]), None);
    }

    #[test]
    fn config_overrides_the_environment() {
        let cfg = Tracing { endpoint: Some("http://c:4318/".into()), service_name: Some("p".into()), sample_ratio: Some(0.5), ..Tracing::default() };
        let s = resolve(&cfg, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_SERVICE_NAME", "env"), ("OTEL_TRACES_SAMPLER", "always_off")]).unwrap();
        assert_eq!(s.protocol, OtlpProtocol::Grpc);
        assert_eq!(s.endpoint.as_deref(), Some("http://c:4318/"));
        assert_eq!((s.service_name.as_deref(), s.sample_ratio), (Some("p"), 0.5));
        let http = resolve(&Tracing { protocol: Some(OtlpProtocol::HttpProtobuf), ..cfg }, &[]).unwrap();
        assert_eq!(http.endpoint.as_deref(), Some("http://c:4318/v1/traces"));
    }

    #[test]
    fn samplers_from_the_environment() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c")];
        let with = |extra: &[(&str, &str)]| resolve(&Tracing::default(), &[on.as_slice(), extra].concat()).unwrap();
        assert_eq!(with(&[("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"), ("OTEL_TRACES_SAMPLER_ARG", "0.1")]).sample_ratio, 0.1);
        assert_eq!(with(&[("OTEL_TRACES_SAMPLER", "always_off")]).sample_ratio, 0.0);
        let bad = with(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]);
        assert_eq!((bad.sample_ratio, bad.notes.len()), (1.0, 1));
        assert_eq!(with(&[("OTEL_SERVICE_NAME", "svc")]).service_name, None);
    }
}
