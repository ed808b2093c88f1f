//! Discovery by spec: the DNS or Kubernetes loop, until stopped.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::dns::{self, Resolver, SystemResolver};
use super::kubernetes;
use super::replica::Replica;
use crate::config::DiscoverSpec;

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
