//! `checks:` (top level, and per scenario): what a probe's answer must be, beyond arriving in
//! time. The YAML form, the validated form and its checks. A scenario's own `checks:` replaces
//! the top-level one entirely (as `arrival` does). The checks themselves run in `src/checks/`.
//!
//! The `///` comments are the user documentation of the format (see `config/README.md`).

use std::sync::Arc;

use serde::Deserialize;

use super::check::Checker;
pub use super::expect::Expect;
use super::kinds::{Carries, ProtocolKind};

/// `checks:` as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with finish_reasons, output_cap, natural_stop, stop, structured_output, tool_call, known_answers, dataset_answers, fingerprint, reasoning_exhausted"
)]
pub struct RawChecks {
    /// Finish reasons accepted (`stop`, `length`, `tool_calls`, `content_filter`, ...). Default:
    /// any. `error` is never accepted (it is a `stream_error`).
    pub finish_reasons: Option<Vec<String>>,
    /// The answer has at most `max_tokens` tokens (by the server's count). Default false.
    pub output_cap: Option<bool>,
    /// The answer ends by end-of-sequence (`finish_reason: stop`) within this many tokens (a
    /// short-answer prompt: catches an ignored EOS or a broken chat template). Off by default.
    pub natural_stop: Option<i64>,
    /// Stop sequences sent (`stop`) that must not appear in the answer; 1 to 4, each 1 to 64
    /// bytes.
    pub stop: Option<Vec<String>>,
    /// Structured output: `response_format` with this JSON Schema is sent and the answer must
    /// be JSON valid against it.
    pub structured_output: Option<RawStructured>,
    /// A tool is offered (`tools`, `tool_choice`) and the answer must call it with arguments
    /// valid against its parameter schema.
    pub tool_call: Option<RawToolCall>,
    /// Prompts with a known answer, sent in turn at temperature 0 instead of the scenario's
    /// prompts.
    pub known_answers: Option<Vec<RawKnownAnswer>>,
    /// Dataset entries' `expect` (substring) or `expect_regex` field is the known answer. Needs
    /// `dataset`. Default false.
    pub dataset_answers: Option<bool>,
    /// Temperature-0 output hashed per prompt; a change is a behaviour change (logged, counted,
    /// a release marker of source `behaviour`), not an error. Needs prompts that repeat
    /// (`known_answers`, or a dataset with `nonce: false`). Default false.
    pub fingerprint: Option<bool>,
    /// The answer must not be lost to reasoning: a probe that reasoned until its length limit
    /// (`finish_reason: length`) and left no answer fails. Chat and Responses APIs. Default
    /// false.
    pub reasoning_exhausted: Option<bool>,
}

/// `checks.structured_output`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with name, schema")]
pub struct RawStructured {
    /// The schema's name in `response_format.json_schema.name`. Default `answer`.
    pub name: Option<String>,
    /// A JSON Schema (as YAML); `$ref`s to other documents are not resolved.
    pub schema: serde_json::Value,
}

/// `checks.tool_call`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with name, description, parameters, choice")]
pub struct RawToolCall {
    /// The function's name: letters, digits, `_`, `-`; 1 to 64 characters.
    pub name: String,
    /// Its description, sent to the model.
    pub description: Option<String>,
    /// JSON Schema of its arguments (an object schema).
    pub parameters: serde_json::Value,
    /// `tool_choice`: `required` (default), `auto`, or `function` (this function by name).
    pub choice: Option<String>,
}

/// One of `checks.known_answers`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, expecting = "a mapping with prompt and expect or regex")]
pub struct RawKnownAnswer {
    pub prompt: String,
    /// A substring the answer must contain (case-insensitive).
    pub expect: Option<String>,
    /// A regular expression the answer must match (Rust `regex` syntax).
    pub regex: Option<String>,
}

/// A multi-line library message as one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A compiled JSON Schema with the text it came from.
#[derive(Clone)]
pub struct Schema {
    pub value: serde_json::Value,
    pub validator: Arc<jsonschema::Validator>,
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "Schema({})", self.value)
    }
}

/// Two schemas are the same when their texts are.
impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        self.value == other.value
    }
}

impl Schema {
    /// Compiles a schema; `$ref`s to other documents fail (nothing is fetched or read).
    pub fn new(value: serde_json::Value) -> Result<Schema, String> {
        if !value.is_object() {
            return Err("a JSON Schema must be a mapping".into());
        }
        let validator = jsonschema::validator_for(&value).map_err(|e| format!("not a valid JSON Schema: {}", one_line(&e.to_string())))?;
        Ok(Schema { value, validator: Arc::new(validator) })
    }
}

/// `tool_choice`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice {
    Required,
    Auto,
    /// This function, by name.
    Function,
}

#[derive(Debug, Clone)]
pub struct ToolCallCheck {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Schema,
    pub choice: ToolChoice,
}

#[derive(Debug, Clone)]
pub struct KnownAnswer {
    pub prompt: String,
    pub expect: Expect,
}

/// Validated `checks:`. Every field off means no check and nothing added to the request.
#[derive(Debug, Clone, Default)]
pub struct Checks {
    pub finish_reasons: Option<Vec<String>>,
    pub output_cap: bool,
    pub natural_stop: Option<u32>,
    pub stop: Vec<String>,
    /// `(name, schema)`.
    pub structured_output: Option<(String, Schema)>,
    pub tool_call: Option<ToolCallCheck>,
    pub known_answers: Vec<KnownAnswer>,
    pub dataset_answers: bool,
    pub fingerprint: bool,
    pub reasoning_exhausted: bool,
}

impl Checks {
    /// Whether anything is checked.
    pub fn any(&self) -> bool {
        self.finish_reasons.is_some()
            || self.output_cap
            || self.natural_stop.is_some()
            || !self.stop.is_empty()
            || self.structured_output.is_some()
            || self.tool_call.is_some()
            || !self.known_answers.is_empty()
            || self.dataset_answers
            || self.fingerprint
            || self.reasoning_exhausted
    }

    /// Whether the answer's text must be kept while it streams.
    pub fn needs_text(&self) -> bool {
        !self.stop.is_empty() || self.structured_output.is_some() || self.tool_call.is_some() || self.wants_answers() || self.fingerprint
    }

    fn wants_answers(&self) -> bool {
        !self.known_answers.is_empty() || self.dataset_answers
    }

    /// Whether the answer's own end is checked (all but `finish_reasons` and `output_cap`): then
    /// the request never asks to ignore EOS.
    pub fn natural_end(&self) -> bool {
        self.natural_stop.is_some() || self.needs_text()
    }

    /// Requests go out at temperature 0 (known answers and fingerprints need the same output
    /// for the same prompt).
    pub fn greedy(&self) -> bool {
        self.wants_answers() || self.fingerprint
    }

    /// The checks (by field name) that an API family cannot carry, by what its row in the
    /// family table says it carries.
    pub fn unsupported(&self, carries: Carries) -> Vec<&'static str> {
        // A stop sequence is sent, and checked in the answer's text.
        let stop = carries.stop && carries.answer_text;
        [
            ("stop", !self.stop.is_empty() && !stop),
            ("structured_output", self.structured_output.is_some() && !carries.structured_output),
            ("tool_call", self.tool_call.is_some() && !carries.tool_call),
            ("known_answers", !self.known_answers.is_empty() && !carries.answer_text),
            ("dataset_answers", self.dataset_answers && !carries.answer_text),
            ("fingerprint", self.fingerprint && !carries.answer_text),
            ("reasoning_exhausted", self.reasoning_exhausted && !carries.reasoning),
        ]
        .into_iter()
        .filter_map(|(name, bad)| bad.then_some(name))
        .collect()
    }
}

/// Longest known-answer prompt, stop sequence and tool description taken.
const MAX_PROMPT: usize = 65_536;
const MAX_STOP: usize = 64;
const MAX_KNOWN_ANSWERS: usize = 1024;

/// Checks one `checks:` section (`path` is where it is: `checks` or `scenarios[i].checks`).
pub fn checks(path: &str, raw: &RawChecks, c: &mut Checker) -> Checks {
    let finish_reasons = raw.finish_reasons.as_ref().map(|list| {
        if list.is_empty() {
            c.error(format!("{path}.finish_reasons"), "must not be empty (leave it out to accept any)");
        }
        for (i, r) in list.iter().enumerate() {
            if r == "error" {
                c.error(format!("{path}.finish_reasons[{i}]"), "\"error\" is never a normal end: such a stream is a stream_error");
            } else if r.is_empty() || r.len() > 64 || !r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                c.error(format!("{path}.finish_reasons[{i}]"), format!("{r:?} is not a finish reason: expected letters, digits and _"));
            }
        }
        list.clone()
    });
    let natural_stop = raw.natural_stop.map(|n| {
        if !(1..=super::check::MAX_TOKENS).contains(&n) {
            c.error(format!("{path}.natural_stop"), format!("must be 1 to {} tokens, got {n}", super::check::MAX_TOKENS));
        }
        n.clamp(1, super::check::MAX_TOKENS) as u32
    });
    let stop = raw.stop.clone().unwrap_or_default();
    if raw.stop.is_some() && !(1..=4).contains(&stop.len()) {
        c.error(format!("{path}.stop"), format!("give 1 to 4 stop sequences, got {}", stop.len()));
    }
    for (i, s) in stop.iter().enumerate() {
        if s.is_empty() || s.len() > MAX_STOP {
            c.error(format!("{path}.stop[{i}]"), format!("must be 1 to {MAX_STOP} bytes"));
        }
    }
    let structured_output = raw.structured_output.as_ref().and_then(|s| {
        let name = s.name.clone().unwrap_or_else(|| "answer".to_owned());
        function_name(&format!("{path}.structured_output.name"), &name, c);
        match Schema::new(s.schema.clone()) {
            Ok(schema) => Some((name, schema)),
            Err(e) => {
                c.error(format!("{path}.structured_output.schema"), e);
                None
            }
        }
    });
    let tool_call = raw.tool_call.as_ref().and_then(|t| tool_call(&format!("{path}.tool_call"), t, c));
    if structured_output.is_some() && tool_call.is_some() {
        c.error(format!("{path}.tool_call"), "set either structured_output or tool_call in one scenario, not both");
    }
    let known = raw.known_answers.as_deref().unwrap_or_default();
    if raw.known_answers.is_some() && !(1..=MAX_KNOWN_ANSWERS).contains(&known.len()) {
        c.error(format!("{path}.known_answers"), format!("give 1 to {MAX_KNOWN_ANSWERS} prompts, got {}", known.len()));
    }
    let known_answers = known
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            let at = format!("{path}.known_answers[{i}]");
            if k.prompt.trim().is_empty() || k.prompt.len() > MAX_PROMPT {
                c.error(format!("{at}.prompt"), format!("must be 1 to {MAX_PROMPT} bytes of text"));
            }
            match Expect::new(k.expect.as_deref(), k.regex.as_deref()) {
                Ok(Some(expect)) => Some(KnownAnswer { prompt: k.prompt.clone(), expect }),
                Ok(None) => {
                    c.error(&at, "needs expect (a substring) or regex");
                    None
                }
                Err(e) => {
                    let field = if k.regex.is_some() && k.expect.is_none() { "regex" } else { "expect" };
                    c.error(format!("{at}.{field}"), e);
                    None
                }
            }
        })
        .collect();
    Checks {
        finish_reasons,
        output_cap: raw.output_cap.unwrap_or(false),
        natural_stop,
        stop,
        structured_output,
        tool_call,
        known_answers,
        dataset_answers: raw.dataset_answers.unwrap_or(false),
        fingerprint: raw.fingerprint.unwrap_or(false),
        reasoning_exhausted: raw.reasoning_exhausted.unwrap_or(false),
    }
}

fn function_name(path: &str, name: &str, c: &mut Checker) {
    if name.is_empty() || name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        c.error(path, format!("{name:?} is not a function name: 1 to 64 letters, digits, _ or -"));
    }
}

fn tool_call(path: &str, raw: &RawToolCall, c: &mut Checker) -> Option<ToolCallCheck> {
    let choice = match raw.choice.as_deref() {
        None | Some("required") => ToolChoice::Required,
        Some("auto") => ToolChoice::Auto,
        Some("function") => ToolChoice::Function,
        Some(other) => {
            c.error(format!("{path}.choice"), format!("unknown tool choice {other:?}: expected required, auto or function"));
            ToolChoice::Required
        }
    };
    let parameters = function(path, &raw.name, raw.description.as_deref(), &raw.parameters, c)?;
    Some(ToolCallCheck { name: raw.name.clone(), description: raw.description.clone(), parameters, choice })
}

/// A function tool's name, description and parameter schema, checked (`path` is the tool's);
/// the compiled schema, `None` when it is not one.
pub(super) fn function(path: &str, name: &str, description: Option<&str>, parameters: &serde_json::Value, c: &mut Checker) -> Option<Schema> {
    function_name(&format!("{path}.name"), name, c);
    if description.is_some_and(|d| d.len() > MAX_PROMPT) {
        c.error(format!("{path}.description"), format!("must be at most {MAX_PROMPT} bytes"));
    }
    if parameters.get("type").and_then(|t| t.as_str()) != Some("object") {
        c.error(format!("{path}.parameters"), "a function's parameters must be an object schema (type: object)");
        return None;
    }
    match Schema::new(parameters.clone()) {
        Ok(schema) => Some(schema),
        Err(e) => {
            c.error(format!("{path}.parameters"), e);
            None
        }
    }
}

/// The scenario-wide conditions of a section: its prompts and the targets' APIs.
pub fn check_scenario(path: &str, checks: &Checks, has_dataset: bool, dataset_nonce: bool, apis: &[(String, ProtocolKind)], c: &mut Checker) {
    if checks.dataset_answers && !has_dataset {
        c.error(format!("{path}.dataset_answers"), "needs a dataset (its entries' expect or expect_regex fields)");
    }
    if !checks.known_answers.is_empty() && has_dataset {
        c.error(format!("{path}.known_answers"), "known_answers replace the scenario's prompts: not with a dataset (use dataset_answers)");
    }
    let repeats = !checks.known_answers.is_empty() || (has_dataset && !dataset_nonce);
    if checks.fingerprint && !repeats {
        c.error(format!("{path}.fingerprint"), "needs prompts that repeat: known_answers, or a dataset with nonce: false");
    }
    for (target, api) in apis {
        for name in checks.unsupported((c.resolvers.carries)(*api)) {
            c.error(format!("{path}.{name}"), format!("target {target} speaks {}, which cannot carry this check", api.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;

    const HEAD: &str = "\
targets:
  - name: a
    base_url: http://127.0.0.1:18000
    api: openai-chat
";

    fn load(text: &str) -> Result<Config, String> {
        crate::app::loader::parse(text, "t.yaml").map_err(|e| e.to_string())
    }

    fn scenario(checks: &str) -> String {
        format!("{HEAD}scenarios:\n  - name: s\n    input_tokens: 8\n    output_tokens: 8\n{checks}")
    }

    #[test]
    fn absent_or_empty_checks_nothing() {
        for text in [scenario(""), format!("{}checks:\n", scenario("")), format!("{}checks: {{}}\n", scenario("")), scenario("    checks: {}\n")] {
            let c = load(&text).unwrap();
            assert!(c.scenarios[0].checks.is_none(), "{text}");
        }
    }

    #[test]
    fn full_section_and_scenario_override() {
        let text = format!(
            "{}checks:\n  finish_reasons: [stop, length, tool_calls]\n  output_cap: true\n  natural_stop: 32\n  stop: [\"###\"]\n  \
             structured_output:\n    name: city\n    schema: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}\n  \
             known_answers:\n    - {{prompt: \"What is 2 + 2?\", regex: \"\\\\b4\\\\b\"}}\n  fingerprint: true\n",
            scenario("")
        );
        let c = load(&text).unwrap();
        let k = c.scenarios[0].checks.as_deref().expect("top-level checks apply");
        assert_eq!(k.finish_reasons.as_deref(), Some(&["stop".to_owned(), "length".into(), "tool_calls".into()][..]));
        assert!(k.output_cap && k.fingerprint && k.greedy() && k.needs_text());
        assert_eq!(k.natural_stop, Some(32));
        assert_eq!(k.stop, ["###"]);
        assert_eq!(k.structured_output.as_ref().map(|s| s.0.as_str()), Some("city"));
        assert!(k.known_answers[0].expect.matches("it is 4."));
        // A scenario's own section replaces it whole; `checks: {}` turns them off there.
        let own = text.replace("    output_tokens: 8\n", "    output_tokens: 8\n    checks:\n      tool_call: {name: f, parameters: {type: object}}\n");
        let k = load(&own).unwrap().scenarios[0].checks.clone().unwrap();
        assert!(k.tool_call.is_some() && k.structured_output.is_none() && !k.fingerprint);
        assert_eq!(k.tool_call.as_ref().map(|t| t.choice), Some(super::ToolChoice::Required));
    }

    /// What a family carries is data in its row: a check it cannot carry names the field.
    #[test]
    fn checks_a_family_cannot_carry_are_refused() {
        let on = |api: &str, checks: &str| load(&scenario(checks).replace("api: openai-chat", &format!("api: {api}")));
        let k = on("openai-responses", "    checks: {reasoning_exhausted: true, finish_reasons: [stop, length]}\n").unwrap();
        assert!(k.scenarios[0].checks.as_deref().unwrap().reasoning_exhausted);
        let e = on("openai-responses", "    checks: {stop: [\"###\"]}\n").unwrap_err();
        assert!(e.contains("scenarios[0].checks.stop: target a speaks openai-responses, which cannot carry this check"), "{e}");
        let e = on("openai-completions", "    checks: {reasoning_exhausted: true}\n").unwrap_err();
        assert!(e.contains("scenarios[0].checks.reasoning_exhausted: target a speaks openai-completions"), "{e}");
        assert!(on("openai-responses", "    checks: {tool_call: {name: f, parameters: {type: object}}}\n").is_ok());
    }

    #[test]
    fn dataset_answers_need_every_entry_answered() {
        let dir = std::env::temp_dir().join(format!("llmprobe-checks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("qa.jsonl");
        std::fs::write(&file, "{\"prompt\": \"2+2?\", \"expect\": \"4\"}\n{\"prompt\": \"Capital of France?\", \"expect_regex\": \"(?i)paris\"}\n").unwrap();
        let text = format!(
            "{HEAD}scenarios:\n  - name: s\n    output_tokens: 8\n    dataset: {{path: {}, nonce: false}}\n    checks: {{dataset_answers: true, fingerprint: true}}\n",
            file.display()
        );
        let c = load(&text).unwrap();
        let d = c.scenarios[0].dataset.as_ref().unwrap();
        assert!(d.entries.iter().all(|e| e.expect.is_some()));
        std::fs::write(&file, "{\"prompt\": \"2+2?\", \"expect\": \"4\"}\n{\"prompt\": \"no answer\"}\n").unwrap();
        let e = load(&text).unwrap_err();
        assert!(e.contains("scenarios[0].checks.dataset_answers: 1 of 2 dataset entries have no expect"), "{e}");
        std::fs::write(&file, "{\"prompt\": \"x\", \"expect\": \"a\", \"expect_regex\": \"b\"}\n").unwrap();
        let e = load(&text).unwrap_err();
        assert!(e.contains("line 1: expect: set either a substring or a regex"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
