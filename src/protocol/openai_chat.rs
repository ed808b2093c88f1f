//! OpenAI `/v1/chat/completions` streaming. The role-only first chunk carries no text and is not
//! a token; `reasoning_content` / `reasoning` deltas and tool-call arguments are generated text.

use serde::Deserialize;
use serde_json::json;

use super::openai::{common, parse_json, WireUsage};
use super::{Framing, Protocol, ProtocolError, ProtocolKind, RequestSpec, StreamEvent, StreamState};
use crate::config::Target;

pub struct OpenAiChat;

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

fn len(s: &Option<String>) -> usize {
    s.as_deref().map_or(0, str::len)
}

impl Protocol for OpenAiChat {
    fn kind(&self) -> ProtocolKind {
        ProtocolKind::OpenaiChat
    }
    fn framing(&self) -> Framing {
        Framing::Sse
    }
    fn path(&self) -> &'static str {
        "/v1/chat/completions"
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut body = json!({
            "model": req.model,
            "messages": [{"role": "user", "content": req.prompt}],
            "max_tokens": req.max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if target.ignore_eos && req.ignore_eos {
            body["ignore_eos"] = json!(true);
            body["min_tokens"] = json!(req.max_tokens);
        }
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        state.frames += 1;
        if let Some(ev) = common(frame)? {
            return Ok(ev);
        }
        let chunk: Chunk = parse_json(frame)?;
        let mut ev = StreamEvent { model: chunk.model, usage: chunk.usage.map(Into::into), ..Default::default() };
        for choice in chunk.choices {
            let delta = choice.delta.unwrap_or_default();
            ev.content_bytes += len(&delta.content);
            ev.reasoning_bytes += len(&delta.reasoning_content) + len(&delta.reasoning);
            for call in delta.tool_calls.into_iter().filter_map(|c| c.function) {
                ev.content_bytes += len(&call.name) + len(&call.arguments);
            }
            if choice.finish_reason.is_some() {
                ev.finish_reason = choice.finish_reason;
            }
        }
        Ok(ev)
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
    fn usage_chunk_and_done_and_error() {
        let ev = parse(r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#).unwrap();
        assert_eq!(ev.usage, Some(super::super::Usage { prompt_tokens: 5, completion_tokens: 7 }));
        assert!(parse("[DONE]").unwrap().done);
        let err = parse(r#"{"error":{"message":"boom","type":"x","code":500}}"#).unwrap_err();
        assert_eq!(err, ProtocolError::Stream("boom".into()));
        assert!(matches!(parse("{not json").unwrap_err(), ProtocolError::Parse(_)));
    }
}
