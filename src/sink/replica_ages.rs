//! When each discovered replica of a target came up with its version, so the canary comparison
//! and the release tests can leave out a replica still warming up (restart, compilation, cold
//! prefix cache): one that came up while the prober watched — first seen more than
//! `SEEN_TOGETHER_S` after the target's first replicas, or seen again with another version — for
//! the release grace after it came up. The replicas there when the prober started are warm.

use std::collections::HashMap;

/// Replicas first seen this close to the target's first are taken as already serving when the
/// prober started (discovery reads them one by one).
pub const SEEN_TOGETHER_S: f64 = 30.0;

#[derive(Debug, Default)]
pub struct ReplicaAges {
    /// Replica → (its version, when it was first seen with it, its number).
    since: HashMap<String, (String, f64, u32)>,
    watched_from: Option<f64>,
    next_number: u32,
    /// Replica → the node it runs on, where discovery read one.
    nodes: HashMap<String, String>,
}

impl ReplicaAges {
    /// Discovery saw `replica` serving `version` at `now`.
    pub fn seen(&mut self, replica: &str, version: &str, now: f64) {
        self.watched_from.get_or_insert(now);
        if self.since.get(replica).is_none_or(|(v, _, _)| v != version) {
            self.next_number = self.next_number.wrapping_add(1);
            self.since.insert(replica.to_owned(), (version.to_owned(), now, self.next_number));
        }
    }

    pub fn forget(&mut self, replica: &str) {
        self.since.remove(replica);
        self.nodes.remove(replica);
    }

    /// Discovery read the node `replica` runs on (empty: none).
    pub fn set_node(&mut self, replica: &str, node: &str) {
        if node.is_empty() {
            self.nodes.remove(replica);
        } else if self.nodes.get(replica).is_none_or(|n| n != node) {
            self.nodes.insert(replica.to_owned(), node.to_owned());
        }
    }

    /// What the release tests key a replica's lasting offset by: its node where known (a
    /// replica's offset is its machine's — another GPU, a noisy neighbour — and a rolling update
    /// replaces the pod on the same node), else its own name.
    pub fn offset_key<'a>(&'a self, replica: &'a str) -> &'a str {
        self.nodes.get(replica).map_or(replica, String::as_str)
    }

    /// A number for `replica` that changes when it comes back with another version (the canary
    /// clusters its variance by it).
    pub fn number(&self, replica: &str) -> Option<u32> {
        self.since.get(replica).map(|x| x.2)
    }

    /// Whether `replica` is still warming up at `now`: it came up while the prober watched, less
    /// than `warmup_s` ago.
    pub fn warming(&self, replica: &str, now: f64, warmup_s: f64) -> bool {
        let Some(&(_, since, _)) = self.since.get(replica) else { return false };
        self.watched_from.is_some_and(|w| since > w + SEEN_TOGETHER_S) && now < since + warmup_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_replica_that_came_up_while_watched_warms_up() {
        let mut a = ReplicaAges::default();
        a.seen("a", "v1", 0.0);
        a.seen("b", "v1", 10.0);
        assert!(!a.warming("a", 20.0, 300.0) && !a.warming("b", 20.0, 300.0), "there when the prober started");
        a.seen("b", "v2", 1000.0);
        assert!(a.warming("b", 1299.0, 300.0) && !a.warming("b", 1300.0, 300.0), "back with another version");
        let number = a.number("b");
        a.seen("b", "v2", 1100.0);
        assert_eq!(a.number("b"), number, "the same version again changes nothing");
        a.seen("c", "v2", 1500.0);
        assert!(a.warming("c", 1600.0, 300.0) && !a.warming("c", 1800.0, 300.0));
        a.forget("c");
        assert!(!a.warming("c", 1600.0, 300.0) && a.number("c").is_none());
    }
}
