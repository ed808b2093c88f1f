//! DNS replica discovery through a static resolver: replicas appear and disappear with the
//! records; a failed lookup keeps the last set; stop ends it.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use llmprobe::replicas::discover::{DiscoverSpec, Replica, Resolver, StaticResolver};

/// The static resolver, counting the lookups.
struct Counting {
    table: StaticResolver,
    lookups: AtomicUsize,
}

impl Resolver for Counting {
    fn lookup<'a>(&'a self, name: &'a str) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        self.table.lookup(name)
    }
}

/// Waits until the resolver has been asked `n` more times than `from`.
async fn wait_for_lookups(resolver: &Counting, from: usize, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while resolver.lookups.load(Ordering::SeqCst) < from + n {
        assert!(std::time::Instant::now() < deadline, "no lookups");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

async fn expect(rx: &mut watch::Receiver<Vec<Replica>>, step: &str, want: &[&str]) {
    let ids = |set: &[Replica]| set.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    if tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|set| ids(set) == want)).await.is_err() {
        panic!("{step}: published {:?}, wanted {want:?}", ids(&rx.borrow()));
    }
}

#[tokio::test]
async fn replicas_follow_the_records() {
    let resolver = StaticResolver::new();
    resolver.set("vllm-headless.inference.svc.cluster.local", ips(&["127.0.0.3", "127.0.0.2"]));
    let spec = DiscoverSpec::Dns { name: "vllm-headless.inference.svc.cluster.local".into(), port: 8000, interval: Duration::from_millis(20) };
    let (tx, mut rx) = watch::channel(Vec::new());
    let stop = CancellationToken::new();
    let counting = Arc::new(Counting { table: resolver.clone(), lookups: AtomicUsize::new(0) });
    let task = tokio::spawn(llmprobe::replicas::discover::run_with(spec, counting.clone(), tx, stop.clone()));

    expect(&mut rx, "first answer", &["127.0.0.2:8000", "127.0.0.3:8000"]).await;
    let first = rx.borrow()[0].clone();
    assert_eq!(first.addr, "127.0.0.2:8000".parse().unwrap());
    assert_eq!((first.node, first.zone, first.version), (None, None, None));

    resolver.set("vllm-headless.inference.svc.cluster.local", ips(&["127.0.0.3"]));
    expect(&mut rx, "a replica disappears", &["127.0.0.3:8000"]).await;

    // The name stops resolving: the last set stays.
    resolver.remove("vllm-headless.inference.svc.cluster.local");
    rx.borrow_and_update();
    // Two failed lookups done: the third has begun.
    wait_for_lookups(&counting, counting.lookups.load(Ordering::SeqCst), 3).await;
    assert!(!rx.has_changed().unwrap(), "a failed lookup changed the set");

    resolver.set("vllm-headless.inference.svc.cluster.local", ips(&["127.0.0.4", "127.0.0.3", "127.0.0.4"]));
    expect(&mut rx, "a replica appears", &["127.0.0.3:8000", "127.0.0.4:8000"]).await;

    // An empty answer is an empty set.
    resolver.set("vllm-headless.inference.svc.cluster.local", []);
    expect(&mut rx, "no records", &[]).await;

    stop.cancel();
    tokio::time::timeout(Duration::from_secs(2), task).await.expect("stops when told").unwrap();
}

#[tokio::test]
async fn system_resolver_finds_localhost() {
    let spec = DiscoverSpec::Dns { name: "localhost".into(), port: 9, interval: Duration::from_secs(60) };
    let (tx, mut rx) = watch::channel(Vec::new());
    let stop = CancellationToken::new();
    let task = tokio::spawn(llmprobe::replicas::discover::run(spec, tx, stop.clone()));
    let set = tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|set| !set.is_empty())).await.expect("localhost resolves").unwrap().clone();
    assert!(set.iter().all(|r| r.addr.ip().is_loopback() && r.addr.port() == 9 && r.id == r.addr.to_string()), "{set:?}");
    stop.cancel();
    task.await.unwrap();
}
