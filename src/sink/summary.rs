//! The live one-line summary printed while probing: achieved rate, success and goodput ratios,
//! TTFT/TPOT percentiles and errors by class, over a rolling window of probe end times.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Sink;
use crate::probe::measure::Sample;
use crate::probe::outcome::{ErrorClass, Outcome};
use crate::util::stats::{percentile, sort_f64};

const DEFAULT_WINDOW: Duration = Duration::from_secs(30);
/// Upper bound on kept entries, so a very high rate cannot grow memory without limit.
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Clone, Copy)]
struct Entry {
    end: Instant,
    class: Option<ErrorClass>,
    /// TTFT and TPOT in seconds, and the goodput verdict, for successes with a sample.
    ttft: Option<f64>,
    tpot: Option<f64>,
    goodput: bool,
}

/// Numbers over the window, as shown by `Summary::line`.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryStats {
    /// Probes that ended in the window, dropped ones included.
    pub scheduled: u64,
    /// Probes sent per second over the window (or since start, if shorter).
    pub rate: f64,
    pub succeeded: u64,
    /// `succeeded / scheduled`; `None` without probes.
    pub success_ratio: Option<f64>,
    /// Goodput probes / scheduled; `None` without probes.
    pub goodput_ratio: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p95_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    /// Failed and dropped probes by class label.
    pub errors: BTreeMap<&'static str, u64>,
}

/// Rolling-window summary of recent probes.
#[derive(Debug)]
pub struct Summary {
    window: Duration,
    started: Instant,
    entries: Mutex<VecDeque<Entry>>,
}

impl Default for Summary {
    fn default() -> Self {
        Summary::new(DEFAULT_WINDOW)
    }
}

impl Summary {
    pub fn new(window: Duration) -> Self {
        Summary::starting_at(window, Instant::now())
    }

    /// As `new`, with an explicit start (the rate's denominator until a full window has passed).
    pub fn starting_at(window: Duration, started: Instant) -> Self {
        Summary { window, started, entries: Mutex::new(VecDeque::new()) }
    }

    /// The one-line summary as of now.
    pub fn line(&self) -> String {
        self.line_at(Instant::now())
    }

    pub fn line_at(&self, now: Instant) -> String {
        format_line(&self.stats_at(now))
    }

    /// Statistics over probes that ended within the window before `now`.
    pub fn stats_at(&self, now: Instant) -> SummaryStats {
        let entries = self.lock();
        let in_window: Vec<Entry> = entries.iter().filter(|e| now.saturating_duration_since(e.end) <= self.window).copied().collect();
        drop(entries);
        let span = self.window.min(now.saturating_duration_since(self.started));
        compute(&in_window, span)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn compute(entries: &[Entry], span: Duration) -> SummaryStats {
    let scheduled = entries.len() as u64;
    let count = |f: &dyn Fn(&Entry) -> bool| entries.iter().filter(|e| f(e)).count() as u64;
    let succeeded = count(&|e| e.class.is_none());
    let sent = count(&|e| e.class != Some(ErrorClass::InFlightCap));
    let goodput = count(&|e| e.goodput);
    let ratio = |n: u64| (scheduled > 0).then(|| n as f64 / scheduled as f64);
    let mut ttft: Vec<f64> = entries.iter().filter_map(|e| e.ttft).collect();
    let mut tpot: Vec<f64> = entries.iter().filter_map(|e| e.tpot).collect();
    sort_f64(&mut ttft);
    sort_f64(&mut tpot);
    let ms = |v: Option<f64>| v.map(|s| s * 1000.0);
    let mut errors = BTreeMap::new();
    for class in entries.iter().filter_map(|e| e.class) {
        *errors.entry(class.as_str()).or_insert(0) += 1;
    }
    SummaryStats {
        scheduled,
        rate: if span.is_zero() { 0.0 } else { sent as f64 / span.as_secs_f64() },
        succeeded,
        success_ratio: ratio(succeeded),
        goodput_ratio: ratio(goodput),
        ttft_p50_ms: ms(percentile(&ttft, 0.5)),
        ttft_p95_ms: ms(percentile(&ttft, 0.95)),
        tpot_p50_ms: ms(percentile(&tpot, 0.5)),
        errors,
    }
}

/// e.g. `rate 4.9/s | ok 147/150 (98.0%) | goodput 95.3% | ttft p50 123ms p95 340ms | tpot p50 21.0ms | errors: timeout_ttft=2 http_5xx=1`
fn format_line(s: &SummaryStats) -> String {
    let pct = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{:.1}%", r * 100.0));
    let dur = |v: Option<f64>, decimals: usize| v.map_or("-".to_owned(), |v| format!("{v:.decimals$}ms"));
    let mut line = format!(
        "rate {:.1}/s | ok {}/{} ({}) | goodput {} | ttft p50 {} p95 {} | tpot p50 {} | errors:",
        s.rate,
        s.succeeded,
        s.scheduled,
        pct(s.success_ratio),
        pct(s.goodput_ratio),
        dur(s.ttft_p50_ms, 0),
        dur(s.ttft_p95_ms, 0),
        dur(s.tpot_p50_ms, 1),
    );
    if s.errors.is_empty() {
        line.push_str(" none");
    }
    // Most frequent first; ties by name so the line is stable.
    let mut errors: Vec<(&str, u64)> = s.errors.iter().map(|(k, v)| (*k, *v)).collect();
    errors.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for (class, n) in errors {
        let _ = write!(line, " {class}={n}");
    }
    line
}

impl Sink for Summary {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>) {
        let sample = sample.filter(|_| outcome.is_success());
        let entry = Entry {
            end: outcome.timeline.end,
            class: outcome.error_class(),
            ttft: sample.map(|s| s.ttft.as_secs_f64()),
            tpot: sample.and_then(|s| s.tpot).map(|d| d.as_secs_f64()),
            goodput: sample.is_some_and(|s| s.goodput),
        };
        let mut entries = self.lock();
        // Entries arrive roughly in end order: trim the front by the newest end seen.
        while entries.front().is_some_and(|f| entry.end.saturating_duration_since(f.end) > self.window) || entries.len() >= MAX_ENTRIES {
            entries.pop_front();
        }
        entries.push_back(entry);
    }
}
