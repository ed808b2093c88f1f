//! Stage 1: the YAML file as written, deserialized with serde.
//!
//! Every struct denies unknown fields so a typo is an error, not a silently ignored key. Values
//! that need checks beyond their YAML type (durations, URLs, api names, ranges) are kept loosely
//! typed here and checked in `validate.rs`, so that one file with many mistakes reports them all
//! at once instead of stopping at the first.
//!
//! The `///` comments on these fields are the user documentation of the format (see
//! `config/README.md`).

use serde::Deserialize;
use serde::de;

use super::duration::RawDuration;
use super::raw_workload::{RawArrival, RawScenario};
use super::slo::RawSlo;
use super::target::RawTarget;

/// The whole file.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with the sections listen, probe, targets, scenarios, slo, tracing, jsonl, sources, bench, detect, checks")]
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
    #[schemars(with = "Option<RawSlo>")]
    pub slo: RawSlo,
    /// OTLP trace and metric export and exemplars (`config/README.md` "tracing"). An empty
    /// section is the same as none.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(with = "Option<super::telemetry::RawTracing>")]
    pub tracing: super::telemetry::RawTracing,
    /// Each probe as a JSON line in a file (`config/README.md` "jsonl"). An empty section is the
    /// same as none.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(with = "Option<super::jsonl::RawJsonl>")]
    pub jsonl: super::jsonl::RawJsonl,
    /// Engine and GPU telemetry scraped alongside the probes (`config/README.md` "sources").
    #[serde(default)]
    pub sources: Vec<super::telemetry::RawSource>,
    /// Benchmark mode (`llmprobe bench`); ignored by the prober.
    pub bench: Option<super::bench::RawBench>,
    /// The release-regression detector (`config/README.md` "detect"). An empty section is the
    /// same as none: the detector on with its defaults.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(with = "Option<super::detect::RawDetect>")]
    pub detect: super::detect::RawDetect,
    /// Behaviour checks for every scenario without its own `checks:` (`config/README.md`
    /// "checks"). An empty section is the same as none.
    #[serde(default, deserialize_with = "null_as_default")]
    pub checks: super::checks::RawChecks,
}

/// An empty YAML value (`slo:` with nothing after it) reads as the section's default.
fn null_as_default<'de, D: de::Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

fn default_listen() -> String {
    "127.0.0.1:9464".to_owned()
}

/// `probe:` section.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Deserialize, schemars::JsonSchema)]
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
