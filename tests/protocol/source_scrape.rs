//! The scrape loop over real HTTP: the mock engine's vLLM `/metrics` and fake DCGM page parse and
//! map, a dead source reads `llmprobe_source_up 0` without stopping anything, and NVML on a
//! machine without the NVIDIA driver stays down without a crash.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llmprobe::source::promtext::parse;
use llmprobe::source::scrape::ScrapeReport;
use llmprobe::source::{self, EngineKind, GpuFilter, SnapshotCache, SourceKind, SourceSpec};
use tokio_util::sync::CancellationToken;

fn spec(name: &str, kind: SourceKind, url: Option<String>) -> SourceSpec {
    SourceSpec {
        name: name.into(),
        kind,
        url,
        interval: Duration::from_millis(50),
        timeout: Duration::from_millis(200),
        target: Some("t".into()),
        filter: GpuFilter::default(),
    }
}

#[tokio::test]
async fn mock_pages_parse_cleanly() {
    let (addr, stop) = common::start_mock(Default::default()).await;
    for path in ["/metrics", "/dcgm/metrics"] {
        let text = reqwest::get(format!("http://{addr}{path}")).await.unwrap().text().await.unwrap();
        let page = parse(&text);
        assert_eq!(page.bad_lines, 0, "{path}");
        assert!(page.samples.len() >= 9, "{path}: {} samples", page.samples.len());
    }
    let vllm = parse(&reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap());
    assert_eq!(EngineKind::detect(&vllm), Some(EngineKind::Vllm));
    stop.cancel();
}

/// Reports each scrape on to the metrics and counts them by source.
struct Counted {
    metrics: Arc<llmprobe::sink::Metrics>,
    scrapes: Mutex<HashMap<String, usize>>,
}

impl ScrapeReport for Counted {
    fn scraped(&self, source: &str, up: bool, seconds: f64) {
        self.metrics.scraped(source, up, seconds);
        *self.scrapes.lock().unwrap().entry(source.to_owned()).or_default() += 1;
    }
}

/// Runs the given sources until each has been scraped twice (its outcome, and the one after
/// it, reported); returns the final `/metrics` and the cache.
async fn scrape_twice(specs: Vec<SourceSpec>) -> (String, Arc<SnapshotCache>) {
    let mut config = common::config("http://127.0.0.1:9", "openai-completions", "{rate: 1}", "", 4);
    config.sources = specs.clone();
    let metrics = Arc::new(llmprobe::sink::Metrics::new(&config));
    let counted = Arc::new(Counted { metrics: metrics.clone(), scrapes: Mutex::default() });
    let cache = Arc::new(SnapshotCache::default());
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    for s in specs {
        cache.register(&s.name, s.target.as_deref(), s.interval);
        let src = source::build(&s, reqwest::Client::new());
        tasks.push(tokio::spawn(source::scrape::run(src, s, cache.clone(), counted.clone(), stop.clone())));
    }
    let deadline = Instant::now() + common::PATIENCE;
    while !names.iter().all(|n| counted.scrapes.lock().unwrap().get(n).is_some_and(|c| *c >= 2)) {
        assert!(Instant::now() < deadline, "sources not scraped twice: {:?}", counted.scrapes.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    for t in tasks {
        t.await.unwrap();
    }
    (metrics.encode_openmetrics(), cache)
}

#[tokio::test]
async fn live_sources_fill_the_cache_and_dead_ones_are_down() {
    let (addr, stop) = common::start_mock(Default::default()).await;
    let specs = vec![
        spec("engine", SourceKind::Engine(None), Some(format!("http://{addr}/metrics"))),
        spec("gpu", SourceKind::Dcgm, Some(format!("http://{addr}/dcgm/metrics"))),
        spec("dead", SourceKind::Engine(None), Some("http://127.0.0.1:9/metrics".into())),
        spec("wrong-page", SourceKind::Dcgm, Some(format!("http://{addr}/metrics"))),
    ];
    let (text, cache) = scrape_twice(specs).await;
    assert_eq!(common::metric(&text, "llmprobe_source_up", &["source=\"engine\""]), 1.0, "{text}");
    assert_eq!(common::metric(&text, "llmprobe_source_up", &["source=\"gpu\""]), 1.0);
    assert_eq!(common::metric(&text, "llmprobe_source_up", &["source=\"dead\""]), 0.0);
    assert_eq!(common::metric(&text, "llmprobe_source_up", &["source=\"wrong-page\""]), 0.0, "a vLLM page is not a DCGM page");
    assert!(text.contains("llmprobe_source_scrape_duration_seconds{source=\"engine\"}"));
    let joined = cache.at("t", Instant::now()).expect("a fresh snapshot");
    assert_eq!(joined.reading.requests_running, Some(0.0));
    assert!(joined.reading.gpu_memory_used_bytes.unwrap() > 0.0);
    stop.cancel();
}

#[tokio::test]
async fn nvml_without_a_driver_is_down_not_fatal() {
    let has_driver = std::path::Path::new("/proc/driver/nvidia/version").exists();
    let (text, cache) = scrape_twice(vec![spec("nvml", SourceKind::Nvml, None)]).await;
    let up = common::metric(&text, "llmprobe_source_up", &["source=\"nvml\""]);
    if has_driver {
        assert_eq!(up, 1.0, "{text}");
        assert!(cache.at("t", Instant::now()).unwrap().reading.gpu_utilization.is_some());
    } else {
        assert_eq!(up, 0.0, "{text}");
        assert!(cache.at("t", Instant::now()).is_none());
    }
}
