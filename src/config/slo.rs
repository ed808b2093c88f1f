//! Per-target and per-scenario SLO overrides (`targets[].slo`, `scenarios[].slo`) and the effective
//! SLO of a target×scenario pair: scenario fields win over target fields, which win over the global
//! `slo:` section, field by field. A threshold set to `off` removes an inherited one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::check::Checker;
use super::duration::RawDuration;

/// Latency objectives; a request is "good" when it succeeded and meets every set threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// Time to first token.
    pub ttft: Option<Duration>,
    /// Time per output token after the first.
    pub tpot: Option<Duration>,
    /// End-to-end latency.
    pub e2e: Option<Duration>,
    /// Goodput objective, a ratio in (0, 1), e.g. 0.99.
    pub objective: f64,
}

/// `slo:` section. Every threshold is optional; a request meets the SLO when it succeeded and
/// is within every threshold that is set.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with ttft, tpot, e2e, objective")]
pub struct RawSlo {
    /// Time to first token.
    pub ttft: Option<RawDuration>,
    /// Time per output token after the first.
    pub tpot: Option<RawDuration>,
    /// End-to-end request latency.
    pub e2e: Option<RawDuration>,
    /// Target fraction of good requests, in (0, 1). Default 0.99.
    #[serde(default = "default_objective")]
    pub objective: f64,
}

impl Default for RawSlo {
    fn default() -> Self {
        RawSlo { ttft: None, tpot: None, e2e: None, objective: default_objective() }
    }
}

fn default_objective() -> f64 {
    0.99
}

/// `slo:` of a target or a scenario: only the fields it sets replace the inherited ones.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with ttft, tpot, e2e, objective")]
pub struct RawSloOverride {
    /// Time to first token, or `off` to drop an inherited threshold.
    pub ttft: Option<RawDuration>,
    /// Time per output token after the first, or `off`.
    pub tpot: Option<RawDuration>,
    /// End-to-end request latency, or `off`.
    pub e2e: Option<RawDuration>,
    /// Target fraction of good requests, in (0, 1).
    pub objective: Option<f64>,
}

/// Validated override: `None` inherits, `Some(None)` removes the threshold (`off`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SloOverride {
    pub ttft: Option<Option<Duration>>,
    pub tpot: Option<Option<Duration>>,
    pub e2e: Option<Option<Duration>>,
    pub objective: Option<f64>,
}

impl Slo {
    /// This SLO with the fields `o` sets replaced.
    pub fn overridden(&self, o: &SloOverride) -> Slo {
        Slo {
            ttft: o.ttft.unwrap_or(self.ttft),
            tpot: o.tpot.unwrap_or(self.tpot),
            e2e: o.e2e.unwrap_or(self.e2e),
            objective: o.objective.unwrap_or(self.objective),
        }
    }
}

/// Effective SLO per (target, scenario); cheap to clone.
#[derive(Debug, Clone)]
pub struct SloTable {
    pub(super) global: Slo,
    /// target -> scenario -> SLO.
    pub(super) pairs: Arc<HashMap<String, HashMap<String, Slo>>>,
}

impl SloTable {
    /// One SLO for every pair (no overrides).
    pub fn uniform(slo: Slo) -> SloTable {
        SloTable { global: slo, pairs: Arc::default() }
    }

    /// The pair's SLO, the global one for a pair the config does not have.
    pub fn get(&self, target: &str, scenario: &str) -> &Slo {
        self.pairs.get(target).and_then(|s| s.get(scenario)).unwrap_or(&self.global)
    }
}

/// Stage-2 check of one override at `path` (e.g. `scenarios[1].slo`).
pub(super) fn slo_override(path: &str, raw: Option<&RawSloOverride>, c: &mut Checker) -> SloOverride {
    let Some(raw) = raw else { return SloOverride::default() };
    let mut threshold = |name: &str, d: &Option<RawDuration>| {
        d.as_ref().map(|d| if d.0.trim() == "off" { None } else { Some(c.positive_duration(&format!("{path}.{name}"), d)) })
    };
    let o = SloOverride { ttft: threshold("ttft", &raw.ttft), tpot: threshold("tpot", &raw.tpot), e2e: threshold("e2e", &raw.e2e), objective: raw.objective };
    if let Some(obj) = raw.objective.filter(|o| !(*o > 0.0 && *o < 1.0)) {
        c.error(format!("{path}.objective"), format!("must be between 0 and 1 (exclusive), e.g. 0.99; got {obj}"));
    }
    o
}

pub(super) fn slo(raw: &RawSlo, c: &mut Checker) -> Slo {
    let mut threshold = |name: &str, d: &Option<RawDuration>| d.as_ref().map(|d| c.positive_duration(&format!("slo.{name}"), d));
    let slo = Slo { ttft: threshold("ttft", &raw.ttft), tpot: threshold("tpot", &raw.tpot), e2e: threshold("e2e", &raw.e2e), objective: raw.objective };
    if !(raw.objective > 0.0 && raw.objective < 1.0) {
        c.error("slo.objective", format!("must be between 0 and 1 (exclusive), e.g. 0.99; got {}", raw.objective));
    }
    slo
}
