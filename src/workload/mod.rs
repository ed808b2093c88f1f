//! What each probe sends: token lengths drawn from the scenario's spec and a synthetic prompt.

mod prompt;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

pub use prompt::synthesize_prompt;

use crate::config::{LengthSpec, Scenario};

/// Lengths and prompt of one probe.
#[derive(Debug, Clone)]
pub struct Draw {
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub prompt: String,
}

/// Draws probes for one target×scenario stream; deterministic for a seed.
pub struct Sampler {
    scenario: Scenario,
    rng: StdRng,
}

impl Sampler {
    pub fn new(scenario: Scenario, seed: u64) -> Self {
        Sampler { scenario, rng: StdRng::seed_from_u64(seed) }
    }

    pub fn draw(&mut self) -> Draw {
        let input_tokens = sample_length(self.scenario.input_tokens, &mut self.rng);
        let output_tokens = sample_length(self.scenario.output_tokens, &mut self.rng);
        let nonce: u64 = self.rng.random();
        Draw { input_tokens, output_tokens, prompt: synthesize_prompt(input_tokens, nonce) }
    }
}

fn sample_length(spec: LengthSpec, rng: &mut StdRng) -> u32 {
    match spec {
        LengthSpec::Fixed(n) => n,
        LengthSpec::Range { min, max } => rng.random_range(min..=max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_stay_inside_and_seed_repeats() {
        let scenario = Scenario {
            name: "s".into(),
            rate: 1.0,
            input_tokens: LengthSpec::Range { min: 10, max: 20 },
            output_tokens: LengthSpec::Fixed(8),
        };
        let mut a = Sampler::new(scenario.clone(), 3);
        let mut b = Sampler::new(scenario, 3);
        for _ in 0..200 {
            let (x, y) = (a.draw(), b.draw());
            assert!((10..=20).contains(&x.input_tokens));
            assert_eq!(x.output_tokens, 8);
            assert_eq!(x.prompt, y.prompt);
        }
    }
}
