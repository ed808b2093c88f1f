//! Benchmark mode: load sweeps (closed-loop concurrency or open-arrival rate) with warm-up and
//! repeats, per-request evidence, summaries with spread, the candidate knee, reports with plots,
//! a release gate and a capacity planner. Requests go through the prober's own path: the
//! scheduler (closed pacing for concurrency sweeps, open pacing with the in-flight cap for rate
//! sweeps, any arrival process), the recorder and `measure`; each warm-up or repeat collects its
//! records through a `sink::Collect`.
//!
//! `gate` (with `paired`) probes two deployments side by side with the same workload and judges
//! the candidate against the baseline pair by pair.
//!
//! A result directory holds `manifest.json`, `records.jsonl`, `summary.json`, optional side
//! samples (`process.jsonl`), and `report.md` / `report.html`.

pub mod capacity;
pub mod compare;
pub mod engine;
pub mod figure;
pub mod gate;
mod json;
pub mod knee;
pub mod manifest;
pub mod matrix;
pub mod paired;
mod plan;
pub mod progress;
pub mod records;
pub mod report;
mod run;
pub mod schema;
pub mod shard;
pub mod side;
mod summarize;
pub mod summary;
pub mod svg;

pub use json::{read_json, write_json};
pub use plan::BenchPlan;
pub use run::{BenchOptions, run, run_sharded};
pub use summarize::summarize;
