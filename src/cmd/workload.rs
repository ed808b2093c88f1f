//! `llmprobe workload preview` (what a config's scenarios will send) and `workload accuracy`
//! (prompt-length figures against a live server, see `accuracy.rs`).

use std::process::ExitCode;

use crate::cli::WorkloadCommand;
use crate::config::{ConfigErrors, ProtocolKind, Target};
use crate::{loader, workload};

pub async fn run(command: WorkloadCommand) -> anyhow::Result<ExitCode> {
    match command {
        WorkloadCommand::Preview { config: file } => match loader::load(&file) {
            Ok(cfg) => {
                print!("{}", workload::preview::render(&cfg));
                Ok(ExitCode::SUCCESS)
            }
            Err(errors) => Ok(super::config::failed(&errors)),
        },
        WorkloadCommand::Accuracy(args) => {
            let target = match accuracy_target(&args.base_url, &args.api, args.model.as_deref()) {
                Ok(target) => target,
                Err(errors) => return Ok(super::config::failed(&errors)),
            };
            let report = super::accuracy::check(target, &args.lengths, args.output, args.probes, args.warmup, !args.no_tokenize).await?;
            print!("{}", super::accuracy::render(&report));
            let ok = report.rows.iter().all(|r| r.within_tolerance(report.warmup) && r.failures.is_empty());
            Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

/// The target the command line describes, checked as a `targets:` entry would be.
fn accuracy_target(base_url: &str, api: &str, model: Option<&str>) -> Result<Target, ConfigErrors> {
    let fail = |issues| ConfigErrors { file: "command line".into(), issues };
    let Some(kind) = ProtocolKind::parse(api) else {
        let valid: Vec<&str> = ProtocolKind::ALL.iter().map(|k| k.as_str()).collect();
        let message = format!("unknown api \"{api}\": expected one of {}", valid.join(", "));
        return Err(fail(vec![crate::config::ConfigIssue { path: "--api".into(), line: None, message }]));
    };
    let target = Target::new("accuracy", base_url, kind).map_err(fail)?;
    Ok(match model {
        Some(m) => target.with_model(m),
        None => target,
    })
}
