//! OpenAI `/v1/completions` streaming: `choices[].text` carries the generated text.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;

use super::api::{Protocol, ProtocolError, RequestSpec, StreamEvent, StreamState};
use super::openai::{ObjectIsError, StrLen, WireUsage, chunk_error, finish_body, len, parse_body, parse_frame, parse_json};
use crate::config::Target;

pub struct OpenAiCompletions;

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
    /// Only its length is used: not copied.
    text: Option<StrLen>,
    finish_reason: Option<String>,
}

impl Protocol for OpenAiCompletions {
    fn path(&self, _stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        Cow::Borrowed("/v1/completions")
    }
    fn end_needs_finish_reason(&self) -> bool {
        true
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut body = json!({
            "prompt": req.prompt,
        });
        finish_body(&mut body, target, req);
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        parse_frame(frame, state, read_chunk)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        parse_body(body, read_chunk)
    }
}

fn read_chunk(frame: &[u8]) -> Result<(StreamEvent, Option<serde_json::Value>), ProtocolError> {
    let chunk: Chunk = parse_json(frame)?;
    let mut ev = StreamEvent {
        model: chunk.model,
        usage: chunk.usage.map(Into::into),
        emitted_ns: chunk.mock_emitted_ns.and_then(|v| v.as_u64()),
        ..Default::default()
    };
    let bare_message = chunk.message.is_some() && chunk.choices.is_empty();
    for choice in chunk.choices {
        ev.content_bytes += len(choice.text);
        if choice.finish_reason.is_some() {
            ev.finish_reason = choice.finish_reason;
        }
    }
    Ok((ev, chunk_error(frame, chunk.error, chunk.object.0, bare_message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(frame: &str) -> Result<StreamEvent, ProtocolError> {
        OpenAiCompletions.parse(frame.as_bytes(), &mut StreamState::default())
    }

    #[test]
    fn finish_reason_error_and_error_objects_without_an_error_key() {
        assert!(matches!(parse(r#"{"choices":[{"index":0,"text":"","finish_reason":"error"}]}"#), Err(ProtocolError::Stream(_))));
        let whole = br#"{"choices":[{"index":0,"text":"partial","finish_reason":"error"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
        assert!(matches!(OpenAiCompletions.parse_whole(whole), Err(ProtocolError::Stream(_))));
        let vllm = r#"{"object":"error","message":"boom","type":"InternalServerError","param":null,"code":500}"#;
        assert_eq!(parse(vllm).unwrap_err(), ProtocolError::Stream("boom".into()));
        let ok = parse(r#"{"object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":"length"}]}"#).unwrap();
        assert_eq!((ok.content_bytes, ok.finish_reason.as_deref()), (2, Some("length")));
    }
}
