//! `llmprobe workload preview` (what a config's scenarios will send) and `workload accuracy`
//! (prompt-length figures against a live server, see `accuracy.rs`).

use std::process::ExitCode;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::app::loader;
use crate::config::{ConfigErrors, Target};
use crate::workload;

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
    let target = Target::from_names("accuracy", base_url, api).map_err(|issues| ConfigErrors { file: "command line".into(), issues })?;
    Ok(match model {
        Some(m) => target.with_model(m),
        None => target,
    })
}
