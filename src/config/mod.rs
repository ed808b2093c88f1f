//! Configuration: YAML text -> `RawConfig` (serde, `deny_unknown_fields`) -> validated `Config`.
//! Every problem is reported as a `ConfigIssue { path, line, message }`.
//!
//! The validated types below are the contract the rest of the crate reads.
//!
//! Files: `raw.rs` (stage 1: serde structs and defaults), `validate.rs` and `target.rs`
//! (stage 2: every check), `telemetry.rs` (the `tracing:` and `sources:` sections), `duration.rs`
//! (`250ms`-style durations), `locate.rs` (path -> line), `bench.rs` (the `bench:` section).
//! The file format is documented in `config/README.md`.

mod bench;
mod duration;
mod locate;
mod raw;
mod target;
mod telemetry;
mod validate;

use std::fmt;

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::protocol::ProtocolKind;

pub use bench::{ArrivalKind, Bench, BenchMode, Matrix};
pub use duration::parse_duration;
pub use telemetry::{OtlpProtocol, Tracing};

/// The built-in configuration used by `llmprobe demo` (probes the bundled mock engine).
pub const DEMO_YAML: &str = include_str!("../../config/demo.yaml");

/// Reads and validates a configuration file. A read failure is reported like any other
/// issue, with an empty path.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &file),
        Err(e) => Err(ConfigErrors {
            file,
            issues: vec![ConfigIssue {
                path: String::new(),
                line: None,
                message: format!("cannot read config file: {e}"),
            }],
        }),
    }
}

/// Parses and validates configuration text. `file` is only used in messages.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    let fail = |issues| ConfigErrors {
        file: file.to_owned(),
        issues,
    };
    // The YAML library reports a syntax error only after handing out the events before it, so
    // a broken file could first show up as a confusing "missing field". Check syntax first.
    if let Err(e) = serde::de::IgnoredAny::deserialize(serde_norway::Deserializer::from_str(text)) {
        return Err(fail(vec![locate::syntax_issue(&e)]));
    }
    let de = serde_norway::Deserializer::from_str(text);
    let raw: raw::RawConfig =
        serde_path_to_error::deserialize(de).map_err(|e| fail(vec![locate::serde_issue(e)]))?;
    let mut checker = validate::Checker::default();
    let mut config = validate::validate(&raw, &mut checker);
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
}

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
    pub timeouts: Timeouts,
    /// Send `ignore_eos: true` so output length equals `max_tokens` (vLLM, SGLang accept it).
    pub ignore_eos: bool,
    /// Streaming request (default). `false`: one JSON answer, E2E only (no TTFT/TPOT/ITL).
    pub stream: bool,
    /// Largest accepted response body per request, bytes.
    pub max_response_bytes: usize,
    pub http_version: HttpVersion,
    pub tls: TlsSettings,
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
    pub const ALL: [(HttpVersion, &'static str); 3] = [
        (HttpVersion::Auto, "auto"),
        (HttpVersion::Http1, "http1"),
        (HttpVersion::Http2PriorKnowledge, "http2-prior-knowledge"),
    ];
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
    /// Resolved arrival rate per target, requests per second (> 0).
    pub rate: f64,
    /// Prompt length in tokens.
    pub input_tokens: LengthSpec,
    /// Requested output length (`max_tokens`).
    pub output_tokens: LengthSpec,
}

/// A token count: fixed, or uniform in an inclusive range; always within 1..=1_000_000.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LengthSpec {
    Fixed(u32),
    Range { min: u32, max: u32 },
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
