//! Sinks: where outcomes go.
use crate::measure::Sample;
use crate::outcome::Outcome;

pub trait Sink: Send + Sync {
    fn record(&self, outcome: &Outcome, sample: Option<&Sample>);
}
