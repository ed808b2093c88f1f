//! llmprobe: a continuous open-arrival SLO prober and benchmark for LLM inference services.
//!
//! Data flows one way: config -> scheduler (arrival + workload) -> exec (protocol) -> Outcome
//! -> recorder (measure) -> sinks (Prometheus, history, summary).

pub mod app;
pub mod arrival;
pub mod bench;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod deadline;
pub mod detect;
pub mod discover;
pub mod exec;
pub mod health;
pub mod loader;
pub mod measure;
pub mod mock;
pub mod once;
pub mod outcome;
pub mod protocol;
pub mod recorder;
pub mod release;
pub mod replicas;
pub mod rfc3339;
pub mod scheduler;
pub mod secret;
pub mod server;
pub mod sink;
pub mod source;
pub mod stats;
pub mod target;
pub mod tokenize;
pub mod trace;
pub mod version;
pub mod workload;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use cli::{Cli, Command};

/// Exit code for an invalid config.
pub const EXIT_CONFIG: u8 = 2;

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    init_logging(&cli.log);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::CheckConfig { file } => Ok(match loader::load(&file) {
                Ok(cfg) => {
                    for w in &cfg.warnings {
                        eprintln!("warning: {w}");
                    }
                    println!("{}: ok ({} targets, {} scenarios)", file.display(), cfg.targets.len(), cfg.scenarios.len());
                    ExitCode::SUCCESS
                }
                Err(errors) => config_failed(&errors),
            }),
            Command::Probe(args) => {
                let mut cfg = match loader::load(&args.config) {
                    Ok(cfg) => cfg,
                    Err(errors) => return Ok(config_failed(&errors)),
                };
                cfg.override_probe(args.shard, args.prober.as_deref());
                if args.once {
                    let mut text = String::new();
                    let ok = once::run(&cfg, &mut text).await?;
                    print!("{text}");
                    return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
                }
                let overrides = app::ProbeOverrides { shard: args.shard, prober: args.prober.clone() };
                let options = app::RunOptions { lifecycle: args.web_enable_lifecycle, overrides, ..app::RunOptions::default() };
                app::run_until_signal(cfg, Some(&args.config), options).await
            }
            Command::Workload(cmd) => workload_command(cmd).await,
            Command::Mock(args) => {
                let shutdown = CancellationToken::new();
                app::cancel_on_signals(shutdown.clone());
                let listener = tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
                tracing::info!("mock engine listening on http://{}", listener.local_addr()?);
                mock::serve(listener, args.options(), shutdown).await?;
                Ok(ExitCode::SUCCESS)
            }
            Command::Demo(args) => demo(args).await,
            Command::Bench(args) => bench::cmd::bench(args).await,
            Command::Report(args) | Command::Merge(args) => bench::cmd::report(args),
            Command::Compare(args) => bench::cmd::compare(args),
            Command::Capacity(args) => bench::cmd::capacity(args),
            Command::Detect(cmd) => cmd::detect::run(cmd),
            Command::Release(cli::ReleaseCommand::Mark(args)) => release::post_marker(&args).await.map(|()| ExitCode::SUCCESS),
        }
    })
}

async fn workload_command(cmd: cli::WorkloadCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        cli::WorkloadCommand::Preview { config: file } => match loader::load(&file) {
            Ok(cfg) => {
                print!("{}", workload::preview::render(&cfg));
                Ok(ExitCode::SUCCESS)
            }
            Err(errors) => Ok(config_failed(&errors)),
        },
        cli::WorkloadCommand::Accuracy(args) => {
            let yaml = format!(
                "targets: [{{name: accuracy, base_url: {:?}, api: {:?}{}}}]\nscenarios: [{{name: accuracy, input_tokens: 1, output_tokens: 1}}]\n",
                args.base_url,
                args.api,
                args.model.as_ref().map(|m| format!(", model: {m:?}")).unwrap_or_default(),
            );
            let cfg = match loader::parse(&yaml, "command line") {
                Ok(cfg) => cfg,
                Err(errors) => return Ok(config_failed(&errors)),
            };
            let target = cfg.targets[0].clone();
            let report = cmd::accuracy::check(target, &args.lengths, args.output, args.probes, args.warmup, !args.no_tokenize).await?;
            print!("{}", cmd::accuracy::render(&report));
            let ok = report.rows.iter().all(|r| r.within_tolerance(report.warmup) && r.failures.is_empty());
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

fn config_failed(errors: &config::ConfigErrors) -> ExitCode {
    eprintln!("{errors}");
    ExitCode::from(EXIT_CONFIG)
}

/// The embedded default: the mock engine where the demo config's target points, plus the prober.
async fn demo(args: cli::DemoArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = loader::demo();
    if let Some(listen) = args.listen {
        cfg.listen = listen;
    }
    let mock_addr = mock_address(&cfg.targets[0].base_url)?;
    let listener = tokio::net::TcpListener::bind(mock_addr).await.with_context(|| format!("binding the mock engine to {mock_addr}"))?;
    let mock_stop = CancellationToken::new();
    let mock_task = tokio::spawn(mock::serve(listener, mock::MockOptions::default(), mock_stop.clone()));
    println!("llmprobe demo: mock engine on http://{mock_addr}, metrics on http://{}/metrics (Ctrl-C to stop)", cfg.listen);
    let options = app::RunOptions { summary_every: Some(Duration::from_secs(args.summary_every.max(1))), ..app::RunOptions::default() };
    let code = app::run_until_signal(cfg, None, options).await;
    mock_stop.cancel();
    let _ = mock_task.await;
    code
}

fn mock_address(base_url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let rest = base_url.strip_prefix("http://").context("the demo target must be plain http")?;
    rest.trim_end_matches('/').parse().with_context(|| format!("the demo target {base_url} is not host:port"))
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
