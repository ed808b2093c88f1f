//! The verdict of each configured check on a finished answer: pure functions of the answer.

use crate::config::{Agent, Checks, Expect};
use crate::probe::outcome::{Check, CheckReport};
use crate::protocol::{Collected, MAX_TEXT, ToolCall};

/// A finished answer, as the checks see it.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    /// Text and tool calls (present when a check reads them).
    pub collected: Option<&'a Collected>,
    pub finish_reason: Option<&'a str>,
    /// Generated tokens by the server's count (usage or the API's counter), else text frames.
    pub completion_tokens: Option<u64>,
    /// What was asked for (`max_tokens`, any reasoning budget included).
    pub max_tokens: u32,
    /// Some frame carried answer content (text or a tool call).
    pub answered: bool,
    /// Some frame carried reasoning.
    pub reasoned: bool,
}

/// Characters of answer text quoted in a failure.
const EXCERPT: usize = 80;

/// A short, escaped quote of the answer (its start, and its end when it is long).
pub fn excerpt(text: &str) -> String {
    let chars = text.chars().count();
    let quoted = if chars <= EXCERPT {
        text.to_owned()
    } else {
        let head: String = text.chars().take(EXCERPT / 2).collect();
        let tail: String = text.chars().skip(chars - EXCERPT / 2).collect();
        format!("{head}…{tail}")
    };
    format!("\"{}\"", crate::util::logsafe::escape_control(&quoted))
}

/// Runs every configured check on a complete answer. `expect` is this prompt's known answer.
pub fn evaluate(checks: &Checks, expect: Option<&Expect>, a: &Answer) -> CheckReport {
    let mut r = CheckReport::default();
    let empty = Collected::new();
    let got = a.collected.unwrap_or(&empty);
    if let Some(allowed) = &checks.finish_reasons {
        r.add(Check::FinishReason, finish_reason(allowed, a.finish_reason));
    }
    if checks.output_cap {
        r.add(Check::OutputCap, output_cap(a));
    }
    if let Some(within) = checks.natural_stop {
        r.add(Check::NaturalStop, natural_stop(within, a));
    }
    if !checks.stop.is_empty() {
        r.add(Check::Stop, stop(&checks.stop, got));
    }
    if let Some((_, schema)) = &checks.structured_output {
        r.add(Check::StructuredOutput, structured(schema, got, a.finish_reason));
    }
    if let Some(tool) = &checks.tool_call {
        r.add(Check::ToolCall, tool_call(tool, got));
    }
    if checks.reasoning_exhausted {
        r.add(Check::ReasoningExhausted, reasoning_exhausted(a));
    }
    if let Some(expect) = expect {
        r.add(Check::KnownAnswer, known_answer(expect, got));
    }
    r
}

fn finish_reason(allowed: &[String], got: Option<&str>) -> Option<String> {
    match got {
        Some(f) if allowed.iter().any(|a| a == f) => None,
        Some(f) => Some(format!("finish_reason {:?} is not one of {}", crate::util::logsafe::escape_control(f), allowed.join(", "))),
        None => Some(format!("no finish reason (expected one of {})", allowed.join(", "))),
    }
}

fn output_cap(a: &Answer) -> Option<String> {
    match a.completion_tokens {
        Some(n) if n > u64::from(a.max_tokens) => Some(format!("{n} tokens generated, over max_tokens {}", a.max_tokens)),
        _ => None,
    }
}

fn natural_stop(within: u32, a: &Answer) -> Option<String> {
    let tokens = a.completion_tokens.map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string());
    match a.finish_reason {
        Some("stop") => match a.completion_tokens {
            Some(n) if n > u64::from(within) => Some(format!("ended by EOS only after {n} tokens, not within {within}")),
            _ => None,
        },
        Some(other) => Some(format!(
            "ended by {:?} after {tokens} tokens, not by EOS (\"stop\") within {within}: an ignored EOS or a broken chat template",
            crate::util::logsafe::escape_control(other)
        )),
        None => Some(format!("no finish reason after {tokens} tokens; expected EOS (\"stop\") within {within}")),
    }
}

/// Reasoning that ran to the length limit and left no answer: the budget, not the server, ended
/// it. (An answer cut by the limit after it began is the output cap's business.)
fn reasoning_exhausted(a: &Answer) -> Option<String> {
    if !a.reasoned || a.answered || a.finish_reason != Some("length") {
        return None;
    }
    let tokens = a.completion_tokens.map_or_else(|| "an unknown number of".to_owned(), |n| n.to_string());
    Some(format!("reasoning used the whole length limit ({tokens} tokens, max_tokens {}) and left no answer", a.max_tokens))
}

fn stop(sequences: &[String], got: &Collected) -> Option<String> {
    let found = sequences.iter().find_map(|s| got.text.find(s.as_str()).map(|at| (s, at)))?;
    let (s, at) = found;
    let around = &got.text[floor(&got.text, at.saturating_sub(20))..];
    Some(format!("stop sequence {} in the answer at byte {at}: {}", excerpt(s), excerpt(around)))
}

/// The char boundary at or before `i`.
fn floor(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The answer must be one JSON value valid against the schema. JSON that ends early is said to
/// be truncated (and by what: the output cap, or the keep cap).
fn structured(schema: &crate::config::Schema, got: &Collected, finish: Option<&str>) -> Option<String> {
    let text = got.text.trim();
    if got.cut > 0 {
        return Some(format!("answer longer than the {MAX_TEXT} bytes kept ({} more): truncated JSON not checked", got.cut));
    }
    if text.is_empty() {
        return Some("no answer text (expected JSON)".into());
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Err(e) if e.is_eof() => {
            let by = if finish == Some("length") { ", cut by max_tokens (finish_reason length)" } else { "" };
            Some(format!("truncated JSON{by}: {} bytes, ends {}", text.len(), excerpt(tail(text))))
        }
        Err(e) => Some(format!("not JSON ({e}): {}", excerpt(text))),
        Ok(value) => schema_error(schema, &value),
    }
}

fn schema_error(schema: &crate::config::Schema, value: &serde_json::Value) -> Option<String> {
    let e = schema.validator.iter_errors(value).next()?;
    let path = e.instance_path().to_string();
    let path = if path.is_empty() { "/".to_owned() } else { path };
    Some(format!("does not match the schema at {path}: {}", crate::protocol::truncate_chars(&crate::util::logsafe::escape_control(&e.to_string()), 160)))
}

/// The last few characters.
fn tail(text: &str) -> &str {
    let n = text.chars().count();
    let skip = n.saturating_sub(24);
    text.char_indices().nth(skip).map_or(text, |(i, _)| &text[i..])
}

fn tool_call(tool: &crate::config::ToolCallCheck, got: &Collected) -> Option<String> {
    let Some(call) = got.tool_calls.iter().find(|c| c.name == tool.name) else {
        let named: Vec<String> = got.tool_calls.iter().map(|c| excerpt(&c.name)).collect();
        return Some(if named.is_empty() {
            format!("no tool call (answer text: {})", excerpt(got.text.trim()))
        } else {
            format!("no call of {}; called {}", tool.name, named.join(", "))
        });
    };
    arguments(&tool.parameters, call)
}

/// A call's arguments: whole JSON, valid against the tool's parameter schema.
fn arguments(parameters: &crate::config::Schema, call: &ToolCall) -> Option<String> {
    if call.cut > 0 {
        return Some(format!("arguments longer than the {MAX_TEXT} bytes kept: not checked"));
    }
    match serde_json::from_str::<serde_json::Value>(call.arguments.trim()) {
        Err(e) if e.is_eof() => Some(format!("arguments are truncated JSON: {}", excerpt(&call.arguments))),
        Err(e) => Some(format!("arguments are not JSON ({e}): {}", excerpt(&call.arguments))),
        Ok(args) => schema_error(parameters, &args).map(|e| format!("arguments {e}")),
    }
}

/// The `tool` name a call is counted under when it names no declared tool.
pub const UNDECLARED: &str = "undeclared";

/// Judges step `step` of an agent loop that made `calls_made` calls before it: each call names
/// a declared tool (the expected one, where the loop expects calls) with arguments valid for
/// its schema (`tool_call`); a step without calls must come after the expected calls and carry
/// an answer, and a step with calls must leave a step to answer in (`agent_loop`).
pub fn agent_step(agent: &Agent, step: u32, calls_made: usize, got: &Collected, r: &mut CheckReport) {
    let mut wrong = Vec::new();
    for (i, call) in got.tool_calls.iter().enumerate() {
        let n = calls_made + i;
        let Some(tool) = agent.tool(&call.name) else {
            wrong.push(format!("call {} names no declared tool: {}", n + 1, excerpt(&call.name)));
            r.calls.push(UNDECLARED.to_owned());
            continue;
        };
        r.calls.push(tool.name.clone());
        match agent.expect_calls.get(n) {
            Some(expected) if expected != &tool.name => wrong.push(format!("call {} is {}, expected {expected}", n + 1, tool.name)),
            None if !agent.expect_calls.is_empty() => {
                wrong.push(format!("call {} ({}) comes after the {} expected calls", n + 1, tool.name, agent.expect_calls.len()))
            }
            _ => {}
        }
        if let Some(e) = arguments(&tool.parameters, call) {
            wrong.push(format!("{}: {e}", tool.name));
        }
    }
    if !got.tool_calls.is_empty() {
        r.add(Check::ToolCall, (!wrong.is_empty()).then(|| wrong.join("; ")));
    }
    let verdict = if got.tool_calls.is_empty() {
        match agent.expect_calls.get(calls_made) {
            Some(next) => Some(format!(
                "answered after {calls_made} of {} expected calls (next expected: {next}): {}",
                agent.expect_calls.len(),
                excerpt(got.text.trim())
            )),
            None if got.text.trim().is_empty() => Some(format!("step {step} made no tool call and gave no answer")),
            None => None,
        }
    } else if step >= agent.max_steps {
        Some(format!("still calling tools at step {step}, the last of max_steps {}: no answer", agent.max_steps))
    } else {
        None
    };
    r.add(Check::AgentLoop, verdict);
}

fn known_answer(expect: &Expect, got: &Collected) -> Option<String> {
    if expect.matches(&got.text) {
        return None;
    }
    Some(format!("expected {}, answer {}", crate::util::logsafe::escape_control(&expect.describe()), excerpt(got.text.trim())))
}
