//! Stage 1: the YAML file as written, deserialized with serde.
//!
//! Every struct denies unknown fields so a typo is an error, not a silently ignored key. Values
//! that need checks beyond their YAML type (durations, URLs, api names, ranges) are kept loosely
//! typed here and checked in `validate.rs`, so that one file with many mistakes reports them all
//! at once instead of stopping at the first.
//!
//! The `///` comments on these fields are the user documentation of the format (see
//! `config/README.md`).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

pub use super::raw_workload::{RawArrival, RawDataset, RawLength, RawPrefix};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with the sections listen, probe, targets, scenarios, slo, tracing, sources, bench, detect")]
pub struct RawConfig {
    /// Address (`IP:port`) of the prober's own HTTP server. Default `127.0.0.1:9464`.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Settings shared by every target.
    #[serde(default)]
    pub probe: RawProbe,
    /// The servers to probe; at least one.
    #[serde(default)]
    pub targets: Vec<RawTarget>,
    /// The request shapes sent to every target; at least one.
    #[serde(default)]
    pub scenarios: Vec<RawScenario>,
    /// Latency objectives used for goodput; `targets[].slo` and `scenarios[].slo` override fields.
    /// An empty section (`slo:` or `slo: {}`) is the same as none.
    #[serde(default, deserialize_with = "null_as_default")]
    pub slo: RawSlo,
    /// OTLP trace and metric export and exemplars (`config/README.md` "tracing"). An empty
    /// section is the same as none.
    #[serde(default, deserialize_with = "null_as_default")]
    pub tracing: super::telemetry::RawTracing,
    /// Engine and GPU telemetry scraped alongside the probes (`config/README.md` "sources").
    #[serde(default)]
    pub sources: Vec<super::telemetry::RawSource>,
    /// Benchmark mode (`llmprobe bench`); ignored by the prober.
    pub bench: Option<super::bench::RawBench>,
    /// The release-regression detector (`config/README.md` "detect"). An empty section is the
    /// same as none: the detector on with its defaults.
    #[serde(default, deserialize_with = "null_as_default")]
    pub detect: super::detect::RawDetect,
}

/// An empty YAML value (`slo:` with nothing after it) reads as the section's default.
fn null_as_default<'de, D: de::Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

fn default_listen() -> String {
    "127.0.0.1:9464".to_owned()
}

/// `probe:` section.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with rate, seed, max_in_flight, shutdown_grace, discovery_interval, arrival, shard, prober")]
pub struct RawProbe {
    /// Total requests per second sent to EACH target, split across the scenarios without their
    /// own `rate` in proportion to their `weight`. Default 1.0.
    pub rate: Option<f64>,
    /// RNG seed for arrivals and workload sampling; omit for a fresh seed on every start.
    pub seed: Option<u64>,
    /// In-flight cap per target (>= 1); a probe due while the cap is reached is dropped and
    /// counted, never delayed. Default 64.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u64,
    /// How long in-flight probes may finish after shutdown starts. Default `10s`.
    #[serde(default = "default_shutdown_grace")]
    pub shutdown_grace: RawDuration,
    /// How often each target's model and engine version are re-read (a change is a release
    /// marker). Default `60s`.
    #[serde(default = "default_discovery_interval")]
    pub discovery_interval: RawDuration,
    /// Arrival process of every scenario without its own `arrival`. Default Poisson.
    pub arrival: Option<RawArrival>,
    /// This prober's share of the schedule when several probers share one config: shard
    /// `index` of `count` sends rate/count of every scenario (independent Poisson streams add up
    /// to the configured rate). Default `{index: 0, count: 1}`.
    pub shard: Option<RawShard>,
    /// This prober's name (vantage point: zone, cluster), the `prober` label on every series.
    pub prober: Option<String>,
}

/// `probe.shard`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShard {
    pub index: u64,
    pub count: u64,
}

impl Default for RawProbe {
    fn default() -> Self {
        RawProbe {
            rate: None,
            seed: None,
            max_in_flight: default_max_in_flight(),
            shutdown_grace: default_shutdown_grace(),
            discovery_interval: default_discovery_interval(),
            arrival: None,
            shard: None,
            prober: None,
        }
    }
}

fn default_max_in_flight() -> u64 {
    64
}

fn default_shutdown_grace() -> RawDuration {
    RawDuration("10s".to_owned())
}

fn default_discovery_interval() -> RawDuration {
    RawDuration("60s".to_owned())
}

/// One entry of `targets:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a target mapping with name, base_url, api, ...")]
pub struct RawTarget {
    /// Unique name, used as the `target` label: letters, digits, `_`, `.`, `-`.
    pub name: String,
    /// `http://` or `https://` URL of the server, without the API path; a path prefix (for a
    /// proxy) is allowed. A trailing `/` is removed.
    pub base_url: String,
    /// API family: `openai-completions`, `openai-chat`, `ollama-generate`, `ollama-chat`,
    /// `llamacpp` (native `/completion`) or `tgi` (native `/generate_stream`).
    pub api: String,
    /// Model name sent in requests; omit to use the first model listed by `GET /v1/models`.
    pub model: Option<String>,
    /// Name of an environment variable holding the API key (sent as a bearer token).
    pub api_key_env: Option<String>,
    /// Path of a file holding the API key. Exclusive with `api_key_env`.
    pub api_key_file: Option<String>,
    /// Extra request headers, `Name: value`, sent on every probe.
    #[serde(default)]
    pub headers: RawHeaders,
    /// Ask the server to ignore end-of-sequence so the output length is exactly the requested
    /// `max_tokens`. Default true.
    #[serde(default = "default_true")]
    pub ignore_eos: bool,
    /// Per-request time limits.
    #[serde(default)]
    pub timeouts: RawTimeouts,
    /// Stream the answer (default true). `false` sends a non-streaming request and measures E2E
    /// only: TTFT, TPOT and ITL are not observed for such a target.
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Largest response body accepted per request, in bytes (>= 1024). Default 67108864 (64 MiB).
    #[serde(default = "default_max_response_bytes")]
    pub max_response_bytes: u64,
    /// HTTP version: `auto` (HTTP/1.1, or HTTP/2 when TLS ALPN offers it), `http1`, or
    /// `http2-prior-knowledge` (HTTP/2 without negotiation, e.g. h2c). Default `auto`.
    #[serde(default = "default_http_version")]
    pub http_version: String,
    /// TLS settings for an `https://` target.
    #[serde(default)]
    pub tls: RawTls,
    /// Follow HTTP redirects (default false: a redirect is the error class `http_3xx`, so
    /// prompts, the key and headers never go to a host the config did not name).
    #[serde(default)]
    pub follow_redirects: bool,
    /// Header values read from an environment variable or a file (`{env: NAME}` or
    /// `{file: PATH}`), redacted like the API key everywhere; files are re-read when they change.
    #[serde(default)]
    pub headers_from: std::collections::BTreeMap<String, RawHeaderSource>,
    /// SLO fields replacing the global `slo:` ones for this target's probes (ttft, tpot, e2e,
    /// objective; a threshold `off` drops the inherited one). A scenario's own `slo:` wins.
    pub slo: Option<super::slo::RawSloOverride>,
    /// Content codings to accept (`Accept-Encoding`): `identity` (default), `gzip`, `deflate`.
    /// Asking for compression makes frames be timed as they come out of the decoder.
    pub accept_encoding: Option<Vec<String>>,
    /// Find the replicas behind the target and probe each (`dns` or `kubernetes`).
    pub discover: Option<super::replicas::RawDiscover>,
    /// How the target's rate is shared by its replicas, the cap and the grace period.
    pub replicas: Option<super::replicas::RawReplicas>,
}

/// Where one `headers_from` value comes from: exactly one of `env` or `file`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with env or file")]
pub struct RawHeaderSource {
    pub env: Option<String>,
    pub file: Option<String>,
}

fn default_true() -> bool {
    true
}

fn default_max_response_bytes() -> u64 {
    64 << 20
}

fn default_http_version() -> String {
    "auto".to_owned()
}

/// `tls:` of a target. Server certificates are checked against the system roots plus `ca_file`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with ca_file, client_cert_file, client_key_file, insecure_skip_verify")]
pub struct RawTls {
    /// PEM file of extra CA certificates to trust (added to the system roots).
    pub ca_file: Option<String>,
    /// PEM client certificate (chain) for mutual TLS; needs `client_key_file`.
    pub client_cert_file: Option<String>,
    /// PEM private key of `client_cert_file`.
    pub client_key_file: Option<String>,
    /// Accept any server certificate. For tests only: logged as a warning at every start.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

/// `timeouts:` of a target. Every limit must be > 0; `ttft` and `idle` must not exceed `total`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with connect, ttft, idle, total")]
pub struct RawTimeouts {
    /// TCP (and TLS) connect. Default `2s`.
    #[serde(default = "default_connect")]
    pub connect: RawDuration,
    /// Request sent -> first generated token. Default `30s`.
    #[serde(default = "default_ttft")]
    pub ttft: RawDuration,
    /// Longest gap between two stream frames after the first token. Default `10s`.
    #[serde(default = "default_idle")]
    pub idle: RawDuration,
    /// Whole request, sent -> end of stream. Default `120s`.
    #[serde(default = "default_total")]
    pub total: RawDuration,
}

impl Default for RawTimeouts {
    fn default() -> Self {
        RawTimeouts { connect: default_connect(), ttft: default_ttft(), idle: default_idle(), total: default_total() }
    }
}

fn default_connect() -> RawDuration {
    RawDuration("2s".to_owned())
}
fn default_ttft() -> RawDuration {
    RawDuration("30s".to_owned())
}
fn default_idle() -> RawDuration {
    RawDuration("10s".to_owned())
}
fn default_total() -> RawDuration {
    RawDuration("120s".to_owned())
}

/// One entry of `scenarios:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a scenario mapping with name, weight or rate, input_tokens, output_tokens, ...")]
pub struct RawScenario {
    /// Unique name, used as the `scenario` label: letters, digits, `_`, `.`, `-`.
    pub name: String,
    /// Share of `probe.rate` (> 0). Default 1. Exclusive with `rate`.
    pub weight: Option<f64>,
    /// Own rate in requests per second per target (> 0), outside `probe.rate`. Exclusive with
    /// `weight`.
    pub rate: Option<f64>,
    /// Prompt length in tokens: a number, `{min, max}` for uniform, or a distribution;
    /// 1..=1000000. Required unless `dataset` is set.
    pub input_tokens: Option<RawLength>,
    /// Requested output length in tokens (`max_tokens`), same forms. Required unless every
    /// dataset entry carries its own.
    pub output_tokens: Option<RawLength>,
    /// Arrival process for this scenario, replacing `probe.arrival`.
    pub arrival: Option<RawArrival>,
    /// Shared prompt prefix (off by default: every prompt starts with a unique nonce).
    pub prefix: Option<RawPrefix>,
    /// Replay prompts from a file instead of synthesizing them.
    pub dataset: Option<RawDataset>,
    /// vLLM `cache_salt` sent in the body: requests with different salts never share cached
    /// prefixes (one salt per trust group).
    pub cache_salt: Option<String>,
    /// SLO fields replacing the target's and the global ones for this scenario (ttft, tpot, e2e,
    /// objective; a threshold `off` drops the inherited one).
    pub slo: Option<super::slo::RawSloOverride>,
}

/// `slo:` section. Every threshold is optional; a request meets the SLO when it succeeded and
/// is within every threshold that is set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with ttft, tpot, e2e, objective")]
pub struct RawSlo {
    /// Time to first token.
    pub ttft: Option<RawDuration>,
    /// Time per output token after the first.
    pub tpot: Option<RawDuration>,
    /// End-to-end request latency.
    pub e2e: Option<RawDuration>,
    /// Target fraction of good requests, in (0, 1). Default 0.99.
    #[serde(default = "default_objective")]
    pub objective: f64,
}

impl Default for RawSlo {
    fn default() -> Self {
        RawSlo { ttft: None, tpot: None, e2e: None, objective: default_objective() }
    }
}

fn default_objective() -> f64 {
    0.99
}

/// A duration as written (`250ms`, `2s`). Any scalar is accepted here so that `ttft: 30`
/// reaches validation and gets the duration error message with its unit hint.
#[derive(Debug, Clone, PartialEq)]
pub struct RawDuration(pub String);

impl<'de> Deserialize<'de> for RawDuration {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = RawDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration like 250ms, 2s or 1m")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawDuration, E> {
                Ok(RawDuration(s.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<RawDuration, E> {
                Ok(RawDuration(n.to_string()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<RawDuration, E> {
                Ok(RawDuration(n.to_string()))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<RawDuration, E> {
                Ok(RawDuration(n.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `headers:` as an ordered list of (name, value); order and duplicates are kept so that
/// validation can report a repeated name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawHeaders(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for RawHeaders {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawHeaders;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of header names to string values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawHeaders, A::Error> {
                let mut out = Vec::new();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    out.push((name, value));
                }
                Ok(RawHeaders(out))
            }
        }
        d.deserialize_map(V)
    }
}
