//! Configuration: YAML text -> `RawConfig` (serde, `deny_unknown_fields`) -> validated `Config`.
//! Every problem is reported as a `ConfigIssue { path, line, message }`.
//!
//! The validated types below are the contract the rest of the crate reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::protocol::ProtocolKind;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address of the prober's own HTTP server (/metrics, /healthz, /readyz).
    pub listen: SocketAddr,
    pub probe: ProbeSettings,
    pub targets: Vec<Target>,
    pub scenarios: Vec<Scenario>,
    pub slo: Slo,
}

#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// RNG seed for arrivals and workload sampling; `None` = from entropy.
    pub seed: Option<u64>,
    /// In-flight cap per target; a probe due while the cap is reached is dropped and counted.
    pub max_in_flight: usize,
    /// How long in-flight probes may run after shutdown starts before they count as `cancelled`.
    pub shutdown_grace: Duration,
}

#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    /// Base URL without the API path, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    pub api: ProtocolKind,
    /// `None`: discover from `GET {base_url}/v1/models` (first model).
    pub model: Option<String>,
    pub api_key: Option<SecretRef>,
    /// Extra request headers (name, value), sent on every probe.
    pub headers: Vec<(String, String)>,
    pub timeouts: Timeouts,
    /// Send `ignore_eos: true` so output length equals `max_tokens` (vLLM, SGLang accept it).
    pub ignore_eos: bool,
}

/// Where an API key comes from. The key itself is never stored in the config.
#[derive(Debug, Clone, PartialEq)]
pub enum SecretRef {
    Env(String),
    File(PathBuf),
}

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

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// Resolved arrival rate per target, requests per second (> 0).
    pub rate: f64,
    pub input_tokens: LengthSpec,
    pub output_tokens: LengthSpec,
}

/// A token count: fixed, or uniform in an inclusive range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LengthSpec {
    Fixed(u32),
    Range { min: u32, max: u32 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub ttft: Option<Duration>,
    pub tpot: Option<Duration>,
    pub e2e: Option<Duration>,
    /// Goodput objective, a ratio in (0, 1), e.g. 0.99.
    pub objective: f64,
}
