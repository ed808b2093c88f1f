//! One probe's draw: its lengths, prompt and conversation step from the scenario's
//! distributions (`Sampler`), and what a conversation or cache pair sends after it (`Follow`).

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use sha2::{Digest, Sha256};

use super::{Calibration, NONCE_WORDS, synthesize};
use crate::config::{Dataset, DatasetOrder};
use crate::config::{LengthSpec, Scenario, Sequence};
use crate::probe::step::Step;
use crate::probe::trace::TraceIds;
use crate::protocol::{Message, ProtocolKind};

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
    /// Its place in a conversation or cache pair (`None`: a probe on its own).
    pub step: Option<Step>,
    /// A sequence's first probe: the probes that follow it, drawn with it.
    pub follow: Option<Box<Follow>>,
    /// A conversation turn or an agent's later step: the earlier messages, sent before `prompt`.
    pub history: Vec<Message>,
    /// An agent loop's step: the loop's tools and checks.
    pub agent: Option<Arc<crate::config::Agent>>,
    /// Keep the answer's text (a conversation sends it back in the next turn).
    pub keep_answer: bool,
    /// A later probe of a sequence: the id of the sequence (its first probe's id) and the trace
    /// its span joins.
    pub sequence: Option<Arc<str>>,
    pub trace: Option<TraceIds>,
}

/// The probes that follow a sequence's first one, in order: each is sent `gap` after the
/// previous one ended.
#[derive(Debug, Clone)]
pub struct Follow {
    pub gap: std::time::Duration,
    pub steps: Vec<Draw>,
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
        let mut draw = match (self.scenario.dataset.clone(), known, self.scenario.sequence.take()) {
            (_, _, Some(sequence)) => {
                let draw = self.sequence(&sequence, checks.as_ref());
                self.scenario.sequence = Some(sequence);
                return draw;
            }
            (_, Some(c), None) => self.known_answer(c),
            (Some(dataset), None, None) => self.replay(&dataset),
            (None, None, None) => self.synthetic(),
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

    /// A conversation's turns or a cache pair, all drawn now (before the first one's wait): the
    /// first probe, carrying the others in `follow`.
    fn sequence(&mut self, sequence: &Sequence, checks: Option<&Arc<crate::config::Checks>>) -> Draw {
        let mut steps = match sequence {
            Sequence::Conversation { turns, .. } => {
                let last = turns.len();
                let mut drawn = Vec::with_capacity(last);
                for (i, turn) in turns.iter().enumerate() {
                    let mut d = self.synthetic_of(&turn.input_tokens, &turn.output_tokens, None);
                    d.step = Some(Step::Turn(i as u32 + 1));
                    d.keep_answer = i + 1 < last;
                    d.cache_salt = self.scenario.cache_salt.clone();
                    drawn.push(d);
                }
                drawn
            }
            Sequence::CachePair { prefix_tokens } => {
                // A prefix no server has seen, the same in both; each probe its own nonce and rest.
                let seed: u64 = self.rng.random();
                let prefix = Some((self.calibration.fit().words_for_text(*prefix_tokens), seed));
                let input = LengthSpec::Fixed(self.scenario.input_tokens.sample(&mut self.rng));
                let output = LengthSpec::Fixed(self.scenario.output_tokens.sample(&mut self.rng));
                let pair = [Step::Cold, Step::Warm].map(|step| {
                    let mut d = self.synthetic_of(&input, &output, prefix);
                    d.step = Some(step);
                    // vLLM's cache isolation: a salt of the pair's own, so only the cold probe
                    // can have filled the cache the warm one reads.
                    d.cache_salt = Some(format!("llmprobe-pair-{seed:016x}"));
                    d
                });
                pair.into_iter().collect()
            }
            Sequence::Agent(agent) => {
                let last = agent.max_steps as usize;
                let mut drawn = Vec::with_capacity(last);
                let output = self.scenario.output_tokens.clone();
                for k in 1..=last {
                    // Step 1 asks the task; the others continue from the tools' results.
                    let mut d = match (k, &agent.task) {
                        (1, Some(task)) => {
                            let output_tokens = output.sample(&mut self.rng);
                            Draw { prompt: task.clone(), output_tokens, ..Draw::default() }
                        }
                        (1, None) => {
                            let input = self.scenario.input_tokens.clone();
                            self.synthetic_of(&input, &output, None)
                        }
                        _ => Draw { output_tokens: output.sample(&mut self.rng), ..Draw::default() },
                    };
                    d.step = Some(Step::Agent(k as u32));
                    d.keep_answer = k < last;
                    d.cache_salt = self.scenario.cache_salt.clone();
                    d.agent = Some(agent.clone());
                    drawn.push(d);
                }
                drawn
            }
        };
        for d in &mut steps {
            d.checks = checks.cloned();
            d.reasoning = self.scenario.reasoning;
            d.prompt_sha256 = sha256_hex(d.prompt.as_bytes());
        }
        let gap = match sequence {
            Sequence::Conversation { think_time, .. } => *think_time,
            // A tool's canned result is there at once.
            Sequence::CachePair { .. } | Sequence::Agent(_) => std::time::Duration::ZERO,
        };
        let mut first = steps.remove(0);
        first.follow = Some(Box::new(Follow { gap, steps }));
        first
    }

    fn synthetic(&mut self) -> Draw {
        let fit = self.calibration.fit();
        let prefix = self.scenario.prefix.and_then(|p| {
            let shared = self.rng.random::<f64>() < p.share;
            let k = self.rng.random_range(0..self.prefix_seeds.len());
            shared.then(|| (fit.words_for_text(p.tokens), self.prefix_seeds[k]))
        });
        let (input, output) = (self.scenario.input_tokens.clone(), self.scenario.output_tokens.clone());
        self.synthetic_of(&input, &output, prefix)
    }

    /// A synthetic prompt of a length drawn from `input`, behind `prefix` (its words and seed).
    fn synthetic_of(&mut self, input: &LengthSpec, output: &LengthSpec, prefix: Option<(u32, u64)>) -> Draw {
        let input_tokens = input.sample(&mut self.rng);
        let output_tokens = output.sample(&mut self.rng);
        let nonce: u64 = self.rng.random();
        let fit = self.calibration.fit();
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
        let prompt = if dataset.nonce { super::prompt::with_nonce(&entry.prompt, nonce) } else { entry.prompt.clone() };
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
    fn a_conversation_draws_every_turn_up_front() {
        let mut scenario = Scenario::synthetic("c", 1.0, LengthSpec::Fixed(40), LengthSpec::Fixed(8));
        let turn = |i, o| crate::config::TurnSpec { input_tokens: LengthSpec::Fixed(i), output_tokens: LengthSpec::Fixed(o) };
        scenario.sequence =
            Some(Sequence::Conversation { turns: vec![turn(40, 8), turn(16, 4), turn(16, 2)], think_time: std::time::Duration::from_millis(7) });
        let mut s = Sampler::uncalibrated(scenario, 1, ProtocolKind::OpenaiChat);
        let first = s.draw();
        assert_eq!((first.step, first.input_tokens, first.output_tokens, first.keep_answer), (Some(Step::Turn(1)), 40, 8, true));
        let follow = first.follow.expect("the later turns");
        assert_eq!(follow.gap, std::time::Duration::from_millis(7));
        let steps: Vec<_> = follow.steps.iter().map(|d| (d.step, d.input_tokens, d.output_tokens, d.keep_answer)).collect();
        assert_eq!(steps, vec![(Some(Step::Turn(2)), 16, 4, true), (Some(Step::Turn(3)), 16, 2, false)]);
        assert!(follow.steps.iter().all(|d| d.follow.is_none() && d.prompt_sha256.len() == 64 && d.prompt != first.prompt));
    }

    #[test]
    fn a_cache_pair_repeats_a_fresh_prefix() {
        let mut scenario = Scenario::synthetic("p", 1.0, LengthSpec::Fixed(100), LengthSpec::Fixed(4));
        scenario.sequence = Some(Sequence::CachePair { prefix_tokens: 80 });
        let mut s = Sampler::uncalibrated(scenario, 2, ProtocolKind::OpenaiCompletions);
        let head = |p: &str| p.split(' ').take(80).collect::<Vec<_>>().join(" ");
        let (a, b) = (s.draw(), s.draw());
        let a_warm = &a.follow.as_ref().unwrap().steps[0];
        assert_eq!((a.step, a_warm.step), (Some(Step::Cold), Some(Step::Warm)));
        assert_eq!(head(&a.prompt), head(&a_warm.prompt), "the warm probe repeats the cold one's prefix");
        assert_ne!(a.prompt, a_warm.prompt, "with a rest of its own");
        assert_ne!(head(&a.prompt), head(&b.prompt), "every pair a fresh prefix");
        assert_eq!(a.cache_salt, a_warm.cache_salt);
        assert_ne!(a.cache_salt, b.cache_salt);
        assert_eq!(a_warm.follow.as_ref().map(|f| f.steps.len()), None);
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
