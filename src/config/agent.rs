//! A scenario that is an agent's tool loop (`agent:`): the tools it offers, each with a canned
//! result, and how far the loop may go. Step 1 sends the task; when the model calls tools, the
//! next step sends the calls and the tools' canned results back, until the model answers or the
//! steps run out. The checks on each step run in `src/checks/judge.rs`.
//!
//! The `///` comments are the user documentation of the format (see `config/README.md`).

use serde::Deserialize;

use super::check::Checker;
use super::checks::Schema;

/// Most tools one loop offers.
pub const MAX_TOOLS: usize = 8;
/// Most steps of one loop: every step re-sends the whole loop so far, so a bound keeps requests
/// bounded.
pub const MAX_STEPS: u32 = 16;
/// Steps when `max_steps` is not set.
pub const DEFAULT_STEPS: u32 = 4;
/// Longest canned result (as JSON text) and task.
pub const MAX_RESULT_BYTES: usize = 16 * 1024;

/// `agent:` as written.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with tools, max_steps, tool_choice, expect_calls, task")]
pub struct RawAgent {
    /// The function tools offered at every step, 1 to 8, each answered with its canned `result`.
    pub tools: Vec<RawAgentTool>,
    /// Most steps (requests) of one loop, 2 to 16, the answering step included. Default 4.
    pub max_steps: Option<i64>,
    /// `auto` (default: the model decides when to call and when to answer) or `required` (every
    /// step forces a call until `expect_calls` are made, then the next step may answer; needs
    /// `expect_calls`).
    pub tool_choice: Option<String>,
    /// The calls the loop must make, in order, by tool name (across steps; a step may make
    /// several), before it answers. Without it any declared tool may be called in any order.
    pub expect_calls: Option<Vec<String>>,
    /// The user's request that starts the loop. Default: a synthetic prompt of the scenario's
    /// `input_tokens`.
    pub task: Option<String>,
}

/// One of `agent.tools`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with name, description, parameters, result")]
pub struct RawAgentTool {
    /// The function's name: letters, digits, `_`, `-`; 1 to 64 characters; unique in the loop.
    pub name: String,
    /// Its description, sent to the model.
    pub description: Option<String>,
    /// JSON Schema of its arguments (an object schema); every call's arguments are checked
    /// against it.
    pub parameters: serde_json::Value,
    /// What the tool "returns", sent back as the tool's result: a string as it is, anything
    /// else as JSON text (at most 16 KiB).
    pub result: serde_json::Value,
}

/// A validated agent loop.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub tools: Vec<AgentTool>,
    pub max_steps: u32,
    /// `tool_choice: required`: a step must call while expected calls remain.
    pub required: bool,
    pub expect_calls: Vec<String>,
    pub task: Option<String>,
}

/// One tool of a loop.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTool {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Schema,
    /// The canned result, as sent.
    pub result: String,
}

impl Agent {
    pub fn tool(&self, name: &str) -> Option<&AgentTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Whether a step after `calls_made` calls must call a tool (`tool_choice: required` with
    /// expected calls left).
    pub fn must_call(&self, calls_made: usize) -> bool {
        self.required && calls_made < self.expect_calls.len()
    }
}

/// Checks `agent:`; `None` when a part is wrong (each named with its field).
pub fn agent(path: &str, raw: &RawAgent, c: &mut Checker) -> Option<Agent> {
    if raw.tools.is_empty() || raw.tools.len() > MAX_TOOLS {
        c.error(format!("{path}.tools"), format!("an agent offers 1 to {MAX_TOOLS} tools, got {}", raw.tools.len()));
        return None;
    }
    let mut tools = Vec::with_capacity(raw.tools.len());
    for (i, t) in raw.tools.iter().enumerate() {
        let at = format!("{path}.tools[{i}]");
        if raw.tools[..i].iter().any(|o| o.name == t.name) {
            c.error(format!("{at}.name"), format!("tool {:?} is declared twice", t.name));
        }
        let result = match &t.result {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if result.len() > MAX_RESULT_BYTES {
            c.error(format!("{at}.result"), format!("must be at most {MAX_RESULT_BYTES} bytes as JSON text, got {}", result.len()));
        }
        if let Some(parameters) = super::checks::function(&at, &t.name, t.description.as_deref(), &t.parameters, c) {
            tools.push(AgentTool { name: t.name.clone(), description: t.description.clone(), parameters, result });
        }
    }
    let max_steps = match raw.max_steps {
        None => DEFAULT_STEPS,
        Some(n) if (2..=i64::from(MAX_STEPS)).contains(&n) => n as u32,
        Some(n) => {
            c.error(format!("{path}.max_steps"), format!("must be 2 to {MAX_STEPS}, got {n}"));
            DEFAULT_STEPS
        }
    };
    let required = match raw.tool_choice.as_deref() {
        None | Some("auto") => false,
        Some("required") => true,
        Some(other) => {
            c.error(format!("{path}.tool_choice"), format!("unknown tool choice {other:?}: expected auto or required"));
            false
        }
    };
    let expect_calls = raw.expect_calls.clone().unwrap_or_default();
    for (i, name) in expect_calls.iter().enumerate() {
        if !raw.tools.iter().any(|t| &t.name == name) {
            c.error(format!("{path}.expect_calls[{i}]"), format!("{name:?} is not one of the declared tools"));
        }
    }
    // Calls need at least one step each (several may come in one), and the answer one more.
    if expect_calls.len() as u32 >= max_steps && required {
        c.error(format!("{path}.expect_calls"), format!("{} forced calls leave no step of max_steps {max_steps} to answer in", expect_calls.len()));
    }
    if required && expect_calls.is_empty() {
        c.error(format!("{path}.tool_choice"), "required forces a call at every step: set expect_calls, so the loop knows when to let the model answer");
    }
    if raw.task.as_ref().is_some_and(|t| t.trim().is_empty() || t.len() > MAX_RESULT_BYTES) {
        c.error(format!("{path}.task"), format!("must be 1 to {MAX_RESULT_BYTES} bytes of text"));
    }
    (tools.len() == raw.tools.len()).then(|| Agent { tools, max_steps, required, expect_calls, task: raw.task.clone() })
}
