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
    let mut text = format!(
        "name={}\nrate={:?}\ninput={:?}\noutput={:?}\narrival={:?}\nprefix={:?}\ndataset={:?}\ncache_salt={:?}\n",
        s.name, s.rate, s.input_tokens, s.output_tokens, s.arrival, s.prefix, dataset, s.cache_salt
    );
    // Only when set, so that the hash of a scenario without it is what it always was.
    if let Some(r) = s.reasoning {
        text.push_str(&format!("reasoning={:?}:{}\n", r.effort.map(|e| e.as_str()), r.budget_tokens));
    }
    if let Some(sequence) = &s.sequence {
        text.push_str(&format!("sequence={sequence:?}\n"));
    }
    text
}

pub fn fingerprint(config: &Config) -> WorkloadHash {
    let scenarios: Vec<(String, String)> = config.scenarios.iter().map(|s| (s.name.clone(), sha256_hex(canonical(s).as_bytes()))).collect();
    let joined: String = scenarios.iter().map(|(n, h)| format!("{n}={h}\n")).collect();
    WorkloadHash { total: sha256_hex(joined.as_bytes()), scenarios }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(scenario: &str) -> Config {
        let yaml = format!(
            "targets:\n  - {{name: t, base_url: \"http://127.0.0.1:1\", api: openai-chat, model: m}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4{scenario}}}\n"
        );
        crate::app::loader::parse(&yaml, "t.yaml").unwrap()
    }

    fn hash(scenario: &str) -> String {
        fingerprint(&config(scenario)).scenarios[0].1.clone()
    }

    /// Reasoning settings change what is sent, so they change the scenario's hash; a scenario
    /// without them hashes as it did before they existed.
    #[test]
    fn reasoning_is_part_of_the_workload() {
        let plain = hash("");
        let text = canonical(&config("").scenarios[0]);
        assert!(text.ends_with("cache_salt=None\n") && !text.contains("reasoning"), "{text}");
        let low = hash(", reasoning: {effort: low}");
        assert_ne!(low, plain);
        assert_ne!(low, hash(", reasoning: {effort: low, budget_tokens: 64}"));
    }

    /// A conversation's turns and think time, and a cache pair's prefix, shape the traffic too.
    #[test]
    fn sequences_are_part_of_the_workload() {
        let yaml = |scenario: &str| {
            let text =
                format!("targets:\n  - {{name: t, base_url: \"http://127.0.0.1:1\", api: openai-chat, model: m}}\nscenarios:\n  - {{name: s{scenario}}}\n");
            fingerprint(&crate::app::loader::parse(&text, "t.yaml").unwrap()).scenarios[0].1.clone()
        };
        let turns = ", turns: [{input_tokens: 8, output_tokens: 4}, {input_tokens: 8, output_tokens: 4}]";
        let two = yaml(turns);
        assert_ne!(two, hash(""), "a conversation is not its first turn alone");
        assert_ne!(two, yaml(&format!("{turns}, think_time: 3s")));
        let pair = hash(", cache_pair: {prefix_tokens: 4}");
        assert_ne!(pair, hash(""));
        assert_ne!(pair, hash(", cache_pair: {prefix_tokens: 6}"));
    }
}
