//! Replica comparisons from the probes of discovered replicas (`detect::compare`):
//! - **canary**: while a target's replicas report more than one version (a rolling update), the
//!   newest version's probes against the other versions' since the rollout began, per signal;
//!   the verdict clears when one version is left;
//! - **outlier**: each replica against its peers of the same version over the last 15 minutes
//!   (with three or more replicas of that version), per signal.
//!
//! Both groups see the same time and load, so neither needs a baseline from before.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::Sink;
use super::detect::observation;
use super::prometheus::ReplicaFamilies;
use super::replica_ages::{ReplicaAges, SEEN_TOGETHER_S};
use crate::detect::Signal;
use crate::detect::compare::{CompareSettings, Group, compare, compare_with};
use crate::detect::verdict::{Canary, CanarySignal};
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;

/// Outliers are judged on the last this many seconds.
const OUTLIER_WINDOW_S: f64 = 900.0;

#[derive(Default)]
struct TargetState {
    /// Replica id → its version.
    versions: HashMap<String, String>,
    /// When each version was first seen (the newest one is the canary).
    first_seen: HashMap<String, f64>,
    /// Per version, the probes since the rollout began (only while there are several versions).
    rollout: HashMap<String, Group>,
    rollout_started: Option<f64>,
    /// The old version's replicas' probes of the `OUTLIER_WINDOW_S` before the rollout, one
    /// group per replica: how much replicas differ, for the canary's variance.
    before_rollout: Vec<Group>,
    /// Per replica, the recent probes (outliers).
    recent: HashMap<String, Group>,
    /// When each replica came up (its warm-up) and its number in the canary groups (their
    /// variance is clustered by replica).
    ages: ReplicaAges,
    /// The last canary comparison of the rollout in progress (for the release verdict).
    canary: Option<Canary>,
}

pub struct ReplicaSink {
    targets: Mutex<HashMap<String, TargetState>>,
    families: ReplicaFamilies,
    canary: CompareSettings,
    outlier: CompareSettings,
    /// A replica that comes up while the prober watches counts in the canary groups only this
    /// long after it was first seen (the release tests' grace: restarts, cold caches).
    warmup_s: f64,
}

impl ReplicaSink {
    /// The comparisons' settings and the warm-up (`release_grace_s`) come from `detect.tuning`
    /// (`CompareSettings::canary`); an outlier test spends the canary's α over the replicas.
    pub fn new(families: ReplicaFamilies, tuning: &crate::config::DetectSettings) -> Self {
        let canary = CompareSettings::canary(tuning);
        let outlier = CompareSettings { window_s: OUTLIER_WINDOW_S, ..canary };
        ReplicaSink { targets: Mutex::new(HashMap::new()), families, canary, outlier, warmup_s: tuning.release_grace_s }
    }

    pub fn set_version(&self, target: &str, replica: &str, version: &str) {
        let mut all = self.lock();
        all.entry(target.to_owned()).or_default().set_version(replica, version, crate::util::clock::unix_now());
    }

    /// A replica gone for good: its probes and version leave every comparison.
    pub fn forget(&self, target: &str, replica: &str) {
        let mut all = self.lock();
        if let Some(t) = all.get_mut(target) {
            t.versions.remove(replica);
            t.recent.remove(replica);
            t.ages.forget(replica);
        }
        self.families.forget_outlier(target, replica);
    }

    /// Runs the comparisons and exports the verdicts.
    pub fn publish(&self, now: f64) {
        let mut all = self.lock();
        for (target, t) in all.iter_mut() {
            for g in t.recent.values_mut() {
                g.expire(now, OUTLIER_WINDOW_S);
            }
            let versions: BTreeMap<String, usize> = t.versions.values().fold(BTreeMap::new(), |mut m, v| {
                *m.entry(v.clone()).or_insert(0) += 1;
                m
            });
            self.publish_canary(target, t, &versions, now);
            self.publish_outliers(target, t);
        }
    }

    fn publish_canary(&self, target: &str, t: &mut TargetState, versions: &BTreeMap<String, usize>, now: f64) {
        if versions.len() < 2 {
            if t.rollout_started.take().is_some() {
                tracing::info!(target_name = %target, "rollout complete: one version left, canary verdict cleared");
            }
            t.rollout.clear();
            t.before_rollout.clear();
            t.canary = None;
            self.families.clear_canary(target);
            return;
        }
        let Some(new) = newest_version(versions.keys(), &t.first_seen) else { return };
        if t.rollout_started.is_none() {
            tracing::info!(target_name = %target, versions = ?versions.keys().collect::<Vec<_>>(), "rollout: several versions serve; comparing the newest with the others");
            t.start_rollout(new, now);
        }
        let mut old = Group::default();
        for (v, g) in &t.rollout {
            if v != new {
                old.extend(g);
            }
        }
        let empty = Group::default();
        let newest = t.rollout.get(new).unwrap_or(&empty);
        let mut signals = Vec::new();
        for signal in Signal::ALL {
            let v = compare_with(newest, &old, signal, &self.canary, &t.before_rollout);
            self.families.set_canary(target, new, signal.as_str(), &v);
            signals.push(CanarySignal {
                signal: signal.as_str(),
                judged: v.judged,
                regressed: v.regressed,
                effect: v.effect,
                probes: v.new_samples,
                reference_probes: v.reference_samples,
                evidence: v.log_evidence,
                threshold: v.threshold,
            });
        }
        t.canary = Some(Canary { version: new.clone(), started_s: t.rollout_started.unwrap_or(now), signals });
    }

    /// The canary comparison of `target`'s rollout in progress, as last published.
    pub fn canary(&self, target: &str) -> Option<Canary> {
        self.lock().get(target).and_then(|t| t.canary.clone())
    }

    fn publish_outliers(&self, target: &str, t: &TargetState) {
        let mut by_version: HashMap<&String, Vec<&String>> = HashMap::new();
        for (replica, version) in &t.versions {
            by_version.entry(version).or_default().push(replica);
        }
        for replicas in by_version.values() {
            let judged = replicas.len() >= 3;
            let settings = CompareSettings { alpha: self.outlier.alpha / replicas.len().max(1) as f64, ..self.outlier };
            for replica in replicas {
                for signal in [Signal::Ttft, Signal::E2e, Signal::Goodput] {
                    let outlier = judged && {
                        let mut peers = Group::default();
                        for other in replicas.iter().filter(|o| *o != replica) {
                            if let Some(g) = t.recent.get(*other) {
                                peers.extend(g);
                            }
                        }
                        t.recent.get(*replica).is_some_and(|g| compare(g, &peers, signal, &settings).regressed)
                    };
                    self.families.set_outlier(target, replica, signal.as_str(), outlier);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TargetState>> {
        self.targets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The rollout's new version: the one that appeared last; among versions that appeared
/// together, the greatest in natural order (`0.10.0` > `0.9.2`, `v2` > `v1`).
fn newest_version<'a>(versions: impl Iterator<Item = &'a String>, first_seen: &HashMap<String, f64>) -> Option<&'a String> {
    let seen = |v: &String| first_seen.get(v).copied().unwrap_or(0.0);
    versions.max_by(|a, b| if (seen(a) - seen(b)).abs() > SEEN_TOGETHER_S { seen(a).total_cmp(&seen(b)) } else { natural_cmp(a, b) })
}

/// Compares runs of digits as numbers and the rest as text.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let ord = match (x, y) {
            ((true, x), (true, y)) => {
                x.trim_start_matches('0').len().cmp(&y.trim_start_matches('0').len()).then_with(|| x.trim_start_matches('0').cmp(y.trim_start_matches('0')))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if ord != std::cmp::Ordering::Equal {
            return ord;
        }
    }
    pa.len().cmp(&pb.len())
}

impl Sink for ReplicaSink {
    fn event(&self, event: &super::Event) {
        match *event {
            super::Event::ReplicaVersion { target, replica, version, .. } => self.set_version(target, replica, version),
            super::Event::ReplicaGone { target, replica, .. } => self.forget(target, replica),
            _ => {}
        }
    }

    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let Some(replica) = outcome.replica.as_deref() else { return };
        let obs = observation(outcome, sample);
        let now = crate::util::clock::unix_now();
        let mut all = self.lock();
        let t = all.entry(outcome.target.to_string()).or_default();
        t.recent.entry(replica.to_owned()).or_default().observe(&obs, now);
        t.observe_rollout(replica, &obs, now, self.warmup_s);
    }
}

impl TargetState {
    /// A rollout of `new` begins: the other versions' replicas' recent probes are kept (how
    /// much replicas differ, for the canary's variance), the new version's warm-up left out.
    fn start_rollout(&mut self, new: &str, now: f64) {
        self.rollout_started = Some(now);
        let old = |r: &String| self.versions.get(r).is_some_and(|v| v != new);
        self.before_rollout = self.recent.iter().filter(|(r, _)| old(r)).map(|(_, g)| g.clone()).collect();
    }

    fn set_version(&mut self, replica: &str, version: &str, now: f64) {
        self.versions.insert(replica.to_owned(), version.to_owned());
        self.first_seen.entry(version.to_owned()).or_insert(now);
        self.ages.seen(replica, version, now);
    }

    /// Adds a probe to its version's canary group while a rollout runs, unless its replica is
    /// still warming up (`ReplicaAges::warming`): a new replica's first minutes (restart,
    /// compilation, cold prefix cache) are not the version's speed.
    fn observe_rollout(&mut self, replica: &str, obs: &crate::detect::Observation, now: f64, warmup_s: f64) {
        if self.rollout_started.is_none() {
            return;
        }
        let Some(version) = self.versions.get(replica).cloned() else { return };
        let Some(number) = self.ages.number(replica) else { return };
        if self.ages.warming(replica, now, warmup_s) {
            return;
        }
        self.rollout.entry(version).or_default().observe_replica(obs, now, number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica that comes up during the rollout counts only after its warm-up; the replicas
    /// there when the prober started count at once, and so does one back on a new version only
    /// after its own warm-up.
    #[test]
    fn a_new_replica_counts_in_the_canary_after_its_warm_up() {
        let obs = crate::detect::Observation { ttft: Some(0.2), tpot: None, e2e: Some(0.4), good: Some(true), ..Default::default() };
        let mut t = TargetState::default();
        t.set_version("a", "v1", 0.0);
        t.set_version("b", "v1", 1.0);
        t.set_version("b", "v2", 1000.0);
        t.rollout_started = Some(1001.0);
        let count = |t: &TargetState, v: &str| t.rollout.get(v).map_or(0, |g| g.samples(Signal::Ttft));
        for now in [1010.0, 1200.0, 1299.0, 1300.0, 1400.0] {
            t.observe_rollout("a", &obs, now, 300.0);
            t.observe_rollout("b", &obs, now, 300.0);
        }
        assert_eq!(count(&t, "v1"), 5, "a replica seen at the start is warm");
        assert_eq!(count(&t, "v2"), 2, "b on v2 from 1000 s: its probes from 1300 s count");
        t.set_version("c", "v2", 1500.0);
        t.observe_rollout("c", &obs, 1600.0, 300.0);
        t.observe_rollout("c", &obs, 1800.0, 300.0);
        assert_eq!(count(&t, "v2"), 3, "c, up at 1500 s, counts from 1800 s");
    }

    #[test]
    fn the_old_replicas_recent_probes_are_kept_when_a_rollout_starts() {
        let obs = crate::detect::Observation { ttft: Some(0.2), tpot: None, e2e: Some(0.4), good: Some(true), ..Default::default() };
        let mut t = TargetState::default();
        for (replica, version) in [("a", "v1"), ("b", "v1"), ("c", "v2")] {
            t.set_version(replica, version, 0.0);
            t.recent.entry(replica.to_owned()).or_default().observe(&obs, 10.0);
        }
        t.start_rollout("v2", 20.0);
        assert_eq!(t.rollout_started, Some(20.0));
        assert_eq!(t.before_rollout.len(), 2, "a and b, not the new version's c");
        assert!(t.before_rollout.iter().all(|g| g.samples(Signal::Ttft) == 1));
    }

    #[test]
    fn the_new_version_is_the_later_or_the_greater() {
        assert_eq!(natural_cmp("0.10.0", "0.9.2"), std::cmp::Ordering::Greater);
        assert_eq!(natural_cmp("v2", "v10"), std::cmp::Ordering::Less);
        let seen: HashMap<String, f64> = [("0.33.0".to_owned(), 100.0), ("0.32.0".to_owned(), 101.0), ("abc".to_owned(), 500.0)].into();
        let together = ["0.32.0".to_owned(), "0.33.0".to_owned()];
        assert_eq!(newest_version(together.iter(), &seen).unwrap(), "0.33.0", "seen together: by name");
        let later = ["0.33.0".to_owned(), "abc".to_owned()];
        assert_eq!(newest_version(later.iter(), &seen).unwrap(), "abc", "seen later: by time");
    }
}
