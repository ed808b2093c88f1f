//! A loaded bench config: what a run measures.

use anyhow::Context;

use crate::config::{Bench, Config, Target};

/// A loaded bench config: the validated config, its `bench:` section and the file's hash.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    pub config: Config,
    pub bench: Bench,
    pub config_file: String,
    pub config_sha256: String,
}

impl BenchPlan {
    /// From a validated config and the exact file text it came from.
    pub fn new(config: Config, config_file: &str, text: &str) -> anyhow::Result<BenchPlan> {
        let bench = config.bench.clone().with_context(|| format!("{config_file} has no bench: section (see config/README.md, \"bench\")"))?;
        Ok(BenchPlan { config, bench, config_file: config_file.to_owned(), config_sha256: crate::workload::sha256_hex(text.as_bytes()) })
    }

    /// The one target of a bench run: `--target NAME`, or the only one in the file.
    pub fn target(&self, name: Option<&str>) -> anyhow::Result<Target> {
        match name {
            Some(n) => self.config.targets.iter().find(|t| t.name == n).cloned().with_context(|| format!("no target named {n:?} in {}", self.config_file)),
            None if self.config.targets.len() == 1 => Ok(self.config.targets[0].clone()),
            None => anyhow::bail!("{} has {} targets: a bench run measures one; choose it with --target NAME", self.config_file, self.config.targets.len()),
        }
    }
}
