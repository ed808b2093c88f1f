//! Stage 2: `RawConfig` -> `Config`, collecting every problem instead of stopping at the first.
//!
//! Each check records issues by path (`targets[1].timeouts.ttft`) and returns a placeholder on
//! failure so the remaining checks still run; the result is only used when nothing was
//! recorded. Lines are filled in afterwards from the paths (see `locate.rs`). Target checks
//! live in `target.rs`.

use std::net::SocketAddr;
use std::path::Path;

use super::check::{Checker, MAX_IN_FLIGHT, MAX_RATE, MIN_RATE, check_name, check_unique};
use super::duration::format_duration;
use super::kinds::SourceKind;
use super::model::{Config, ProbeSettings};
use super::raw::{RawConfig, RawProbe};
use super::raw_workload::RawScenario;
use super::slo::slo;
use super::target::Target;
use super::workload::{ArrivalSpec, LengthSpec, Scenario};
use super::{target, workload};

/// Validates the whole file. The `Config` is meaningful only when `checker.errors` is empty.
/// Relative dataset paths are resolved against `base_dir` (the config file's folder).
pub fn validate(raw: &RawConfig, base_dir: &Path, c: &mut Checker) -> Config {
    let listen = listen(&raw.listen, c);
    let (probe, probe_rate) = probe(&raw.probe, c);
    let targets = target::targets(&raw.targets, c);
    let arrival = workload::arrival("probe.arrival", raw.probe.arrival.as_ref(), c);
    let default_checks = super::checks::checks("checks", &raw.checks, c);
    let apis: Vec<(String, super::ProtocolKind)> = targets.iter().map(|t| (t.name.clone(), t.api)).collect();
    let shared = Shared { explicit_probe_rate: raw.probe.rate, probe_rate, arrival, base_dir, default_checks, apis };
    let mut scenarios = scenarios(&raw.scenarios, &shared, c);
    // A shard sends its share; the shards' independent streams add up to the configured rate.
    for s in &mut scenarios {
        s.rate /= probe.shard.count as f64;
    }
    let slo = slo(&raw.slo, c);
    warn_in_flight_cap(&probe, &targets, &scenarios, c);
    let tracing = super::telemetry::tracing(&raw.tracing, c);
    let jsonl = super::jsonl::jsonl(&raw.jsonl, c);
    let mut sources = super::telemetry::sources(&raw.sources, &raw.targets, c);
    // An engine source tied to a target reads that target's own page (resolved once, here).
    for s in sources.iter_mut().filter(|s| s.url.is_none() && matches!(s.kind, SourceKind::Engine(_))) {
        s.url = targets.iter().find(|t| Some(&t.name) == s.target.as_ref()).map(Target::metrics_url);
    }
    super::series::check(&targets, &scenarios, sources.len(), c);
    let bench = super::bench::bench(raw.bench.as_ref(), c);
    let detect = super::detect::detect(&raw.detect, c);
    Config { listen, probe, targets, scenarios, slo, tracing, jsonl, sources, bench, detect, warnings: Vec::new() }
}

fn listen(text: &str, c: &mut Checker) -> SocketAddr {
    text.parse().unwrap_or_else(|_| {
        c.error("listen", format!("invalid address \"{text}\": expected IP:port, e.g. 127.0.0.1:9464"));
        SocketAddr::from(([127, 0, 0, 1], 9464))
    })
}

/// Returns the settings and the shared rate (`probe.rate`, default 1.0).
fn probe(raw: &RawProbe, c: &mut Checker) -> (ProbeSettings, f64) {
    let rate = c.rate("probe.rate", raw.rate.unwrap_or(1.0));
    if !(1..=MAX_IN_FLIGHT).contains(&raw.max_in_flight) {
        c.error("probe.max_in_flight", format!("must be between 1 and {MAX_IN_FLIGHT}, got {}", raw.max_in_flight));
    }
    let shard = match &raw.shard {
        None => super::Shard::default(),
        Some(s) => {
            if !(1..=super::MAX_SHARDS).contains(&s.count) {
                c.error("probe.shard.count", format!("must be 1 to {}, got {}", super::MAX_SHARDS, s.count));
            } else if s.index >= s.count {
                c.error("probe.shard.index", format!("must be below count ({}), got {}", s.count, s.index));
            }
            super::Shard { index: s.index.min(s.count.saturating_sub(1)).min(super::MAX_SHARDS) as u32, count: s.count.clamp(1, super::MAX_SHARDS) as u32 }
        }
    };
    if let Some(p) = &raw.prober {
        check_name("probe.prober", p, c);
    }
    let settings = ProbeSettings {
        seed: raw.seed,
        max_in_flight: usize::try_from(raw.max_in_flight).unwrap_or(usize::MAX),
        shutdown_grace: c.duration("probe.shutdown_grace", &raw.shutdown_grace),
        discovery_interval: c.positive_duration("probe.discovery_interval", &raw.discovery_interval),
        shard,
        prober: raw.prober.clone(),
    };
    (settings, rate)
}

/// What every scenario inherits from `probe:`.
struct Shared<'a> {
    explicit_probe_rate: Option<f64>,
    probe_rate: f64,
    arrival: ArrivalSpec,
    base_dir: &'a Path,
    /// The top-level `checks:`, for scenarios without their own.
    default_checks: super::checks::Checks,
    /// Every target's name and API (which checks it can carry).
    apis: Vec<(String, super::ProtocolKind)>,
}

/// Resolves every scenario's rate: its own `rate`, or its weight's share of `probe.rate`.
fn scenarios(raws: &[RawScenario], shared: &Shared, c: &mut Checker) -> Vec<Scenario> {
    if raws.is_empty() {
        c.error("scenarios", "at least one scenario is required");
    }
    check_unique("scenarios", "scenario", raws.iter().map(|s| s.name.as_str()), c);
    let weights: Vec<Option<f64>> = raws.iter().enumerate().map(|(i, s)| weight(i, s, c)).collect();
    let total_weight: f64 = weights.iter().flatten().sum();
    if total_weight == 0.0 && !raws.is_empty() && shared.explicit_probe_rate.is_some() {
        c.warn("probe.rate", "unused: every scenario sets its own rate");
    }
    raws.iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (raw, w))| {
            let path = format!("scenarios[{i}]");
            check_name(&format!("{path}.name"), &raw.name, c);
            let rate = match (raw.rate, w) {
                (Some(own), _) => c.rate(&format!("{path}.rate"), own),
                (None, Some(w)) => weighted_rate(&format!("{path}.weight"), w, total_weight, shared.probe_rate, c),
                (None, None) => shared.probe_rate, // unreachable: no rate means a weight
            };
            scenario(&path, raw, rate, shared, c)
        })
        .collect()
}

/// The rate a weight gives its scenario: its share of `probe.rate`. Out of range, the error
/// says so in terms of the weight, not as if a rate had been written there.
fn weighted_rate(path: &str, weight: f64, total_weight: f64, probe_rate: f64, c: &mut Checker) -> f64 {
    let rate = probe_rate * weight / total_weight;
    if rate.is_finite() && (MIN_RATE..=MAX_RATE).contains(&rate) {
        return rate;
    }
    c.error(
        path,
        format!(
            "weight {weight} of {total_weight} in all gives this scenario {rate} probes per second of probe.rate {probe_rate}, \
             outside {MIN_RATE} to {MAX_RATE}: change the weights or probe.rate, or give the scenario its own rate"
        ),
    );
    1.0
}

/// One scenario's lengths, arrival, prefix and dataset.
fn scenario(path: &str, raw: &RawScenario, rate: f64, shared: &Shared, c: &mut Checker) -> Scenario {
    let dataset = raw.dataset.as_ref().and_then(|d| workload::dataset(&format!("{path}.dataset"), d, shared.base_dir, c));
    let mut length = |field: &str, value: &Option<super::raw_workload::RawLength>, required: bool| match value {
        Some(v) => workload::length(&format!("{path}.{field}"), v, c),
        None => {
            if required {
                c.error(path, format!("missing field `{field}`"));
            }
            LengthSpec::Fixed(0) // unused: the dataset provides it
        }
    };
    let has_dataset = raw.dataset.is_some();
    // Known-answer prompts are sent as they are, as a dataset's are.
    let known_answers = match &raw.checks {
        Some(own) => own.known_answers.is_some(),
        None => !shared.default_checks.known_answers.is_empty(),
    };
    let has_turns = raw.turns.is_some();
    // An agent's task, when given, is its prompt.
    let has_task = raw.agent.as_ref().is_some_and(|a| a.task.is_some());
    let input_tokens = length("input_tokens", &raw.input_tokens, !has_dataset && !known_answers && !has_turns && !has_task);
    let needs_output = dataset.as_ref().is_none_or(|d| d.entries_without_output() > 0);
    let output_tokens = length("output_tokens", &raw.output_tokens, needs_output && !(has_dataset && dataset.is_none()) && !has_turns);
    if has_dataset && raw.input_tokens.is_some() {
        c.error(format!("{path}.input_tokens"), "input_tokens does not apply with a dataset (its prompts are sent as they are)");
    }
    if has_dataset && raw.prefix.is_some() {
        c.error(format!("{path}.prefix"), "prefix does not apply with a dataset");
    }
    let prefix = raw.prefix.as_ref().map(|p| workload::prefix(&format!("{path}.prefix"), p, c));
    if let (Some(p), Some(min)) = (prefix, input_tokens.min_value()) {
        if p.tokens >= min && p.share > 0.0 {
            c.warn(
                format!("{path}.prefix.tokens"),
                format!("prefix ({}) is not shorter than the shortest input ({min}): shorter draws get a cut prefix", p.tokens),
            );
        }
    }
    if let Some(salt) = &raw.cache_salt {
        if salt.is_empty() || salt.len() > 256 {
            c.error(format!("{path}.cache_salt"), "must be 1 to 256 characters");
        }
    }
    let sequence = scenario_sequence(path, raw, known_answers, &input_tokens, shared, c);
    // A conversation's first turn is the scenario's own lengths (what previews and the workload
    // hash read).
    let (input_tokens, output_tokens) = match &sequence {
        Some(super::Sequence::Conversation { turns, .. }) => (turns[0].input_tokens.clone(), turns[0].output_tokens.clone()),
        _ => (input_tokens, output_tokens),
    };
    Scenario {
        name: raw.name.clone(),
        rate,
        input_tokens,
        output_tokens,
        sequence,
        arrival: match &raw.arrival {
            Some(a) => workload::arrival(&format!("{path}.arrival"), Some(a), c),
            None => shared.arrival,
        },
        prefix,
        cache_salt: raw.cache_salt.clone(),
        slo: super::slo::slo_override(&format!("{path}.slo"), raw.slo.as_ref(), c),
        checks: scenario_checks(path, raw, dataset.as_deref(), shared, c),
        reasoning: scenario_reasoning(path, raw, shared, c),
        dataset,
    }
}

/// The scenario's own `checks:`, else the top-level one; checked against its prompts and the
/// targets' APIs. `None` when nothing is checked.
fn scenario_checks(path: &str, raw: &RawScenario, dataset: Option<&super::Dataset>, shared: &Shared, c: &mut Checker) -> Option<std::sync::Arc<super::Checks>> {
    let (at, mut checks) = match &raw.checks {
        Some(own) => (format!("{path}.checks"), super::checks::checks(&format!("{path}.checks"), own, c)),
        None => ("checks".to_owned(), shared.default_checks.clone()),
    };
    // An agent's steps that call tools end so: it is the loop's own end, not a failure.
    if let (Some(_), Some(reasons)) = (&raw.agent, checks.finish_reasons.as_mut()) {
        if !reasons.iter().any(|r| r == "tool_calls") {
            reasons.push("tool_calls".to_owned());
        }
    }
    if !checks.any() {
        return None;
    }
    let has_dataset = raw.dataset.is_some();
    super::checks::check_scenario(&at, &checks, has_dataset, dataset.is_none_or(|d| d.nonce), &shared.apis, c);
    if let (true, Some(d)) = (checks.dataset_answers, dataset) {
        let without = d.entries.iter().filter(|e| e.expect.is_none()).count();
        if without > 0 {
            c.error(format!("{at}.dataset_answers"), format!("{without} of {} dataset entries have no expect or expect_regex field", d.entries.len()));
        }
    }
    Some(std::sync::Arc::new(checks))
}

/// The scenario's `turns:` or `cache_pair:`, with what does not combine with them refused: a
/// conversation needs every target to read its answers' text (they are sent back in the next
/// turn); a pair's prefix must be shorter than its shortest prompt.
fn scenario_sequence(path: &str, raw: &RawScenario, known_answers: bool, input: &LengthSpec, shared: &Shared, c: &mut Checker) -> Option<super::Sequence> {
    let conversation = raw.turns.is_some();
    let agent = raw.agent.is_some();
    let others = [
        ("input_tokens", conversation && raw.input_tokens.is_some()),
        ("output_tokens", conversation && raw.output_tokens.is_some()),
        ("dataset", raw.dataset.is_some()),
        ("prefix", raw.prefix.is_some()),
        ("cache_salt", !conversation && !agent && raw.cache_salt.is_some()),
        ("checks.known_answers", known_answers),
        ("checks.tool_call", agent && raw.checks.as_ref().is_some_and(|k| k.tool_call.is_some())),
        ("checks.structured_output", agent && raw.checks.as_ref().is_some_and(|k| k.structured_output.is_some())),
    ];
    let sections = super::sequence::RawSequence {
        turns: raw.turns.as_deref(),
        think_time: raw.think_time.as_ref(),
        pair: raw.cache_pair.as_ref(),
        agent: raw.agent.as_ref(),
    };
    let sequence = super::sequence::sequence(path, sections, &others, c)?;
    match &sequence {
        super::Sequence::Agent(_) => {
            for (target, api) in &shared.apis {
                let carries = (c.resolvers.carries)(*api);
                if !(carries.tool_call && carries.answer_text) {
                    c.error(
                        format!("{path}.agent"),
                        format!("target {target} speaks {}, which carries no function tools (openai-chat and openai-responses do)", api.as_str()),
                    );
                }
            }
        }
        super::Sequence::Conversation { .. } => {
            for (target, api) in &shared.apis {
                if !(c.resolvers.carries)(*api).answer_text {
                    let at = format!("{path}.turns");
                    c.error(
                        at,
                        format!(
                            "target {target} speaks {}, whose answers' text is not read (openai-chat, openai-completions and openai-responses are)",
                            api.as_str()
                        ),
                    );
                }
            }
        }
        super::Sequence::CachePair { prefix_tokens } => {
            if let Some(min) = input.min_value().filter(|min| prefix_tokens >= min) {
                c.error(format!("{path}.cache_pair.prefix_tokens"), format!("must be shorter than the shortest input ({min})"));
            }
        }
    }
    Some(sequence)
}

/// The scenario's `reasoning:`, refused for targets whose API carries no reasoning settings.
fn scenario_reasoning(path: &str, raw: &RawScenario, shared: &Shared, c: &mut Checker) -> Option<super::Reasoning> {
    let at = format!("{path}.reasoning");
    let reasoning = super::reasoning::reasoning(&at, raw.reasoning.as_ref(), c)?;
    for (target, api) in &shared.apis {
        if !(c.resolvers.carries)(*api).reasoning {
            c.error(&at, format!("target {target} speaks {}, which carries no reasoning settings (openai-chat and openai-responses do)", api.as_str()));
        }
    }
    Some(reasoning)
}

/// The scenario's weight when it shares `probe.rate`, `None` when it has its own rate.
fn weight(i: usize, raw: &RawScenario, c: &mut Checker) -> Option<f64> {
    match (raw.weight, raw.rate) {
        (Some(_), Some(_)) => {
            c.error(format!("scenarios[{i}].rate"), "set either weight (a share of probe.rate) or rate (an own rate), not both");
            None
        }
        (_, Some(_)) => None,
        (w, None) => Some(c.positive(&format!("scenarios[{i}].weight"), w.unwrap_or(1.0))),
    }
}

/// Open-loop traffic at `rate` against requests that may each take up to `total` needs about
/// `rate × total` slots; below that, a slow target makes the prober drop probes.
fn warn_in_flight_cap(probe: &ProbeSettings, targets: &[Target], scenarios: &[Scenario], c: &mut Checker) {
    let rate: f64 = scenarios.iter().map(|s| s.rate).sum();
    for t in targets {
        let needed = rate * t.timeouts.total.as_secs_f64();
        if (probe.max_in_flight as f64) < needed {
            c.warn(
                "probe.max_in_flight",
                format!(
                    "{} is below rate × total timeout for target \"{}\" ({}/s × {} = {needed:.0}): \
                     probes will be dropped if responses get that slow",
                    probe.max_in_flight,
                    t.name,
                    short_number(rate),
                    format_duration(t.timeouts.total),
                ),
            );
        }
    }
}

/// `2.1000000000000005` -> `2.1`: at most 3 decimals, no trailing zeros.
fn short_number(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}
