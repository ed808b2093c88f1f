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
