//! llmprobe: a continuous open-arrival SLO prober and benchmark for LLM inference services.
//!
//! Data flows one way: config -> scheduler (arrival + workload) -> exec (protocol) -> Outcome
//! -> recorder (measure) -> sinks (Prometheus, history, summary).

pub mod app;
pub mod bench;
pub mod checks;
pub mod cli;
pub mod client;
pub mod cmd;
pub mod config;
pub mod detect;
pub mod mock;
pub mod pipeline;
pub mod probe;
pub mod protocol;
pub mod replicas;
pub mod sink;
pub mod source;
pub mod util;
pub mod workload;

use std::process::ExitCode;

use anyhow::Context;

use cli::{Cli, Command};

/// Exit code for an invalid config.
pub use cmd::config::EXIT_CONFIG;

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    init_logging(&cli.log);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let result = runtime.block_on(async move {
        match cli.command {
            Command::CheckConfig { file } => Ok(cmd::config::check(&file)),
            Command::ConfigSchema { chart_values } => cmd::config::schema(chart_values.as_deref()),
            Command::Probe(args) => cmd::probe::run(args).await,
            Command::Workload(command) => cmd::workload::run(command).await,
            Command::Mock(args) => cmd::demo::mock(args).await,
            Command::Demo(args) => cmd::demo::demo(args).await,
            Command::Bench(args) => cmd::bench::bench(args).await,
            Command::Report(args) | Command::Merge(args) => cmd::bench::report(args),
            Command::Compare(args) => cmd::bench::compare(args),
            Command::Gate(args) => cmd::gate::gate(args).await,
            Command::Capacity(args) => cmd::bench::capacity(args),
            Command::Detect(cmd) => cmd::detect::run(cmd),
            Command::Release(cmd::release::ReleaseCommand::Mark(args)) => cmd::release::mark(&args).await.map(|()| ExitCode::SUCCESS),
            Command::Release(cmd::release::ReleaseCommand::Wait(args)) => cmd::release::wait(&args).await,
        }
    });
    // Whatever was awaited is done; a blocking task still running (a config being parsed for a
    // reload that a signal cut short) must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .with_target(false)
        // Server text (model ids, error messages) must not start a log line of its own.
        .fmt_fields(util::logsafe::EscapedFields)
        .try_init();
}
