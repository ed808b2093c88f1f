//! The families of probes that come in sequences: a conversation's turns (per `turn`, bounded
//! to `1`..`7` and `8+`) and a cache pair's cold and warm probes (per `cache`), with the probes a
//! cut-short sequence never sent and the turns that moved to another replica. Only scenarios
//! with `turns:` or `cache_pair:` have series here; every probe of a sequence is also counted in
//! the per-probe families like any other.

use super::contract::{
    AGENT_LOOP_DURATION_SECONDS, AGENT_LOOPS_TOTAL, AGENT_STEP_TTFT_SECONDS, AGENT_STEPS_TOTAL, AGENT_TOOL_CALLS_TOTAL, CONVERSATION_CACHED_TOKENS_TOTAL,
    CONVERSATION_INPUT_TOKENS_TOTAL, CONVERSATION_REPLICA_MOVES_TOTAL, CONVERSATION_TPOT_SECONDS, CONVERSATION_TTFT_SECONDS, CONVERSATION_TURNS_TOTAL,
    PREFIX_CACHE_CACHED_TOKENS_TOTAL, PREFIX_CACHE_INPUT_TOKENS_TOTAL, PREFIX_CACHE_TTFT_SECONDS, SEQUENCE_PROBES_CUT_TOTAL,
};
use super::labels::{TraceExemplar, TsLabels};
use super::registry::{HistogramFamily, e2e_histogram, histogram_family, register, touch, tpot_histogram, ttft_histogram};
use crate::config::{Config, Scenario, Sequence};
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::probe::step::{LOOP_ANSWERED, LOOP_RESULTS, Step, StepOf, TURN_LABELS};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// The `result` of a turn: goodput (succeeded within every SLO), a success that missed one, or
/// a failure (an error or a drop).
const TURN_RESULTS: [&str; 3] = ["goodput", "slo_missed", "error"];
/// The `reason` a sequence was cut short.
const CUT_REASONS: [&str; 2] = ["error", "stopped"];
/// The `cache` side of a pair.
const CACHE_SIDES: [&str; 2] = ["cold", "warm"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    pub target: String,
    pub scenario: String,
    pub step: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepResultLabels {
    pub target: String,
    pub scenario: String,
    pub step: &'static str,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    pub target: String,
    pub scenario: String,
    pub tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoopLabels {
    pub target: String,
    pub scenario: String,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TurnLabels {
    pub target: String,
    pub scenario: String,
    pub turn: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TurnResultLabels {
    pub target: String,
    pub scenario: String,
    pub turn: &'static str,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    pub target: String,
    pub scenario: String,
    pub cache: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CutLabels {
    pub target: String,
    pub scenario: String,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PairLabels {
    pub target: String,
    pub scenario: String,
}

/// The `tool` values of an agent scenario: its declared tools and `undeclared` (none for others).
fn tool_labels(scenario: &Scenario) -> Vec<String> {
    match &scenario.sequence {
        Some(Sequence::Agent(agent)) => agent.tools.iter().map(|t| t.name.clone()).chain([crate::checks::UNDECLARED.to_owned()]).collect(),
        _ => Vec::new(),
    }
}

/// The `result` of a turn or agent step (`TURN_RESULTS`); `sample` is a success's.
fn step_result(outcome: &Outcome, sample: Option<&Sample>) -> &'static str {
    match sample {
        Some(s) if s.goodput => TURN_RESULTS[0],
        Some(_) => TURN_RESULTS[1],
        None if outcome.is_success() => TURN_RESULTS[1],
        None => TURN_RESULTS[2],
    }
}

/// Conversations, cache pairs and agent loops.
#[derive(Debug, Clone)]
pub struct SequenceFamilies {
    turn_ttft: HistogramFamily<TurnLabels>,
    turn_tpot: HistogramFamily<TurnLabels>,
    turns: Family<TurnResultLabels, Counter>,
    turn_input_tokens: Family<TurnLabels, Counter>,
    turn_cached_tokens: Family<TurnLabels, Counter>,
    moves: Family<PairLabels, Counter>,
    cache_ttft: HistogramFamily<CacheLabels>,
    cache_input_tokens: Family<CacheLabels, Counter>,
    cache_cached_tokens: Family<CacheLabels, Counter>,
    cut: Family<CutLabels, Counter>,
    step_ttft: HistogramFamily<StepLabels>,
    steps: Family<StepResultLabels, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    loops: Family<LoopLabels, Counter>,
    loop_duration: HistogramFamily<PairLabels>,
}

impl SequenceFamilies {
    pub(super) fn new() -> Self {
        SequenceFamilies {
            turn_ttft: histogram_family(ttft_histogram),
            turn_tpot: histogram_family(tpot_histogram),
            turns: Family::default(),
            turn_input_tokens: Family::default(),
            turn_cached_tokens: Family::default(),
            moves: Family::default(),
            cache_ttft: histogram_family(ttft_histogram),
            cache_input_tokens: Family::default(),
            cache_cached_tokens: Family::default(),
            cut: Family::default(),
            step_ttft: histogram_family(ttft_histogram),
            steps: Family::default(),
            tool_calls: Family::default(),
            loops: Family::default(),
            loop_duration: histogram_family(e2e_histogram),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        register(r, CONVERSATION_TTFT_SECONDS, self.turn_ttft.clone());
        register(r, CONVERSATION_TPOT_SECONDS, self.turn_tpot.clone());
        register(r, CONVERSATION_TURNS_TOTAL, self.turns.clone());
        register(r, CONVERSATION_INPUT_TOKENS_TOTAL, self.turn_input_tokens.clone());
        register(r, CONVERSATION_CACHED_TOKENS_TOTAL, self.turn_cached_tokens.clone());
        register(r, CONVERSATION_REPLICA_MOVES_TOTAL, self.moves.clone());
        register(r, PREFIX_CACHE_TTFT_SECONDS, self.cache_ttft.clone());
        register(r, PREFIX_CACHE_INPUT_TOKENS_TOTAL, self.cache_input_tokens.clone());
        register(r, PREFIX_CACHE_CACHED_TOKENS_TOTAL, self.cache_cached_tokens.clone());
        register(r, SEQUENCE_PROBES_CUT_TOTAL, self.cut.clone());
        register(r, AGENT_STEP_TTFT_SECONDS, self.step_ttft.clone());
        register(r, AGENT_STEPS_TOTAL, self.steps.clone());
        register(r, AGENT_TOOL_CALLS_TOTAL, self.tool_calls.clone());
        register(r, AGENT_LOOPS_TOTAL, self.loops.clone());
        register(r, AGENT_LOOP_DURATION_SECONDS, self.loop_duration.clone());
    }

    /// Creates at zero the series of every configured conversation and cache pair.
    pub(super) fn precreate(&self, config: &Config) {
        for target in &config.targets {
            for scenario in &config.scenarios {
                let Some(sequence) = &scenario.sequence else { continue };
                let (t, s) = (target.name.as_str(), scenario.name.as_str());
                for reason in CUT_REASONS {
                    touch(&self.cut, &CutLabels { target: t.to_owned(), scenario: s.to_owned(), reason });
                }
                match sequence {
                    Sequence::Conversation { turns, .. } => {
                        for turn in TURN_LABELS.into_iter().take(turns.len()) {
                            let labels = TurnLabels { target: t.to_owned(), scenario: s.to_owned(), turn };
                            for family in [&self.turn_ttft, &self.turn_tpot] {
                                touch(family, &labels);
                            }
                            for family in [&self.turn_input_tokens, &self.turn_cached_tokens] {
                                touch(family, &labels);
                            }
                            for result in TURN_RESULTS {
                                touch(&self.turns, &TurnResultLabels { target: t.to_owned(), scenario: s.to_owned(), turn, result });
                            }
                        }
                        touch(&self.moves, &PairLabels { target: t.to_owned(), scenario: s.to_owned() });
                    }
                    Sequence::CachePair { .. } => {
                        for cache in CACHE_SIDES {
                            let labels = CacheLabels { target: t.to_owned(), scenario: s.to_owned(), cache };
                            touch(&self.cache_ttft, &labels);
                            for family in [&self.cache_input_tokens, &self.cache_cached_tokens] {
                                touch(family, &labels);
                            }
                        }
                    }
                    Sequence::Agent(agent) => {
                        for step in TURN_LABELS.into_iter().take(agent.max_steps as usize) {
                            touch(&self.step_ttft, &StepLabels { target: t.to_owned(), scenario: s.to_owned(), step });
                            for result in TURN_RESULTS {
                                touch(&self.steps, &StepResultLabels { target: t.to_owned(), scenario: s.to_owned(), step, result });
                            }
                        }
                        for tool in tool_labels(scenario) {
                            touch(&self.tool_calls, &ToolLabels { target: t.to_owned(), scenario: s.to_owned(), tool });
                        }
                        for result in LOOP_RESULTS {
                            touch(&self.loops, &LoopLabels { target: t.to_owned(), scenario: s.to_owned(), result });
                        }
                        touch(&self.loop_duration, &PairLabels { target: t.to_owned(), scenario: s.to_owned() });
                    }
                }
            }
        }
    }

    /// Removes every series of a target×scenario pair.
    pub(super) fn forget(&self, ts: &TsLabels, scenario: &Scenario) {
        let (t, s) = (ts.target.clone(), ts.scenario.clone());
        for reason in CUT_REASONS {
            self.cut.remove(&CutLabels { target: t.clone(), scenario: s.clone(), reason });
        }
        for turn in TURN_LABELS {
            let labels = TurnLabels { target: t.clone(), scenario: s.clone(), turn };
            for family in [&self.turn_ttft, &self.turn_tpot] {
                family.remove(&labels);
            }
            for family in [&self.turn_input_tokens, &self.turn_cached_tokens] {
                family.remove(&labels);
            }
            for result in TURN_RESULTS {
                self.turns.remove(&TurnResultLabels { target: t.clone(), scenario: s.clone(), turn, result });
            }
        }
        self.moves.remove(&PairLabels { target: t.clone(), scenario: s.clone() });
        for cache in CACHE_SIDES {
            let labels = CacheLabels { target: t.clone(), scenario: s.clone(), cache };
            self.cache_ttft.remove(&labels);
            self.cache_input_tokens.remove(&labels);
            self.cache_cached_tokens.remove(&labels);
        }
        for step in TURN_LABELS {
            self.step_ttft.remove(&StepLabels { target: t.clone(), scenario: s.clone(), step });
            for result in TURN_RESULTS {
                self.steps.remove(&StepResultLabels { target: t.clone(), scenario: s.clone(), step, result });
            }
        }
        for tool in tool_labels(scenario) {
            self.tool_calls.remove(&ToolLabels { target: t.clone(), scenario: s.clone(), tool });
        }
        for result in LOOP_RESULTS {
            self.loops.remove(&LoopLabels { target: t.clone(), scenario: s.clone(), result });
        }
        self.loop_duration.remove(&PairLabels { target: t.clone(), scenario: s.clone() });
    }

    /// Records one probe of a sequence by its turn or cache side.
    pub(super) fn record(&self, outcome: &Outcome, step: &StepOf, sample: Option<&Sample>, exemplar: Option<&TraceExemplar>) {
        let (target, scenario) = (outcome.target.to_string(), outcome.scenario.to_string());
        let sample = sample.filter(|_| outcome.is_success());
        match step.step {
            Step::Turn(k) => {
                let turn = Step::turn_label(k);
                let result = step_result(outcome, sample);
                self.turns.get_or_create(&TurnResultLabels { target: target.clone(), scenario: scenario.clone(), turn, result }).inc();
                let Some(s) = sample else { return };
                let labels = TurnLabels { target, scenario, turn };
                if s.streamed {
                    self.turn_ttft.get_or_create(&labels).observe(s.ttft.as_secs_f64(), exemplar.cloned(), None);
                    if let Some(tpot) = s.tpot {
                        self.turn_tpot.get_or_create(&labels).observe(tpot.as_secs_f64(), exemplar.cloned(), None);
                    }
                }
                if let Some(n) = s.input_tokens {
                    self.turn_input_tokens.get_or_create(&labels).inc_by(n);
                }
                if let Some(n) = s.cached_tokens {
                    self.turn_cached_tokens.get_or_create(&labels).inc_by(n);
                }
            }
            Step::Agent(k) => {
                let step = Step::turn_label(k);
                let result = step_result(outcome, sample);
                self.steps.get_or_create(&StepResultLabels { target: target.clone(), scenario: scenario.clone(), step, result }).inc();
                // A failed step's calls count too: they are what the model did.
                for tool in outcome.checks.iter().flat_map(|c| &c.calls) {
                    self.tool_calls.get_or_create(&ToolLabels { target: target.clone(), scenario: scenario.clone(), tool: tool.clone() }).inc();
                }
                if let Some(s) = sample.filter(|s| s.streamed) {
                    self.step_ttft.get_or_create(&StepLabels { target, scenario, step }).observe(s.ttft.as_secs_f64(), exemplar.cloned(), None);
                }
            }
            Step::Cold | Step::Warm => {
                let (Some(s), Some(cache)) = (sample, step.step.cache_label()) else { return };
                let labels = CacheLabels { target, scenario, cache };
                if s.streamed {
                    self.cache_ttft.get_or_create(&labels).observe(s.ttft.as_secs_f64(), exemplar.cloned(), None);
                }
                // Only probes whose server reported a cached count: absent is not zero, and a warm
                // probe's input growing while its cached count stays 0 is what the alert reads.
                if let (Some(input), Some(cached)) = (s.input_tokens, s.cached_tokens) {
                    self.cache_input_tokens.get_or_create(&labels).inc_by(input);
                    self.cache_cached_tokens.get_or_create(&labels).inc_by(cached);
                }
            }
        }
    }

    /// Counts the probes a cut-short sequence will not send.
    pub(super) fn cut(&self, target: &str, scenario: &str, reason: &'static str, probes: u64) {
        self.cut.get_or_create(&CutLabels { target: target.to_owned(), scenario: scenario.to_owned(), reason }).inc_by(probes);
    }

    /// Counts an ended agent loop, and times it when it answered.
    pub(super) fn agent_loop(&self, target: &str, scenario: &str, result: &'static str, seconds: f64) {
        let (t, s) = (target.to_owned(), scenario.to_owned());
        if result == LOOP_ANSWERED {
            self.loop_duration.get_or_create(&PairLabels { target: t.clone(), scenario: s.clone() }).observe(seconds, None, None);
        }
        self.loops.get_or_create(&LoopLabels { target: t, scenario: s, result }).inc();
    }

    pub(super) fn moved(&self, target: &str, scenario: &str) {
        self.moves.get_or_create(&PairLabels { target: target.to_owned(), scenario: scenario.to_owned() }).inc();
    }
}
