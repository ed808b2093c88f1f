//! Release regression detection from sparse probes (the method in plain words, and its measured
//! false alarms and power, are in the README, "Release regression detection").
//!
//! Per target the probes are pooled in time bins; the variogram of the bin means measures the
//! target's own dependence (load swings, drift), and every before/after test takes its variance
//! from it, so correlated probes are not mistaken for independent evidence.
//!
//! **Release-armed tests** (`mark_release`): after a grace window, per latency signal the mean of
//! winsorized log latency and the share above the baseline's p90, pooled and per scenario, and for
//! goodput the bad count per bin capped (outage bins left out); looks spread over the window with
//! the error level split by Bonferroni, and the effect required in both halves of the window.
//!
//! **Continuous test**: every few minutes the last half hour against the hours before it, at an
//! error level per look that keeps the false alarms below one per `continuous_arl_days`; an alarm
//! needs two passing looks in a row.
//!
//! **Recovery**: the last 10 minutes no longer worse than the "still regressed" alternative.
//!
//! Memory: at most `max_keys` target × scenario keys, each with 3 × `baseline_max_samples` latency
//! values plus as many post-release values and 7 hours of goodput bins, and per target the bins
//! of `history_s` with a variogram per latency signal.
pub mod compare;
pub mod detector;
pub mod math;
pub mod persist;
pub mod sim;

pub use crate::config::DetectSettings;
pub use detector::{Detector, Estimate, Event, Ignored, Observation, Restored, Signal, SignalReport, Source, State};
