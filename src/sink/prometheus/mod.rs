//! The Prometheus sink. `contract.rs` is the metric contract (`METRICS.md`): every exported name,
//! help text and bucket layout, and nothing else names a family. Below it, bottom up: `labels.rs`
//! (label sets, exemplars), `registry.rs` (family kinds, registration), `detect.rs`,
//! `replicas.rs` and `sequence.rs` (the detector's, the replicas' and the conversations' and
//! cache pairs' families), and `metrics.rs` (`Metrics`: the
//! registry, pre-created series, the recorder of samples, the text encoders).

mod contract;
mod detect;
mod labels;
mod metrics;
mod registry;
mod replicas;
mod sequence;

pub use contract::*;
pub use detect::{DetectDeltaLabels, DetectFamilies, DetectRatioLabels, DetectSignalLabels, DetectStateLabels, ReleaseLabels};
pub use labels::{EXEMPLAR_MAX_CHARS, MAX_SERVER_LABEL_CHARS, TraceExemplar};
pub use metrics::Metrics;
pub use replicas::{CanaryEffectLabels, CanaryLabels, CanaryStateLabels, OutlierLabels, ReplicaCountLabels, ReplicaFamilies, ReplicaInfoLabels};
