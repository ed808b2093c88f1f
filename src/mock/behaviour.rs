//! What the OpenAI routes answer when a request asks for behaviour the prober checks: a known
//! answer to one of the documented questions, JSON valid for a `response_format` schema, a tool
//! call valid for the offered function, text cut at a `stop` sequence, and an end by EOS for
//! these short answers. The engine still times every token; a plan only says what the tokens
//! are and how the answer ends. The faults `invalid_json`, `wrong_answer`, `ignore_stop`,
//! `no_eos` and `bad_tool_call` break exactly one of these (see `README.md`).

use serde_json::{Map, Value, json};

use super::faults::Fault;

/// The known-answer questions the mock answers (matched case-insensitively anywhere in the last
/// user message or the prompt), and its answers. Documented in `README.md`.
const KNOWN_ANSWERS: &[(&str, &str)] = &[
    ("what is the capital of france", "The capital of France is Paris."),
    ("what is 2 + 2", "2 + 2 = 4."),
    ("what color is a clear daytime sky", "Blue."),
    ("how many days are in a week", "There are 7 days in a week."),
    ("what is the opposite of hot", "Cold."),
    ("spell the word cat backwards", "tac"),
];

/// What a `wrong_answer` fault answers instead.
const WRONG: &str = "I am not sure; perhaps Lyon.";

/// What a prompt with a `stop` sequence and no other plan is answered with: the stop sequence
/// comes in the middle of it.
const STOPPED: &str = "Short answer.";

/// The tokens of a planned answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Text of each generated token, in order.
    pub pieces: Vec<String>,
    /// The function called (`tools`): the pieces are its arguments.
    pub tool: Option<String>,
    /// Whether the answer ends by EOS after its pieces (`no_eos` runs it to `max_tokens`).
    pub eos: bool,
}

impl Plan {
    /// Tokens the engine generates for it, at most `max_tokens`.
    pub fn tokens(&self, max_tokens: u32) -> u32 {
        if self.eos { (self.pieces.len() as u32).clamp(1, max_tokens.max(1)) } else { max_tokens.max(1) }
    }

    /// Whether an answer of `max_tokens` ended by EOS (its pieces fit).
    pub fn stops_by_eos(&self, max_tokens: u32) -> bool {
        self.eos && self.pieces.len() as u32 <= max_tokens
    }
}

/// The plan for a request body, or `None` for the usual random words.
pub fn plan(body: &Value, chat: bool, fault: Option<Fault>) -> Option<Plan> {
    let stops = stop_sequences(body);
    let (text, tool) = if let Some(call) = chat.then(|| tool_call(body, fault)).flatten() {
        call
    } else if let Some(json) = chat.then(|| structured(body, fault)).flatten() {
        (json, None)
    } else if let Some(answer) = known_answer(&prompt_text(body, chat)) {
        let answer = if fault == Some(Fault::WrongAnswer) { WRONG } else { answer };
        (with_stop(answer, &stops, fault), None)
    } else if let Some(first) = stops.first() {
        (with_stop(&format!("{STOPPED}{first}More text after the stop sequence."), &stops, fault), None)
    } else {
        return None;
    };
    Some(Plan { pieces: pieces(&text), tool, eos: fault != Some(Fault::NoEos) })
}

/// Cuts the text before its first stop sequence (the sequence itself is never sent), unless
/// `ignore_stop`; a known answer gets a continuation with the stop sequence in it, so that the
/// cut is visible.
fn with_stop(answer: &str, stops: &[String], fault: Option<Fault>) -> String {
    let Some(first) = stops.first() else { return answer.to_owned() };
    let full = if answer.contains(first.as_str()) { answer.to_owned() } else { format!("{answer}{first}Next question.") };
    if fault == Some(Fault::IgnoreStop) {
        return full;
    }
    let cut = stops.iter().filter_map(|s| full.find(s.as_str())).min().unwrap_or(full.len());
    full[..cut].to_owned()
}

fn stop_sequences(body: &Value) -> Vec<String> {
    match body.get("stop") {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

/// The user's text: the last user message (chat) or the prompt.
fn prompt_text(body: &Value, chat: bool) -> String {
    if !chat {
        return body.get("prompt").and_then(Value::as_str).unwrap_or("").to_owned();
    }
    let messages = body.get("messages").and_then(Value::as_array);
    let last = messages.and_then(|m| m.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user")));
    match last.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(" "),
        _ => String::new(),
    }
}

pub fn known_answer(prompt: &str) -> Option<&'static str> {
    let p = prompt.to_lowercase();
    KNOWN_ANSWERS.iter().find(|(q, _)| p.contains(q)).map(|(_, a)| *a)
}

/// `response_format: {type: json_schema, json_schema: {schema}}` (or `json_object`): JSON valid
/// for the schema; `invalid_json` cuts it short.
fn structured(body: &Value, fault: Option<Fault>) -> Option<String> {
    let rf = body.get("response_format")?;
    let value = match rf.get("type").and_then(Value::as_str) {
        Some("json_schema") => value_for(rf.pointer("/json_schema/schema").unwrap_or(&Value::Null), 0),
        Some("json_object") => json!({"answer": "ok"}),
        _ => return None,
    };
    let text = value.to_string();
    Some(if fault == Some(Fault::InvalidJson) { cut_json(&text) } else { text })
}

/// The first ~60% of a JSON text: valid JSON no more (an unterminated value).
fn cut_json(text: &str) -> String {
    let mut end = (text.len() * 3 / 5).max(1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Which step of an agent loop a request is: 1 + the tool results it carries (chat `tool`
/// messages, Responses `function_call_output` items).
pub fn agent_step(body: &Value) -> u32 {
    let messages = body.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let results = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool") || m.get("type").and_then(Value::as_str) == Some("function_call_output"))
        .count();
    u32::try_from(results).unwrap_or(u32::MAX).saturating_add(1)
}

/// What the mock answers once an agent loop has its tools' results.
const LOOP_ANSWER: &str = "Done: the tools' results answer the request.";

/// `tools` with a function and a `tool_choice` other than `none`: a call of the function with
/// arguments valid for its parameters. Which function: the named one; else, as an agent loop
/// goes, the next declared tool after the results so far (`required` wraps around; `auto` answers
/// with text once every tool was called).
fn tool_call(body: &Value, fault: Option<Fault>) -> Option<(String, Option<String>)> {
    let tools = body.get("tools").and_then(Value::as_array)?;
    let choice = body.get("tool_choice");
    if choice.and_then(Value::as_str) == Some("none") {
        return None;
    }
    let functions: Vec<&Value> = tools.iter().filter_map(|t| t.get("function")).collect();
    let wanted = choice.and_then(|c| c.pointer("/function/name")).and_then(Value::as_str);
    let done = agent_step(body) as usize - 1;
    let function = match wanted {
        Some(w) => functions.iter().find(|f| f.get("name").and_then(Value::as_str) == Some(w))?,
        None if choice.and_then(Value::as_str) == Some("required") => functions.get(done % functions.len().max(1))?,
        None if done >= functions.len() && done > 0 => return Some((LOOP_ANSWER.to_owned(), None)),
        None => functions.get(done)?,
    };
    let name = function.get("name").and_then(Value::as_str)?.to_owned();
    let args = value_for(function.get("parameters").unwrap_or(&Value::Null), 0).to_string();
    let args = if fault == Some(Fault::BadToolCall) { cut_json(&args) } else { args };
    Some((args, Some(name)))
}

/// A value valid for a simple schema: objects (every property, so `required` holds), strings
/// (within `minLength`/`maxLength`), numbers and integers (within `minimum`/`maximum`), booleans,
/// `enum`/`const` (the first value), arrays (`minItems` items, at least one). Deeper than 8
/// levels, or a kind it does not know: `null`.
fn value_for(schema: &Value, depth: u32) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "",
    };
    match kind {
        "object" => {
            let mut out = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, v) in props {
                    out.insert(k.clone(), value_for(v, depth + 1));
                }
            }
            Value::Object(out)
        }
        "string" => {
            let min = num("minLength").unwrap_or(0.0) as usize;
            let max = num("maxLength").map_or(usize::MAX, |m| m as usize);
            let mut s = "Paris".to_owned();
            while s.chars().count() < min {
                s.push('x');
            }
            Value::String(s.chars().take(max).collect())
        }
        "integer" => json!(bounded(42.0, num("minimum"), num("maximum")).round() as i64),
        "number" => json!(bounded(2.5, num("minimum"), num("maximum"))),
        "boolean" => json!(true),
        "array" => {
            let n = num("minItems").unwrap_or(1.0).clamp(1.0, 16.0) as usize;
            let n = n.min(num("maxItems").map_or(n, |m| m as usize));
            let item = value_for(schema.get("items").unwrap_or(&Value::Null), depth + 1);
            Value::Array(vec![item; n])
        }
        _ => Value::Null,
    }
}

fn bounded(v: f64, min: Option<f64>, max: Option<f64>) -> f64 {
    let v = min.map_or(v, |m| v.max(m));
    max.map_or(v, |m| v.min(m))
}

/// Text split into token pieces: a word with its leading space, JSON by 4 characters.
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        let boundary = if c == ' ' { !cur.trim().is_empty() } else { cur.chars().count() >= 4 && !cur.ends_with(' ') };
        if boundary {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(content: &str, extra: Value) -> Value {
        let mut body = json!({"messages": [{"role": "user", "content": content}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    }

    fn text(p: &Plan) -> String {
        p.pieces.concat()
    }

    #[test]
    fn known_answers_and_the_wrong_answer_fault() {
        let p = plan(&chat("Question: What is the capital of France?", json!({})), true, None).unwrap();
        assert_eq!(text(&p), "The capital of France is Paris.");
        assert!(p.eos && p.tool.is_none());
        let p = plan(&json!({"prompt": "what is 2 + 2?"}), false, Some(Fault::WrongAnswer)).unwrap();
        assert_eq!(text(&p), WRONG);
        assert!(plan(&chat("tell me a story", json!({})), true, None).is_none(), "other prompts get random words");
    }

    #[test]
    fn stop_sequences_cut_unless_ignored() {
        let body = chat("What is the opposite of hot?", json!({"stop": ["\n\n"]}));
        assert_eq!(text(&plan(&body, true, None).unwrap()), "Cold.");
        assert_eq!(text(&plan(&body, true, Some(Fault::IgnoreStop)).unwrap()), "Cold.\n\nNext question.");
        let body = chat("anything", json!({"stop": "###"}));
        assert_eq!(text(&plan(&body, true, None).unwrap()), STOPPED);
        assert!(text(&plan(&body, true, Some(Fault::IgnoreStop)).unwrap()).contains("###"));
    }

    #[test]
    fn json_valid_for_the_schema_and_cut_by_the_fault() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string", "minLength": 2}, "population": {"type": "integer", "minimum": 100},
            "area": {"type": "number"}, "capital": {"type": "boolean"}, "unit": {"enum": ["km", "mi"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2}, "mayor": {"type": ["string", "null"]}
        }, "required": ["city", "population", "unit"]});
        let body = chat("x", json!({"response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}}));
        let p = plan(&body, true, None).unwrap();
        let v: Value = serde_json::from_str(&text(&p)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&v), "{v}");
        assert_eq!(v["population"], json!(100));
        let bad = plan(&body, true, Some(Fault::InvalidJson)).unwrap();
        assert!(serde_json::from_str::<Value>(&text(&bad)).unwrap_err().is_eof());
    }

    #[test]
    fn tool_calls_for_the_chosen_function() {
        let tools = json!([
            {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
        ]);
        let body = chat("x", json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}));
        let p = plan(&body, true, None).unwrap();
        assert_eq!(p.tool.as_deref(), Some("get_weather"));
        assert_eq!(serde_json::from_str::<Value>(&text(&p)).unwrap(), json!({"city": "Paris"}));
        assert!(serde_json::from_str::<Value>(&text(&plan(&body, true, Some(Fault::BadToolCall)).unwrap())).is_err());
        let none = chat("x", json!({"tools": tools, "tool_choice": "none"}));
        assert!(plan(&none, true, None).is_none());
    }

    #[test]
    fn an_agent_loop_calls_the_next_tool_then_answers() {
        let tools = json!([
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
        ]);
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "{}"});
        let call = |name: &str| json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": "{}"}}]});
        let step = |history: Vec<Value>, choice: &str| {
            let mut messages = vec![json!({"role": "user", "content": "weather and time?"})];
            messages.extend(history);
            json!({"messages": messages, "tools": tools, "tool_choice": choice})
        };
        let body = step(vec![], "auto");
        assert_eq!((agent_step(&body), plan(&body, true, None).unwrap().tool.as_deref()), (1, Some("get_weather")));
        let body = step(vec![call("get_weather"), result("a")], "auto");
        assert_eq!((agent_step(&body), plan(&body, true, None).unwrap().tool.as_deref()), (2, Some("get_time")));
        let body = step(vec![call("get_weather"), result("a"), call("get_time"), result("b")], "auto");
        let p = plan(&body, true, None).unwrap();
        assert_eq!((p.tool.as_deref(), text(&p).as_str(), p.eos), (None, LOOP_ANSWER, true));
        // `required` never answers: it goes round the tools.
        let body = step(vec![call("get_weather"), result("a"), call("get_time"), result("b")], "required");
        assert_eq!(plan(&body, true, None).unwrap().tool.as_deref(), Some("get_weather"));
        // Responses items count as results too.
        let items = json!({"messages": [{"type": "function_call", "call_id": "a"}, {"type": "function_call_output", "call_id": "a", "output": "{}"}]});
        assert_eq!(agent_step(&items), 2);
    }

    #[test]
    fn eos_and_the_no_eos_fault() {
        let body = chat("How many days are in a week?", json!({}));
        let p = plan(&body, true, None).unwrap();
        assert_eq!(p.tokens(100), p.pieces.len() as u32);
        assert!(p.stops_by_eos(100) && !p.stops_by_eos(2));
        assert_eq!(p.tokens(2), 2, "the cap still caps");
        let p = plan(&body, true, Some(Fault::NoEos)).unwrap();
        assert_eq!(p.tokens(100), 100);
        assert!(!p.stops_by_eos(100));
    }

    #[test]
    fn pieces_keep_every_character() {
        for t in ["The capital of France is Paris.", r#"{"city":"Paris","n":[1,2]}"#, "  two  spaces ", "é漢字 ok"] {
            assert_eq!(pieces(t).concat(), t);
        }
        assert_eq!(pieces("a bc d"), ["a", " bc", " d"]);
    }
}
