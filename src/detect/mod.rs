//! Release regression detection from sparse probes: the binned history and its variogram, the
//! release-armed and continuous tests, canary and outlier comparisons, persistence and the
//! planner. The method, its assumptions in plain words and its measured false alarms and power
//! live in one place: docs/detection.md.
//!
//! The detector in layers, each file naming only those below it: `daily` (the daily shape),
//! `state` (types and state),
//! `covariates` (load adjustment, cache warm-up), `tail` (departures from the recent level, the
//! tail test's history), `history`, `baseline` and `sensitivity` (binned history, frozen
//! baselines, each scenario's share of the shared load), `release`
//! (release-armed tests, recovery), `continuous` (the marker-free test), `report` (the exported
//! rows), and `detector` on top (probes, markers, time).
//!
//! Memory: at most `max_keys` target × scenario keys, each with 3 × `baseline_max_samples` latency
//! values plus as many post-release values and 7 hours of goodput bins, and per target the bins
//! of `history_s` with a variogram per latency signal and a week of hourly sums per latency
//! signal (the daily shape: 168 hours, about 4 KB), and per key and latency signal an hourly
//! histogram of the tail test's departures for each hour of `history_s` (96 counts each).
pub mod baseline;
pub mod compare;
pub mod continuous;
pub mod covariates;
pub mod daily;
pub mod detector;
#[cfg(test)]
mod fixtures;
pub mod history;
pub mod math;
pub mod persist;
pub mod release;
pub mod report;
pub mod sensitivity;
pub mod sim;
pub mod snapshot;
pub mod state;
pub mod tail;
pub mod verdict;

pub use crate::config::DetectSettings;
pub use covariates::{CacheWarmup, replica_id};
pub use snapshot::Restored;
pub use state::{
    Cause, ChecksReport, Detector, Estimate, Ignored, MAX_VERSION_CHARS, Marked, MarkerTime, Observation, Signal, SignalReport, State, StateChange,
};
