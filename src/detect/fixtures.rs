//! Probe streams and readings shared by the detector's unit tests.

use rand::rngs::SmallRng;
use rand_distr::{Distribution, StandardNormal};

use super::state::{Detector, Observation, Signal, SignalReport, State, StateChange};
use crate::config::DetectSettings;

pub(super) const SC: [&str; 3] = ["a", "b", "c"];

pub(super) fn lognormal(rng: &mut SmallRng, median: f64, sigma: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    median * (sigma * z).exp()
}

pub(super) fn probe(rng: &mut SmallRng, factor: f64) -> Observation {
    Observation { ttft: Some(lognormal(rng, 0.2, 0.5) * factor), tpot: None, e2e: None, good: Some(true), ..Default::default() }
}

/// Feeds `n` probes one second apart from `t0`, round robin over the scenarios.
pub(super) fn feed(d: &mut Detector, rng: &mut SmallRng, t0: f64, n: usize, mut obs: impl FnMut(&mut SmallRng, usize, f64) -> Observation) -> f64 {
    for i in 0..n {
        let t = t0 + i as f64;
        d.observe("t", SC[i % 3], obs(rng, i % 3, t), t);
    }
    t0 + n as f64
}

pub(super) fn pooled(d: &Detector, signal: Signal) -> SignalReport {
    d.report().into_iter().find(|r| r.scenario.is_none() && r.signal == signal).expect("pooled row")
}

pub(super) fn quiet() -> DetectSettings {
    DetectSettings { continuous: false, ..DetectSettings::default() }
}

/// Seconds from the marker to the first pooled `regressed` event of `signal`, if any.
pub(super) fn first_alarm(d: &mut Detector, signal: Signal, marker: f64) -> Option<f64> {
    d.drain_events().iter().find(|e| e.scenario.is_none() && e.signal == signal && e.state == State::Regressed).map(|e| e.at - marker)
}

pub(super) fn ttft_alarm(events: &[StateChange]) -> bool {
    events.iter().any(|e| e.scenario.is_none() && e.signal == Signal::Ttft && e.state == State::Regressed)
}
