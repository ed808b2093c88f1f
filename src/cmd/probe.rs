//! `llmprobe probe`: the continuous prober until a signal, or one probe per target × scenario
//! with `--once`.

use std::process::ExitCode;

use crate::cli::ProbeArgs;
use crate::{app, loader, once};

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
    let options = app::RunOptions { lifecycle: args.web_enable_lifecycle, overrides, ..app::RunOptions::default() };
    app::run_until_signal(cfg, Some(&args.config), options).await
}
