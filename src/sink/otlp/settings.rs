//! Which OTLP settings apply, for traces and metrics at once: the `tracing:` section first, then
//! the standard variables (`OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_[SIGNAL_]ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_[SIGNAL_]PROTOCOL`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`/`_ARG`,
//! `OTEL_METRICS_EXPORTER`, `OTEL_METRIC_EXPORT_INTERVAL`), then defaults. The exporters
//! themselves also read `OTEL_EXPORTER_OTLP_[SIGNAL_]ENDPOINT`/`HEADERS`/`TIMEOUT` when the config
//! leaves them out, and the resource reads `OTEL_RESOURCE_ATTRIBUTES`.

use std::time::Duration;

use crate::config::{OtlpProtocol, Tracing};

/// Default `OTEL_METRIC_EXPORT_INTERVAL`.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);

/// Resolved export settings of both signals; a signal that is `None` is not exported.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpSettings {
    pub traces: Option<TraceSettings>,
    pub metrics: Option<MetricSettings>,
    /// Extra export headers from the config, for both signals.
    pub headers: Vec<(String, String)>,
    /// `None` = `OTEL_SERVICE_NAME` is set and used by the resource.
    pub service_name: Option<String>,
    /// Problems worth a log line (an unknown sampler name, ...).
    pub notes: Vec<String>,
}

/// Where one signal goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Transport {
    pub protocol: OtlpProtocol,
    /// Full URL from config (the signal's `/v1/...` path added for HTTP); `None` = the exporter
    /// reads the environment.
    pub endpoint: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    pub transport: Transport,
    pub sample_ratio: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetricSettings {
    pub transport: Transport,
    pub interval: Duration,
}

impl OtlpSettings {
    /// Applies the precedence. `env` reads a variable (tests pass a map).
    pub fn resolve(cfg: &Tracing, env: impl Fn(&str) -> Option<String>) -> OtlpSettings {
        let var = |name: &str| env(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut notes = Vec::new();
        let sdk_disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));

        let env_endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let traces_on = cfg.enabled.unwrap_or(!sdk_disabled && (cfg.endpoint.is_some() || env_endpoint.is_some()));
        let traces = traces_on.then(|| TraceSettings {
            transport: transport(cfg, "TRACES", "/v1/traces", &var, &mut notes),
            sample_ratio: cfg.sample_ratio.unwrap_or_else(|| sampler_ratio(var("OTEL_TRACES_SAMPLER"), var("OTEL_TRACES_SAMPLER_ARG"), &mut notes)),
        });

        let metrics_from_env = match var("OTEL_METRICS_EXPORTER").as_deref() {
            None | Some("none") => false,
            Some("otlp") => true,
            Some(other) => {
                notes.push(format!("OTEL_METRICS_EXPORTER={other} is not supported (otlp or none): not exporting metrics"));
                false
            }
        };
        let metrics = cfg.metrics.unwrap_or(metrics_from_env && !sdk_disabled).then(|| MetricSettings {
            transport: transport(cfg, "METRICS", "/v1/metrics", &var, &mut notes),
            interval: export_interval(var("OTEL_METRIC_EXPORT_INTERVAL"), &mut notes),
        });

        let service_name = cfg.service_name.clone().or_else(|| var("OTEL_SERVICE_NAME").is_none().then(|| "llmprobe".to_owned()));
        OtlpSettings { traces, metrics, headers: cfg.headers.clone(), service_name, notes }
    }
}

/// One signal's protocol (config, `OTEL_EXPORTER_OTLP_{SIGNAL}_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL`,
/// http/protobuf) and the config's endpoint as that signal's URL.
fn transport(cfg: &Tracing, signal: &str, http_path: &str, var: &dyn Fn(&str) -> Option<String>, notes: &mut Vec<String>) -> Transport {
    let from_env = var(&format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")).or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    let protocol = cfg.protocol.unwrap_or_else(|| match from_env {
        None => OtlpProtocol::HttpProtobuf,
        Some(p) => OtlpProtocol::parse(&p).unwrap_or_else(|| {
            notes.push(format!("OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported (grpc or http/protobuf): using http/protobuf"));
            OtlpProtocol::HttpProtobuf
        }),
    });
    let endpoint = cfg.endpoint.as_deref().map(|e| match protocol {
        OtlpProtocol::Grpc => e.to_owned(),
        OtlpProtocol::HttpProtobuf => http_url(e, http_path),
    });
    Transport { protocol, endpoint }
}

/// The OTLP/HTTP URL of a signal for a base endpoint, as the spec builds it from
/// `OTEL_EXPORTER_OTLP_ENDPOINT`; a URL that already ends in the signal's path is kept.
fn http_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(path) { base.to_owned() } else { format!("{base}{path}") }
}

/// `OTEL_TRACES_SAMPLER` as a ratio. Every llmprobe span is a root span, so the `parentbased_`
/// variants behave as their root samplers.
fn sampler_ratio(sampler: Option<String>, arg: Option<String>, notes: &mut Vec<String>) -> f64 {
    let mut ratio = || match arg.as_deref().map(str::parse::<f64>) {
        None => 1.0,
        Some(Ok(r)) if (0.0..=1.0).contains(&r) => r,
        Some(_) => {
            notes.push(format!("OTEL_TRACES_SAMPLER_ARG={} is not a ratio in 0..1: using 1.0", arg.clone().unwrap_or_default()));
            1.0
        }
    };
    match sampler.as_deref() {
        None | Some("always_on" | "parentbased_always_on") => 1.0,
        Some("always_off" | "parentbased_always_off") => 0.0,
        Some("traceidratio" | "parentbased_traceidratio") => ratio(),
        Some(other) => {
            notes.push(format!("OTEL_TRACES_SAMPLER={other} is not supported: sampling every probe"));
            1.0
        }
    }
}

/// `OTEL_METRIC_EXPORT_INTERVAL` (milliseconds).
fn export_interval(ms: Option<String>, notes: &mut Vec<String>) -> Duration {
    match ms {
        None => DEFAULT_INTERVAL,
        Some(ms) => match ms.parse::<u64>() {
            Ok(n) if n > 0 => Duration::from_millis(n),
            _ => {
                notes.push(format!("OTEL_METRIC_EXPORT_INTERVAL={ms} is not a positive number of milliseconds: using 60000"));
                DEFAULT_INTERVAL
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(cfg: &Tracing, vars: &[(&str, &str)]) -> OtlpSettings {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        OtlpSettings::resolve(cfg, |k| map.get(k).cloned())
    }

    fn traces(cfg: &Tracing, vars: &[(&str, &str)]) -> Option<TraceSettings> {
        resolve(cfg, vars).traces
    }

    fn metrics(cfg: &Tracing, vars: &[(&str, &str)]) -> Option<MetricSettings> {
        resolve(cfg, vars).metrics
    }

    #[test]
    fn traces_off_unless_an_endpoint_is_given() {
        assert_eq!(traces(&Tracing::default(), &[]), None);
        let on = resolve(&Tracing::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]);
        let t = on.traces.unwrap();
        assert_eq!((t.transport.protocol, t.transport.endpoint.as_deref(), on.service_name.as_deref()), (OtlpProtocol::HttpProtobuf, None, Some("llmprobe")));
        assert_eq!(traces(&Tracing::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"), ("OTEL_SDK_DISABLED", "true")]), None);
        let off = Tracing { enabled: Some(false), endpoint: Some("http://c".into()), ..Tracing::default() };
        assert_eq!(traces(&off, &[]), None);
    }

    #[test]
    fn config_overrides_the_environment() {
        let cfg = Tracing { endpoint: Some("http://c:4318/".into()), service_name: Some("p".into()), sample_ratio: Some(0.5), ..Tracing::default() };
        let s = resolve(&cfg, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_SERVICE_NAME", "env"), ("OTEL_TRACES_SAMPLER", "always_off")]);
        let t = s.traces.unwrap();
        assert_eq!(t.transport.protocol, OtlpProtocol::Grpc);
        assert_eq!(t.transport.endpoint.as_deref(), Some("http://c:4318/"));
        assert_eq!((s.service_name.as_deref(), t.sample_ratio), (Some("p"), 0.5));
        let http = traces(&Tracing { protocol: Some(OtlpProtocol::HttpProtobuf), ..cfg }, &[]).unwrap();
        assert_eq!(http.transport.endpoint.as_deref(), Some("http://c:4318/v1/traces"));
    }

    #[test]
    fn samplers_from_the_environment() {
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c")];
        let with = |extra: &[(&str, &str)]| resolve(&Tracing::default(), &[on.as_slice(), extra].concat());
        let ratio = |extra: &[(&str, &str)]| with(extra).traces.unwrap().sample_ratio;
        assert_eq!(ratio(&[("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"), ("OTEL_TRACES_SAMPLER_ARG", "0.1")]), 0.1);
        assert_eq!(ratio(&[("OTEL_TRACES_SAMPLER", "always_off")]), 0.0);
        let bad = with(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]);
        assert_eq!((bad.traces.unwrap().sample_ratio, bad.notes.len()), (1.0, 1));
        assert_eq!(with(&[("OTEL_SERVICE_NAME", "svc")]).service_name, None);
    }

    #[test]
    fn metrics_off_unless_asked_for() {
        assert_eq!(metrics(&Tracing::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318")]), None, "an endpoint alone exports traces only");
        assert_eq!(metrics(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "none")]), None);
        let on = metrics(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "otlp")]).unwrap();
        assert_eq!((on.transport.protocol, on.transport.endpoint.as_deref(), on.interval), (OtlpProtocol::HttpProtobuf, None, DEFAULT_INTERVAL));
        assert_eq!(metrics(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "otlp"), ("OTEL_SDK_DISABLED", "true")]), None);
        let bad = resolve(&Tracing::default(), &[("OTEL_METRICS_EXPORTER", "prometheus")]);
        assert_eq!((bad.metrics, bad.notes.len()), (None, 1));
        let cfg = Tracing { metrics: Some(true), endpoint: Some("http://c:4318/".into()), ..Tracing::default() };
        assert_eq!(metrics(&cfg, &[]).unwrap().transport.endpoint.as_deref(), Some("http://c:4318/v1/metrics"));
        let cfg_off = Tracing { metrics: Some(false), ..Tracing::default() };
        assert_eq!(metrics(&cfg_off, &[("OTEL_METRICS_EXPORTER", "otlp")]), None, "config wins over the environment");
    }

    #[test]
    fn interval_and_protocol_from_the_environment() {
        let on = [("OTEL_METRICS_EXPORTER", "otlp")];
        let with = |extra: &[(&str, &str)]| resolve(&Tracing::default(), &[on.as_slice(), extra].concat());
        let m = |extra: &[(&str, &str)]| with(extra).metrics.unwrap();
        assert_eq!(m(&[("OTEL_METRIC_EXPORT_INTERVAL", "5000")]).interval, Duration::from_secs(5));
        let bad = with(&[("OTEL_METRIC_EXPORT_INTERVAL", "soon")]);
        assert_eq!((bad.metrics.unwrap().interval, bad.notes.len()), (DEFAULT_INTERVAL, 1));
        let both = [("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")];
        assert_eq!(m(&both).transport.protocol, OtlpProtocol::Grpc);
        assert_eq!(m(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).transport.protocol, OtlpProtocol::Grpc);
    }

    #[test]
    fn one_resolution_serves_both_signals() {
        let cfg = Tracing { endpoint: Some("http://c:4318".into()), metrics: Some(true), ..Tracing::default() };
        let s = resolve(&cfg, &[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")]);
        let (t, m) = (s.traces.unwrap(), s.metrics.unwrap());
        assert_eq!((t.transport.protocol, t.transport.endpoint.as_deref()), (OtlpProtocol::Grpc, Some("http://c:4318")));
        assert_eq!((m.transport.protocol, m.transport.endpoint.as_deref()), (OtlpProtocol::HttpProtobuf, Some("http://c:4318/v1/metrics")));
    }
}
