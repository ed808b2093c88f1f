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
mod endpoints;
mod follow;

pub use endpoints::Endpoints;
pub use follow::{follow, window};
