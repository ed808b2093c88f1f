//! The continuous prober end to end over loopback: scheduling, replicas, reloads, its own server,
//! detection, metrics and OTLP export.
//! One test binary for the group: the crate is linked once, not once per file.

#[path = "../common/mod.rs"]
mod common;
#[path = "../metrics_common/mod.rs"]
mod metrics_common;
#[path = "../otlp_receiver/mod.rs"]
mod otlp_receiver;
#[path = "../props/mod.rs"]
mod props;

mod agent_loops;
mod arrival_fidelity;
mod behaviour_checks;
mod discover_dns;
mod discover_kubernetes;
mod discover_props;
mod jsonl_export;
mod metrics_contract;
mod metrics_golden;
mod metrics_summary;
mod otlp_export;
mod otlp_metrics;
mod otlp_real_vllm;
mod probe_log;
mod probe_mock;
mod probe_protocols;
mod probe_shards;
mod release_detection;
mod reload;
mod reload_by_target;
mod replicas_discovery;
mod rollouts_analysis;
mod sequences;
mod server_http;
mod server_limits;
mod slo_overrides;
mod tracing_env;
