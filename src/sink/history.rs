//! Recent probes for `/debug/probes`: a ring of the latest outcomes plus a separate ring of errors,
//! so a failure stays visible after many successes have pushed it out of the main ring.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::Sink;
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};

/// Default sizes of the two rings.
const RECENT_CAPACITY: usize = 200;
const FAILURE_CAPACITY: usize = 200;
/// Error details are bounded at the source; this is a second bound for the debug page.
const DETAIL_MAX_BYTES: usize = 512;

/// One probe as shown on `/debug/probes`. Durations in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeView {
    pub target: String,
    pub scenario: String,
    pub seq: u64,
    pub request_id: String,
    /// Readable id `{run}-{target}-{scenario}-{n}`.
    pub probe_id: String,
    /// Requested prompt tokens (0 for a replayed prompt) and what the server counted.
    pub requested_input_tokens: u32,
    pub prompt_tokens: Option<u64>,
    /// Index of a replayed dataset prompt.
    pub dataset_index: Option<u64>,
    /// SHA-256 of the prompt as sent.
    pub prompt_sha256: String,
    /// `success`, `error` or `dropped`.
    pub outcome: &'static str,
    /// The error class, `null` on success.
    pub error: Option<&'static str>,
    pub error_detail: Option<String>,
    pub http_status: Option<u16>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// Send -> end (or failure detection); `null` for dropped probes, which were never sent.
    pub elapsed_ms: Option<f64>,
    pub output_tokens: Option<u64>,
    pub token_source: Option<&'static str>,
    pub schedule_lag_ms: Option<f64>,
    /// How long ago the probe ended, at render time.
    pub age_ms: f64,
}

/// The `/debug/probes` document; newest first in both lists.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryView {
    pub recent: Vec<ProbeView>,
    pub failures: Vec<ProbeView>,
}

#[derive(Debug)]
struct Entry {
    end: Instant,
    view: ProbeView,
}

#[derive(Debug)]
struct Rings {
    recent: VecDeque<Entry>,
    failures: VecDeque<Entry>,
}

/// Bounded history of recent probes. Errors (not drops) are also kept in the failure ring.
#[derive(Debug)]
pub struct History {
    rings: Mutex<Rings>,
    recent_capacity: usize,
    failure_capacity: usize,
}

impl Default for History {
    fn default() -> Self {
        History::new(RECENT_CAPACITY, FAILURE_CAPACITY)
    }
}

impl History {
    pub fn new(recent_capacity: usize, failure_capacity: usize) -> Self {
        let rings = Rings { recent: VecDeque::with_capacity(recent_capacity), failures: VecDeque::with_capacity(failure_capacity) };
        History { rings: Mutex::new(rings), recent_capacity, failure_capacity }
    }

    /// Both rings, newest first, with ages relative to `now`.
    pub fn view_at(&self, now: Instant) -> HistoryView {
        let rings = self.lock();
        let render = |ring: &VecDeque<Entry>| -> Vec<ProbeView> {
            ring.iter().rev().map(|e| ProbeView { age_ms: ms(now.saturating_duration_since(e.end)), ..e.view.clone() }).collect()
        };
        HistoryView { recent: render(&rings.recent), failures: render(&rings.failures) }
    }

    /// The `/debug/probes` JSON body.
    pub fn to_json(&self) -> String {
        // Serialising plain strings and numbers cannot fail.
        serde_json::to_string_pretty(&self.view_at(Instant::now())).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rings> {
        // A panic elsewhere must not take the debug page down with it.
        self.rings.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn push_bounded(ring: &mut VecDeque<Entry>, capacity: usize, entry: Entry) {
    if capacity == 0 {
        return;
    }
    while ring.len() >= capacity {
        ring.pop_front();
    }
    ring.push_back(entry);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let cut = (0..=max).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &s[..cut])
}

fn view(outcome: &Outcome, sample: Option<&Sample>) -> ProbeView {
    let class = outcome.error_class();
    let sent = class != Some(ErrorClass::InFlightCap);
    let tl = &outcome.timeline;
    ProbeView {
        target: outcome.target.to_string(),
        scenario: outcome.scenario.to_string(),
        seq: outcome.seq,
        request_id: outcome.request_id.clone(),
        probe_id: outcome.probe_id.clone(),
        requested_input_tokens: outcome.requested_input_tokens,
        prompt_tokens: outcome.usage.map(|u| u.prompt_tokens),
        dataset_index: outcome.dataset_index,
        prompt_sha256: outcome.prompt_sha256.clone(),
        outcome: class.map_or("success", ErrorClass::outcome_label),
        error: class.map(ErrorClass::as_str),
        error_detail: outcome.result.as_ref().err().map(|f| bounded(&f.detail, DETAIL_MAX_BYTES)),
        http_status: outcome.http_status,
        ttft_ms: sample.map(|s| ms(s.ttft)),
        tpot_ms: sample.and_then(|s| s.tpot).map(ms),
        e2e_ms: sample.map(|s| ms(s.e2e)),
        elapsed_ms: sent.then(|| ms(tl.end.saturating_duration_since(tl.sent))),
        output_tokens: sample.map(|s| s.output_tokens),
        token_source: sample.map(|s| s.token_source.as_str()),
        schedule_lag_ms: sent.then(|| ms(tl.schedule_lag())),
        age_ms: 0.0,
    }
}

impl Sink for History {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let entry = || Entry { end: outcome.timeline.end, view: view(outcome, sample) };
        let mut rings = self.lock();
        if outcome.error_class().is_some_and(|c| c != ErrorClass::InFlightCap) {
            push_bounded(&mut rings.failures, self.failure_capacity, entry());
        }
        push_bounded(&mut rings.recent, self.recent_capacity, entry());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_cuts_on_char_boundary() {
        assert_eq!(bounded("abc", 5), "abc");
        assert_eq!(bounded("aé", 2), "a…");
        assert_eq!(bounded("abcdef", 3), "abc…");
    }
}
