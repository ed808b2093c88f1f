//! `llmprobe probe`: the continuous prober until a signal, or one probe per target × scenario
//! with `--once`.

use std::process::ExitCode;

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::app::{self, loader};
use crate::pipeline::once;

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
    /// Append every finished probe to this file as a JSON line (target, scenario, outcome, send
    /// time, TTFT/TPOT/E2E, goodput): `llmprobe detect simulate --replay FILE --replay-order time`
    /// plans the detector on this traffic.
    #[arg(long, env = "LLMPROBE_PROBE_LOG")]
    pub probe_log: Option<PathBuf>,
    /// Size at which the probe log is renamed to FILE.1 (replacing an older one) and started anew.
    #[arg(long, default_value_t = 64)]
    pub probe_log_max_mb: u64,
}

pub async fn run(args: ProbeArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = match loader::load(&args.config) {
        Ok(cfg) => cfg,
        Err(errors) => return Ok(super::config::failed(&errors)),
    };
    cfg.override_probe(args.shard, args.prober.as_deref());
    if args.once {
        let mut text = String::new();
        let ok = once::run(&cfg, &mut text).await?;
        print!("{text}");
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let overrides = app::ProbeOverrides { shard: args.shard, prober: args.prober.clone() };
    let probe_log = match &args.probe_log {
        Some(path) => Some(std::sync::Arc::new(
            crate::sink::probe_log::ProbeLog::open(path, args.probe_log_max_mb.saturating_mul(1 << 20))
                .with_context(|| format!("opening the probe log {}", path.display()))?,
        )),
        None => None,
    };
    let options = app::RunOptions { lifecycle: args.web_enable_lifecycle, overrides, probe_log, ..app::RunOptions::default() };
    app::run_until_signal(cfg, Some(&args.config), options).await
}
