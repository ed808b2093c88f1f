//! Replicas from DNS: every A/AAAA record of a name, at one port, re-resolved on an interval.
//! The resolver is a trait so tests map names to loopback addresses without a DNS server.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::replica::{Replica, Streak, publish};

/// Resolves a name to its addresses. An error (no such name, no records, resolver down) keeps
/// the last published set; an empty answer publishes an empty set.
pub trait Resolver: Send + Sync {
    fn lookup<'a>(&'a self, name: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>>;
}

/// The system resolver (`getaddrinfo` through `tokio::net::lookup_host`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((name, 0)).await?.map(|a| a.ip()).collect()) })
    }
}

/// A fixed, changeable name -> addresses table; clones share it. A name not in the table fails
/// like NXDOMAIN.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    table: Arc<Mutex<HashMap<String, Vec<IpAddr>>>>,
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (replaces) the addresses of `name`.
    pub fn set(&self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), addrs.into_iter().collect());
    }

    /// Removes `name`: its lookups fail from now on.
    pub fn remove(&self, name: &str) {
        self.table.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
    }
}

impl Resolver for StaticResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> BoxFuture<'a, io::Result<Vec<IpAddr>>> {
        let got = self.table.lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned();
        Box::pin(async move { got.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no such name: {name}"))) })
    }
}

/// The longest a lookup may take before it counts as failed.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest refresh interval honoured (a zero interval would spin).
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The replicas of one answer: `ip:port` ids, each address once.
pub fn replicas(addrs: &[IpAddr], port: u16) -> Vec<Replica> {
    let mut out: Vec<Replica> = addrs
        .iter()
        .map(|ip| {
            let addr = SocketAddr::new(*ip, port);
            Replica { id: addr.to_string(), addr, node: None, zone: None, version: None }
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

pub(super) async fn run(name: &str, port: u16, interval: Duration, resolver: &dyn Resolver, out: &tokio::sync::watch::Sender<Vec<Replica>>) {
    let mut streak = Streak::new(format!("dns discovery of {name}"));
    loop {
        match tokio::time::timeout(LOOKUP_TIMEOUT, resolver.lookup(name)).await {
            Ok(Ok(addrs)) => {
                streak.ok();
                if publish(out, replicas(&addrs, port)) {
                    tracing::debug!(name, replicas = out.borrow().len(), "dns discovery: replica set changed");
                }
            }
            Ok(Err(e)) => streak.fail(&e.to_string()),
            Err(_) => streak.fail(&format!("lookup took over {LOOKUP_TIMEOUT:?}")),
        }
        tokio::time::sleep(interval.max(MIN_INTERVAL)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_ip_port_and_unique() {
        let ips: Vec<IpAddr> = ["127.0.0.3", "127.0.0.2", "127.0.0.3", "::1"].iter().map(|s| s.parse().unwrap()).collect();
        let ids: Vec<String> = replicas(&ips, 8000).into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["127.0.0.2:8000", "127.0.0.3:8000", "[::1]:8000"]);
    }

    #[tokio::test]
    async fn system_resolver_resolves_localhost() {
        let got = SystemResolver.lookup("localhost").await.unwrap();
        assert!(got.iter().all(|ip| ip.is_loopback()), "{got:?}");
    }
}
