//! The replica set loop: the probed window of what discovery finds, each replica's own
//! discovery, and the grace before a gone replica's series go.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::discover::Replica;
use super::endpoints::Endpoints;
use crate::client::TargetRuntime;
use crate::config::{Config, Replicas};
use crate::sink::{Event, Sinks};

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
    let target = endpoints.base().name.clone();
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
                        let rt = Arc::new(endpoints.base().for_replica(&r.id, r.addr));
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
    fn the_window_is_capped_and_rotates() {
        assert_eq!(window(&replicas(3), 8, 0).len(), 3);
        let w = window(&replicas(50), 8, 48);
        assert_eq!(w.len(), 8);
        assert_eq!(w[0].id, "r48");
        assert_eq!(w[2].id, "r00", "wraps around");
    }
}
