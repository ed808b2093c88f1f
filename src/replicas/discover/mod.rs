//! Replica discovery: the replicas behind one target, each a probed endpoint of its own.
//!
//! Two sources: the A/AAAA records of a DNS name (a Kubernetes headless Service, Consul, any
//! DNS), refreshed on an interval, and the EndpointSlices of a Kubernetes Service, listed and
//! then watched through the API server with the pod's service account. Either publishes the
//! full replica set, sorted by id, on a `watch` channel whenever it changes.
//!
//! A failed refresh keeps the last published set (logged once per failure streak): a
//! discovery outage must not drop every replica from probing.

pub mod dns;
pub mod kubernetes;
mod replica;
mod run;

pub use crate::config::{ApiAccess, DiscoverSpec, KubernetesSpec, PortRef};
pub use dns::{Resolver, StaticResolver, SystemResolver};
pub use replica::Replica;
pub use run::{run, run_with};
