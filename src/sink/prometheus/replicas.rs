//! The families of discovered replicas: info, counts, canary verdicts, outliers.

use super::contract::{CANARY_EFFECT, CANARY_EVIDENCE, CANARY_STATE, REPLICA_INFO, REPLICA_OUTLIER, REPLICAS};
use super::labels::server_label;
use super::registry::{FloatGauge, InfoFamily, info_family, register, touch};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::Mutex;

// ---- Replica families ----------------------------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaInfoLabels {
    pub target: String,
    pub replica: String,
    pub version: String,
    pub node: String,
    pub zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaCountLabels {
    pub target: String,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryLabels {
    pub target: String,
    pub version: String,
    pub signal: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryStateLabels {
    pub target: String,
    pub version: String,
    pub signal: String,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryEffectLabels {
    pub target: String,
    pub version: String,
    pub signal: String,
    pub bound: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutlierLabels {
    pub target: String,
    pub replica: String,
    pub signal: String,
}

/// Replica state: info, counts, canary verdicts and outliers (`replicas.rs`, `sink/replicas.rs`).
#[derive(Debug, Clone)]
pub struct ReplicaFamilies {
    pub(super) info: InfoFamily<ReplicaInfoLabels>,
    pub(super) info_current: std::sync::Arc<Mutex<HashMap<(String, String), ReplicaInfoLabels>>>,
    pub(super) counts: Family<ReplicaCountLabels, Gauge>,
    pub(super) canary_state: Family<CanaryStateLabels, Gauge>,
    pub(super) canary_effect: Family<CanaryEffectLabels, FloatGauge>,
    pub(super) canary_evidence: Family<CanaryLabels, FloatGauge>,
    /// Canary series per target, to clear them when the rollout ends.
    pub(super) canary_current: std::sync::Arc<Mutex<HashMap<String, Vec<CanaryLabels>>>>,
    pub(super) outlier: Family<OutlierLabels, Gauge>,
}

impl ReplicaFamilies {
    pub(super) fn new() -> Self {
        ReplicaFamilies {
            info: info_family(),
            info_current: Default::default(),
            counts: Family::default(),
            canary_state: Family::default(),
            canary_effect: Family::default(),
            canary_evidence: Family::default(),
            canary_current: Default::default(),
            outlier: Family::default(),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        register(r, REPLICA_INFO, self.info.clone());
        register(r, REPLICAS, self.counts.clone());
        register(r, CANARY_STATE, self.canary_state.clone());
        register(r, CANARY_EFFECT, self.canary_effect.clone());
        register(r, CANARY_EVIDENCE, self.canary_evidence.clone());
        register(r, REPLICA_OUTLIER, self.outlier.clone());
    }

    /// The canary verdict of `version` on `signal`.
    pub fn set_canary(&self, target: &str, version: &str, signal: &str, v: &crate::detect::compare::Comparison) {
        let (regressed, effect, evidence) = (v.regressed, v.effect, v.log_evidence);
        let labels = CanaryLabels { target: target.to_owned(), version: server_label(version), signal: signal.to_owned() };
        for state in ["ok", "regressed"] {
            let l = CanaryStateLabels { target: labels.target.clone(), version: labels.version.clone(), signal: labels.signal.clone(), state };
            self.canary_state.get_or_create(&l).set(i64::from((state == "regressed") == regressed));
        }
        let e = effect.unwrap_or(crate::detect::Estimate { value: f64::NAN, low: f64::NAN, high: f64::NAN });
        for (bound, v) in [("estimate", e.value), ("low", e.low), ("high", e.high)] {
            let l = CanaryEffectLabels { target: labels.target.clone(), version: labels.version.clone(), signal: labels.signal.clone(), bound };
            self.canary_effect.get_or_create(&l).set(v);
        }
        self.canary_evidence.get_or_create(&labels).set(evidence);
        let mut current = self.canary_current.lock().unwrap_or_else(|e| e.into_inner());
        let list = current.entry(target.to_owned()).or_default();
        if !list.contains(&labels) {
            list.push(labels);
        }
    }

    /// The rollout ended: the target's canary series go.
    pub fn clear_canary(&self, target: &str) {
        let Some(list) = self.canary_current.lock().unwrap_or_else(|e| e.into_inner()).remove(target) else { return };
        for l in list {
            for state in ["ok", "regressed"] {
                self.canary_state.remove(&CanaryStateLabels { target: l.target.clone(), version: l.version.clone(), signal: l.signal.clone(), state });
            }
            for bound in ["estimate", "low", "high"] {
                self.canary_effect.remove(&CanaryEffectLabels { target: l.target.clone(), version: l.version.clone(), signal: l.signal.clone(), bound });
            }
            self.canary_evidence.remove(&l);
        }
    }

    pub fn set_outlier(&self, target: &str, replica: &str, signal: &str, outlier: bool) {
        self.outlier
            .get_or_create(&OutlierLabels { target: target.to_owned(), replica: replica.to_owned(), signal: signal.to_owned() })
            .set(i64::from(outlier));
    }

    pub fn forget_outlier(&self, target: &str, replica: &str) {
        for signal in ["ttft", "e2e", "goodput"] {
            self.outlier.remove(&OutlierLabels { target: target.to_owned(), replica: replica.to_owned(), signal: signal.to_owned() });
        }
    }

    pub(super) fn set_info(&self, target: &str, replica: &str, version: &str, node: &str, zone: &str) {
        let labels = ReplicaInfoLabels {
            target: target.to_owned(),
            replica: replica.to_owned(),
            version: server_label(version),
            node: server_label(node),
            zone: server_label(zone),
        };
        let mut current = self.info_current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = current.insert((target.to_owned(), replica.to_owned()), labels.clone()) {
            if old != labels {
                self.info.remove(&old);
            }
        }
        touch(&self.info, &labels);
    }

    pub(super) fn forget_info(&self, target: &str, replica: &str) {
        if let Some(old) = self.info_current.lock().unwrap_or_else(|e| e.into_inner()).remove(&(target.to_owned(), replica.to_owned())) {
            self.info.remove(&old);
        }
    }
}
