//! The exporters a config can turn on, started in one place and stopped together.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Sink;
use super::exporter::{Start, StartContext, Started};
use crate::config::Config;
use crate::source::SnapshotCache;

/// Every kind of exporter, in the order they hear of probes and events.
const EXPORTERS: &[Start] = &[super::otlp::start, super::jsonl::start];

/// How long a run's exporters get to export what is left when it stops.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// The exporters one config turned on.
#[derive(Default)]
pub struct Exporters(Vec<Started>);

impl Exporters {
    /// Starts each exporter the config turns on. Blocking: call it from `spawn_blocking`.
    pub fn start(config: &Config, snapshots: &Arc<SnapshotCache>) -> anyhow::Result<Exporters> {
        let context = StartContext { config, snapshots };
        let mut started = Vec::new();
        for start in EXPORTERS {
            started.extend(start(&context)?);
        }
        Ok(Exporters(started))
    }

    /// Each exporter as a sink, for the recorder's list and the events.
    pub fn sinks(&self) -> impl Iterator<Item = Arc<dyn Sink>> + '_ {
        self.0.iter().map(|s| s.sink.clone())
    }

    /// The largest share of probes any exporter wants traced; `None`: none reads trace ids.
    pub fn trace_ratio(&self) -> Option<f64> {
        self.0.iter().filter_map(|s| s.exporter.trace_ratio()).reduce(f64::max)
    }

    /// Flushes and shuts down every exporter at once, each on a blocking thread, and waits until
    /// `within` has passed at most: an exporter still exporting then is left to finish alone.
    pub async fn stop(self, within: Duration) {
        let deadline = Instant::now() + within;
        let stopping: Vec<_> = self
            .0
            .into_iter()
            .map(|s| {
                let exporter = s.exporter;
                let name = exporter.name();
                let task = tokio::task::spawn_blocking(move || {
                    exporter.flush();
                    exporter.shutdown(deadline);
                });
                (name, task)
            })
            .collect();
        for (name, task) in stopping {
            let left = deadline.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, task).await.is_err() {
                tracing::warn!("{name} export did not stop within {within:?}: left to finish in the background");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::measure::Sample;
    use crate::probe::outcome::Outcome;
    use crate::sink::Exporter;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    /// Notes what its lifecycle went through.
    #[derive(Default)]
    struct Steps {
        flushed: AtomicBool,
        shut_down: AtomicBool,
    }

    struct Noting(Arc<Steps>, Option<f64>);

    impl Sink for Noting {
        fn record(&self, _: &Outcome, _: Option<&Sample>) {}
    }

    impl Exporter for Noting {
        fn name(&self) -> &'static str {
            "noting"
        }
        fn trace_ratio(&self) -> Option<f64> {
            self.1
        }
        fn flush(&self) {
            self.0.flushed.store(true, Ordering::SeqCst);
        }
        fn shutdown(&self, _: Instant) {
            self.0.shut_down.store(true, Ordering::SeqCst);
        }
    }

    /// A shutdown that waits until the test lets it go (a collector that does not answer).
    struct Hangs(Mutex<mpsc::Receiver<()>>);

    impl Sink for Hangs {
        fn record(&self, _: &Outcome, _: Option<&Sample>) {}
    }

    impl Exporter for Hangs {
        fn name(&self) -> &'static str {
            "hangs"
        }
        fn shutdown(&self, _: Instant) {
            let _ = self.0.lock().unwrap().recv();
        }
    }

    #[tokio::test]
    async fn stop_flushes_and_shuts_down_every_exporter_past_one_that_hangs() {
        let (release, hold) = mpsc::channel();
        let steps = Arc::new(Steps::default());
        let exporters = Exporters(vec![Started::new(Hangs(Mutex::new(hold))), Started::new(Noting(steps.clone(), None))]);
        exporters.stop(Duration::from_secs(1)).await;
        assert!(steps.flushed.load(Ordering::SeqCst) && steps.shut_down.load(Ordering::SeqCst));
        let _ = release.send(());
    }

    #[test]
    fn the_trace_ratio_is_the_largest_any_exporter_asks_for() {
        let noting = |ratio| Started::new(Noting(Arc::default(), ratio));
        assert_eq!(Exporters(vec![noting(None), noting(Some(0.1)), noting(Some(0.5))]).trace_ratio(), Some(0.5));
        assert_eq!(Exporters(vec![noting(None)]).trace_ratio(), None);
        assert_eq!(Exporters::default().trace_ratio(), None);
    }
}
