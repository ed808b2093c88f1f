//! Shared pieces of the two OpenAI-compatible APIs: the end marker, error objects, usage.

use serde::Deserialize;

use super::{ProtocolError, StreamEvent, StreamState, Usage};

#[derive(Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens }
    }
}

/// Handles what both APIs share before the API-specific chunk shape is read: `[DONE]` and
/// `{"error": ...}`. Returns `Ok(Some(event))` when the frame was one of those.
pub(super) fn common(frame: &[u8]) -> Result<Option<StreamEvent>, ProtocolError> {
    let trimmed = frame.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(Some(StreamEvent { done: true, ..Default::default() }));
    }
    if let Ok(ErrorFrame { error: Some(err) }) = serde_json::from_slice::<ErrorFrame>(trimmed) {
        return Err(ProtocolError::Stream(error_summary(&err)));
    }
    Ok(None)
}

#[derive(Deserialize)]
struct ErrorFrame {
    error: Option<serde_json::Value>,
}

/// A short description of an error object (`message`, else the raw value), bounded in length.
pub(crate) fn error_summary(err: &serde_json::Value) -> String {
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
    if target.ignore_eos {
        body["ignore_eos"] = json!(true);
        body["min_tokens"] = json!(req.max_tokens);
    }
}

pub(super) fn parse_json<'a, T: Deserialize<'a>>(frame: &'a [u8]) -> Result<T, ProtocolError> {
    serde_json::from_slice(frame).map_err(|e| ProtocolError::Parse(e.to_string()))
}

/// A streamed frame of either OpenAI API: the shared markers first, then the API's chunk shape.
pub(super) fn parse_frame(
    frame: &[u8],
    state: &mut StreamState,
    read_chunk: fn(&[u8]) -> Result<StreamEvent, ProtocolError>,
) -> Result<StreamEvent, ProtocolError> {
    state.frames += 1;
    match common(frame)? {
        Some(ev) => Ok(ev),
        None => read_chunk(frame),
    }
}

/// A whole (non-streamed) response: the same shape as a chunk, with all the text.
pub(super) fn parse_body(body: &[u8], read_chunk: fn(&[u8]) -> Result<StreamEvent, ProtocolError>) -> Result<StreamEvent, ProtocolError> {
    match common(body)? {
        Some(ev) => Ok(ev),
        None => Ok(StreamEvent { done: true, ..read_chunk(body)? }),
    }
}
