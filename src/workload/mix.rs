//! The draws of one stream: a single scenario's sampler (the prober, `--once`, accuracy) or a
//! weighted mix of scenarios (a bench sweep), each request picking its scenario by weight.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::{Calibration, Draw, Sampler};
use crate::config::Scenario;

pub struct Mix {
    entries: Vec<(Arc<str>, Sampler)>,
    cumulative: Vec<f64>,
    rng: StdRng,
    calibration: Arc<Calibration>,
}

impl Mix {
    /// Every scenario in proportion to its configured rate (weight share); each draws its lengths
    /// and prompt from its own sampler, seeded from `seed`.
    pub fn new(scenarios: &[Scenario], seed: u64, calibration: &Arc<Calibration>) -> Self {
        let mut total = 0.0;
        let cumulative = scenarios
            .iter()
            .map(|s| {
                total += s.rate;
                total
            })
            .collect();
        let entries = scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| (Arc::from(s.name.as_str()), Sampler::new(s.clone(), seed.wrapping_add(i as u64 + 1).rotate_left(17), calibration.clone())))
            .collect();
        Mix { entries, cumulative, rng: StdRng::seed_from_u64(seed), calibration: calibration.clone() }
    }

    /// One scenario only: every draw comes from `sampler`.
    pub fn single(scenario: &str, sampler: Sampler) -> Self {
        let calibration = sampler.calibration().clone();
        Mix { entries: vec![(Arc::from(scenario), sampler)], cumulative: vec![1.0], rng: StdRng::seed_from_u64(0), calibration }
    }

    /// A seed for something else of the same run (its arrival process), so one seed drives it all.
    pub fn fork_seed(&mut self) -> u64 {
        self.rng.random()
    }

    /// The prompt-length calibration the draws use; successful requests' usage refines it.
    pub fn calibration(&self) -> &Arc<Calibration> {
        &self.calibration
    }

    /// The next request's scenario and draw.
    pub fn draw(&mut self) -> (Arc<str>, Draw) {
        let i = match self.entries.len() {
            1 => 0,
            n => {
                let total = *self.cumulative.last().expect("at least one scenario");
                let x = self.rng.random::<f64>() * total;
                self.cumulative.iter().position(|&c| x < c).unwrap_or(n - 1)
            }
        };
        let (name, sampler) = &mut self.entries[i];
        (name.clone(), sampler.draw())
    }
}
