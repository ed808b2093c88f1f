//! Where recorded probes go. One recorder task hands every finished probe to each sink;
//! sinks keep their own state behind interior mutability so they can be shared with the server.

pub mod collect;
pub mod detect;
pub mod history;
pub mod otlp;
pub mod otlp_metrics;
pub mod probe_log;
pub mod prometheus;
pub mod replicas;
pub mod summary;

mod expo;

use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;

pub use collect::Collect;
pub use history::History;
pub use prometheus::Metrics;
pub use summary::Summary;

/// A consumer of finished probes.
pub trait Sink: Send + Sync {
    /// Records one probe. `sample` is `Some` only for a success that produced a first token.
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>);
    /// A probe of (target, scenario) was scheduled (called once per intended send, before it
    /// runs), so `scheduled − recorded` is visible while probes are in flight.
    fn scheduled(&self, _target: &str, _scenario: &str, _replica: Option<&str>) {}
}
