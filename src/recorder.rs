//! The recorder: one task that receives every outcome over a bounded channel, measures it, and
//! fans it out to the sinks. It also keeps the accounting that proves no probe is lost:
//! scheduled = succeeded + failed (by class) + dropped (by reason).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::Slo;
use crate::measure::measure;
use crate::outcome::{ErrorClass, Outcome};
use crate::sink::Sink;

/// Outcomes waiting for the recorder; senders wait (never drop) when it is full.
const CHANNEL_CAPACITY: usize = 4096;
/// At most one failure log line per (target, class) in this window; the rest are counted.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts kept on both sides of the channel.
#[derive(Debug, Default)]
pub struct Accounting {
    pub scheduled: AtomicU64,
    pub recorded: AtomicU64,
}

impl Accounting {
    pub fn scheduled(&self) -> u64 {
        self.scheduled.load(Ordering::Relaxed)
    }
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }
}

/// The sending side, cloned into every scheduler and probe task.
#[derive(Clone)]
pub struct RecorderHandle {
    tx: mpsc::Sender<Outcome>,
    pub accounting: Arc<Accounting>,
}

impl RecorderHandle {
    /// Counts a probe as scheduled. Call exactly once per intended send.
    pub fn scheduled(&self) {
        self.accounting.scheduled.fetch_add(1, Ordering::Relaxed);
    }

    pub async fn record(&self, outcome: Outcome) {
        // The receiver only ends after every sender is gone, so this cannot fail in practice.
        let _ = self.tx.send(outcome).await;
    }
}

/// Starts the recorder. It ends when every `RecorderHandle` is dropped and the queue is drained.
pub fn spawn(sinks: Vec<Arc<dyn Sink>>, slo: Slo) -> (RecorderHandle, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Outcome>(CHANNEL_CAPACITY);
    let accounting = Arc::new(Accounting::default());
    let counts = accounting.clone();
    let task = tokio::spawn(async move {
        let mut log = FailureLog::default();
        while let Some(outcome) = rx.recv().await {
            let sample = measure(&outcome, &slo);
            for sink in &sinks {
                sink.record(&outcome, sample.as_ref());
            }
            log.maybe_log(&outcome);
            counts.recorded.fetch_add(1, Ordering::Relaxed);
        }
    });
    (RecorderHandle { tx, accounting }, task)
}

/// Rate-limited failure logging: one line per (target, class) per window, with a count.
#[derive(Default)]
struct FailureLog {
    last: HashMap<(Arc<str>, ErrorClass), (Instant, u64)>,
}

impl FailureLog {
    fn maybe_log(&mut self, outcome: &Outcome) {
        let Err(failure) = &outcome.result else { return };
        let now = Instant::now();
        let entry = self.last.entry((outcome.target.clone(), failure.class)).or_insert((now - LOG_EVERY * 2, 0));
        entry.1 += 1;
        if now.duration_since(entry.0) < LOG_EVERY {
            return;
        }
        tracing::warn!(
            target_name = %outcome.target,
            scenario = %outcome.scenario,
            error = failure.class.as_str(),
            request_id = %outcome.request_id,
            count = entry.1,
            "probe failed: {}",
            failure.detail
        );
        *entry = (now, 0);
    }
}
