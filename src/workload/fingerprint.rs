//! The workload SHA-256: one hash of everything that shapes the traffic (per scenario and for
//! the whole spec), so two runs can be checked to have sent the same kind of load. The seed is
//! not part of it (it picks a realisation, not the workload); datasets count by content hash.

use super::sha256_hex;
use crate::config::{Config, Scenario};

/// Hashes of a config's workload.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadHash {
    /// Over every scenario, in file order.
    pub total: String,
    /// (scenario name, hash of that scenario).
    pub scenarios: Vec<(String, String)>,
}

/// A canonical text of one scenario's workload.
fn canonical(s: &Scenario) -> String {
    let dataset = s.dataset.as_ref().map(|d| format!("{}:{:?}:{:?}:{}", d.sha256, d.format, d.order, d.nonce));
    format!(
        "name={}\nrate={:?}\ninput={:?}\noutput={:?}\narrival={:?}\nprefix={:?}\ndataset={:?}\ncache_salt={:?}\n",
        s.name, s.rate, s.input_tokens, s.output_tokens, s.arrival, s.prefix, dataset, s.cache_salt
    )
}

pub fn fingerprint(config: &Config) -> WorkloadHash {
    let scenarios: Vec<(String, String)> = config.scenarios.iter().map(|s| (s.name.clone(), sha256_hex(canonical(s).as_bytes()))).collect();
    let joined: String = scenarios.iter().map(|(n, h)| format!("{n}={h}\n")).collect();
    WorkloadHash { total: sha256_hex(joined.as_bytes()), scenarios }
}
