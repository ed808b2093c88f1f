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
    /// Each probe as a JSON line in a file (`jsonl:`); `None`: off.
    pub jsonl: Option<super::jsonl::Jsonl>,
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

/// Shard `index` (from 0) of `count`: a prober's share of one schedule (`probe --shard`,
/// `probe.shard`) or a load generator's share of a bench run (`bench --shard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// `I/N`, e.g. `0/3` (from the command line or `LLMPROBE_SHARD`).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (i, n) = s.split_once('/').ok_or_else(|| format!("{s:?}: expected I/N (shard I of N, 0-based), e.g. 0/3"))?;
        let index: u32 = i.trim().parse().map_err(|_| format!("{s:?}: shard index {i:?} is not a whole number"))?;
        let count: u32 = n.trim().parse().map_err(|_| format!("{s:?}: shard count {n:?} is not a whole number"))?;
        if count == 0 || u64::from(count) > MAX_SHARDS {
            return Err(format!("{s:?}: the shard count must be 1 to {MAX_SHARDS}"));
        }
        if index >= count {
            return Err(format!("{s:?}: shard index {index} is out of range for {count} shards (0-based: 0..={})", count - 1));
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of a whole number split over the shards: `total / N`, plus one for the
    /// first `total % N` shards.
    pub fn part(&self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        total / n + u64::from(i < total % n)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Shard::parse(s)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
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
