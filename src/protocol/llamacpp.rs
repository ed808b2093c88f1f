//! llama.cpp server's native `POST /completion`: SSE `data: {"content", "tokens", "stop"}`; the
//! last object has `stop: true`, `stop_type` and `timings` (`prompt_n`, `prompt_ms`,
//! `predicted_n`, `predicted_ms`). There is no `[DONE]`; `stop: true` is the end. A failure
//! mid-stream is an SSE `error:` line, which the decoder hands over as `{"error": ...}`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::api::{Protocol, ProtocolError, RequestSpec, ServerTiming, StreamEvent, StreamState, Usage, from_ms, sum_durations};
use super::openai::{error_summary, parse_json};
use crate::config::Target;

pub struct LlamaCpp;

#[derive(Deserialize)]
struct Chunk {
    content: Option<String>,
    /// Token ids of this chunk (empty unless the server returns them).
    tokens: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    stop: bool,
    stop_type: Option<String>,
    model: Option<String>,
    tokens_predicted: Option<u64>,
    tokens_evaluated: Option<u64>,
    timings: Option<Timings>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Timings {
    /// Prompt tokens reused from the slot's cache (not in `prompt_n`, which counts the prompt
    /// tokens evaluated). `tokens_cached` is not this: it is every token in the slot at the end.
    cache_n: Option<u64>,
    prompt_n: Option<u64>,
    prompt_ms: Option<f64>,
    predicted_n: Option<u64>,
    predicted_ms: Option<f64>,
}

impl Protocol for LlamaCpp {
    fn path(&self, _stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        Cow::Borrowed("/completion")
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut body = json!({
            "prompt": req.prompt,
            "n_predict": req.max_tokens,
            "stream": target.stream,
        });
        if target.ignore_eos && !req.checks.is_some_and(|c| c.natural_end()) {
            body["ignore_eos"] = json!(true);
        }
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        state.frames += 1;
        read_chunk(frame, Some(state))
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        // `stream: false` answers with the final object, holding all the text.
        read_chunk(body, None)
    }
}

/// `stop_type` as an OpenAI-style finish reason (`none`: stopped for no stated reason).
fn finish_reason(stop_type: Option<&str>) -> Option<String> {
    match stop_type {
        Some("limit") => Some("length".into()),
        Some("eos" | "word") => Some("stop".into()),
        Some("none") => None,
        Some(other) => Some(other.to_string()),
        None => Some("stop".into()),
    }
}

fn read_chunk(frame: &[u8], state: Option<&mut StreamState>) -> Result<StreamEvent, ProtocolError> {
    let c: Chunk = parse_json(frame)?;
    if let Some(err) = &c.error {
        return Err(ProtocolError::Stream(error_summary(err)));
    }
    let content_bytes = c.content.as_deref().map_or(0, str::len);
    let mut ev = StreamEvent { content_bytes, model: c.model, done: c.stop, ..Default::default() };
    // Tokens in this chunk: the step of the running `tokens_predicted`, else the token ids.
    let stepped = match (state, c.tokens_predicted) {
        (Some(st), Some(p)) if !c.stop => Some(st.advance(p, true)),
        _ => None,
    };
    if content_bytes > 0 {
        ev.tokens = stepped.or_else(|| c.tokens.as_ref().map(|t| t.len() as u64)).filter(|n| *n > 0);
    }
    if c.stop {
        ev.finish_reason = finish_reason(c.stop_type.as_deref());
        let t = c.timings.as_ref();
        let completion = t.and_then(|t| t.predicted_n).or(c.tokens_predicted);
        let cached = t.and_then(|t| t.cache_n);
        // The whole prompt: the tokens evaluated plus those the cache supplied.
        let prompt = t.and_then(|t| t.prompt_n).map(|n| n.saturating_add(cached.unwrap_or(0))).or(c.tokens_evaluated);
        ev.counter = completion.map(|n| Usage { cached_tokens: cached, ..Usage::counts(prompt.unwrap_or(0), n) });
        if let Some(t) = t {
            let prefill = from_ms("timings.prompt_ms", t.prompt_ms)?;
            let decode = from_ms("timings.predicted_ms", t.predicted_ms)?;
            let total = sum_durations("timings.prompt_ms + predicted_ms", prefill, decode)?;
            ev.server_timing = ServerTiming { prefill, decode, total, ..Default::default() };
        }
    }
    Ok(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(frame: &str) -> Result<StreamEvent, ProtocolError> {
        LlamaCpp.parse(frame.as_bytes(), &mut StreamState::default())
    }

    #[test]
    fn token_chunks_and_the_final_object() {
        let ev = parse(r#"{"index":0,"content":" over","tokens":[927],"stop":false,"id_slot":0}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.tokens, ev.done), (5, Some(1), false));
        let mut st = StreamState::default();
        let steps =
            [r#"{"content":" a b c d","tokens":[1],"stop":false,"tokens_predicted":4}"#, r#"{"content":" e","tokens":[2],"stop":false,"tokens_predicted":5}"#];
        let n: Vec<_> = steps.iter().map(|f| LlamaCpp.parse(f.as_bytes(), &mut st).unwrap().tokens).collect();
        assert_eq!(n, [Some(4), Some(1)], "tokens_predicted steps tell the tokens per chunk");
        let ev = parse(r#"{"content":" a b","tokens":[],"stop":false}"#).unwrap();
        assert_eq!(ev.tokens, None, "an empty token list says nothing");
        let last = r#"{"content":"","stop":true,"model":"m","stop_type":"limit","tokens_predicted":16,"tokens_evaluated":6,"timings":{"prompt_n":6,"prompt_ms":12.5,"predicted_n":16,"predicted_ms":250.0,"predicted_per_second":64.0}}"#;
        let ev = parse(last).unwrap();
        assert!(ev.done && !ev.has_text());
        assert_eq!(ev.finish_reason.as_deref(), Some("length"));
        assert_eq!(ev.counter, Some(Usage::counts(6, 16)));
        assert_eq!(ev.server_timing.prefill, Some(Duration::from_micros(12_500)));
        assert_eq!(ev.server_timing.decode, Some(Duration::from_millis(250)));
    }

    /// The prompt tokens the slot's cache supplied are `timings.cache_n`; `prompt_n` counts only
    /// the rest, so the prompt is their sum. `tokens_cached` (every token in the slot at the
    /// end, answer included) is not a cache hit.
    #[test]
    fn cached_prompt_tokens() {
        let hit = r#"{"content":"","stop":true,"stop_type":"eos","tokens_predicted":3,"tokens_evaluated":40,"tokens_cached":42,"timings":{"cache_n":32,"prompt_n":8,"predicted_n":3}}"#;
        let c = parse(hit).unwrap().counter.unwrap();
        assert_eq!((c.prompt_tokens, c.cached_tokens), (40, Some(32)));
        let no_timings = r#"{"content":"","stop":true,"stop_type":"eos","tokens_predicted":3,"tokens_evaluated":40,"tokens_cached":42}"#;
        let c = parse(no_timings).unwrap().counter.unwrap();
        assert_eq!((c.prompt_tokens, c.cached_tokens), (40, None));
    }

    #[test]
    fn stop_types() {
        assert_eq!(finish_reason(Some("eos")).as_deref(), Some("stop"));
        assert_eq!(finish_reason(Some("word")).as_deref(), Some("stop"));
        assert_eq!(finish_reason(Some("none")), None);
    }

    #[test]
    fn error_object() {
        let err = parse(r#"{"error":{"code":500,"message":"slot unavailable","type":"server_error"}}"#).unwrap_err();
        assert_eq!(err, ProtocolError::Stream("slot unavailable".into()));
    }
}
