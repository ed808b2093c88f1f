//! The validated configuration as a whole: what the rest of the crate reads.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::bench::Bench;
use super::check::ConfigIssue;
use super::detect::Detect;
use super::slo::{Slo, SloTable};
use super::target::Target;
use super::telemetry::{SourceSpec, Tracing};
use super::workload::Scenario;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address of the prober's own HTTP server (/metrics, /healthz, /readyz).
    pub listen: SocketAddr,
    pub probe: ProbeSettings,
    pub targets: Vec<Target>,
    pub scenarios: Vec<Scenario>,
    pub slo: Slo,
    /// OTLP trace export (`tracing:`); `OTEL_*` variables fill what is not set.
    pub tracing: Tracing,
    /// Engine and GPU telemetry sources (`sources:`).
    pub sources: Vec<SourceSpec>,
    /// The `bench:` section, when present (`llmprobe bench` needs it; the prober ignores it).
    pub bench: Option<Bench>,
    /// The release-regression detector (`detect:`).
    pub detect: Detect,
    /// Non-fatal findings (e.g. an in-flight cap that may drop probes), in file order.
    pub warnings: Vec<ConfigIssue>,
}

/// Settings shared by all targets (`probe:`). The shared rate is already resolved into each
/// `Scenario::rate`.
#[derive(Debug, Clone)]
pub struct ProbeSettings {
    /// RNG seed for arrivals and workload sampling; `None` = from entropy.
    pub seed: Option<u64>,
    /// In-flight cap per target; a probe due while the cap is reached is dropped and counted.
    pub max_in_flight: usize,
    /// How long in-flight probes may run after shutdown starts before they count as `cancelled`.
    pub shutdown_grace: Duration,
    /// How often each target's model and engine version are re-read (release marker).
    pub discovery_interval: Duration,
    /// This prober's share of the schedule (`index` of `count`); scenario rates are already
    /// divided by `count`.
    pub shard: Shard,
    /// The `prober` label on every series (vantage point), when set.
    pub prober: Option<String>,
}

/// Shard `index` (from 0) of `count` probers sharing one schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// `I/N`, e.g. `0/3` (from the command line or `LLMPROBE_SHARD`).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("invalid shard {text:?}: expected INDEX/COUNT with INDEX below COUNT, e.g. 0/3");
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
        if count == 0 || index >= count || count as u64 > MAX_SHARDS {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl Config {
    /// Command-line overrides of `probe.shard` and `probe.prober` (a StatefulSet passes the
    /// pod's index): the scenario rates follow the new shard count.
    pub fn override_probe(&mut self, shard: Option<Shard>, prober: Option<&str>) {
        if let Some(s) = shard {
            let scale = self.probe.shard.count as f64 / s.count as f64;
            for scenario in &mut self.scenarios {
                scenario.rate *= scale;
            }
            self.probe.shard = s;
        }
        if let Some(p) = prober {
            self.probe.prober = Some(p.to_owned());
        }
    }
}

/// Most probers that may share one schedule.
pub const MAX_SHARDS: u64 = 1000;

impl Config {
    /// The SLO that applies to probes of `target` × `scenario`: scenario > target > global, field
    /// by field. Unknown names get the global SLO.
    pub fn slo_for(&self, target: &str, scenario: &str) -> Slo {
        let mut slo = self.slo.clone();
        if let Some(t) = self.targets.iter().find(|t| t.name == target) {
            slo = slo.overridden(&t.slo);
        }
        if let Some(s) = self.scenarios.iter().find(|s| s.name == scenario) {
            slo = slo.overridden(&s.slo);
        }
        slo
    }

    /// The effective SLO of every target×scenario pair, for lookups per probe.
    pub fn slo_table(&self) -> SloTable {
        let pairs =
            self.targets.iter().map(|t| (t.name.clone(), self.scenarios.iter().map(|s| (s.name.clone(), self.slo_for(&t.name, &s.name))).collect())).collect();
        SloTable { global: self.slo.clone(), pairs: Arc::new(pairs) }
    }
}
