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

/// Prints the errors and gives the config exit code.
pub fn failed(errors: &ConfigErrors) -> ExitCode {
    eprintln!("{errors}");
    ExitCode::from(EXIT_CONFIG)
}
