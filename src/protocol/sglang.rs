//! SGLang's native `POST /generate`: SSE `data: {"text", "output_ids", "meta_info"}` events,
//! then `data: [DONE]`. `text` is the whole text so far (SGLang's default; with
//! `--incremental-streaming-output` each event carries only its new text, which is told apart
//! by the previous text's end not matching). `meta_info.completion_tokens` is the running token
//! count, so a frame's tokens are its step; `meta_info.finish_reason` is null until the last
//! event, then `{"type": "length" | "stop" | "abort", ...}`. Like OpenAI's, `[DONE]` is a success
//! only after a finish reason.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::api::{Protocol, ProtocolError, RequestSpec, StreamEvent, StreamState, Usage};
use super::openai::{error_summary, parse_json};
use crate::config::Target;

pub struct Sglang;

#[derive(Deserialize)]
struct Event {
    text: Option<String>,
    meta_info: Option<Meta>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Meta {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// Prompt tokens served from the radix cache.
    cached_tokens: Option<u64>,
    finish_reason: Option<serde_json::Value>,
}

impl Protocol for Sglang {
    fn path(&self, _stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        Cow::Borrowed("/generate")
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut params = json!({"max_new_tokens": req.max_tokens, "temperature": 0});
        if target.ignore_eos && !req.checks.is_some_and(|c| c.natural_end()) {
            params["ignore_eos"] = json!(true);
        }
        json!({"text": req.prompt, "sampling_params": params, "stream": target.stream})
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        state.frames += 1;
        if frame.trim_ascii() == b"[DONE]" {
            return Ok(StreamEvent { done: true, ..Default::default() });
        }
        let ev: Event = parse_json(frame)?;
        read(ev, Some(state))
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        let mut ev = read(parse_json(body)?, None)?;
        ev.done = true;
        Ok(ev)
    }

    fn end_needs_finish_reason(&self) -> bool {
        true
    }
}

fn read(ev: Event, state: Option<&mut StreamState>) -> Result<StreamEvent, ProtocolError> {
    if let Some(err) = &ev.error {
        return Err(ProtocolError::Stream(error_summary(err)));
    }
    let text = ev.text.unwrap_or_default();
    let mut out = StreamEvent::default();
    out.content_bytes = match state {
        Some(st) => {
            let new = st.cumulative.new_bytes(&text);
            if new > 0 {
                if let Some(n) = ev.meta_info.as_ref().and_then(|m| m.completion_tokens) {
                    out.tokens = Some(st.advance(n, true)).filter(|n| *n > 0);
                }
            }
            new
        }
        None => text.len(),
    };
    if let Some(m) = ev.meta_info {
        let reason = m.finish_reason.as_ref().and_then(|r| r.get("type").and_then(|t| t.as_str()).or(r.as_str()));
        out.finish_reason = reason.map(str::to_owned);
        if out.finish_reason.is_some() {
            out.counter = m.completion_tokens.map(|n| Usage { cached_tokens: m.cached_tokens, ..Usage::counts(m.prompt_tokens.unwrap_or(0), n) });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(frames: &[&str]) -> Vec<StreamEvent> {
        let mut st = StreamState::default();
        frames.iter().map(|f| Sglang.parse(f.as_bytes(), &mut st).unwrap()).collect()
    }

    #[test]
    fn cumulative_text_counts_only_what_is_new() {
        let ev = events(&[
            r#"{"text":"The","meta_info":{"completion_tokens":1,"prompt_tokens":5,"finish_reason":null}}"#,
            r#"{"text":"The sky","meta_info":{"completion_tokens":2,"prompt_tokens":5,"finish_reason":null}}"#,
            r#"{"text":"The sky is blue","meta_info":{"completion_tokens":4,"prompt_tokens":5,"cached_tokens":3,"finish_reason":{"type":"length","length":4}}}"#,
            "[DONE]",
        ]);
        assert_eq!(ev.iter().map(|e| e.content_bytes).collect::<Vec<_>>(), [3, 4, 8, 0]);
        assert_eq!(ev[2].tokens, Some(2), "a frame of two tokens");
        assert_eq!(ev[2].finish_reason.as_deref(), Some("length"));
        assert_eq!(ev[2].counter, Some(Usage { cached_tokens: Some(3), ..Usage::counts(5, 4) }), "meta_info.cached_tokens: the radix cache's share");
        assert!(ev[3].done);
    }

    #[test]
    fn incremental_text_counts_whole() {
        let ev = events(&[r#"{"text":"ab","meta_info":{"completion_tokens":1}}"#, r#"{"text":"cd","meta_info":{"completion_tokens":2}}"#]);
        assert_eq!(ev.iter().map(|e| e.content_bytes).collect::<Vec<_>>(), [2, 2]);
    }

    #[test]
    fn errors_and_whole_answers() {
        let mut st = StreamState::default();
        assert!(matches!(Sglang.parse(br#"{"error":{"message":"boom"}}"#, &mut st), Err(ProtocolError::Stream(_))));
        let ev = Sglang.parse_whole(br#"{"text":"abc","meta_info":{"completion_tokens":3,"prompt_tokens":2,"finish_reason":{"type":"stop"}}}"#).unwrap();
        assert!(ev.done && ev.content_bytes == 3 && ev.finish_reason.as_deref() == Some("stop"));
    }
}
