//! Stage 2 for `targets:`: names, URLs, api, key references, headers, timeouts.
//!
//! Secrets are never read here, and no message echoes a header value or a URL with
//! credentials.

use reqwest::header::{HeaderName, HeaderValue};

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use super::check::{Checker, ConfigIssue, check_name, check_unique};
use super::duration::{RawDuration, format_duration};
use super::kinds::{ContentCoding, ProtocolKind};
use super::replicas::Replicas;
use super::slo::SloOverride;

/// Every target, plus the checks across them (at least one, unique names).
/// One server to probe.
#[derive(Debug, Clone)]
pub struct Target {
    /// Unique, `[a-zA-Z0-9_.-]+`; the `target` label.
    pub name: String,
    /// Base URL without the API path, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    /// API family the target speaks.
    pub api: ProtocolKind,
    /// `None`: discover from `GET {base_url}/v1/models` (first model).
    pub model: Option<String>,
    /// Where the bearer token comes from; read at startup, never at load time.
    pub api_key: Option<SecretRef>,
    /// Extra request headers (name, value), sent on every probe.
    pub headers: Vec<(String, String)>,
    /// Header values kept secret: read from env or a file at start, redacted like the key.
    pub headers_from: Vec<(String, SecretRef)>,
    /// Follow redirects (default false).
    pub follow_redirects: bool,
    pub timeouts: Timeouts,
    /// Send `ignore_eos: true` so output length equals `max_tokens` (vLLM, SGLang accept it).
    pub ignore_eos: bool,
    /// Streaming request (default). `false`: one JSON answer, E2E only (no TTFT/TPOT/ITL).
    pub stream: bool,
    /// Largest accepted response body per request, bytes.
    pub max_response_bytes: usize,
    pub http_version: HttpVersion,
    pub tls: TlsSettings,
    /// `slo:` fields replacing the global ones for this target (a scenario's own win over them).
    pub slo: SloOverride,
    /// Content codings the probe accepts (`Accept-Encoding`); default `[identity]`, so the stream
    /// is timed as it leaves the server. A coded response is decoded whether asked for or not.
    pub accept_encoding: Vec<ContentCoding>,
    /// Replica discovery (`discover:` and `replicas:`); `None` probes `base_url` only.
    pub replicas: Option<Replicas>,
}

impl Target {
    /// A target as a `targets:` entry naming only `name`, `base_url` and `api` validates: every
    /// other field at its documented default (the same checks build it). For code that builds
    /// targets without a file (tests, `workload accuracy --url`); change fields with the `with_`
    /// methods or directly. Errors in the three values are returned with their field paths.
    pub fn new(name: &str, base_url: &str, api: ProtocolKind) -> Result<Target, Vec<ConfigIssue>> {
        Target::from_names(name, base_url, api.as_str())
    }

    /// [`Target::new`] with the API by its `api:` name (a command line's `--api`); an unknown
    /// name is the same error a file gets.
    pub fn from_names(name: &str, base_url: &str, api: &str) -> Result<Target, Vec<ConfigIssue>> {
        let mut entry = serde_norway::Mapping::new();
        for (key, value) in [("name", name), ("base_url", base_url), ("api", api)] {
            entry.insert(key.into(), value.into());
        }
        let raw = RawTarget::deserialize(serde_norway::Value::Mapping(entry))
            .map_err(|e| vec![ConfigIssue { path: "target".into(), line: None, message: e.to_string() }])?;
        let mut c = Checker::detached();
        let target = target("target", &raw, &mut c);
        if c.errors.is_empty() { Ok(target) } else { Err(c.errors) }
    }

    /// The model to ask for (else the first one `/v1/models` lists).
    pub fn with_model(mut self, model: &str) -> Target {
        self.model = Some(model.to_owned());
        self
    }

    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Target {
        self.timeouts = timeouts;
        self
    }

    /// The target's own Prometheus page: `base_url` + `/metrics` (engine sources and the bench's
    /// agreement check read it unless given another URL).
    pub fn metrics_url(&self) -> String {
        format!("{}/metrics", self.base_url.trim_end_matches('/'))
    }

    /// The `Accept-Encoding` header value probes send.
    pub fn accept_encoding_header(&self) -> String {
        let names: Vec<&str> = self.accept_encoding.iter().map(|c| c.as_str()).collect();
        if names.is_empty() { "identity".to_owned() } else { names.join(", ") }
    }
}

/// Default `max_response_bytes`: a runaway stream must not eat memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Which HTTP version the client speaks to a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpVersion {
    /// HTTP/1.1, or HTTP/2 when TLS ALPN negotiates it.
    #[default]
    Auto,
    Http1,
    /// HTTP/2 from the first byte (h2c on `http://`).
    Http2PriorKnowledge,
}

impl HttpVersion {
    pub const ALL: [(HttpVersion, &'static str); 3] =
        [(HttpVersion::Auto, "auto"), (HttpVersion::Http1, "http1"), (HttpVersion::Http2PriorKnowledge, "http2-prior-knowledge")];
}

/// TLS material for a target; files are read when the client is built.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsSettings {
    /// Extra trusted CA certificates (PEM), on top of the system roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate and key (PEM) for mutual TLS; both or neither.
    pub client_identity: Option<(PathBuf, PathBuf)>,
    /// Accept any server certificate (tests only; warned about at load and start).
    pub insecure_skip_verify: bool,
}

/// Where an API key comes from. The key itself is never stored in the config.
#[derive(Debug, Clone, PartialEq)]
pub enum SecretRef {
    /// Name of an environment variable.
    Env(String),
    /// Path of a file holding the key.
    File(PathBuf),
}

/// Per-request limits, each > 0; `ttft` and `idle` never exceed `total`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    /// TCP (+TLS) connect.
    pub connect: Duration,
    /// Request sent -> first generated token.
    pub ttft: Duration,
    /// Longest allowed gap between two frames after the first token.
    pub idle: Duration,
    /// Whole request, send -> end of stream.
    pub total: Duration,
}

/// One entry of `targets:`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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

pub(super) fn targets(raws: &[RawTarget], c: &mut Checker) -> Vec<Target> {
    if raws.is_empty() {
        c.error("targets", "at least one target is required");
    }
    check_unique("targets", "target", raws.iter().map(|t| t.name.as_str()), c);
    raws.iter().enumerate().map(|(i, t)| target(&format!("targets[{i}]"), t, c)).collect()
}

fn target(path: &str, raw: &RawTarget, c: &mut Checker) -> Target {
    check_name(&format!("{path}.name"), &raw.name, c);
    let api_key = api_key(path, raw, c);
    if raw.model.as_deref() == Some("") {
        c.error(format!("{path}.model"), "must not be empty (omit it to use the first model listed by /v1/models)");
    }
    let base_url = base_url(&format!("{path}.base_url"), &raw.base_url, c);
    Target {
        name: raw.name.clone(),
        base_url,
        api: api(&format!("{path}.api"), &raw.api, c),
        model: raw.model.clone(),
        headers: headers(&format!("{path}.headers"), &raw.headers, api_key.is_some(), c),
        headers_from: headers_from(&format!("{path}.headers_from"), raw, api_key.is_some(), c),
        follow_redirects: raw.follow_redirects,
        api_key,
        timeouts: timeouts(&format!("{path}.timeouts"), &raw.timeouts, c),
        ignore_eos: raw.ignore_eos,
        stream: raw.stream,
        max_response_bytes: max_response_bytes(&format!("{path}.max_response_bytes"), raw.max_response_bytes, c),
        http_version: http_version(&format!("{path}.http_version"), &raw.http_version, c),
        tls: tls(&format!("{path}.tls"), &raw.tls, base_url_is_https(&raw.base_url), c),
        slo: super::slo::slo_override(&format!("{path}.slo"), raw.slo.as_ref(), c),
        accept_encoding: accept_encoding(&format!("{path}.accept_encoding"), raw.accept_encoding.as_deref(), c),
        replicas: super::replicas::replicas(path, raw.discover.as_ref(), raw.replicas.as_ref(), c),
    }
}

/// `accept_encoding`: codings the prober decodes; `br` and `zstd` are named as unsupported.
fn accept_encoding(path: &str, raw: Option<&[String]>, c: &mut Checker) -> Vec<ContentCoding> {
    let Some(raw) = raw else { return vec![ContentCoding::Identity] };
    if raw.is_empty() {
        c.error(path, "must name at least one coding (identity, gzip, deflate); omit it for identity");
    }
    let mut out = Vec::new();
    for (i, name) in raw.iter().enumerate() {
        match ContentCoding::parse(name) {
            Some(coding) if out.contains(&coding) => c.error(format!("{path}[{i}]"), format!("{name:?} is listed twice")),
            Some(coding) => out.push(coding),
            None => c.error(format!("{path}[{i}]"), format!("unsupported coding {name:?}: llmprobe decodes identity, gzip and deflate")),
        }
    }
    out
}

fn base_url_is_https(text: &str) -> bool {
    text.trim_start().to_ascii_lowercase().starts_with("https://")
}

fn max_response_bytes(path: &str, value: u64, c: &mut Checker) -> usize {
    const MIN: u64 = 1024;
    const MAX: u64 = 4 << 30;
    if !(MIN..=MAX).contains(&value) {
        c.error(path, format!("must be between {MIN} and {MAX} bytes, got {value}"));
    }
    usize::try_from(value.clamp(MIN, MAX)).unwrap_or(usize::MAX)
}

fn http_version(path: &str, text: &str, c: &mut Checker) -> HttpVersion {
    HttpVersion::ALL.iter().find(|(_, name)| *name == text).map(|(v, _)| *v).unwrap_or_else(|| {
        let valid: Vec<&str> = HttpVersion::ALL.iter().map(|(_, n)| *n).collect();
        c.error(path, format!("unknown http_version \"{text}\": expected one of {}", valid.join(", ")));
        HttpVersion::Auto
    })
}

fn tls(path: &str, raw: &RawTls, https: bool, c: &mut Checker) -> TlsSettings {
    let file = |name: &str, value: &Option<String>, c: &mut Checker| {
        if value.as_deref() == Some("") {
            c.error(format!("{path}.{name}"), "must not be empty");
        }
        value.as_ref().map(Into::into)
    };
    let ca_file = file("ca_file", &raw.ca_file, c);
    let cert = file("client_cert_file", &raw.client_cert_file, c);
    let key = file("client_key_file", &raw.client_key_file, c);
    let client_identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (Some(_), None) => {
            c.error(format!("{path}.client_cert_file"), "client_cert_file needs client_key_file too");
            None
        }
        (None, Some(_)) => {
            c.error(format!("{path}.client_key_file"), "client_key_file needs client_cert_file too");
            None
        }
        (None, None) => None,
    };
    if raw.insecure_skip_verify {
        c.warn(
            format!("{path}.insecure_skip_verify"),
            "server certificates are NOT verified for this target: anyone on the path can read the traffic and the API key",
        );
    }
    let set = ca_file.is_some() || client_identity.is_some() || raw.insecure_skip_verify;
    if set && !https {
        c.warn(path, "tls settings have no effect: base_url is not https://");
    }
    TlsSettings { ca_file, client_identity, insecure_skip_verify: raw.insecure_skip_verify }
}

/// Checks an http(s) URL with a host and returns it without a trailing `/`. A path prefix
/// (e.g. a proxy mount point) is kept; the API path is appended to it per request.
fn base_url(path: &str, text: &str, c: &mut Checker) -> String {
    // A URL with `user:password@` must not be echoed back.
    let shown = if text.contains('@') { "(hidden)".to_owned() } else { format!("\"{text}\"") };
    let Some(url) = c.http_url(path, text) else {
        return String::new();
    };
    if url.query().is_some() || url.fragment().is_some() {
        c.error(path, format!("invalid URL {shown}: must not have a query or fragment"));
    }
    let clean = url.as_str().trim_end_matches('/').to_owned();
    if clean.ends_with("/v1") {
        c.warn(path, "ends with /v1, but the API path (/v1/...) is appended to base_url: requests will go to /v1/v1/...");
    }
    clean
}

fn api(path: &str, text: &str, c: &mut Checker) -> ProtocolKind {
    ProtocolKind::parse(text).unwrap_or_else(|| {
        let valid: Vec<&str> = ProtocolKind::ALL.iter().map(|k| k.as_str()).collect();
        c.error(path, format!("unknown api \"{text}\": expected one of {}", valid.join(", ")));
        ProtocolKind::OpenaiChat
    })
}

/// Keeps only the reference; the secret is read at startup by whoever sends requests.
fn api_key(path: &str, raw: &RawTarget, c: &mut Checker) -> Option<SecretRef> {
    match (&raw.api_key_env, &raw.api_key_file) {
        (Some(_), Some(_)) => {
            c.error(format!("{path}.api_key_file"), "api_key_env and api_key_file are mutually exclusive: set only one");
            None
        }
        (Some(var), None) => {
            if var.is_empty() || var.contains(['=', '\0']) {
                c.error(
                    format!("{path}.api_key_env"),
                    // Not echoed: a pasted `NAME=key` would put the key in the message.
                    "invalid environment variable name: must be non-empty, without '=' or NUL",
                );
            }
            Some(SecretRef::Env(var.clone()))
        }
        (None, Some(file)) => {
            if file.is_empty() {
                c.error(format!("{path}.api_key_file"), "must not be empty");
            }
            Some(SecretRef::File(file.into()))
        }
        (None, None) => None,
    }
}

fn headers(path: &str, raw: &RawHeaders, has_api_key: bool, c: &mut Checker) -> Vec<(String, String)> {
    let mut seen: Vec<String> = Vec::new();
    for (name, value) in &raw.0 {
        let at = format!("{path}.{name}");
        let lower = name.to_ascii_lowercase();
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            c.error(&at, format!("invalid header name \"{name}\": must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)"));
        } else if HeaderValue::from_str(value).is_err() {
            c.error(&at, "invalid header value: only visible ASCII, spaces and tabs are allowed");
        }
        if has_api_key && lower == "authorization" {
            c.error(&at, "Authorization conflicts with api_key_env/api_key_file, which already send `Authorization: Bearer <key>`: remove one");
        }
        if lower == "accept-encoding" {
            c.error(&at, "set the target's accept_encoding instead (the prober must know which codings it asked for)");
        }
        if seen.contains(&lower) {
            c.error(&at, format!("header \"{name}\" is set more than once (names are case-insensitive)"));
        }
        seen.push(lower);
    }
    raw.0.clone()
}

fn headers_from(path: &str, raw: &RawTarget, has_api_key: bool, c: &mut Checker) -> Vec<(String, SecretRef)> {
    let mut out = Vec::new();
    for (name, source) in &raw.headers_from {
        let at = format!("{path}.{name}");
        let lower = name.to_ascii_lowercase();
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            c.error(&at, format!("invalid header name \"{name}\": must be an HTTP token (letters, digits, !#$%&'*+-.^_`|~)"));
        }
        if raw.headers.0.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            c.error(&at, format!("header \"{name}\" is also set in headers: set it in one place"));
        }
        if has_api_key && lower == "authorization" {
            c.error(&at, "Authorization conflicts with api_key_env/api_key_file, which already send `Authorization: Bearer <key>`: remove one");
        }
        match (&source.env, &source.file) {
            (Some(env), None) if !env.is_empty() => out.push((name.clone(), SecretRef::Env(env.clone()))),
            (None, Some(file)) if !file.is_empty() => out.push((name.clone(), SecretRef::File(file.into()))),
            _ => c.error(&at, "set exactly one of env (a variable name) or file (a path), not empty"),
        }
    }
    out
}

fn timeouts(path: &str, raw: &RawTimeouts, c: &mut Checker) -> Timeouts {
    let t = Timeouts {
        connect: c.positive_duration(&format!("{path}.connect"), &raw.connect),
        ttft: c.positive_duration(&format!("{path}.ttft"), &raw.ttft),
        idle: c.positive_duration(&format!("{path}.idle"), &raw.idle),
        total: c.positive_duration(&format!("{path}.total"), &raw.total),
    };
    // The connect runs inside the TTFT window (and the total one for non-streamed probes).
    if t.connect >= t.ttft && !t.ttft.is_zero() {
        c.warn(
            format!("{path}.connect"),
            format!(
                "connect timeout ({}) is not shorter than the ttft timeout ({}): a connect that hangs is reported as timeout_ttft, not timeout_connect",
                format_duration(t.connect),
                format_duration(t.ttft),
            ),
        );
    }
    // A zero means that one was already reported as malformed or zero.
    for (name, d) in [("ttft", t.ttft), ("idle", t.idle)] {
        if d > t.total && !t.total.is_zero() {
            c.error(
                format!("{path}.{name}"),
                format!("{name} timeout ({}) must not exceed the total timeout ({})", format_duration(d), format_duration(t.total),),
            );
        }
    }
    t
}
