//! Command line: `probe`, `check-config`, `workload`, `mock`, `demo`, and the bench-mode commands
//! (`bench`, `report`, `compare`, `capacity`; their flags live in `bench::cmd`), and `detect`
//! (flags in `cmd::detect`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
    Probe(ProbeArgs),
    /// Validate a config file: prints every problem as `path: message (file:line)`; exit 2 if invalid.
    CheckConfig {
        /// The YAML config file.
        file: PathBuf,
    },
    /// Inspect the traffic a config sends.
    #[command(subcommand)]
    Workload(WorkloadCommand),
    /// Run the built-in mock engine (a simulated OpenAI-compatible server with vLLM metrics).
    Mock(MockArgs),
    /// Run the mock engine and the prober together with the built-in demo config.
    Demo(DemoArgs),
    /// Benchmark one target: a concurrency or rate sweep with warm-up and repeats (`bench:` config).
    Bench(crate::bench::cmd::BenchArgs),
    /// Write report.md and report.html (inline SVG plots) for result directories; merges several.
    Report(crate::bench::cmd::ReportArgs),
    /// Merge the shard directories of one sharded run (`bench --shard`) into one result: the same
    /// as `report` over them, which checks run id, config and shard count and names a missing shard.
    Merge(crate::bench::cmd::ReportArgs),
    /// Release gate: compare two results; exit 1 if goodput, throughput or latency regressed.
    Compare(crate::bench::cmd::CompareArgs),
    /// Capacity planner: memory- and compute-bound concurrency, demand vs supply, cost per 1M good tokens.
    Capacity(crate::bench::cmd::CapacityArgs),
    /// Release regression detection: `simulate` sizes the probe rate (detection power, false alarms).
    #[command(subcommand)]
    Detect(crate::cmd::detect::DetectCommand),
    /// Release markers: `mark` tells a running prober that a target was released (for CI/CD).
    #[command(subcommand)]
    Release(ReleaseCommand),
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The YAML config file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Send one probe per target and scenario, print each timeline, and exit (1 if any failed).
    #[arg(long)]
    pub once: bool,
    /// Serve `POST /-/reload` (off by default, as in Prometheus: anyone who can reach the port
    /// could otherwise make the prober re-read its file).
    #[arg(long = "web.enable-lifecycle")]
    pub web_enable_lifecycle: bool,
    /// This prober's share of the schedule, `INDEX/COUNT` (overrides `probe.shard`): COUNT
    /// probers with one config together send the configured rate.
    #[arg(long, env = "LLMPROBE_SHARD", value_parser = crate::config::Shard::parse)]
    pub shard: Option<crate::config::Shard>,
    /// This prober's name, the `prober` label on every series (overrides `probe.prober`).
    #[arg(long, env = "LLMPROBE_PROBER")]
    pub prober: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ReleaseCommand {
    /// POST a release marker to a running prober's /api/v1/releases (it arms the detector).
    Mark(ReleaseMarkArgs),
}

#[derive(Debug, Args)]
#[command(disable_version_flag = true)]
pub struct ReleaseMarkArgs {
    /// The prober's base URL, e.g. http://llmprobe:9464.
    #[arg(long)]
    pub url: String,
    /// The target name as in the prober's config.
    #[arg(long)]
    pub target: String,
    /// The version released (image tag, git revision, ...).
    #[arg(long)]
    pub version: String,
    /// A short note (change ticket, pipeline id).
    #[arg(long)]
    pub note: Option<String>,
    /// File holding the bearer token (the prober's detect.release_token_file).
    #[arg(long, env = "LLMPROBE_RELEASE_TOKEN_FILE")]
    pub token_file: PathBuf,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Serve the prober's /metrics here instead of the demo config's address.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Seconds between the printed one-line summaries.
    #[arg(long, default_value_t = 5)]
    pub summary_every: u64,
}

#[derive(Debug, Subcommand)]
pub enum WorkloadCommand {
    /// Print what a config will send: scenarios, rates, length distributions (sampled means,
    /// p50/p90/p99, histograms) and the tokens/s the probe adds to each target.
    Preview {
        /// The YAML config file.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Send synthetic prompts of given lengths to one server and print how close its prompt
    /// token count (usage) came to each, and whether output length equalled max_tokens.
    Accuracy(AccuracyArgs),
}

#[derive(Debug, Args)]
pub struct AccuracyArgs {
    /// Server base URL, e.g. http://127.0.0.1:8000.
    #[arg(long)]
    pub base_url: String,
    /// API family: openai-completions or openai-chat.
    #[arg(long, default_value = "openai-completions")]
    pub api: String,
    /// Model name; discovered from /v1/models when omitted.
    #[arg(long)]
    pub model: Option<String>,
    /// Requested prompt lengths in tokens, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,512,2000")]
    pub lengths: Vec<u32>,
    /// Requested output tokens (max_tokens, with ignore_eos).
    #[arg(long, default_value_t = 8)]
    pub output: u32,
    /// Probes per length.
    #[arg(long, default_value_t = 6)]
    pub probes: usize,
    /// Leading probes per length not held to the tolerance.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Skip /tokenize and learn from usage only (as for a server without it).
    #[arg(long)]
    pub no_tokenize: bool,
}
