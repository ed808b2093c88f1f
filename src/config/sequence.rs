//! A scenario whose probes come in a sequence instead of one at a time: a conversation of
//! `turns:` (each turn sends the earlier prompts and the answers the server gave, after a think
//! time), a `cache_pair:` (a cold probe with a fresh prefix, then a warm one that repeats it), or
//! an `agent:` tool loop (`agent.rs`).
//! The arrival process times a sequence's start; its later probes follow the earlier ones.
//!
//! The `///` comments are the user documentation of the format (see `config/README.md`).

use std::time::Duration;

use super::agent::RawAgent;
use super::check::Checker;
use super::duration::RawDuration;
use super::raw_workload::{RawCachePair, RawTurn};
use super::workload::{Sequence, TurnSpec, length};

/// Most turns in one conversation: the requests carry every earlier turn, so a bound keeps them
/// bounded.
pub const MAX_TURNS: usize = 32;
/// Longest think time between two turns.
const MAX_THINK_TIME: Duration = Duration::from_secs(600);
/// Think time when a conversation sets none.
const DEFAULT_THINK_TIME: Duration = Duration::from_secs(1);

/// A scenario's sequence sections as written.
pub struct RawSequence<'a> {
    pub turns: Option<&'a [RawTurn]>,
    pub think_time: Option<&'a RawDuration>,
    pub pair: Option<&'a RawCachePair>,
    pub agent: Option<&'a RawAgent>,
}

/// Checks a scenario's `turns:`, `think_time:`, `cache_pair:` and `agent:`; `None` when it has
/// none. `others`: the scenario's other sections that do not combine with a sequence, by name,
/// when set.
pub fn sequence(path: &str, raw: RawSequence, others: &[(&str, bool)], c: &mut Checker) -> Option<Sequence> {
    let RawSequence { turns, think_time, pair, agent } = raw;
    if think_time.is_some() && turns.is_none() {
        c.error(format!("{path}.think_time"), "think_time applies to a conversation (turns:) only");
    }
    let set: Vec<&str> = [("turns", turns.is_some()), ("cache_pair", pair.is_some()), ("agent", agent.is_some())]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
    if set.len() > 1 {
        c.error(
            format!("{path}.{}", set[1]),
            format!("a scenario is one of a conversation (turns:), a cache pair (cache_pair:) or an agent loop (agent:), not {}", set.join(" and ")),
        );
        return None;
    }
    let (section, sequence) = match (turns, pair, agent) {
        (Some(turns), _, _) => ("turns", conversation(path, turns, think_time, c)?),
        (None, Some(pair), _) => ("cache_pair", cache_pair(path, pair, c)?),
        (None, None, Some(agent)) => ("agent", Sequence::Agent(std::sync::Arc::new(super::agent::agent(&format!("{path}.agent"), agent, c)?))),
        (None, None, None) => return None,
    };
    for (name, _) in others.iter().filter(|(_, set)| *set) {
        c.error(format!("{path}.{name}"), format!("{name} does not apply with {section}:"));
    }
    Some(sequence)
}

fn conversation(path: &str, turns: &[RawTurn], think_time: Option<&RawDuration>, c: &mut Checker) -> Option<Sequence> {
    if !(2..=MAX_TURNS).contains(&turns.len()) {
        c.error(format!("{path}.turns"), format!("a conversation has 2 to {MAX_TURNS} turns, got {}", turns.len()));
        return None;
    }
    let turns = turns
        .iter()
        .enumerate()
        .map(|(i, t)| TurnSpec {
            input_tokens: length(&format!("{path}.turns[{i}].input_tokens"), &t.input_tokens, c),
            output_tokens: length(&format!("{path}.turns[{i}].output_tokens"), &t.output_tokens, c),
        })
        .collect();
    let think_time = match think_time {
        None => DEFAULT_THINK_TIME,
        Some(raw) => {
            let at = format!("{path}.think_time");
            let d = c.duration(&at, raw);
            if d > MAX_THINK_TIME {
                c.error(&at, format!("must be at most {}s", MAX_THINK_TIME.as_secs()));
            }
            d.min(MAX_THINK_TIME)
        }
    };
    Some(Sequence::Conversation { turns, think_time })
}

fn cache_pair(path: &str, pair: &RawCachePair, c: &mut Checker) -> Option<Sequence> {
    let at = format!("{path}.cache_pair.prefix_tokens");
    if !(1..=super::check::MAX_TOKENS).contains(&pair.prefix_tokens) {
        c.error(at, format!("must be 1 to {} tokens, got {}", super::check::MAX_TOKENS, pair.prefix_tokens));
        return None;
    }
    Some(Sequence::CachePair { prefix_tokens: pair.prefix_tokens as u32 })
}

#[cfg(test)]
mod tests {
    fn load(api: &str, scenario: &str) -> Result<super::super::Config, String> {
        let text = format!("targets:\n  - name: a\n    base_url: http://127.0.0.1:18000\n    api: {api}\nscenarios:\n  - name: s\n{scenario}");
        crate::app::loader::parse(&text, "t.yaml").map_err(|e| e.to_string())
    }

    use super::*;
    use crate::config::LengthSpec;

    #[test]
    fn absent_or_empty_sets_no_sequence() {
        let c = load("openai-chat", "    input_tokens: 8\n    output_tokens: 8\n").unwrap();
        assert_eq!(c.scenarios[0].sequence, None);
        // A key with no value is the same as no key.
        let c = load("openai-chat", "    input_tokens: 8\n    output_tokens: 8\n    turns:\n    cache_pair:\n").unwrap();
        assert_eq!(c.scenarios[0].sequence, None);
        // An empty mapping misses its field, named with its line.
        let e = load("openai-chat", "    input_tokens: 8\n    output_tokens: 8\n    cache_pair: {}\n").unwrap_err();
        assert!(e.contains("scenarios[0].cache_pair: missing field `prefix_tokens` (t.yaml:9)"), "{e}");
    }

    #[test]
    fn a_conversation_takes_its_first_turn_as_the_scenario_lengths() {
        let yaml =
            "    turns:\n      - {input_tokens: 64, output_tokens: 16}\n      - {input_tokens: {min: 8, max: 16}, output_tokens: 32}\n    think_time: 250ms\n";
        let c = load("openai-chat", yaml).unwrap();
        let s = &c.scenarios[0];
        assert_eq!((s.input_tokens.clone(), s.output_tokens.clone()), (LengthSpec::Fixed(64), LengthSpec::Fixed(16)));
        let Some(Sequence::Conversation { turns, think_time }) = &s.sequence else { panic!("{:?}", s.sequence) };
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[1].input_tokens, LengthSpec::Uniform { min: 8, max: 16 });
        assert_eq!(*think_time, Duration::from_millis(250));
        let c = load("openai-completions", "    turns: [{input_tokens: 8, output_tokens: 8}, {input_tokens: 8, output_tokens: 8}]\n").unwrap();
        assert!(matches!(c.scenarios[0].sequence, Some(Sequence::Conversation { think_time: DEFAULT_THINK_TIME, .. })));
    }

    #[test]
    fn bad_conversations_name_the_field() {
        let one = "    turns: [{input_tokens: 8, output_tokens: 8}]\n";
        assert!(load("openai-chat", one).unwrap_err().contains("scenarios[0].turns: a conversation has 2 to 32 turns, got 1"));
        let empty = "    turns: []\n";
        assert!(load("openai-chat", empty).unwrap_err().contains("scenarios[0].turns"));
        let two = "    turns: [{input_tokens: 8, output_tokens: 8}, {input_tokens: 0, output_tokens: 8}]\n";
        assert!(load("openai-chat", two).unwrap_err().contains("scenarios[0].turns[1].input_tokens"));
        let lengths = format!("    input_tokens: 8\n    output_tokens: 8\n{}", two.replace("input_tokens: 0", "input_tokens: 4"));
        let e = load("openai-chat", &lengths).unwrap_err();
        assert!(e.contains("scenarios[0].input_tokens: input_tokens does not apply with turns:"), "{e}");
        let think = "    turns: [{input_tokens: 8, output_tokens: 8}, {input_tokens: 8, output_tokens: 8}]\n    think_time: 1h\n";
        assert!(load("openai-chat", think).unwrap_err().contains("scenarios[0].think_time: must be at most 600s"));
        let alone = "    input_tokens: 8\n    output_tokens: 8\n    think_time: 1s\n";
        assert!(load("openai-chat", alone).unwrap_err().contains("scenarios[0].think_time: think_time applies to a conversation"));
        let native = "    turns: [{input_tokens: 8, output_tokens: 8}, {input_tokens: 8, output_tokens: 8}]\n";
        let e = load("tgi", native).unwrap_err();
        assert!(e.contains("scenarios[0].turns: target a speaks tgi"), "{e}");
        let unknown = "    turns: [{input_tokens: 8, output_tokens: 8, think: 1}, {input_tokens: 8, output_tokens: 8}]\n";
        assert!(load("openai-chat", unknown).unwrap_err().contains("think"));
    }

    #[test]
    fn a_cache_pair_and_its_bounds() {
        let c = load("openai-chat", "    input_tokens: 256\n    output_tokens: 8\n    cache_pair: {prefix_tokens: 200}\n").unwrap();
        assert_eq!(c.scenarios[0].sequence, Some(Sequence::CachePair { prefix_tokens: 200 }));
        // Every family can send a pair: it needs no answer text.
        assert!(load("tgi", "    input_tokens: 256\n    output_tokens: 8\n    cache_pair: {prefix_tokens: 200}\n").is_ok());
        let long = "    input_tokens: {min: 100, max: 300}\n    output_tokens: 8\n    cache_pair: {prefix_tokens: 200}\n";
        assert!(load("openai-chat", long).unwrap_err().contains("scenarios[0].cache_pair.prefix_tokens: must be shorter than the shortest input (100)"));
        let zero = "    input_tokens: 256\n    output_tokens: 8\n    cache_pair: {prefix_tokens: 0}\n";
        assert!(load("openai-chat", zero).unwrap_err().contains("scenarios[0].cache_pair.prefix_tokens: must be 1 to"));
        let salted = "    input_tokens: 256\n    output_tokens: 8\n    cache_salt: x\n    cache_pair: {prefix_tokens: 20}\n";
        assert!(load("openai-chat", salted).unwrap_err().contains("scenarios[0].cache_salt: cache_salt does not apply with cache_pair:"));
        let both = "    input_tokens: 256\n    output_tokens: 8\n    cache_pair: {prefix_tokens: 20}\n    turns: [{input_tokens: 8, output_tokens: 8}, {input_tokens: 8, output_tokens: 8}]\n";
        assert!(load("openai-chat", both).unwrap_err().contains("scenarios[0].cache_pair: a scenario is one of a conversation (turns:), a cache pair (cache_pair:) or an agent loop (agent:), not turns and cache_pair"));
    }
}
