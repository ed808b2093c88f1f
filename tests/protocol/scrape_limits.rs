//! Engine pages a peer sizes: a page with more series than `MAX_SERIES`, or larger than
//! `MAX_PAGE_BYTES`, is refused with an error that says so; the scrape loop reports the source
//! down and the last good reading stays the one joined. Loopback server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use llmprobe::source::scrape::{MAX_PAGE_BYTES, MAX_SERIES, ScrapeReport};
use llmprobe::source::{self, GpuFilter, SnapshotCache, SourceKind, SourceSpec};
use tokio_util::sync::CancellationToken;

const GOOD: &str = "vllm:num_requests_running 3\nvllm:num_requests_waiting 1\n";

/// Pages served in turn: the first request gets the first page, and so on; the last repeats.
async fn server(pages: Vec<String>) -> std::net::SocketAddr {
    let pages = Arc::new(pages);
    let served = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let (pages, served) = (pages.clone(), served.clone());
            async move {
                let i = served.fetch_add(1, Ordering::Relaxed).min(pages.len() - 1);
                pages[i].clone()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn too_many_series() -> String {
    let mut page = String::from(GOOD);
    for i in 0..MAX_SERIES {
        page.push_str(&format!("vllm:x{{i=\"{i}\"}} 1\n"));
    }
    page
}

fn too_large() -> String {
    let mut page = String::from(GOOD);
    while page.len() <= MAX_PAGE_BYTES {
        page.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    page
}

fn spec(addr: std::net::SocketAddr, interval: Duration) -> SourceSpec {
    SourceSpec {
        name: "engine".into(),
        kind: SourceKind::Engine(None),
        url: Some(format!("http://{addr}/metrics")),
        interval,
        timeout: Duration::from_secs(20),
        target: Some("t".into()),
        filter: GpuFilter::default(),
    }
}

#[tokio::test]
async fn pages_over_the_caps_are_refused_with_a_clear_error() {
    let addr = server(vec![GOOD.into(), too_many_series(), too_large(), GOOD.into()]).await;
    let mut src = source::build(&spec(addr, Duration::from_secs(1)), reqwest::Client::new());
    assert_eq!(src.scrape().await.unwrap().requests_running, Some(3.0));
    let err = src.scrape().await.unwrap_err();
    assert!(err.contains(&format!("more than {MAX_SERIES} series")), "{err}");
    let err = src.scrape().await.unwrap_err();
    assert!(err.contains(&format!("page larger than {MAX_PAGE_BYTES} bytes")), "{err}");
    assert_eq!(src.scrape().await.unwrap().requests_running, Some(3.0), "the source reads again once the page is sane");
}

struct Reports(tokio::sync::mpsc::UnboundedSender<bool>);

impl ScrapeReport for Reports {
    fn scraped(&self, _source: &str, up: bool, _seconds: f64) {
        let _ = self.0.send(up);
    }
}

#[tokio::test]
async fn a_refused_page_keeps_the_last_good_reading() {
    let addr = server(vec![GOOD.into(), too_many_series()]).await;
    // A reading is joined for three intervals: long enough that the good one is still fresh
    // when the refused page is reported.
    let spec = spec(addr, Duration::from_secs(1));
    let cache = Arc::new(SnapshotCache::default());
    cache.register(&spec.name, spec.target.as_deref(), spec.interval);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let src = source::build(&spec, reqwest::Client::new());
    let task = tokio::spawn(source::scrape::run(src, spec, cache.clone(), Arc::new(Reports(tx)), stop.clone()));
    assert_eq!(rx.recv().await, Some(true), "the first page is good");
    assert_eq!(rx.recv().await, Some(false), "the page over the series cap is refused");
    let joined = cache.at("t", Instant::now()).expect("the last good reading is kept");
    assert_eq!(joined.reading.requests_running, Some(3.0));
    assert_eq!(joined.reading.requests_waiting, Some(1.0));
    stop.cancel();
    task.await.unwrap();
}
