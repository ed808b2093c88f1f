//! Stage 1 for the workload parts of a scenario: length distributions, arrival processes, shared
//! prefixes and dataset replay, as written in YAML. Checked in `workload.rs`.
//!
//! The `///` comments are the user documentation of the format (see `config/README.md`).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

use super::duration::RawDuration;

/// A token count as written: `128`, `{min: 64, max: 256}` (uniform), or a distribution
/// `{kind: ..., ...}`. Which fields a kind needs is checked in validation.
#[derive(Debug, Clone, PartialEq)]
pub enum RawLength {
    Fixed(i64),
    Dist(Box<RawDist>),
}

/// `{kind: fixed|uniform|normal|lognormal|empirical|mixture, ...}`; `kind` may be omitted for
/// `{min, max}` (uniform).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a length distribution mapping with kind, ...")]
pub struct RawDist {
    /// `fixed`, `uniform`, `normal`, `lognormal`, `empirical` or `mixture`. Default `uniform`.
    pub kind: Option<String>,
    /// `fixed`: the count.
    pub value: Option<i64>,
    /// Lower clamp (every kind); the lower bound of `uniform`. Default 1.
    pub min: Option<i64>,
    /// Upper clamp (every kind); the upper bound of `uniform`. Default 1000000.
    pub max: Option<i64>,
    /// `normal`: mean.
    pub mean: Option<f64>,
    /// `normal`: standard deviation (>= 0).
    pub stddev: Option<f64>,
    /// `lognormal`: median (= e^mu).
    pub median: Option<f64>,
    /// `lognormal`: 90th percentile (> median); exclusive with `p99` and `sigma`.
    pub p90: Option<f64>,
    /// `lognormal`: 99th percentile (> median); exclusive with `p90` and `sigma`.
    pub p99: Option<f64>,
    /// `lognormal`: mu of the underlying normal; exclusive with `median`.
    pub mu: Option<f64>,
    /// `lognormal`: sigma of the underlying normal (> 0).
    pub sigma: Option<f64>,
    /// `empirical`: observed counts, each equally likely.
    pub values: Option<Vec<i64>>,
    /// `empirical`: `[{value, weight}]` pairs; exclusive with `values`.
    pub histogram: Option<Vec<RawBin>>,
    /// `mixture`: the components, each a distribution with a `weight`.
    pub components: Option<Vec<RawDist>>,
    /// Weight of a `mixture` component (> 0); only inside `components`.
    pub weight: Option<f64>,
}

/// One bin of an empirical histogram.
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with value and weight")]
pub struct RawBin {
    pub value: i64,
    pub weight: f64,
}

impl<'de> Deserialize<'de> for RawLength {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LengthVisitor)
    }
}

struct LengthVisitor;

impl<'de> Visitor<'de> for LengthVisitor {
    type Value = RawLength;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a token count, {min: N, max: M}, or a distribution {kind: ..., ...}")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<RawLength, E> {
        Ok(RawLength::Fixed(i64::try_from(n).unwrap_or(i64::MAX)))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<RawLength, E> {
        Ok(RawLength::Fixed(n))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawLength, A::Error> {
        let dist = RawDist::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(RawLength::Dist(Box::new(dist)))
    }
}

/// `probe.arrival` or `scenarios[].arrival`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with kind, burstiness, diurnal")]
pub struct RawArrival {
    /// `poisson` (default), `gamma` or `constant`.
    #[serde(default = "default_arrival_kind")]
    pub kind: String,
    /// `gamma` only: the shape; 1 = Poisson, < 1 burstier, > 1 more regular (CV² = 1/burstiness).
    pub burstiness: Option<f64>,
    /// Optional sinusoidal modulation of the rate.
    pub diurnal: Option<RawDiurnal>,
}

fn default_arrival_kind() -> String {
    "poisson".to_owned()
}

/// `arrival.diurnal`: rate(t) = rate × (1 + amplitude × cos(2π (t − peak_at) / period)).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with period, amplitude, peak_at")]
pub struct RawDiurnal {
    /// Length of one cycle, e.g. `24h`.
    pub period: RawDuration,
    /// Relative swing in [0, 1): 0.5 means the rate runs between 50% and 150% of its mean.
    pub amplitude: f64,
    /// Offset from the start of the run to the first peak. Default `0s` (start at the peak).
    pub peak_at: Option<RawDuration>,
}

/// `scenarios[].prefix`: a shared prompt prefix to measure prefix-cache behaviour.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with tokens, share, distinct")]
pub struct RawPrefix {
    /// Length of the shared prefix in tokens (>= 1), part of `input_tokens`.
    pub tokens: i64,
    /// Fraction of requests that start with a shared prefix, in [0, 1]. Default 1.
    pub share: Option<f64>,
    /// How many different prefixes are used (each request picks one uniformly). Default 1.
    pub distinct: Option<i64>,
}

/// `scenarios[].dataset`: replay prompts from a file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with path, format, order, nonce")]
pub struct RawDataset {
    /// File path, relative to the config file.
    pub path: String,
    /// `jsonl` (one `{"prompt", "output_tokens"|"max_tokens"}` per line) or `sharegpt`.
    /// Default: `sharegpt` for `.json` files, else `jsonl`.
    pub format: Option<String>,
    /// `random` (default: sampled with replacement) or `sequential` (in file order, wrapping).
    pub order: Option<String>,
    /// Start each prompt with a unique nonce (default true) so replays do not hit the prefix
    /// cache by accident.
    pub nonce: Option<bool>,
}

/// One entry of `scenarios:`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a scenario mapping with name, weight or rate, input_tokens, output_tokens, ...")]
pub struct RawScenario {
    /// Unique name, used as the `scenario` label: letters, digits, `_`, `.`, `-`.
    pub name: String,
    /// Share of `probe.rate` (> 0). Default 1. Exclusive with `rate`.
    pub weight: Option<f64>,
    /// Own rate in requests per second per target (> 0), outside `probe.rate`. Exclusive with
    /// `weight`.
    pub rate: Option<f64>,
    /// Prompt length in tokens: a number, `{min, max}` for uniform, or a distribution;
    /// 1..=1000000. Required unless `dataset` or `checks.known_answers` gives the prompts.
    pub input_tokens: Option<RawLength>,
    /// Requested output length in tokens (`max_tokens`), same forms. Required unless every
    /// dataset entry carries its own.
    pub output_tokens: Option<RawLength>,
    /// Arrival process for this scenario, replacing `probe.arrival`.
    pub arrival: Option<RawArrival>,
    /// Shared prompt prefix (off by default: every prompt starts with a unique nonce).
    pub prefix: Option<RawPrefix>,
    /// Replay prompts from a file instead of synthesizing them.
    pub dataset: Option<RawDataset>,
    /// vLLM `cache_salt` sent in the body: requests with different salts never share cached
    /// prefixes (one salt per trust group).
    pub cache_salt: Option<String>,
    /// SLO fields replacing the target's and the global ones for this scenario (ttft, tpot, e2e,
    /// objective; a threshold `off` drops the inherited one).
    pub slo: Option<super::slo::RawSloOverride>,
    /// Behaviour checks replacing the top-level `checks:` for this scenario (`checks: {}` turns
    /// them off here).
    pub checks: Option<super::checks::RawChecks>,
    /// Reasoning effort and budget sent with each request (chat and Responses APIs only).
    pub reasoning: Option<super::reasoning::RawReasoning>,
    /// A conversation: 2 to 32 turns, each `{input_tokens, output_tokens}` (the new user
    /// message and its answer's limit). Turn k sends every earlier prompt and the answer the
    /// server gave to it, then its own prompt. Replaces the scenario's `input_tokens` and
    /// `output_tokens` (the first turn's are those). The arrival process times conversation
    /// starts; each later turn is sent `think_time` after the previous answer ended. Chat,
    /// completions and Responses APIs only.
    pub turns: Option<Vec<RawTurn>>,
    /// Pause between an answer and the next turn of a conversation (at most 10m). Default `1s`.
    pub think_time: Option<super::duration::RawDuration>,
    /// Prefix-cache health: each arrival sends a cold probe with a fresh prefix, then, as soon
    /// as it ended, a warm probe with the same prefix and a new rest. Their TTFTs and cached
    /// tokens are exported apart (`cache="cold"|"warm"`).
    pub cache_pair: Option<RawCachePair>,
    /// An agent's tool loop: the tools offered, each with a canned result, and how far the loop
    /// may go. Each arrival starts a loop; every step is a probe (sent as soon as the previous
    /// one ended) and is checked (declared and expected tools called, arguments valid against
    /// the tool's schema, an answer within `max_steps`). Chat and Responses APIs only.
    pub agent: Option<super::agent::RawAgent>,
}

/// One entry of `turns:` as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with input_tokens, output_tokens")]
pub struct RawTurn {
    /// Length of this turn's new user message in tokens (the earlier turns come on top), in the
    /// forms of a scenario's `input_tokens`.
    pub input_tokens: RawLength,
    /// Requested output length of this turn (`max_tokens`), in the forms of `output_tokens`.
    pub output_tokens: RawLength,
}

/// `cache_pair:` as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with prefix_tokens")]
pub struct RawCachePair {
    /// Tokens of the prefix both probes of a pair share (a fresh one per pair), part of
    /// `input_tokens` and shorter than its shortest draw.
    pub prefix_tokens: i64,
}
