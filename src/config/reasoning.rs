//! `reasoning:` of a scenario: how much a reasoning model may think before it answers. The
//! effort goes out in each API's own field (chat `reasoning_effort`, Responses
//! `reasoning: {effort}`); the budget is room for reasoning on top of `output_tokens` in the
//! request's own length limit (`max_tokens`, `max_output_tokens`), which counts reasoning and
//! answer alike.
//!
//! The `///` comments are the user documentation of the format (see `config/README.md`).

use serde::Deserialize;

use super::check::Checker;

/// `reasoning:` as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with effort, budget_tokens")]
pub struct RawReasoning {
    /// Reasoning effort asked for: `none`, `minimal`, `low`, `medium`, `high`, `xhigh` or `max`
    /// (what the server accepts depends on the model). Default: the server's.
    pub effort: Option<String>,
    /// Tokens of reasoning allowed on top of `output_tokens`: the request's length limit is
    /// `output_tokens + budget_tokens`; 1..=1000000. Default 0 (reasoning and answer share
    /// `output_tokens`).
    pub budget_tokens: Option<i64>,
}

/// A reasoning effort, as the OpenAI APIs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasoningEffort {
    None,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

impl ReasoningEffort {
    pub const ALL: [ReasoningEffort; 7] = [
        ReasoningEffort::None,
        ReasoningEffort::Minimal,
        ReasoningEffort::Low,
        ReasoningEffort::Medium,
        ReasoningEffort::High,
        ReasoningEffort::Xhigh,
        ReasoningEffort::Max,
    ];

    /// The value on the wire and in config.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
            ReasoningEffort::Xhigh => "xhigh",
            ReasoningEffort::Max => "max",
        }
    }

    pub fn parse(s: &str) -> Option<ReasoningEffort> {
        ReasoningEffort::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// Validated `reasoning:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasoning {
    pub effort: Option<ReasoningEffort>,
    /// Tokens added to the request's length limit for reasoning (0: none added).
    pub budget_tokens: u32,
}

/// Checks one scenario's `reasoning:`; `None` when the section is absent or empty.
pub fn reasoning(path: &str, raw: Option<&RawReasoning>, c: &mut Checker) -> Option<Reasoning> {
    let raw = raw?;
    let effort = raw.effort.as_deref().and_then(|e| match ReasoningEffort::parse(e) {
        Some(effort) => Some(effort),
        None => {
            let all: Vec<&str> = ReasoningEffort::ALL.iter().map(|e| e.as_str()).collect();
            c.error(format!("{path}.effort"), format!("unknown effort {e:?}: expected one of {}", all.join(", ")));
            None
        }
    });
    let budget_tokens = match raw.budget_tokens {
        None => 0,
        Some(n) if (1..=super::check::MAX_TOKENS).contains(&n) => n as u32,
        Some(n) => {
            c.error(format!("{path}.budget_tokens"), format!("must be 1 to {} tokens, got {n}", super::check::MAX_TOKENS));
            0
        }
    };
    (effort.is_some() || budget_tokens > 0).then_some(Reasoning { effort, budget_tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(api: &str, scenario: &str) -> Result<super::super::Config, String> {
        let text = format!(
            "targets:\n  - name: a\n    base_url: http://127.0.0.1:18000\n    api: {api}\nscenarios:\n  - name: s\n    input_tokens: 8\n    output_tokens: 8\n{scenario}"
        );
        crate::app::loader::parse(&text, "t.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn absent_or_empty_sets_nothing() {
        for section in ["", "    reasoning:\n", "    reasoning: {}\n"] {
            let c = load("openai-chat", section).unwrap();
            assert_eq!(c.scenarios[0].reasoning, None, "{section:?}");
        }
    }

    #[test]
    fn full_section_on_both_apis() {
        for api in ["openai-chat", "openai-responses"] {
            let c = load(api, "    reasoning: {effort: high, budget_tokens: 512}\n").unwrap();
            assert_eq!(c.scenarios[0].reasoning, Some(Reasoning { effort: Some(ReasoningEffort::High), budget_tokens: 512 }), "{api}");
        }
        let c = load("openai-chat", "    reasoning: {budget_tokens: 64}\n").unwrap();
        assert_eq!(c.scenarios[0].reasoning, Some(Reasoning { effort: None, budget_tokens: 64 }));
        for e in ReasoningEffort::ALL {
            assert_eq!(ReasoningEffort::parse(e.as_str()), Some(e));
        }
    }

    #[test]
    fn bad_values_and_apis_without_reasoning_name_the_field() {
        let e = load("openai-chat", "    reasoning: {effort: extreme, budget_tokens: 0}\n").unwrap_err();
        assert!(e.contains("scenarios[0].reasoning.effort: unknown effort \"extreme\": expected one of none, minimal, low, medium, high, xhigh, max"), "{e}");
        assert!(e.contains("scenarios[0].reasoning.budget_tokens: must be 1 to 1000000 tokens, got 0"), "{e}");
        let e = load("openai-chat", "    reasoning: {effort: low, thinking: true}\n").unwrap_err();
        assert!(e.contains("unknown field `thinking`"), "{e}");
        for api in ["openai-completions", "tgi", "ollama-chat"] {
            let e = load(api, "    reasoning: {effort: low}\n").unwrap_err();
            assert!(e.contains(&format!("scenarios[0].reasoning: target a speaks {api}, which carries no reasoning settings")), "{e}");
        }
    }
}
