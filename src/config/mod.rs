//! Configuration: YAML text -> `RawConfig` (serde, `deny_unknown_fields`) -> validated `Config`.
//! Every problem is reported as a `ConfigIssue { path, line, message }`. Config imports nothing
//! else of the crate: the kinds it names live here, and what it names but does not own (dataset
//! files, mock profiles) is resolved through `Resolvers` by the modules that own it.
//!
//! Files, bottom up (each names only files above it in this list):
//! `demo.rs` (the built-in demo config), `duration.rs` (`250ms`-style durations), `kinds.rs` (API, coding, engine and source kinds),
//! `dataset.rs` (replayed prompts as data), `check.rs` (issues, the `Checker`, common checks),
//! `bounds.rs` (size, depth and alias limits checked before the YAML is parsed),
//! `locate.rs` (path -> line); one file per section, each with its YAML form, its validated form
//! and its checks: `slo.rs`, `replicas.rs`, `bench.rs`, `detect.rs`, `target.rs`,
//! `telemetry.rs` (`tracing:`, `sources:`), `jsonl.rs` (`jsonl:`), `checks.rs` (`checks:`), `reasoning.rs` (a scenario's
//! `reasoning:`), `agent.rs` (a scenario's `agent:`), `sequence.rs` (a scenario's `turns:`, `cache_pair:` or `agent:`), `raw_workload.rs` and
//! `workload.rs` (scenarios); then `raw.rs` (the whole file as written), `schema.rs` (its JSON
//! Schema), `model.rs` (the whole validated `Config`),
//! `validate.rs` (the file-wide checks) and `load.rs` (`load`, `parse`).
//! The file format is documented in `config/README.md`.

mod agent;
mod bench;
mod bounds;
mod check;
mod checks;
mod dataset;
mod demo;
mod detect;
mod duration;
mod expect;
mod jsonl;
mod kinds;
mod load;
mod locate;
mod model;
mod raw;
mod raw_workload;
mod reasoning;
mod replicas;
mod schema;
mod sequence;
pub mod series;
mod slo;
mod target;
mod telemetry;
mod validate;
mod workload;

pub use agent::{Agent, AgentTool, MAX_STEPS as MAX_AGENT_STEPS};
pub use bench::{Bench, BenchMode, Matrix};
pub use bounds::{MAX_ALIASES, MAX_CONFIG_BYTES, MAX_DEPTH, MAX_NODES};
pub use check::{ConfigErrors, ConfigIssue, MAX_IN_FLIGHT, MAX_RATE, MAX_SHOWN_ISSUES, MIN_RATE, Resolvers};
pub use checks::{Checks, Expect, KnownAnswer, Schema, ToolCallCheck, ToolChoice};
pub use dataset::{Dataset, DatasetEntry, DatasetFormat, DatasetOrder, ReadDataset};
pub use demo::DEMO_YAML;
pub use detect::{Detect, DetectSettings, MAX_HISTORY_BINS};
pub use duration::{MAX_DURATION, format_duration, parse_duration};
pub use jsonl::Jsonl;
pub use kinds::{Carries, ContentCoding, EngineKind, ProtocolKind, SourceKind};
pub use load::{load, parse};
pub use model::{Config, MAX_SHARDS, ProbeSettings, Shard};
pub use reasoning::{Reasoning, ReasoningEffort};
pub use replicas::{ApiAccess, DiscoverSpec, KubernetesSpec, PortRef, ReplicaRate, Replicas};
pub use schema::{CHART_CONFIG_DEF, chart_values_schema, config_json_schema};
pub use sequence::MAX_TURNS;
pub use slo::{Slo, SloOverride, SloTable};
pub use target::{DEFAULT_MAX_RESPONSE_BYTES, HttpVersion, SecretRef, Target, Timeouts, TlsSettings};
pub use telemetry::{GpuFilter, OtlpProtocol, SourceSpec, Tracing};
pub use workload::{ArrivalKind, ArrivalSpec, Diurnal, LengthSpec, PrefixSpec, Scenario, Sequence, TurnSpec};

#[cfg(test)]
mod tests;
