//! Telemetry sources: the engine's `/metrics`, dcgm-exporter, and NVML read directly. Each source
//! is scraped by one shared loop (`scrape.rs`: interval, timeout, `llmprobe_source_up`, scrape
//! duration) and its readings go to a `SnapshotCache` (`cache.rs`) that keeps a short history,
//! so a finished probe can be joined with what the engine and GPU looked like when it was sent and
//! when its first token came.
//!
//! Files: `promtext.rs` (text-format parser), `engine.rs` (vLLM/SGLang/llama.cpp/TGI names),
//! `dcgm.rs` (dcgm-exporter names and GPU filters), `nvml.rs` (NVML via nvml-wrapper),
//! `reading.rs` (what a scrape yields, and the `Source` seam every kind implements).

pub mod cache;
pub mod dcgm;
pub mod engine;
pub mod nvml;
pub mod promtext;
mod reading;
pub mod scrape;

pub use crate::config::{EngineKind, GpuFilter, SourceKind, SourceSpec};
pub use cache::{Joined, SnapshotCache};
pub use reading::{Reading, Source};

/// Builds the scraper for a spec. `url` must be resolved for engine and dcgm sources.
pub fn build(spec: &SourceSpec, client: reqwest::Client) -> Box<dyn Source> {
    match &spec.kind {
        SourceKind::Nvml => Box::new(nvml::NvmlSource::new(spec.filter.clone())),
        kind => Box::new(scrape::HttpSource::new(spec, kind.clone(), client)),
    }
}
