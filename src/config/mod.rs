//! Configuration: YAML text -> `RawConfig` (serde, `deny_unknown_fields`) -> validated `Config`.
//! Every problem is reported as a `ConfigIssue { path, line, message }`.
//!
//! The validated types below are the contract the rest of the crate reads.
//!
//! Files: `raw.rs` (stage 1: serde structs and defaults), `validate.rs` and `target.rs`
//! (stage 2: every check), `telemetry.rs` (the `tracing:` and `sources:` sections), `duration.rs`
//! (`250ms`-style durations), `locate.rs` (path -> line), `bench.rs` (the `bench:` section),
//! `slo.rs` (per-target and per-scenario SLO overrides).
//! The file format is documented in `config/README.md`.

mod bench;
mod detect;
mod duration;
mod locate;
mod raw;
mod raw_workload;
mod replicas;
mod slo;
mod target;
mod telemetry;
mod validate;
mod workload;

use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::protocol::ProtocolKind;
use crate::workload::Dataset;

pub use bench::{Bench, BenchMode, Matrix};
pub use detect::Detect;
pub use duration::{MAX_DURATION, format_duration, parse_duration};
pub use replicas::{ReplicaRate, Replicas};
pub use slo::{SloOverride, SloTable};
pub use telemetry::{OtlpProtocol, Tracing};

/// The built-in configuration used by `llmprobe demo` (probes the bundled mock engine).
pub const DEMO_YAML: &str = include_str!("../../config/demo.yaml");

/// Reads and validates a configuration file. A read failure is reported like any other
/// issue, with an empty path.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &file),
        Err(e) => Err(ConfigErrors { file, issues: vec![ConfigIssue { path: String::new(), line: None, message: format!("cannot read config file: {e}") }] }),
    }
}

/// Parses and validates configuration text. `file` is only used in messages.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    let fail = |issues| ConfigErrors { file: file.to_owned(), issues };
    // The YAML library reports a syntax error only after handing out the events before it, so
    // a broken file could first show up as a confusing "missing field". Check syntax first.
    if let Err(e) = serde::de::IgnoredAny::deserialize(serde_norway::Deserializer::from_str(text)) {
        return Err(fail(vec![locate::syntax_issue(&e)]));
    }
    let de = serde_norway::Deserializer::from_str(text);
    let raw: raw::RawConfig = serde_path_to_error::deserialize(de).map_err(|e| fail(vec![locate::serde_issue(e)]))?;
    let mut checker = validate::Checker::default();
    let base_dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut config = validate::validate(&raw, base_dir, &mut checker);
    let with_lines = |mut issues: Vec<ConfigIssue>| {
        for issue in &mut issues {
            issue.line = locate::line_of(text, &issue.path);
        }
        // File order reads best; issues without a line keep their relative order at the end.
        issues.sort_by_key(|i| i.line.unwrap_or(usize::MAX));
        issues
    };
    if !checker.errors.is_empty() {
        return Err(fail(with_lines(checker.errors)));
    }
    config.warnings = with_lines(checker.warnings);
    Ok(config)
}

/// The built-in demo configuration, validated.
pub fn demo() -> Config {
    match parse(DEMO_YAML, "config/demo.yaml") {
        Ok(config) => config,
        // Covered by tests; a broken built-in file is a build defect, not a user error.
        Err(e) => panic!("built-in demo config is invalid:\n{e}"),
    }
}

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Where in the document, e.g. `targets[1].timeouts.ttft`; empty for the whole file.
    pub path: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// What is wrong, and when useful what is expected. Never contains a secret.
    pub message: String,
}

impl ConfigIssue {
    /// Formats as `path: message (file:line)`.
    pub fn display_in<'a>(&'a self, file: &'a str) -> impl fmt::Display + 'a {
        struct In<'a>(&'a ConfigIssue, &'a str);
        impl fmt::Display for In<'_> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                let (issue, file) = (self.0, self.1);
                if !issue.path.is_empty() {
                    write!(f, "{}: ", issue.path)?;
                }
                match issue.line {
                    Some(line) => write!(f, "{} ({file}:{line})", issue.message),
                    None => write!(f, "{} ({file})", issue.message),
                }
            }
        }
        In(self, file)
    }
}

/// Formats as `path: message (line N)`; use `display_in` to name the file.
impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        match self.line {
            Some(line) => write!(f, " (line {line})"),
            None => Ok(()),
        }
    }
}

/// Every problem found in one file; the file is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    /// The file as named by the caller.
    pub file: String,
    /// At least one issue, in file order.
    pub issues: Vec<ConfigIssue>,
}

/// One line per issue: `path: message (file:line)`.
impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}", issue.display_in(&self.file))?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address of the prober's own HTTP server (/metrics, /healthz, /readyz).
    pub listen: SocketAddr,
    pub probe: ProbeSettings,
    pub targets: Vec<Target>,
    pub scenarios: Vec<Scenario>,
    pub slo: Slo,
    /// OTLP trace export (`tracing:`); `OTEL_*` variables fill what is not set.
    pub tracing: Tracing,
    /// Engine and GPU telemetry sources (`sources:`).
    pub sources: Vec<crate::source::SourceSpec>,
    /// The `bench:` section, when present (`llmprobe bench` needs it; the prober ignores it).
    pub bench: Option<Bench>,
    /// The release-regression detector (`detect:`).
    pub detect: Detect,
    /// Non-fatal findings (e.g. an in-flight cap that may drop probes), in file order.
    pub warnings: Vec<ConfigIssue>,
}

/// Settings shared by all targets (`probe:`). The shared rate is already resolved into each
/// `Scenario::rate`.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// RNG seed for arrivals and workload sampling; `None` = from entropy.
    pub seed: Option<u64>,
    /// In-flight cap per target; a probe due while the cap is reached is dropped and counted.
    pub max_in_flight: usize,
    /// How long in-flight probes may run after shutdown starts before they count as `cancelled`.
    pub shutdown_grace: Duration,
    /// How often each target's model and engine version are re-read (release marker).
    pub discovery_interval: Duration,
    /// This prober's share of the schedule (`index` of `count`); scenario rates are already
    /// divided by `count`.
    pub shard: Shard,
    /// The `prober` label on every series (vantage point), when set.
    pub prober: Option<String>,
}

/// Shard `index` (from 0) of `count` probers sharing one schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// `I/N`, e.g. `0/3` (from the command line or `LLMPROBE_SHARD`).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("invalid shard {text:?}: expected INDEX/COUNT with INDEX below COUNT, e.g. 0/3");
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        if count == 0 || index >= count || count as u64 > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Config {
    /// Command-line overrides of `probe.shard` and `probe.prober` (a StatefulSet passes the
    /// pod's index): the scenario rates follow the new shard count.
    pub fn override_probe(&mut self, shard: Option<Shard>, prober: Option<&str>) {
        if let Some(s) = shard {
            let scale = self.probe.shard.count as f64 / s.count as f64;
            for scenario in &mut self.scenarios {
                scenario.rate *= scale;
            }
            self.probe.shard = s;
        }
        if let Some(p) = prober {
            self.probe.prober = Some(p.to_owned());
        }
    }
}

/// Most probers that may share one schedule.
pub const MAX_SHARDS: u64 = 1000;

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
    pub accept_encoding: Vec<crate::protocol::coding::ContentCoding>,
    /// Replica discovery (`discover:` and `replicas:`); `None` probes `base_url` only.
    pub replicas: Option<Replicas>,
}

impl Target {
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

/// One request shape sent to every target at its own arrival rate.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Unique, `[a-zA-Z0-9_.-]+`; the `scenario` label.
    pub name: String,
    /// Resolved mean arrival rate per target, requests per second (> 0).
    pub rate: f64,
    /// Prompt length in tokens (unused when `dataset` is set: its prompts are sent as they are).
    pub input_tokens: LengthSpec,
    /// Requested output length (`max_tokens`); for a dataset, used by entries without their own.
    pub output_tokens: LengthSpec,
    /// How send times are drawn.
    pub arrival: ArrivalSpec,
    /// Shared prompt prefix; `None` = every prompt starts with a unique nonce.
    pub prefix: Option<PrefixSpec>,
    /// Replayed prompts instead of synthetic ones.
    pub dataset: Option<Arc<Dataset>>,
    /// vLLM `cache_salt` body field (prefix-cache isolation per trust group).
    pub cache_salt: Option<String>,
    /// `slo:` fields replacing the target's and the global ones for this scenario.
    pub slo: SloOverride,
}

impl Scenario {
    /// A synthetic-prompt scenario with Poisson arrivals and no prefix sharing.
    pub fn synthetic(name: &str, rate: f64, input_tokens: LengthSpec, output_tokens: LengthSpec) -> Self {
        Scenario {
            name: name.to_owned(),
            rate,
            input_tokens,
            output_tokens,
            arrival: ArrivalSpec::default(),
            prefix: None,
            dataset: None,
            cache_salt: None,
            slo: SloOverride::default(),
        }
    }
}

/// A token-count distribution; every draw is clamped to `min..=max` (1..=1_000_000).
#[derive(Debug, Clone, PartialEq)]
pub enum LengthSpec {
    Fixed(u32),
    /// Uniform on the inclusive range.
    Uniform {
        min: u32,
        max: u32,
    },
    /// Normal, truncated to `min..=max` (redrawn, not piled up on the bounds).
    Normal {
        mean: f64,
        stddev: f64,
        min: u32,
        max: u32,
    },
    /// e^N(mu, sigma²), truncated to `min..=max`.
    LogNormal {
        mu: f64,
        sigma: f64,
        min: u32,
        max: u32,
    },
    /// Observed values with weights (> 0).
    Empirical {
        bins: Vec<(u32, f64)>,
    },
    /// One component per draw, picked by weight (> 0), then clamped to `min..=max`.
    Mixture {
        components: Vec<(f64, LengthSpec)>,
        min: u32,
        max: u32,
    },
}

/// How a scenario's send times are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ArrivalSpec {
    pub kind: ArrivalKind,
    pub diurnal: Option<Diurnal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum ArrivalKind {
    #[default]
    Poisson,
    /// Gamma-distributed gaps with shape `burstiness` (CV² = 1 / burstiness; 1 = Poisson).
    Gamma { burstiness: f64 },
    /// Evenly spaced.
    Constant,
}

/// Sinusoidal rate modulation: rate × (1 + amplitude × cos(2π (t − peak_at) / period)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Diurnal {
    pub period: Duration,
    /// In [0, 1).
    pub amplitude: f64,
    pub peak_at: Duration,
}

/// A shared prompt prefix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixSpec {
    /// Prefix length in tokens (part of the input length).
    pub tokens: u32,
    /// Fraction of requests with a shared prefix, in [0, 1].
    pub share: f64,
    /// Number of different prefixes (>= 1).
    pub distinct: u32,
}

/// Latency objectives; a request is "good" when it succeeded and meets every set threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// Time to first token.
    pub ttft: Option<Duration>,
    /// Time per output token after the first.
    pub tpot: Option<Duration>,
    /// End-to-end latency.
    pub e2e: Option<Duration>,
    /// Goodput objective, a ratio in (0, 1), e.g. 0.99.
    pub objective: f64,
}

#[cfg(test)]
mod tests;
