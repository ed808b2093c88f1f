//! The interface of every sink, and the sinks of one run as one.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use super::event::Event;
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::util::health::panic_message;

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
        sinks.event(&Event::Release {
            target: "t",
            version: "v2",
            source: "api",
            at: 1.0,
            time: crate::detect::MarkerTime::Stated,
            before: ["", ""],
            after: ["", "v2"],
        });
        sinks.event(&Event::ReplicaCounts { target: "t", discovered: 2, probed: 1 });
        assert_eq!(seen.0.load(Ordering::Relaxed), 1);
    }
}
