//! Hugging Face TGI's native API: `POST /generate_stream` (SSE, `data:{...}` with no space) and
//! `POST /generate` (one JSON). Each event is one token `{index, token:{id,text,special},
//! generated_text, details}`; a special token (e.g. `</s>`) is a generated token but not text.
//! `generated_text` and `details` stay null until the last event, which ends the stream (TGI has
//! no `[DONE]` here). Timings come as response headers (`x-queue-time`, `x-inference-time`,
//! `x-time-per-token`, `x-total-time`, in milliseconds) where the server sends them.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::api::{Protocol, ProtocolError, RequestSpec, ServerTiming, StreamEvent, StreamState, Usage, from_ms, sum_durations};
use super::openai::{error_summary, parse_json};
use crate::config::Target;

pub struct Tgi;

#[derive(Deserialize)]
struct Event {
    /// Position of this event's token, from 1 on real TGI (from 0 on the mock); a jump means the
    /// event carried several tokens.
    index: Option<u64>,
    token: Option<Token>,
    generated_text: Option<String>,
    details: Option<Details>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Token {
    text: Option<String>,
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct Details {
    finish_reason: Option<String>,
    generated_tokens: Option<u64>,
    input_length: Option<u64>,
}

impl Protocol for Tgi {
    fn path(&self, stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        if stream { Cow::Borrowed("/generate_stream") } else { Cow::Borrowed("/generate") }
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut params = json!({"max_new_tokens": req.max_tokens, "details": true});
        if target.ignore_eos && !req.checks.is_some_and(|c| c.natural_end()) {
            params["ignore_eos"] = json!(true);
        }
        json!({"inputs": req.prompt, "parameters": params, "stream": target.stream})
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        state.frames += 1;
        let ev: Event = parse_json(frame)?;
        if let Some(err) = &ev.error {
            return Err(ProtocolError::Stream(error_summary(err)));
        }
        let mut out = StreamEvent::default();
        if let Some(token) = &ev.token {
            if !token.special {
                out.content_bytes = token.text.as_deref().map_or(0, str::len);
            }
            // Real TGI numbers events from 1 (the mock's captures from 0): the first event says
            // which. Only the first count depends on it (later ones are differences); an event
            // is one token on real TGI, so a first index of 1 is one token counted from 1.
            let n = ev.index.map_or(1, |i| state.advance(i, state.last_position.is_none() && i == 1));
            if out.content_bytes > 0 {
                out.tokens = Some(n.max(1));
            }
        }
        // The last event carries the whole text and, when asked for, the details.
        out.done = ev.generated_text.is_some() || ev.details.is_some();
        apply_details(&mut out, ev.details);
        Ok(out)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        // `/generate` answers one object; the `/` compat route a one-element list.
        let value: serde_json::Value = parse_json(body)?;
        let value = match value {
            serde_json::Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
            other => other,
        };
        let ev: Event = serde_json::from_value(value).map_err(|e| ProtocolError::Parse(e.to_string()))?;
        if let Some(err) = &ev.error {
            return Err(ProtocolError::Stream(error_summary(err)));
        }
        let text = ev.generated_text.ok_or_else(|| ProtocolError::Parse("no generated_text".into()))?;
        let mut out = StreamEvent { content_bytes: text.len(), done: true, ..Default::default() };
        apply_details(&mut out, ev.details);
        out.finish_reason.get_or_insert_with(|| "stop".into());
        Ok(out)
    }

    fn header_timing(&self, headers: &reqwest::header::HeaderMap) -> Result<ServerTiming, ProtocolError> {
        let ms = |name: &str| -> Result<Option<std::time::Duration>, ProtocolError> {
            let Some(value) = headers.get(name) else {
                return Ok(None);
            };
            let text = value.to_str().unwrap_or("").trim();
            let number = text
                .parse::<f64>()
                .map_err(|_| ProtocolError::Parse(format!("header {name}: {:?} is not a number of milliseconds", super::truncate_chars(text, 40))))?;
            from_ms(&format!("header {name}"), Some(number))
        };
        let queue = ms("x-queue-time")?;
        let inference = ms("x-inference-time")?;
        let total = match ms("x-total-time")? {
            Some(t) => Some(t),
            None => sum_durations("header x-inference-time + x-queue-time", inference, Some(queue.unwrap_or_default()))?,
        };
        Ok(ServerTiming { queue, total, ..Default::default() })
    }
}

fn apply_details(out: &mut StreamEvent, details: Option<Details>) {
    if let Some(d) = details {
        out.finish_reason = d.finish_reason;
        out.counter = d.generated_tokens.map(|n| Usage::counts(d.input_length.unwrap_or(0), n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(frame: &str) -> Result<StreamEvent, ProtocolError> {
        Tgi.parse(frame.as_bytes(), &mut StreamState::default())
    }

    #[test]
    fn tokens_special_tokens_and_the_last_event() {
        let ev = parse(r#"{"index":0,"token":{"id":5,"text":" rabbit","logprob":-0.6,"special":false},"generated_text":null,"details":null}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.tokens, ev.done), (7, Some(1), false));
        let mut state = StreamState::default();
        let jump = [r#"{"index":3,"token":{"id":5,"text":" a b c d","special":false}}"#, r#"{"index":5,"token":{"id":5,"text":" e f","special":false}}"#];
        let n: Vec<_> = jump.iter().map(|f| Tgi.parse(f.as_bytes(), &mut state).unwrap().tokens).collect();
        assert_eq!(n, [Some(4), Some(2)], "an index jump is several tokens in one event");
        let ev = parse(r#"{"index":2,"token":{"id":2,"text":"</s>","logprob":0.0,"special":true},"generated_text":null,"details":null}"#).unwrap();
        assert!(!ev.has_text(), "a special token is not text");
        let last = r#"{"index":3,"token":{"id":2,"text":"</s>","special":true},"generated_text":"a rabbit","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"input_length":4}}"#;
        let ev = parse(last).unwrap();
        assert!(ev.done);
        assert_eq!(ev.finish_reason.as_deref(), Some("eos_token"));
        assert_eq!(ev.counter, Some(Usage::counts(4, 3)));
        // Without `details`, the filled `generated_text` alone ends the stream.
        let ev = parse(r#"{"index":3,"token":{"id":9,"text":".","special":false},"generated_text":"a rabbit.","details":null}"#).unwrap();
        assert!(ev.done && ev.has_text());
    }

    #[test]
    fn index_counts_from_one_or_zero_as_the_first_event_says() {
        let frame = |i: u64| format!(r#"{{"index":{i},"token":{{"id":5,"text":" a","special":false}},"generated_text":null,"details":null}}"#);
        let counts = |indices: &[u64]| {
            let mut state = StreamState::default();
            indices.iter().map(|&i| Tgi.parse(frame(i).as_bytes(), &mut state).unwrap().tokens.unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(counts(&[1, 2, 3]), [1, 1, 1], "real TGI: from 1");
        assert_eq!(counts(&[0, 1, 2]), [1, 1, 1], "the mock: from 0");
        assert_eq!(counts(&[3, 7]), [4, 4], "from 0, several tokens an event");
    }

    #[test]
    fn error_event_and_whole_response_and_headers() {
        let err = parse(r#"{"error":"Request failed during generation","error_type":"generation"}"#).unwrap_err();
        assert_eq!(err, ProtocolError::Stream("Request failed during generation".into()));
        let ev = Tgi.parse_whole(br#"{"generated_text":"abc","details":{"finish_reason":"length","generated_tokens":2}}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.done, ev.counter.map(|c| c.completion_tokens)), (3, true, Some(2)));
        let ev = Tgi.parse_whole(br#"[{"generated_text":"abcd"}]"#).unwrap();
        assert_eq!((ev.content_bytes, ev.finish_reason.as_deref()), (4, Some("stop")));
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("x-queue-time", "3".parse().unwrap());
        h.insert("x-inference-time", "120".parse().unwrap());
        let t = Tgi.header_timing(&h).unwrap();
        assert_eq!((t.queue, t.total), (Some(Duration::from_millis(3)), Some(Duration::from_millis(123))));
    }
}
