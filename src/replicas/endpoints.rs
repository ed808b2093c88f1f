//! Where one target's probes go: `base_url`, one replica in turn, or every replica at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::client::TargetRuntime;
use crate::config::ReplicaRate;

/// Where one target's probes go.
pub struct Endpoints {
    base: Arc<TargetRuntime>,
    rate: ReplicaRate,
    probed: RwLock<Vec<Arc<TargetRuntime>>>,
    next: AtomicUsize,
}

impl Endpoints {
    pub fn new(base: Arc<TargetRuntime>) -> Self {
        let rate = base.config.replicas.as_ref().map_or(ReplicaRate::Split, |r| r.rate);
        Endpoints { base, rate, probed: RwLock::new(Vec::new()), next: AtomicUsize::new(0) }
    }

    /// Fixed endpoints that every probe goes to at the same moment, in turn first (`gate`: the
    /// baseline and the candidate deployment); `base` names the target.
    pub fn side_by_side(base: Arc<TargetRuntime>, sides: Vec<Arc<TargetRuntime>>) -> Self {
        Endpoints { base, rate: ReplicaRate::PerReplica, probed: RwLock::new(sides), next: AtomicUsize::new(0) }
    }

    pub fn base(&self) -> &Arc<TargetRuntime> {
        &self.base
    }

    /// The endpoints of the next probe: one replica in turn (`split`), every replica
    /// (`per_replica`, starting from the next one in turn: probes due at the same moment are
    /// sent in this order, so no replica is always first), or `base_url` while no replica is
    /// known.
    pub fn pick(&self) -> Vec<Arc<TargetRuntime>> {
        let probed = self.probed.read().unwrap_or_else(|e| e.into_inner());
        if probed.is_empty() {
            return vec![self.base.clone()];
        }
        match self.rate {
            ReplicaRate::PerReplica => {
                let first = self.next.fetch_add(1, Ordering::Relaxed) % probed.len();
                probed[first..].iter().chain(&probed[..first]).cloned().collect()
            }
            ReplicaRate::Split => vec![probed[self.next.fetch_add(1, Ordering::Relaxed) % probed.len()].clone()],
        }
    }

    /// Whether `endpoint` is still one that probes go to (a replica leaves when discovery no
    /// longer finds it or the probed window moved on).
    pub fn probes(&self, endpoint: &Arc<TargetRuntime>) -> bool {
        let probed = self.probed.read().unwrap_or_else(|e| e.into_inner());
        probed.iter().any(|p| Arc::ptr_eq(p, endpoint)) || (probed.is_empty() && Arc::ptr_eq(&self.base, endpoint))
    }

    pub(super) fn set(&self, probed: Vec<Arc<TargetRuntime>>) {
        *self.probed.write().unwrap_or_else(|e| e.into_inner()) = probed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_replica_probes_take_turns_at_going_first() {
        let no_files =
            crate::config::Resolvers { dataset: |_, _, _, _| Err("no datasets here".into()), mock_profiles: Vec::new, carries: |api| api.family().carries };
        let cfg = crate::config::parse(
            "targets:\n  - {name: t, base_url: 'http://127.0.0.1:1', api: openai-chat}\nscenarios:\n  - {name: s, input_tokens: 8, output_tokens: 4}\n",
            "t.yaml",
            no_files,
        )
        .unwrap();
        let side = |id: &str| {
            let mut rt = TargetRuntime::new(cfg.targets[0].clone()).unwrap();
            rt.replica = Some(id.into());
            Arc::new(rt)
        };
        let e = Endpoints::side_by_side(side("base"), vec![side("a"), side("b")]);
        let order = |e: &Endpoints| e.pick().iter().map(|t| t.replica.as_deref().unwrap_or("").to_owned()).collect::<Vec<_>>().join(",");
        assert_eq!([order(&e), order(&e), order(&e)], ["a,b", "b,a", "a,b"]);
    }
}

#[cfg(test)]
mod endpoint_tests {
    use super::*;

    fn runtime(name: &str) -> Arc<TargetRuntime> {
        let yaml = format!(
            "targets:\n  - {{name: {name}, base_url: \"http://127.0.0.1:9\", api: openai-chat, model: m}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n"
        );
        let cfg = crate::app::loader::parse(&yaml, "t.yaml").unwrap();
        Arc::new(TargetRuntime::new(cfg.targets[0].clone()).unwrap())
    }

    #[test]
    fn an_endpoint_is_probed_while_it_is_in_the_set() {
        let base = runtime("t");
        let alone = Endpoints::new(base.clone());
        assert!(alone.probes(&base), "without replicas, base_url is the endpoint");
        let (a, b) = (runtime("a"), runtime("b"));
        let sides = Endpoints::side_by_side(base.clone(), vec![a.clone()]);
        assert!(sides.probes(&a));
        assert!(!sides.probes(&b) && !sides.probes(&base), "not in the probed set");
        sides.set(vec![b.clone()]);
        assert!(!sides.probes(&a) && sides.probes(&b), "a replica that left is no longer probed");
    }
}
