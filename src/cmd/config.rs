//! `llmprobe check-config`, and how every command reports a config it cannot use.

use std::path::Path;
use std::process::ExitCode;

use crate::app::loader;
use crate::config::ConfigErrors;

/// Exit code for an invalid config.
pub const EXIT_CONFIG: u8 = 2;

/// Validates a file: warnings and a one-line summary, or every error with its line.
pub fn check(file: &Path) -> ExitCode {
    match loader::load(file) {
        Ok(cfg) => {
            for w in &cfg.warnings {
                eprintln!("warning: {w}");
            }
            println!("{}: ok ({} targets, {} scenarios)", file.display(), cfg.targets.len(), cfg.scenarios.len());
            ExitCode::SUCCESS
        }
        Err(errors) => failed(&errors),
    }
}

/// `llmprobe config-schema`: the config file's JSON Schema, or a chart's values schema with its
/// config part regenerated (`--chart-values`), on stdout.
pub fn schema(chart_values: Option<&Path>) -> anyhow::Result<ExitCode> {
    let value = match chart_values {
        None => crate::config::config_json_schema(),
        Some(path) => {
            // a values schema is a few hundred KiB at most; refuse anything far larger
            let meta = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            anyhow::ensure!(meta.len() <= 16 << 20, "{}: larger than 16 MiB", path.display());
            let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let values: serde_json::Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not JSON: {e}", path.display()))?;
            crate::config::chart_values_schema(&values).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
    };
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(ExitCode::SUCCESS)
}

/// Prints the errors and gives the config exit code.
pub fn failed(errors: &ConfigErrors) -> ExitCode {
    eprintln!("{errors}");
    ExitCode::from(EXIT_CONFIG)
}
