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

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use crate::config::{ApiAccess, DiscoverSpec, KubernetesSpec, PortRef};
pub use dns::{Resolver, StaticResolver, SystemResolver};
pub use replica::Replica;

/// Runs until `stop`; publishes the full, sorted (by id) replica set on every change. A failed
/// refresh keeps the last set (logged once per failure streak). DNS names go through the
/// system resolver.
pub async fn run(spec: DiscoverSpec, out: tokio::sync::watch::Sender<Vec<Replica>>, stop: CancellationToken) {
    run_with(spec, Arc::new(SystemResolver), out, stop).await
}

/// [`run`] with the resolver for `DiscoverSpec::Dns` given (tests: a [`StaticResolver`]).
pub async fn run_with(spec: DiscoverSpec, resolver: Arc<dyn Resolver>, out: tokio::sync::watch::Sender<Vec<Replica>>, stop: CancellationToken) {
    let work = async {
        match spec {
            DiscoverSpec::Dns { name, port, interval } => dns::run(&name, port, interval, resolver.as_ref(), &out).await,
            DiscoverSpec::Kubernetes(k) => kubernetes::run(&k, &out).await,
        }
    };
    tokio::select! {
        () = stop.cancelled() => {}
        () = work => {}
    }
}
