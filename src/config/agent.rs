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
const MAX_TOOLS: usize = 8;
/// Most steps of one loop: every step re-sends the whole loop so far, so a bound keeps requests
/// bounded.
pub const MAX_STEPS: u32 = 16;
/// Steps when `max_steps` is not set.
const DEFAULT_STEPS: u32 = 4;
/// Longest canned result (as JSON text) and task.
const MAX_RESULT_BYTES: usize = 16 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Sequence;

    fn load(api: &str, scenario: &str) -> Result<super::super::Config, String> {
        let text =
            format!("targets:\n  - name: a\n    base_url: http://127.0.0.1:18000\n    api: {api}\nscenarios:\n  - name: s\n    output_tokens: 16\n{scenario}");
        crate::app::loader::parse(&text, "t.yaml").map_err(|e| e.to_string())
    }

    const TOOLS: &str = "      tools:\n        - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}, result: {t: 18}}\n        - {name: get_time, description: Local time., parameters: {type: object}, result: '14:05'}\n";

    fn agent_of(c: &super::super::Config) -> &Agent {
        match &c.scenarios[0].sequence {
            Some(Sequence::Agent(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn absent_empty_and_full() {
        let c = load("openai-chat", "    input_tokens: 8\n").unwrap();
        assert_eq!(c.scenarios[0].sequence, None);
        // A key with no value is the same as no key.
        assert_eq!(load("openai-chat", "    input_tokens: 8\n    agent:\n").unwrap().scenarios[0].sequence, None);
        let e = load("openai-chat", "    input_tokens: 8\n    agent: {}\n").unwrap_err();
        assert!(e.contains("scenarios[0].agent: missing field `tools` (t.yaml:9)"), "{e}");
        let full = format!(
            "    agent:\n      task: What is the weather in Paris?\n      max_steps: 5\n      tool_choice: required\n      expect_calls: [get_weather, get_time]\n{TOOLS}"
        );
        let c = load("openai-responses", &full).unwrap();
        let a = agent_of(&c);
        assert_eq!((a.max_steps, a.required, a.expect_calls.len(), a.task.as_deref()), (5, true, 2, Some("What is the weather in Paris?")));
        assert_eq!(a.tools[0].result, r#"{"t":18}"#, "a mapping is sent as JSON text");
        assert_eq!(a.tools[1].result, "14:05", "a string as it is");
        assert_eq!(a.tools[1].description.as_deref(), Some("Local time."));
        assert!(a.must_call(1) && !a.must_call(2));
        // A task is the prompt: no input_tokens needed; without one, a synthetic prompt is.
        let c = load("openai-chat", &format!("    input_tokens: 8\n    agent:\n{TOOLS}")).unwrap();
        let a = agent_of(&c);
        assert_eq!((a.max_steps, a.required, a.task.clone()), (DEFAULT_STEPS, false, None));
        assert!(load("openai-chat", &format!("    agent:\n{TOOLS}")).unwrap_err().contains("scenarios[0]: missing field `input_tokens`"));
    }

    #[test]
    fn an_agents_finish_reasons_accept_tool_calls() {
        let c = load("openai-chat", &format!("    input_tokens: 8\n    checks: {{finish_reasons: [stop]}}\n    agent:\n{TOOLS}")).unwrap();
        let reasons = c.scenarios[0].checks.as_ref().and_then(|k| k.finish_reasons.clone());
        assert_eq!(reasons, Some(vec!["stop".to_owned(), "tool_calls".to_owned()]));
    }

    #[test]
    fn bad_loops_name_the_field() {
        let bad = |yaml: &str, want: &str| {
            let e = load("openai-chat", &format!("    input_tokens: 8\n    agent:\n{yaml}")).unwrap_err();
            assert!(e.contains(want), "{want}\n{e}");
        };
        bad("      tools: []\n", "scenarios[0].agent.tools: an agent offers 1 to 8 tools, got 0");
        let nine: String = (0..9).map(|i| format!("        - {{name: f{i}, parameters: {{type: object}}, result: x}}\n")).collect();
        bad(&format!("      tools:\n{nine}"), "got 9");
        bad(
            &format!("{TOOLS}        - {{name: get_time, parameters: {{type: object}}, result: x}}\n"),
            "scenarios[0].agent.tools[2].name: tool \"get_time\" is declared twice",
        );
        bad(
            "      tools: [{name: 'get weather', parameters: {type: object}, result: x}]\n",
            "scenarios[0].agent.tools[0].name: \"get weather\" is not a function name",
        );
        bad(
            "      tools: [{name: f, parameters: {type: string}, result: x}]\n",
            "scenarios[0].agent.tools[0].parameters: a function's parameters must be an object schema",
        );
        bad(
            "      tools: [{name: f, parameters: {type: object, minProperties: x}, result: x}]\n",
            "scenarios[0].agent.tools[0].parameters: not a valid JSON Schema",
        );
        bad("      tools: [{name: f, parameters: {type: object}}]\n", "scenarios[0].agent.tools[0]: missing field `result`");
        let big = "x".repeat(MAX_RESULT_BYTES + 1);
        bad(
            &format!("      tools: [{{name: f, parameters: {{type: object}}, result: {big}}}]\n"),
            "scenarios[0].agent.tools[0].result: must be at most 16384 bytes",
        );
        bad(&format!("      max_steps: 1\n{TOOLS}"), "scenarios[0].agent.max_steps: must be 2 to 16, got 1");
        bad(&format!("      max_steps: 17\n{TOOLS}"), "got 17");
        bad(&format!("      tool_choice: always\n{TOOLS}"), "scenarios[0].agent.tool_choice: unknown tool choice \"always\"");
        bad(&format!("      tool_choice: required\n{TOOLS}"), "scenarios[0].agent.tool_choice: required forces a call at every step: set expect_calls");
        bad(&format!("      expect_calls: [get_weather, search]\n{TOOLS}"), "scenarios[0].agent.expect_calls[1]: \"search\" is not one of the declared tools");
        bad(
            &format!("      max_steps: 2\n      tool_choice: required\n      expect_calls: [get_weather, get_time]\n{TOOLS}"),
            "scenarios[0].agent.expect_calls: 2 forced calls leave no step of max_steps 2 to answer in",
        );
        bad(&format!("      task: ''\n{TOOLS}"), "scenarios[0].agent.task: must be 1 to 16384 bytes");
        bad(&format!("      steps: 3\n{TOOLS}"), "unknown field `steps`");
    }

    #[test]
    fn a_loop_combines_with_nothing_that_shapes_its_requests() {
        let agent = format!("    agent:\n{TOOLS}");
        for api in ["tgi", "openai-completions", "ollama-chat"] {
            let e = load(api, &format!("    input_tokens: 8\n{agent}")).unwrap_err();
            assert!(e.contains("scenarios[0].agent: target a speaks"), "{api}: {e}");
        }
        let turns = "    turns: [{input_tokens: 8, output_tokens: 8}, {input_tokens: 8, output_tokens: 8}]\n";
        let e = load("openai-chat", &format!("{turns}{agent}")).unwrap_err();
        assert!(
            e.contains(
                "scenarios[0].agent: a scenario is one of a conversation (turns:), a cache pair (cache_pair:) or an agent loop (agent:), not turns and agent"
            ),
            "{e}"
        );
        let tool = "    checks: {tool_call: {name: f, parameters: {type: object}}}\n";
        let e = load("openai-chat", &format!("    input_tokens: 8\n{tool}{agent}")).unwrap_err();
        assert!(e.contains("scenarios[0].checks.tool_call: checks.tool_call does not apply with agent:"), "{e}");
        let e = load("openai-chat", &format!("    input_tokens: 8\n    prefix: {{tokens: 4}}\n{agent}")).unwrap_err();
        assert!(e.contains("scenarios[0].prefix: prefix does not apply with agent:"), "{e}");
    }
}
