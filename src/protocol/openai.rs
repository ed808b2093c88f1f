//! Shared pieces of the two OpenAI-compatible APIs: the end marker, error objects, usage.

use serde::Deserialize;

use super::answer::Collected;
use super::api::{ProtocolError, StreamEvent, StreamState, Usage};

/// OpenAI `usage` (chat and completions; the Responses API names its fields `input_tokens` and
/// `output_tokens`, read as aliases). The details are `null` on servers that do not report them
/// (vLLM without `--enable-prompt-tokens-details`).
#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default, alias = "input_tokens")]
    prompt_tokens: u64,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: u64,
    #[serde(alias = "output_tokens_details")]
    completion_tokens_details: Option<OutputDetails>,
    #[serde(alias = "input_tokens_details")]
    prompt_tokens_details: Option<InputDetails>,
}

#[derive(Deserialize)]
pub(super) struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct InputDetails {
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
            cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
        }
    }
}

/// Handles what both APIs share before the API-specific chunk shape is read: `[DONE]` and
/// `{"error": ...}`. Returns `Ok(Some(event))` when the frame was one of those.
pub(super) fn common(frame: &[u8]) -> Result<Option<StreamEvent>, ProtocolError> {
    let trimmed = frame.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(Some(StreamEvent { done: true, ..Default::default() }));
    }
    error_object(trimmed)?;
    Ok(None)
}

/// `Err(Stream)` when the frame is a JSON object with a non-null `error`.
fn error_object(frame: &[u8]) -> Result<(), ProtocolError> {
    match serde_json::from_slice::<ErrorFrame>(frame) {
        Ok(ErrorFrame { error: Some(err) }) => Err(ProtocolError::Stream(error_summary(&err))),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
struct ErrorFrame {
    error: Option<serde_json::Value>,
}

/// A short description of an error object (`message`, else the raw value), bounded in length.
/// A wrapped error object (`{"error": {...}}`, as an SSE `event: error` may carry) is read inside.
pub(crate) fn error_summary(err: &serde_json::Value) -> String {
    if let Some(inner) = err.get("error").filter(|e| !e.is_null()) {
        return error_summary(inner);
    }
    let text = match err.get("message").and_then(|m| m.as_str()) {
        Some(m) => m.to_string(),
        None => err.as_str().map(str::to_string).unwrap_or_else(|| err.to_string()),
    };
    truncate_chars(&text, 300)
}

pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The request body fields both APIs share: length, streaming with usage, exact length.
pub(super) fn finish_body(body: &mut serde_json::Value, target: &crate::config::Target, req: &super::RequestSpec) {
    use serde_json::json;
    body["model"] = json!(req.model);
    body["max_tokens"] = json!(req.max_tokens);
    body["stream"] = json!(target.stream);
    if target.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    // An answer whose end is checked is the model's own: its end by EOS is part of the check.
    if target.ignore_eos && !req.checks.is_some_and(|c| c.natural_end()) && req.agent.is_none() {
        body["ignore_eos"] = json!(true);
        body["min_tokens"] = json!(req.max_tokens);
    }
    if let Some(checks) = req.checks {
        super::checks::add_openai(body, checks);
    }
    if let (Some(step), true) = (&req.agent, body.get("messages").is_some()) {
        super::checks::add_agent(body, step, false);
    }
}

pub(super) fn parse_json<'a, T: Deserialize<'a>>(frame: &'a [u8]) -> Result<T, ProtocolError> {
    serde_json::from_slice(frame).map_err(|e| ProtocolError::Parse(e.to_string()))
}

/// Whether a chunk's `object` is `"error"` (vLLM's error object), read without copying it; a
/// value of any other type is ignored, as an unknown field is.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ObjectIsError(pub bool);

impl<'de> Deserialize<'de> for ObjectIsError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ObjectIsError;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ObjectIsError, E> {
                Ok(ObjectIsError(s == "error"))
            }
            fn visit_bool<E>(self, _: bool) -> Result<ObjectIsError, E> {
                Ok(ObjectIsError(false))
            }
            fn visit_i64<E>(self, _: i64) -> Result<ObjectIsError, E> {
                Ok(ObjectIsError(false))
            }
            fn visit_u64<E>(self, _: u64) -> Result<ObjectIsError, E> {
                Ok(ObjectIsError(false))
            }
            fn visit_f64<E>(self, _: f64) -> Result<ObjectIsError, E> {
                Ok(ObjectIsError(false))
            }
            fn visit_unit<E>(self) -> Result<ObjectIsError, E> {
                Ok(ObjectIsError(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ObjectIsError, A::Error> {
                IgnoredAny.visit_seq(seq).map(|_| ObjectIsError(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ObjectIsError, A::Error> {
                IgnoredAny.visit_map(map).map(|_| ObjectIsError(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// The error a chunk reports: its `error` field, else the chunk itself when it is an error
/// object without that key (vLLM's `{"object":"error","message":...}`, or a bare
/// `{"message":...,"type":...}` with no choices). Only an error is read again, as a whole value.
pub(super) fn chunk_error(frame: &[u8], error: Option<serde_json::Value>, object_is_error: bool, bare_message: bool) -> Option<serde_json::Value> {
    if error.is_some() || !(object_is_error || bare_message) {
        return error;
    }
    serde_json::from_slice(frame).ok()
}

/// `finish_reason: "error"` (some routers end a failed generation so): a stream error. Read by
/// reference: the event is not moved through it.
fn failed_finish(ev: &StreamEvent) -> Result<(), ProtocolError> {
    match ev.finish_reason.as_deref() {
        Some("error") => Err(ProtocolError::Stream("finish_reason \"error\"".into())),
        _ => Ok(()),
    }
}

/// A chunk's reading: `Ok((event, error))`, where `error` is the chunk's error (`chunk_error`:
/// an error object in, or as, a chunk of the usual shape).
type Read = Result<(StreamEvent, Option<serde_json::Value>), ProtocolError>;

/// How an API reads its chunk shape: measured only (the usual reading), or keeping the
/// chunk's answer text and tool calls in a `Collected` as they are read (for the checks).
#[derive(Clone, Copy)]
pub(super) struct ReadChunk {
    pub measure: fn(&[u8]) -> Read,
    pub keep: fn(&[u8], &mut Collected) -> Read,
}

impl ReadChunk {
    fn read(self, frame: &[u8], answer: Option<&mut Collected>) -> Read {
        match answer {
            None => (self.measure)(frame),
            Some(a) => (self.keep)(frame, a),
        }
    }
}

/// A streamed frame of either OpenAI API: the shared markers first, then the API's chunk shape.
/// The usual frame is parsed once: the chunk shape reads `error` too, and only a frame that does
/// not have the chunk shape is read again for an error object (the same verdicts as reading the
/// error object first).
pub(super) fn parse_frame(frame: &[u8], state: &mut StreamState, read_chunk: ReadChunk) -> Result<StreamEvent, ProtocolError> {
    state.frames += 1;
    let trimmed = frame.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(StreamEvent { done: true, ..Default::default() });
    }
    match read_chunk.read(frame, state.answer.as_mut()) {
        Ok((_, Some(err))) => Err(ProtocolError::Stream(error_summary(&err))),
        Ok((ev, None)) => failed_finish(&ev).map(|()| ev),
        Err(e) => {
            error_object(trimmed)?;
            Err(e)
        }
    }
}

/// A whole (non-streamed) response: the same shape as a chunk, with all the text.
pub(super) fn parse_body(body: &[u8], answer: Option<&mut Collected>, read_chunk: ReadChunk) -> Result<StreamEvent, ProtocolError> {
    match common(body)? {
        Some(ev) => Ok(ev),
        None => match read_chunk.read(body, answer)? {
            (_, Some(err)) => Err(ProtocolError::Stream(error_summary(&err))),
            (ev, None) => failed_finish(&ev).map(|()| StreamEvent { done: true, ..ev }),
        },
    }
}
