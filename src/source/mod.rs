//! Telemetry sources: the engine's `/metrics`, dcgm-exporter, and NVML read directly. Each source
//! is scraped by one shared loop (`scrape.rs`: interval, timeout, `llmprobe_source_up`, scrape
//! duration) and its readings go to a `SnapshotCache` (`cache.rs`) that keeps a short history,
//! so a finished probe can be joined with what the engine and GPU looked like when it was sent and
//! when its first token came.
//!
//! Files: `promtext.rs` (text-format parser), `engine.rs` (vLLM/SGLang/llama.cpp/TGI names),
//! `dcgm.rs` (dcgm-exporter names and GPU filters), `nvml.rs` (NVML via nvml-wrapper),
//! `reading.rs` (what a scrape yields, and the `Source` seam every kind implements), `build.rs`
//! (the source of a spec).

mod build;
pub mod cache;
pub mod dcgm;
pub mod engine;
pub mod nvml;
pub mod promtext;
mod reading;
pub mod scrape;

pub use crate::config::{EngineKind, GpuFilter, SourceKind, SourceSpec};
pub use build::build;
pub use cache::{Joined, SnapshotCache};
pub use reading::{Reading, Source};
