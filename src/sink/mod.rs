//! Where recorded probes and target events go. One recorder task hands every finished probe to
//! each sink; discovery, release markers and replica discovery hand their events to the same
//! sinks ([`Sinks::event`]), so every exporter hears of both through one interface. Sinks keep
//! their own state behind interior mutability so they can be shared with the server.

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

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use crate::config::Config;
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::util::health::panic_message;

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
    /// Something happened to a target besides a probe; a sink that does not export it ignores it.
    fn event(&self, _event: &Event) {}
}

/// What happens to a target besides its probes. No `Debug`: a replica event carries the whole
/// config, whose header values may be secrets; [`Event::describe`] is what a log line may say.
#[derive(Clone, Copy)]
pub enum Event<'a> {
    /// Discovery read the target's model, engine and engine version (sent when they change).
    Identity { target: &'a str, model: &'a str, engine: &'a str, engine_version: &'a str },
    /// A release marker at `at` (Unix seconds) from `source` (`discovery`: the identity changed;
    /// `api`: posted). `before` and `after` are [model, engine version], empty where unknown.
    Release { target: &'a str, version: &'a str, source: &'a str, at: f64, before: [&'a str; 2], after: [&'a str; 2] },
    /// How many replicas discovery found and how many are probed.
    ReplicaCounts { target: &'a str, discovered: usize, probed: usize },
    /// A replica is probed from now on; `config` names the scenarios its series are made for.
    ReplicaAdded { config: &'a Config, target: &'a str, replica: &'a str },
    /// A replica's own discovery read its version (and where it runs).
    ReplicaVersion { target: &'a str, replica: &'a str, version: &'a str, node: &'a str, zone: &'a str },
    /// A replica stopped being probed a grace period ago: its series go.
    ReplicaGone { config: &'a Config, target: &'a str, replica: &'a str },
    /// A conversation or cache pair was cut short: `probes` of it will not be sent (`reason`:
    /// `error`, a probe of it failed; `stopped`, the run is stopping).
    SequenceCut { target: &'a str, scenario: &'a str, reason: &'static str, probes: u64 },
    /// A conversation's next turn went to another replica (its own left the probed set).
    ReplicaMoved { target: &'a str, scenario: &'a str },
}

impl Event<'_> {
    /// The event's kind and target, for a log line.
    pub fn describe(&self) -> String {
        let (kind, target) = match *self {
            Event::Identity { target, .. } => ("identity", target),
            Event::Release { target, .. } => ("release", target),
            Event::ReplicaCounts { target, .. } => ("replica counts", target),
            Event::ReplicaAdded { target, .. } => ("replica added", target),
            Event::ReplicaVersion { target, .. } => ("replica version", target),
            Event::ReplicaGone { target, .. } => ("replica gone", target),
            Event::SequenceCut { target, .. } => ("sequence cut", target),
            Event::ReplicaMoved { target, .. } => ("replica moved", target),
        };
        format!("{kind} of target {target:?}")
    }
}

/// The sinks of one run as one: events go to each, and a panic in one sink is logged and never
/// keeps an event from the others.
#[derive(Clone, Default)]
pub struct Sinks(Arc<[Arc<dyn Sink>]>);

impl Sinks {
    pub fn new(sinks: Vec<Arc<dyn Sink>>) -> Sinks {
        Sinks(sinks.into())
    }

    pub fn list(&self) -> &[Arc<dyn Sink>] {
        &self.0
    }

    pub fn event(&self, event: &Event) {
        for sink in self.0.iter() {
            if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| sink.event(event))) {
                tracing::error!("internal error: a sink failed on the {}: {}", event.describe(), panic_message(panic.as_ref()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Panics;
    impl Sink for Panics {
        fn record(&self, _: &Outcome, _: Option<&Sample>) {}
        fn event(&self, _: &Event) {
            panic!("a broken exporter");
        }
    }

    #[derive(Default)]
    struct Releases(AtomicU64);
    impl Sink for Releases {
        fn record(&self, _: &Outcome, _: Option<&Sample>) {}
        fn event(&self, event: &Event) {
            if let Event::Release { target: "t", version: "v2", .. } = event {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    #[test]
    fn an_event_reaches_every_sink_past_one_that_panics() {
        let seen = Arc::new(Releases::default());
        let sinks = Sinks::new(vec![Arc::new(Panics), seen.clone()]);
        sinks.event(&Event::Release { target: "t", version: "v2", source: "api", at: 1.0, before: ["", ""], after: ["", "v2"] });
        sinks.event(&Event::ReplicaCounts { target: "t", discovered: 2, probed: 1 });
        assert_eq!(seen.0.load(Ordering::Relaxed), 1);
    }
}
