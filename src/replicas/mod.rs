//! Every replica of a target probed: the endpoints a schedule sends to, and the loop that keeps
//! them in step with discovery (`discover::run`).
//!
//! A target without `discover:` has one endpoint, its `base_url`. With it, each replica is a
//! `TargetRuntime` of its own (same client, key and in-flight cap; `base_url` at the replica's
//! address; its own model and version discovery), and probes carry its `replica` label. The
//! target's rate is spread round-robin over the replicas (`split`) or sent to each at the same
//! moment (`per_replica`). At most `replicas.max` replicas are probed at once; beyond that the
//! probed window rotates at every discovery change, so label cardinality stays bounded. A
//! replica that disappears stops being probed at once; its series go `replicas.grace` later.
//! Until discovery has found any replica, probes go to `base_url`.

pub mod discover;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::client::target::TargetRuntime;
use crate::config::{Config, ReplicaRate, Replicas};
use crate::replicas::discover::Replica;
use crate::sink::{Event, Sinks};

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

    fn set(&self, probed: Vec<Arc<TargetRuntime>>) {
        *self.probed.write().unwrap_or_else(|e| e.into_inner()) = probed;
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

/// The probed window of `all` (sorted by id): all of them up to `max`, else `max` of them
/// starting at `offset`, wrapping around.
pub fn window(all: &[Replica], max: usize, offset: usize) -> Vec<Replica> {
    if all.len() <= max {
        return all.to_vec();
    }
    (0..max).map(|i| all[(offset + i) % all.len()].clone()).collect()
}

/// How often gone replicas are checked for the end of their grace period.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Keeps `endpoints` in step with the replicas discovery finds, until `stop`.
pub async fn follow(
    endpoints: Arc<Endpoints>,
    spec: Replicas,
    config: Arc<Config>,
    sinks: Sinks,
    resolver: Arc<dyn crate::replicas::discover::Resolver>,
    stop: CancellationToken,
) {
    let (tx, mut rx) = tokio::sync::watch::channel(Vec::<Replica>::new());
    let discovery = tokio::spawn(crate::replicas::discover::run_with(spec.discover.clone(), resolver, tx, stop.clone()));
    let target = endpoints.base.name.clone();
    let every = config.probe.discovery_interval;
    let mut live: HashMap<String, (Arc<TargetRuntime>, CancellationToken)> = HashMap::new();
    let mut gone: HashMap<String, Instant> = HashMap::new();
    let mut offset = 0usize;
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    break;
                }
                let all = rx.borrow_and_update().clone();
                if all.len() > spec.max {
                    offset = (offset + spec.max) % all.len();
                    tracing::info!(target_name = %target, discovered = all.len(), probed = spec.max, "more replicas than replicas.max: probing a rotating window");
                }
                let probed = window(&all, spec.max, offset);
                sinks.event(&Event::ReplicaCounts { target: &target, discovered: all.len(), probed: probed.len() });
                for r in &probed {
                    gone.remove(&r.id);
                    if !live.contains_key(&r.id) {
                        let rt = Arc::new(endpoints.base.for_replica(&r.id, r.addr));
                        sinks.event(&Event::ReplicaAdded { config: &config, target: &target, replica: &r.id });
                        let task_stop = stop.child_token();
                        tokio::spawn(discover_replica(rt.clone(), r.clone(), every, sinks.clone(), task_stop.clone()));
                        live.insert(r.id.clone(), (rt, task_stop));
                    }
                }
                let keep: std::collections::HashSet<&str> = probed.iter().map(|r| r.id.as_str()).collect();
                live.retain(|id, (_, task)| {
                    let stays = keep.contains(id.as_str());
                    if !stays {
                        task.cancel();
                        gone.insert(id.clone(), Instant::now());
                        tracing::info!(target_name = %target, replica = %id, "replica no longer probed");
                    }
                    stays
                });
                endpoints.set(probed.iter().filter_map(|r| live.get(&r.id).map(|(rt, _)| rt.clone())).collect());
            }
            _ = sweep.tick() => {
                let expired: Vec<String> = gone.iter().filter(|(_, at)| at.elapsed() >= spec.grace).map(|(id, _)| id.clone()).collect();
                for id in expired {
                    gone.remove(&id);
                    sinks.event(&Event::ReplicaGone { config: &config, target: &target, replica: &id });
                }
            }
            _ = stop.cancelled() => break,
        }
    }
    for (_, (_, task)) in live {
        task.cancel();
    }
    let _ = discovery.await;
}

/// A replica's own discovery (model, engine version): its version is what the replica itself
/// reports, unless discovery read one from a pod label.
async fn discover_replica(rt: Arc<TargetRuntime>, replica: Replica, every: Duration, sinks: Sinks, stop: CancellationToken) {
    let id = replica.id.clone();
    let mut last = None;
    loop {
        let wait = match rt.discover().await {
            Ok(found) => {
                rt.use_discovered_model(&found.model);
                let version =
                    replica.version.clone().unwrap_or_else(|| if found.engine_version.is_empty() { found.model.clone() } else { found.engine_version.clone() });
                if last.as_ref() != Some(&version) {
                    tracing::info!(target_name = %rt.name, replica = %id, version = %version, "replica discovered");
                    let (node, zone) = (replica.node.as_deref().unwrap_or(""), replica.zone.as_deref().unwrap_or(""));
                    sinks.event(&Event::ReplicaVersion { target: &rt.name, replica: &id, version: &version, node, zone });
                    last = Some(version);
                }
                every
            }
            Err(f) => {
                tracing::debug!(target_name = %rt.name, replica = %id, "replica discovery failed: {}", f.detail);
                every.min(Duration::from_secs(10))
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replicas(n: usize) -> Vec<Replica> {
        (0..n).map(|i| Replica { id: format!("r{i:02}"), addr: ([127, 0, 0, 1], 8000 + i as u16).into(), node: None, zone: None, version: None }).collect()
    }

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

    #[test]
    fn the_window_is_capped_and_rotates() {
        assert_eq!(window(&replicas(3), 8, 0).len(), 3);
        let w = window(&replicas(50), 8, 48);
        assert_eq!(w.len(), 8);
        assert_eq!(w[0].id, "r48");
        assert_eq!(w[2].id, "r00", "wraps around");
    }
}
