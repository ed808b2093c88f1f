//! Ollama `/api/generate` and `/api/chat`: NDJSON, one object per line. Text is `response`
//! (generate) or `message.content` (chat), reasoning is `thinking` / `message.thinking`. The
//! last line has `done: true`, `done_reason`, the counters `prompt_eval_count` / `eval_count`
//! and durations in nanoseconds. A mid-stream failure is an `{"error": "..."}` line under 200.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::json;

use super::api::{Protocol, ProtocolError, RequestSpec, ServerTiming, StreamEvent, StreamState, Usage, from_ns};
use super::openai::{error_summary, parse_json};
use crate::config::Target;

pub struct Ollama {
    pub chat: bool,
}

#[derive(Deserialize)]
struct Line {
    model: Option<String>,
    response: Option<String>,
    thinking: Option<String>,
    message: Option<Message>,
    #[serde(default)]
    done: bool,
    done_reason: Option<String>,
    prompt_eval_count: Option<u64>,
    eval_count: Option<u64>,
    total_duration: Option<u64>,
    load_duration: Option<u64>,
    prompt_eval_duration: Option<u64>,
    eval_duration: Option<u64>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
    thinking: Option<String>,
    tool_calls: Option<Vec<serde_json::Value>>,
}

fn len(s: &Option<String>) -> usize {
    s.as_deref().map_or(0, str::len)
}

impl Protocol for Ollama {
    fn path(&self, _stream: bool, _req: &RequestSpec) -> Cow<'static, str> {
        if self.chat { Cow::Borrowed("/api/chat") } else { Cow::Borrowed("/api/generate") }
    }

    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value {
        let mut body = json!({
            "model": req.model,
            "stream": target.stream,
            "options": {"num_predict": req.max_tokens},
        });
        if self.chat {
            body["messages"] = json!([{"role": "user", "content": req.prompt}]);
        } else {
            body["prompt"] = json!(req.prompt);
        }
        if target.ignore_eos && !req.checks.is_some_and(|c| c.natural_end()) {
            // Ollama itself has no such option and ignores it; some compatible servers read it.
            body["options"]["ignore_eos"] = json!(true);
        }
        body
    }

    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError> {
        state.frames += 1;
        read_line(frame)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError> {
        // `stream: false` answers with the final line, holding all the text.
        read_line(body)
    }
}

fn read_line(frame: &[u8]) -> Result<StreamEvent, ProtocolError> {
    let line: Line = parse_json(frame)?;
    if let Some(err) = &line.error {
        return Err(ProtocolError::Stream(error_summary(err)));
    }
    let mut ev = StreamEvent { model: line.model, done: line.done, ..Default::default() };
    ev.content_bytes = len(&line.response);
    ev.reasoning_bytes = len(&line.thinking);
    if let Some(m) = &line.message {
        ev.content_bytes += len(&m.content);
        ev.reasoning_bytes += len(&m.thinking);
        ev.content_bytes += m.tool_calls.iter().flatten().map(|c| c.to_string().len()).sum::<usize>();
    }
    if line.done {
        // Older Ollama ends without `done_reason`; `done: true` is the whole answer either way.
        ev.finish_reason = Some(line.done_reason.unwrap_or_else(|| "stop".into()));
        if let Some(eval) = line.eval_count {
            ev.counter = Some(Usage::counts(line.prompt_eval_count.unwrap_or(0), eval));
        }
        ev.server_timing = ServerTiming {
            queue: None,
            prefill: from_ns("prompt_eval_duration", line.prompt_eval_duration)?,
            decode: from_ns("eval_duration", line.eval_duration)?,
            total: from_ns("total_duration", line.total_duration)?,
            load: from_ns("load_duration", line.load_duration)?,
        };
    }
    Ok(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(chat: bool, line: &str) -> Result<StreamEvent, ProtocolError> {
        Ollama { chat }.parse(line.as_bytes(), &mut StreamState::default())
    }

    #[test]
    fn generate_text_thinking_and_final_counters() {
        let ev = parse(false, r#"{"model":"m","created_at":"t","response":" Yes","done":false}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.done, ev.model.as_deref()), (4, false, Some("m")));
        let ev = parse(false, r#"{"model":"m","response":"","thinking":"hmm","done":false}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.reasoning_bytes), (0, 3));
        let last = r#"{"model":"m","response":"","done":true,"done_reason":"length","total_duration":2000000000,"load_duration":5000,"prompt_eval_count":26,"prompt_eval_duration":130000000,"eval_count":259,"eval_duration":1500000000}"#;
        let ev = parse(false, last).unwrap();
        assert!(ev.done && !ev.has_text());
        assert_eq!(ev.finish_reason.as_deref(), Some("length"));
        assert_eq!(ev.counter, Some(Usage::counts(26, 259)));
        assert_eq!(ev.usage, None, "Ollama counters are not OpenAI usage");
        assert_eq!(ev.server_timing.decode, Some(Duration::from_millis(1500)));
        assert_eq!(ev.server_timing.prefill, Some(Duration::from_millis(130)));
        assert_eq!(ev.server_timing.total, Some(Duration::from_secs(2)));
        assert_eq!(ev.server_timing.load, Some(Duration::from_micros(5)));
    }

    #[test]
    fn done_line_with_text_and_without_done_reason() {
        let ev = parse(false, r#"{"response":"!","done":true}"#).unwrap();
        assert!(ev.done && ev.has_text());
        assert_eq!(ev.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn chat_message_content_thinking_and_tool_calls() {
        let ev = parse(true, r#"{"message":{"role":"assistant","content":"hi","thinking":"ab"},"done":false}"#).unwrap();
        assert_eq!((ev.content_bytes, ev.reasoning_bytes), (2, 2));
        let ev = parse(true, r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},"done":false}"#).unwrap();
        assert!(ev.content_bytes > 0);
    }

    #[test]
    fn error_line_is_a_stream_error() {
        let err = parse(false, r#"{"error":"an error was encountered while running the model"}"#).unwrap_err();
        assert_eq!(err, ProtocolError::Stream("an error was encountered while running the model".into()));
        assert!(matches!(parse(false, "{\"response\":").unwrap_err(), ProtocolError::Parse(_)));
    }
}
