//! An exporter the config turns on, with its lifecycle: `start` builds it from the config (or
//! leaves it off), `record` and `event` (the [`Sink`] interface) hand it each probe and each
//! target event, `flush` pushes out what it buffers and `shutdown` stops it by a deadline.
//! `exporters.rs` holds the list of them; the app names no concrete exporter.

use std::sync::Arc;
use std::time::Instant;

use super::Sink;
use crate::config::Config;
use crate::source::SnapshotCache;

pub trait Exporter: Sink {
    /// A short name for log lines (`otlp`, ...).
    fn name(&self) -> &'static str;
    /// The share of probes this exporter wants traced (sent with a sampled `traceparent`);
    /// `None`: it reads no trace ids.
    fn trace_ratio(&self) -> Option<f64> {
        None
    }
    /// Pushes out what is buffered. Blocking; called before `shutdown`.
    fn flush(&self) {}
    /// Exports what is left and releases what it holds, by `deadline` where it can. Blocking;
    /// nothing is recorded after it.
    fn shutdown(&self, _deadline: Instant) {}
}

/// What an exporter is started with besides the config.
pub struct StartContext<'a> {
    pub config: &'a Config,
    /// Engine and GPU readings the run's sources fill, to join with a probe.
    pub snapshots: &'a Arc<SnapshotCache>,
}

/// Starts one kind of exporter from the config: `Ok(None)` when the config leaves it off.
/// Blocking (exporters may build blocking clients or open files).
pub type Start = fn(&StartContext) -> anyhow::Result<Option<Started>>;

/// A started exporter, as the sink the recorder and the events feed and as its lifecycle.
pub struct Started {
    pub(super) sink: Arc<dyn Sink>,
    pub(super) exporter: Arc<dyn Exporter>,
}

impl Started {
    pub fn new<E: Exporter + 'static>(exporter: E) -> Started {
        let exporter = Arc::new(exporter);
        Started { sink: exporter.clone(), exporter }
    }
}
