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
/// A page with more series (sample lines) than this is refused while it is read, before any
/// of it is parsed: a parsed series costs far more than its line (a 14 MB page of 10^6 series
/// took 660 MiB). vLLM with 8 data-parallel ranks, or dcgm-exporter on a MIG node, is a few
/// thousand.
pub const MAX_SERIES: usize = 50_000;

/// A page as it is read: its bytes, within `MAX_PAGE_BYTES`, and its sample lines counted as
/// they arrive, within `MAX_SERIES`. A page over either is refused at the chunk that crosses
/// it, so it costs what was read by then, never the whole page or its parse.
#[derive(Default)]
struct PageReader {
    body: Vec<u8>,
    series: usize,
    line: LineStart,
}

/// Where the reader stands in the current line: before its first visible character, in a
/// comment or blank line, or in a sample line (already counted).
#[derive(Default, Clone, Copy, PartialEq)]
enum LineStart {
    #[default]
    Start,
    Comment,
    Sample,
}

impl PageReader {
    /// A reader for a page whose announced length is `length` (room is made for it at once).
    pub fn with_length(length: Option<u64>) -> PageReader {
        let room = length.map_or(0, |n| n.min(MAX_PAGE_BYTES as u64) as usize);
        PageReader { body: Vec::with_capacity(room), ..PageReader::default() }
    }

    /// Takes the next chunk of the page; `Err` names the cap it crossed.
    pub fn take(&mut self, chunk: &[u8]) -> Result<(), String> {
        if self.body.len() + chunk.len() > MAX_PAGE_BYTES {
            return Err(format!("page larger than {MAX_PAGE_BYTES} bytes"));
        }
        for &b in chunk {
            self.line = match (self.line, b) {
                (_, b'\n') => LineStart::Start,
                (LineStart::Start, b' ' | b'\t' | b'\r') => LineStart::Start,
                (LineStart::Start, b'#') => LineStart::Comment,
                (LineStart::Start, _) => {
                    self.series += 1;
                    if self.series > MAX_SERIES {
                        return Err(format!("page has more than {MAX_SERIES} series"));
                    }
                    LineStart::Sample
                }
                (state, _) => state,
            };
        }
        self.body.extend_from_slice(chunk);
        Ok(())
    }

    /// The whole page, as text.
    pub fn finish(self) -> Result<String, String> {
        String::from_utf8(self.body).map_err(|_| "page is not UTF-8".to_owned())
    }
}

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
        let mut resp = self.client.get(&self.url).send().await.map_err(|e| crate::client::error_chain(&e))?;
        if !resp.status().is_success() {
            return Err(format!("GET {}: HTTP {}", self.url, resp.status()));
        }
        if resp.content_length().is_some_and(|n| n > MAX_PAGE_BYTES as u64) {
            return Err(format!("GET {}: page larger than {MAX_PAGE_BYTES} bytes", self.url));
        }
        let mut page = PageReader::with_length(resp.content_length());
        while let Some(chunk) = resp.chunk().await.map_err(|e| crate::client::error_chain(&e))? {
            page.take(&chunk).map_err(|e| format!("GET {}: {e}", self.url))?;
        }
        page.finish()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn page(series: usize) -> String {
        let mut text = String::from("# HELP m a metric\n# TYPE m gauge\n\n");
        text.extend((0..series).map(|i| format!("m{{i=\"{i}\"}} 1\n")));
        text
    }

    #[test]
    fn a_page_with_too_many_series_is_refused_while_it_is_read() {
        let text = page(400_000);
        assert!(text.len() < MAX_PAGE_BYTES, "under the byte cap: {}", text.len());
        let mut reader = PageReader::default();
        let refused = text.as_bytes().chunks(16 << 10).find_map(|chunk| reader.take(chunk).err());
        assert_eq!(refused.as_deref(), Some("page has more than 50000 series"));
        // Refused at the chunk that crossed the cap: what was kept is about 50,000 lines.
        let kept = reader.body.len();
        assert!(kept < page(MAX_SERIES).len() && kept + (16 << 10) > page(MAX_SERIES).len(), "kept {kept} bytes");
    }

    #[test]
    fn series_are_counted_across_chunks_and_comments_and_blank_lines_are_not() {
        let text = format!("{}  # indented comment\n\r\n  \t\n", page(MAX_SERIES));
        for size in [1, 7, 4096] {
            let mut reader = PageReader::default();
            for chunk in text.as_bytes().chunks(size) {
                reader.take(chunk).unwrap();
            }
            assert_eq!(reader.series, MAX_SERIES, "chunks of {size}");
            assert_eq!(promtext::parse_limited(&reader.finish().unwrap(), MAX_SERIES).unwrap().samples.len(), MAX_SERIES);
        }
        let mut reader = PageReader::default();
        assert!(reader.take(&vec![b'#'; MAX_PAGE_BYTES + 1]).unwrap_err().contains("larger than"));
    }
}
