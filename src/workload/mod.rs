//! What each probe sends: token lengths drawn from the scenario's distributions, and a prompt
//! synthesized to hit the input length on the target's tokenizer (or replayed from a dataset).
//!
//! Files: `dist.rs` (length sampling), `prompt.rs` (prompt text), `calibrate.rs` (words per
//! token per target), `dataset.rs` (reading JSONL / ShareGPT replay files), `fingerprint.rs`
//! (workload SHA-256), `preview.rs` (`llmprobe workload preview`). No network I/O: the
//! `/tokenize` calls are `crate::workload::tokenize`, `llmprobe workload accuracy` is `crate::cmd::accuracy`.

pub mod calibrate;
mod dataset;
mod dist;
mod fingerprint;
mod mix;
pub mod preview;
pub mod prompt;
pub mod tokenize;

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use sha2::{Digest, Sha256};

pub use crate::config::{Dataset, DatasetEntry, DatasetFormat, DatasetOrder};
pub use calibrate::{Calibration, Fit, FitSource};
pub use dataset::{parse_jsonl, parse_sharegpt};
pub use dist::{pick, quantile};
pub use fingerprint::{WorkloadHash, fingerprint};
pub use mix::Mix;
pub use prompt::{NONCE_WORDS, synthesize, synthesize_prompt};

use crate::config::Scenario;
use crate::protocol::ProtocolKind;

/// Lengths and prompt of one probe.
#[derive(Debug, Clone, Default)]
pub struct Draw {
    /// Requested prompt length in tokens; 0 for a replayed prompt (its length is what it is).
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub prompt: String,
    /// Readable id `{run}-{target}-{scenario}-{n}` (set by the scheduler).
    pub probe_id: String,
    /// Words of a synthetic prompt (what calibration learns from); 0 for a replayed one.
    pub words: u32,
    /// Index of a replayed prompt in its dataset.
    pub dataset_index: Option<u64>,
    /// SHA-256 (hex) of the prompt as sent.
    pub prompt_sha256: String,
    /// vLLM `cache_salt` for the request body.
    pub cache_salt: Option<String>,
    /// The scenario's behaviour checks (request fields to send, what to check on the answer).
    pub checks: Option<std::sync::Arc<crate::config::Checks>>,
    /// The known answer to this prompt (`checks.known_answers`, `checks.dataset_answers`).
    pub expect: Option<crate::config::Expect>,
    /// The scenario's reasoning effort and budget.
    pub reasoning: Option<crate::config::Reasoning>,
}

impl Draw {
    /// The request's length limit: the output length plus the reasoning budget (reasoning and
    /// answer count against one limit).
    pub fn max_tokens(&self) -> u32 {
        self.output_tokens.saturating_add(self.reasoning.map_or(0, |r| r.budget_tokens))
    }
}

/// Draws probes for one target×scenario stream; deterministic for a seed (and calibration).
pub struct Sampler {
    scenario: Scenario,
    rng: StdRng,
    calibration: Arc<Calibration>,
    /// Seeds of the scenario's shared prefixes (the same on every target: a fixed text).
    prefix_seeds: Vec<u64>,
    next_index: usize,
}

impl Sampler {
    pub fn new(scenario: Scenario, seed: u64, calibration: Arc<Calibration>) -> Self {
        let prefix_seeds = match &scenario.prefix {
            Some(p) => (0..p.distinct as u64).map(|k| crate::probe::arrival::stream_seed(k, &scenario.name)).collect(),
            None => Vec::new(),
        };
        Sampler { scenario, rng: StdRng::seed_from_u64(seed), calibration, prefix_seeds, next_index: 0 }
    }

    /// A sampler with its own uncalibrated estimate (one token per word plus the API's prior).
    pub fn uncalibrated(scenario: Scenario, seed: u64, api: ProtocolKind) -> Self {
        Sampler::new(scenario, seed, Arc::new(Calibration::new(api)))
    }

    /// The target's prompt-length calibration this sampler draws with (it learns from usage).
    pub fn calibration(&self) -> &Arc<Calibration> {
        &self.calibration
    }

    pub fn draw(&mut self) -> Draw {
        let checks = self.scenario.checks.clone();
        let known = checks.as_ref().filter(|c| !c.known_answers.is_empty());
        let mut draw = match (self.scenario.dataset.clone(), known) {
            (_, Some(c)) => self.known_answer(c),
            (Some(dataset), None) => self.replay(&dataset),
            (None, None) => self.synthetic(),
        };
        if draw.dataset_index.is_some() && !checks.as_ref().is_some_and(|c| c.dataset_answers) {
            draw.expect = None;
        }
        draw.checks = checks;
        draw.prompt_sha256 = sha256_hex(draw.prompt.as_bytes());
        draw.cache_salt = self.scenario.cache_salt.clone();
        draw.reasoning = self.scenario.reasoning;
        draw
    }

    fn synthetic(&mut self) -> Draw {
        let input_tokens = self.scenario.input_tokens.sample(&mut self.rng);
        let output_tokens = self.scenario.output_tokens.sample(&mut self.rng);
        let nonce: u64 = self.rng.random();
        let fit = self.calibration.fit();
        let prefix = self.scenario.prefix.and_then(|p| {
            let shared = self.rng.random::<f64>() < p.share;
            let k = self.rng.random_range(0..self.prefix_seeds.len());
            shared.then(|| (fit.words_for_text(p.tokens), self.prefix_seeds[k]))
        });
        let words = fit.words_for(input_tokens).max(NONCE_WORDS);
        let prompt = synthesize(words, nonce, prefix);
        Draw { input_tokens, output_tokens, prompt, words, ..Draw::default() }
    }

    /// The next known-answer prompt, in turn and as written (no nonce: temperature-0 answers to
    /// the same prompt are compared across probes).
    fn known_answer(&mut self, checks: &crate::config::Checks) -> Draw {
        let k = &checks.known_answers[self.next_index % checks.known_answers.len()];
        self.next_index += 1;
        let output_tokens = self.scenario.output_tokens.sample(&mut self.rng);
        Draw { input_tokens: 0, output_tokens, prompt: k.prompt.clone(), expect: Some(k.expect.clone()), ..Draw::default() }
    }

    fn replay(&mut self, dataset: &Dataset) -> Draw {
        let i = match dataset.order {
            DatasetOrder::Random => self.rng.random_range(0..dataset.entries.len()),
            DatasetOrder::Sequential => {
                let i = self.next_index % dataset.entries.len();
                self.next_index += 1;
                i
            }
        };
        let entry = &dataset.entries[i];
        let output_tokens = entry.output_tokens.unwrap_or_else(|| self.scenario.output_tokens.sample(&mut self.rng));
        let nonce: u64 = self.rng.random();
        let prompt = if dataset.nonce { prompt::with_nonce(&entry.prompt, nonce) } else { entry.prompt.clone() };
        Draw { input_tokens: 0, output_tokens, prompt, dataset_index: Some(i as u64), expect: entry.expect.clone(), ..Draw::default() }
    }
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LengthSpec, PrefixSpec};

    #[test]
    fn ranges_stay_inside_and_seed_repeats() {
        let scenario = Scenario::synthetic("s", 1.0, LengthSpec::Uniform { min: 10, max: 20 }, LengthSpec::Fixed(8));
        let api = ProtocolKind::OpenaiCompletions;
        let mut a = Sampler::uncalibrated(scenario.clone(), 3, api);
        let mut b = Sampler::uncalibrated(scenario, 3, api);
        for _ in 0..200 {
            let (x, y) = (a.draw(), b.draw());
            assert!((10..=20).contains(&x.input_tokens));
            assert_eq!(x.output_tokens, 8);
            assert_eq!(x.prompt, y.prompt);
            assert_eq!(x.prompt_sha256.len(), 64);
        }
    }

    #[test]
    fn prefix_share_and_distinct_prefixes() {
        let mut scenario = Scenario::synthetic("p", 1.0, LengthSpec::Fixed(200), LengthSpec::Fixed(8));
        scenario.prefix = Some(PrefixSpec { tokens: 64, share: 0.5, distinct: 3 });
        let mut s = Sampler::uncalibrated(scenario, 1, ProtocolKind::OpenaiCompletions);
        let mut heads = std::collections::HashMap::<String, usize>::new();
        for _ in 0..3000 {
            let d = s.draw();
            *heads.entry(d.prompt.split(' ').take(20).collect::<Vec<_>>().join(" ")).or_default() += 1;
        }
        let mut shared: Vec<usize> = heads.values().copied().filter(|&n| n > 1).collect();
        shared.sort();
        assert_eq!(shared.len(), 3, "three distinct prefixes");
        let total: usize = shared.iter().sum();
        assert!((1350..1650).contains(&total), "about half share a prefix: {total}");
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
