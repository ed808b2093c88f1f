//! The recorder: one task that receives every outcome over a bounded channel, measures it
//! (`measure`), and fans it out to the sinks. Every scheduler run records through one: the
//! prober's sinks are its metrics and exports, a finite run's a `sink::Collect`. It also keeps the accounting that proves no probe is lost:
//! scheduled = succeeded + failed (by class) + dropped (by reason). A panic while measuring or
//! in a sink costs that one record (counted as an internal error), never the recorder.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::SloTable;
use crate::probe::measure::measure;
use crate::probe::outcome::{ErrorClass, Outcome};
use crate::sink::{Event, Sink, Sinks};
use crate::util::health::{Health, panic_message};

/// Outcomes waiting for the recorder; senders wait (never drop) when it is full.
const CHANNEL_CAPACITY: usize = 4096;
/// At most one failure log line per (target, class) in this window; the rest are counted.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts kept on both sides of the channel.
#[derive(Debug, Default)]
pub struct Accounting {
    pub scheduled: AtomicU64,
    pub recorded: AtomicU64,
    /// Probes of conversations and cache pairs never scheduled: their sequence was cut short.
    pub cut: AtomicU64,
}

impl Accounting {
    pub fn scheduled(&self) -> u64 {
        self.scheduled.load(Ordering::Relaxed)
    }
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }
    pub fn cut(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }
}

/// The sending side, cloned into every scheduler and probe task.
#[derive(Clone)]
pub struct RecorderHandle {
    tx: mpsc::Sender<Outcome>,
    pub accounting: Arc<Accounting>,
    sinks: Sinks,
}

impl RecorderHandle {
    /// Counts a probe as scheduled. Call exactly once per intended send.
    pub fn scheduled(&self, target: &str, scenario: &str, replica: Option<&str>) {
        self.accounting.scheduled.fetch_add(1, Ordering::Relaxed);
        for sink in self.sinks.list() {
            sink.scheduled(target, scenario, replica);
        }
    }

    /// Counts the `unsent` probes of a sequence that was cut short (`reason`: `error`, a probe of
    /// it failed; `stopped`, the run is stopping): they are never scheduled.
    pub fn cut(&self, target: &str, scenario: &str, reason: &'static str, unsent: u64) {
        self.accounting.cut.fetch_add(unsent, Ordering::Relaxed);
        self.sinks.event(&Event::SequenceCut { target, scenario, reason, probes: unsent });
    }

    /// An agent loop ended (`result`: answered, step_limit, failed, stopped) after `steps`
    /// probes and `seconds` from its first send to its last probe's end.
    pub fn agent_loop(&self, target: &str, scenario: &str, result: &'static str, steps: u32, seconds: f64) {
        self.sinks.event(&Event::AgentLoop { target, scenario, result, steps, seconds });
    }

    /// A conversation's next turn goes to another replica than its earlier ones.
    pub fn moved(&self, target: &str, scenario: &str) {
        self.sinks.event(&Event::ReplicaMoved { target, scenario });
    }

    pub async fn record(&self, outcome: Outcome) {
        // The receiver only ends after every sender is gone, so this cannot fail in practice.
        let _ = self.tx.send(outcome).await;
    }
}

/// Starts the recorder. It ends when every `RecorderHandle` is dropped and the queue is drained.
/// `slo` gives each probe the effective SLO of its target×scenario.
pub fn spawn(sinks: Sinks, slo: SloTable, health: Option<Arc<Health>>) -> (RecorderHandle, JoinHandle<()>) {
    start(sinks, slo, health, true)
}

/// As [`spawn`], without failure log lines: a finite run (bench, `--once`, accuracy) reports its
/// failures in its own output.
pub fn spawn_unlogged(sinks: Vec<Arc<dyn Sink>>, slo: SloTable) -> (RecorderHandle, JoinHandle<()>) {
    start(Sinks::new(sinks), slo, None, false)
}

fn start(sinks: Sinks, slo: SloTable, health: Option<Arc<Health>>, log_failures: bool) -> (RecorderHandle, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<Outcome>(CHANNEL_CAPACITY);
    let accounting = Arc::new(Accounting::default());
    let counts = accounting.clone();
    let task_sinks = sinks.clone();
    let task = tokio::spawn(async move {
        let mut log = FailureLog::default();
        while let Some(outcome) = rx.recv().await {
            // Each step isolated: a panic in measuring or in one sink is counted and every other
            // sink still records the probe (the metrics sink's count is the accounting).
            let report = |what: &str, panic: Box<dyn std::any::Any + Send>| {
                let detail = format!("recording probe {} ({what}): {}", outcome.probe_id, panic_message(panic.as_ref()));
                match &health {
                    Some(h) => h.internal_error("recorder", &detail),
                    None => tracing::error!("internal error: {detail}"),
                }
            };
            let sample =
                std::panic::catch_unwind(AssertUnwindSafe(|| measure(&outcome, slo.get(&outcome.target, &outcome.scenario)))).unwrap_or_else(|panic| {
                    report("measure", panic);
                    None
                });
            for sink in task_sinks.list() {
                if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| sink.record(&outcome, sample.as_ref()))) {
                    report("sink", panic);
                }
            }
            if log_failures && let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| log.maybe_log(&outcome))) {
                report("log", panic);
            }
            counts.recorded.fetch_add(1, Ordering::Relaxed);
        }
    });
    (RecorderHandle { tx, accounting, sinks }, task)
}

/// Rate-limited failure logging: one line per (target, class) per window, with a count.
#[derive(Default)]
struct FailureLog {
    last: HashMap<(Arc<str>, ErrorClass), (Instant, u64)>,
}

impl FailureLog {
    fn maybe_log(&mut self, outcome: &Outcome) {
        let Err(failure) = &outcome.result else {
            return;
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Slo;
    use crate::probe::measure::Sample;
    use crate::probe::outcome::{Failure, Timeline};
    use crate::protocol::ServerTiming;

    struct Panics;
    impl Sink for Panics {
        fn record(&self, _: &Outcome, _: Option<&Sample>) {
            panic!("a broken sink");
        }
    }

    #[derive(Default)]
    struct Counts(AtomicU64);
    impl Sink for Counts {
        fn record(&self, _: &Outcome, _: Option<&Sample>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn failed_probe(seq: u64) -> Outcome {
        let now = Instant::now();
        Outcome {
            target: Arc::from("t"),
            scenario: Arc::from("s"),
            replica: None,
            seq,
            request_id: String::new(),
            probe_id: format!("p-{seq}"),
            dataset_index: None,
            prompt_sha256: String::new(),
            model: Arc::from(""),
            requested_input_tokens: 1,
            requested_output_tokens: 1,
            timeline: Timeline::new(now, now),
            http_status: None,
            usage: None,
            api_counter: None,
            server_timing: ServerTiming::default(),
            streamed: true,
            content_encoding: None,
            finish_reason: None,
            response_model: None,
            result: Err(Failure::new(ErrorClass::Connect, "refused")),
            trace: None,
            checks: None,
            step: None,
        }
    }

    impl crate::util::health::ErrorCounter for Counts {
        fn count_internal_error(&self, _: &str) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test]
    async fn a_panicking_sink_does_not_skip_the_sinks_after_it() {
        let counts = Arc::new(Counts::default());
        let errors = Arc::new(Counts::default());
        let health = Arc::new(Health::new(errors.clone()));
        let (handle, task) = spawn(
            Sinks::new(vec![Arc::new(Panics), counts.clone()]),
            SloTable::uniform(Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 }),
            Some(health.clone()),
        );
        for seq in 0..3 {
            handle.record(failed_probe(seq)).await;
        }
        drop(handle);
        task.await.unwrap();
        assert_eq!(counts.0.load(Ordering::Relaxed), 3, "the sink after the panicking one missed probes");
        assert_eq!(errors.0.load(Ordering::Relaxed), 3, "each panic is counted as an internal error");
    }
}
