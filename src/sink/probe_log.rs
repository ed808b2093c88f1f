//! The prober's own probe log: one JSON line per finished probe, in the fields of a bench
//! record that the planner reads (`llmprobe detect simulate --replay FILE --replay-order time`),
//! so a user can plan the detector on their own traffic, in time order. Bounded by size
//! (`rotating.rs`).

use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::Sink;
use super::rotating::RotatingFile;
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::util::clock::unix_now;

#[derive(Debug)]
pub struct ProbeLog(RotatingFile);

#[derive(Serialize)]
struct Line<'a> {
    target: &'a str,
    scenario: &'a str,
    outcome: &'static str,
    intended_unix_s: f64,
    sent_unix_s: f64,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    e2e_ms: Option<f64>,
    output_tokens: Option<u64>,
    slo: Option<Goodput>,
}

#[derive(Serialize)]
struct Goodput {
    goodput: bool,
}

impl ProbeLog {
    /// Appends to `path` (created if missing); `max_bytes` at least 4 KiB.
    pub fn open(path: &Path, max_bytes: u64) -> std::io::Result<ProbeLog> {
        RotatingFile::open(path, max_bytes, "probe log").map(ProbeLog)
    }
}

impl Sink for ProbeLog {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let tl = &outcome.timeline;
        // Unix time of an instant of this probe: now minus how long ago it was.
        let (now, unix) = (Instant::now(), unix_now());
        let at = |t: Instant| unix - now.saturating_duration_since(t).as_secs_f64();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let line = Line {
            target: &outcome.target,
            scenario: &outcome.scenario,
            outcome: outcome.error_class().map_or("success", |c| c.outcome_label()),
            intended_unix_s: at(tl.intended),
            sent_unix_s: at(tl.sent),
            ttft_ms: sample.filter(|s| s.streamed).map(|s| ms(s.ttft)),
            tpot_ms: sample.and_then(|s| s.tpot.map(ms)),
            e2e_ms: sample.map(|s| ms(s.e2e)),
            output_tokens: sample.map(|s| s.output_tokens),
            slo: sample.map(|s| Goodput { goodput: s.goodput }),
        };
        let Ok(mut text) = serde_json::to_vec(&line) else { return };
        text.push(b'\n');
        let _ = self.0.write(&text);
    }
}
