//! Loads a config file for a command: `config` parses and checks it, and what it names but does
//! not own is resolved here by the modules that own it — dataset files are read by `workload`,
//! mock profile names come from `mock`. Every command and test loads its config through here.

use std::path::Path;

use crate::config::{self, Config, ConfigErrors, Dataset, Resolvers};

/// The resolvers of this build.
pub fn resolvers() -> Resolvers {
    Resolvers { dataset: Dataset::load, mock_profiles: crate::mock::Profile::names, carries: |api| api.family().carries }
}

/// Reads and validates a configuration file (`config::load` with this build's resolvers).
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    config::load(path, resolvers())
}

/// Parses and validates configuration text; `file` is only used in messages (and as the base of
/// relative dataset paths).
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    config::parse(text, file, resolvers())
}

/// The built-in demo configuration, validated.
pub fn demo() -> Config {
    match parse(config::DEMO_YAML, "config/demo.yaml") {
        Ok(config) => config,
        // Covered by tests; a broken built-in file is a build defect, not a user error.
        Err(e) => panic!("built-in demo config is invalid:\n{e}"),
    }
}
