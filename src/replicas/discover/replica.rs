//! What discovery yields: one replica of a target, and how a refresh loop publishes the set,
//! backs off and logs a failure streak (shared by the DNS and Kubernetes loops).

use std::net::SocketAddr;
use std::time::Duration;

/// One replica of a target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Replica {
    /// The pod name when known, else `ip:port`.
    pub id: String,
    pub addr: SocketAddr,
    /// The node the pod runs on (Kubernetes `nodeName`), when known.
    pub node: Option<String>,
    /// The zone of the endpoint (Kubernetes `zone`), when known.
    pub zone: Option<String>,
    /// The pod's `version_label` value, when configured and readable.
    pub version: Option<String>,
}

/// Sorts by id and publishes when the set differs from the last one published.
pub(super) fn publish(out: &tokio::sync::watch::Sender<Vec<Replica>>, mut replicas: Vec<Replica>) -> bool {
    replicas.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.addr.cmp(&b.addr)));
    replicas.dedup_by(|a, b| a.id == b.id);
    out.send_if_modified(|current| {
        if *current == replicas {
            false
        } else {
            *current = replicas;
            true
        }
    })
}

/// Error backoff: 1 s doubling to 30 s.
#[derive(Debug)]
pub(super) struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_secs(1);
    const MAX: Duration = Duration::from_secs(30);

    pub(super) fn new() -> Self {
        Backoff { next: Self::FIRST }
    }

    pub(super) fn next(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        d
    }

    pub(super) fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Logs the first failure of a streak as a warning (later ones at debug) and the recovery.
#[derive(Debug)]
pub(super) struct Streak {
    what: String,
    failing: bool,
}

impl Streak {
    pub(super) fn new(what: String) -> Self {
        Streak { what, failing: false }
    }

    pub(super) fn fail(&mut self, error: &str) {
        if self.failing {
            tracing::debug!("{}: {error}", self.what);
        } else {
            self.failing = true;
            tracing::warn!("{}: {error} (keeping the last replica set; retrying)", self.what);
        }
    }

    pub(super) fn ok(&mut self) {
        if self.failing {
            self.failing = false;
            tracing::info!("{}: recovered", self.what);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(id: &str, port: u16) -> Replica {
        Replica { id: id.into(), addr: SocketAddr::from(([127, 0, 0, 1], port)), node: None, zone: None, version: None }
    }

    #[test]
    fn backoff_doubles_to_thirty_seconds_and_resets() {
        let mut b = Backoff::new();
        let got: Vec<u64> = (0..7).map(|_| b.next().as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 30, 30]);
        b.reset();
        assert_eq!(b.next(), Duration::from_secs(1));
    }

    #[test]
    fn publish_sorts_dedups_and_reports_changes_only() {
        let (tx, rx) = tokio::sync::watch::channel(Vec::new());
        assert!(publish(&tx, vec![replica("b", 2), replica("a", 1), replica("b", 3)]));
        let ids: Vec<_> = rx.borrow().iter().map(|r| (r.id.clone(), r.addr.port())).collect();
        assert_eq!(ids, [("a".to_string(), 1), ("b".to_string(), 2)]);
        assert!(!publish(&tx, vec![replica("a", 1), replica("b", 2)]));
        assert!(publish(&tx, vec![]));
        assert!(rx.borrow().is_empty());
    }
}
