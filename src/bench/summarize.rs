//! The summary file of a set of records (one run, or several merged): per-point figures with
//! spread, and the knee.

use super::knee;
use super::records::Record;
use super::summary::{self, SummaryFile};
use crate::config::BenchMode;

/// Summary of records from one run or several merged runs.
pub fn summarize(all: &[Record], run_ids: &[String], mode: BenchMode, objective: f64) -> SummaryFile {
    let points = summary::points(all, mode == BenchMode::Rate);
    SummaryFile {
        run_ids: run_ids.to_vec(),
        mode: mode.as_str().to_owned(),
        percentile_method: summary::PERCENTILE_METHOD.to_owned(),
        goodput_objective: objective,
        knee: knee::find(&points, objective),
        points,
    }
}
