//! The one scrape loop every source runs in (interval, timeout, up/duration reporting, cache
//! update), and the HTTP source that reads engine and dcgm-exporter pages.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::engine::{self, Counters};
use super::reading::Reading;
use super::{SnapshotCache, Source, SourceKind, SourceSpec, dcgm, promtext};
use crate::config::{EngineKind, GpuFilter};

/// A page larger than this is refused (a misconfigured URL or a hostile engine must not eat
/// memory; real engine and dcgm-exporter pages are well under 1 MiB).
pub const MAX_PAGE_BYTES: usize = 8 << 20;
/// A page with more series (sample lines) than this is refused before it is all parsed: a
/// parsed series costs far more than its line (a 14 MB page of 10^6 series took 660 MiB).
/// vLLM with 8 data-parallel ranks, or dcgm-exporter on a MIG node, is a few thousand.
pub const MAX_SERIES: usize = 50_000;

/// Where each scrape's outcome is reported (`llmprobe_source_up`, the scrape duration; kept by
/// the Prometheus sink).
pub trait ScrapeReport: Send + Sync {
    fn scraped(&self, source: &str, up: bool, seconds: f64);
}

/// Scrapes `source` every `spec.interval` until `stop`, keeping `llmprobe_source_up` and the
/// scrape duration current and storing every reading in `cache`. Failures are logged once per
/// change of state (up -> down), never more often.
pub async fn run(mut source: Box<dyn Source>, spec: SourceSpec, cache: Arc<SnapshotCache>, metrics: Arc<dyn ScrapeReport>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(spec.interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut was_up = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(spec.timeout, source.scrape()).await {
            Ok(r) => r,
            Err(_) => Err(format!("no answer within {:?}", spec.timeout)),
        };
        let up = result.is_ok();
        metrics.scraped(&spec.name, up, started.elapsed().as_secs_f64());
        match result {
            Ok(reading) => cache.push(&spec.name, started, reading),
            Err(e) if was_up != Some(false) => tracing::warn!(source = %spec.name, kind = spec.kind.as_str(), "source scrape failed: {e}"),
            Err(_) => {}
        }
        if up && was_up == Some(false) {
            tracing::info!(source = %spec.name, "source is back");
        }
        was_up = Some(up);
    }
}

/// An engine or dcgm-exporter page over HTTP.
pub struct HttpSource {
    client: reqwest::Client,
    url: String,
    kind: SourceKind,
    filter: GpuFilter,
    /// Detected or configured engine family; detection sticks after the first good page.
    engine: Option<EngineKind>,
    counters: Option<Counters>,
    /// The scraper's monotonic clock for counter rates.
    started: std::time::Instant,
}

impl HttpSource {
    pub fn new(spec: &SourceSpec, kind: SourceKind, client: reqwest::Client) -> Self {
        let engine = match kind {
            SourceKind::Engine(e) => e,
            _ => None,
        };
        HttpSource {
            client,
            url: spec.url.clone().unwrap_or_default(),
            kind,
            filter: spec.filter.clone(),
            engine,
            counters: None,
            started: std::time::Instant::now(),
        }
    }

    async fn fetch(&self) -> Result<String, String> {
        let mut resp = self.client.get(&self.url).send().await.map_err(|e| crate::client::target::error_chain(&e))?;
        if !resp.status().is_success() {
            return Err(format!("GET {}: HTTP {}", self.url, resp.status()));
        }
        if resp.content_length().is_some_and(|n| n > MAX_PAGE_BYTES as u64) {
            return Err(format!("GET {}: page larger than {MAX_PAGE_BYTES} bytes", self.url));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| crate::client::target::error_chain(&e))? {
            if body.len() + chunk.len() > MAX_PAGE_BYTES {
                return Err(format!("GET {}: page larger than {MAX_PAGE_BYTES} bytes", self.url));
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|_| "page is not UTF-8".to_owned())
    }

    /// Reads a page. A refused page (too large, too many series, not the expected kind) is an
    /// error: the scrape loop reports the source down and keeps its last good reading.
    fn read(&mut self, text: &str) -> Result<Reading, String> {
        let page = promtext::parse_limited(text, MAX_SERIES).map_err(|e| format!("GET {}: {e}", self.url))?;
        match self.kind {
            SourceKind::Dcgm => {
                if !page.samples.iter().any(|s| s.name.starts_with("DCGM_FI_")) {
                    return Err("no DCGM_FI_* metrics on the page".into());
                }
                Ok(dcgm::read(&page, &self.filter))
            }
            _ => {
                let kind = match self.engine.or_else(|| EngineKind::detect(&page)) {
                    Some(k) => k,
                    None => return Err("no vllm:, sglang:, llamacpp: or tgi_ metrics on the page".into()),
                };
                self.engine = Some(kind);
                Ok(engine::read(kind, &page, self.started.elapsed().as_secs_f64(), &mut self.counters))
            }
        }
    }
}

impl Source for HttpSource {
    fn scrape(&mut self) -> BoxFuture<'_, Result<Reading, String>> {
        Box::pin(async move {
            let text = self.fetch().await?;
            self.read(&text)
        })
    }
}
