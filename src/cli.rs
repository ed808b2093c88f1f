//! Command line: the commands and their one-line help; each command's flags live with it in
//! `cmd/` (`probe`, `workload`, `demo`, `bench` with `report`/`merge`/`compare`/`capacity`, `gate`,
//! `detect`, `release`), the mock's in `mock`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::mock::MockArgs;

/// Continuous open-arrival SLO prober for LLM inference services.
///
/// Sends low-rate synthetic traffic to OpenAI-compatible endpoints (vLLM, SGLang, llama.cpp, ...)
/// and exports TTFT, TPOT, ITL, E2E, goodput and classified errors as Prometheus metrics.
#[derive(Debug, Parser)]
#[command(name = "llmprobe", version, propagate_version = true)]
pub struct Cli {
    /// Log filter (tracing syntax), e.g. `info`, `llmprobe=debug`.
    #[arg(long, global = true, env = "LLMPROBE_LOG", default_value = "info")]
    pub log: String,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Probe the configured targets continuously and serve /metrics.
    Probe(crate::cmd::probe::ProbeArgs),
    /// Validate a config file: prints every problem as `path: message (file:line)`; exit 2 if invalid.
    CheckConfig {
        /// The YAML config file.
        file: PathBuf,
    },
    /// Print the JSON Schema of the config file, derived from the types the loader reads it with.
    ConfigSchema {
        /// Print this Helm values.schema.json with its config part (`$defs`) regenerated instead.
        #[arg(long, value_name = "FILE")]
        chart_values: Option<PathBuf>,
    },
    /// Inspect the traffic a config sends.
    #[command(subcommand)]
    Workload(crate::cmd::workload::WorkloadCommand),
    /// Run the built-in mock engine (a simulated OpenAI-compatible server with vLLM metrics).
    Mock(MockArgs),
    /// Run the mock engine and the prober together with the built-in demo config.
    Demo(crate::cmd::demo::DemoArgs),
    /// Benchmark one target: a concurrency or rate sweep with warm-up and repeats (`bench:` config).
    Bench(crate::cmd::bench::BenchArgs),
    /// Write report.md and report.html (inline SVG plots) for result directories; merges several.
    Report(crate::cmd::bench::ReportArgs),
    /// Merge the shard directories of one sharded run (`bench --shard`) into one result: the same
    /// as `report` over them, which checks run id, config and shard count and names a missing shard.
    Merge(crate::cmd::bench::ReportArgs),
    /// Release gate: compare two results; exit 1 if goodput, throughput or latency regressed.
    Compare(crate::cmd::bench::CompareArgs),
    /// Two deployments side by side: the same workload to a baseline and a candidate, judged pair
    /// by pair; exit 0 passed, 1 regressed, 3 inconclusive.
    Gate(crate::cmd::gate::GateArgs),
    /// Capacity planner: memory- and compute-bound concurrency, demand vs supply, cost per 1M good tokens.
    Capacity(crate::cmd::bench::CapacityArgs),
    /// Release regression detection: `simulate` sizes the probe rate (detection power, false alarms).
    #[command(subcommand)]
    Detect(crate::cmd::detect::DetectCommand),
    /// Release markers: `mark` tells a running prober that a target was released (for CI/CD).
    #[command(subcommand)]
    Release(crate::cmd::release::ReleaseCommand),
}
