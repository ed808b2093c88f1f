//! The `Protocol` seam: how a request is built for an API and how each stream frame is read.
//!
//! `parse` is pure: it sees one complete frame (an SSE `data` payload or an NDJSON line) and the
//! per-request `StreamState`, and says what the frame carried. The executor owns clocks and I/O.

use std::borrow::Cow;
use std::time::Duration;

use crate::config::Target;

/// How the response body is cut into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Sse,
    Ndjson,
}

/// What one probe asks for (borrowed from the probe: nothing is copied per request).
#[derive(Debug, Clone, Copy)]
pub struct RequestSpec<'a> {
    pub model: &'a str,
    pub prompt: &'a str,
    pub max_tokens: u32,
    /// Behaviour checks whose request fields go out with it (`stop`, `response_format`, tools,
    /// temperature 0); the families that cannot carry one are refused at config check time.
    pub checks: Option<&'a crate::config::Checks>,
    /// The scenario's reasoning effort (its budget is already in `max_tokens`); refused at
    /// config check time for families that cannot carry it.
    pub reasoning: Option<crate::config::Reasoning>,
    /// The earlier messages of a conversation or agent loop, oldest first, sent before
    /// `prompt`; empty for a probe on its own.
    pub history: &'a [Message],
    /// An agent loop's step: the tools it offers (`None`: no agent).
    pub agent: Option<AgentStep<'a>>,
}

/// What an agent loop's step offers the model.
#[derive(Debug, Clone, Copy)]
pub struct AgentStep<'a> {
    pub agent: &'a crate::config::Agent,
    /// This step must call a tool (`tool_choice: required` while expected calls remain).
    pub must_call: bool,
}

/// One earlier message of a conversation or agent loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// What the user asked.
    User(String),
    /// What the server answered: text, and the tool calls it made.
    Assistant { text: String, calls: Vec<Call> },
    /// A tool's result for the call `call_id`.
    ToolResult { call_id: String, content: String },
}

/// A tool call as sent back in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl Message {
    /// The history and `prompt` as chat messages (`prompt` last, as a user message, unless
    /// empty: an agent's later step continues from its tool results).
    pub fn chat(history: &[Message], prompt: &str) -> serde_json::Value {
        use serde_json::json;
        let mut messages = Vec::with_capacity(history.len() + 1);
        for m in history {
            messages.push(match m {
                Message::User(text) => json!({"role": "user", "content": text}),
                Message::Assistant { text, calls } if calls.is_empty() => json!({"role": "assistant", "content": text}),
                Message::Assistant { text, calls } => {
                    let calls: Vec<_> =
                        calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})).collect();
                    let content = if text.is_empty() { serde_json::Value::Null } else { json!(text) };
                    json!({"role": "assistant", "content": content, "tool_calls": calls})
                }
                Message::ToolResult { call_id, content } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
            });
        }
        if !prompt.is_empty() {
            messages.push(json!({"role": "user", "content": prompt}));
        }
        serde_json::Value::Array(messages)
    }

    /// The history and `prompt` as Responses API input items: messages, and an agent's calls
    /// and results as `function_call` and `function_call_output` items.
    pub fn responses_input(history: &[Message], prompt: &str) -> serde_json::Value {
        use serde_json::json;
        let mut items = Vec::with_capacity(history.len() + 1);
        for m in history {
            match m {
                Message::User(text) => items.push(json!({"role": "user", "content": text})),
                Message::Assistant { text, calls } => {
                    if !text.is_empty() || calls.is_empty() {
                        items.push(json!({"role": "assistant", "content": text}));
                    }
                    for c in calls {
                        items.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}));
                    }
                }
                Message::ToolResult { call_id, content } => items.push(json!({"type": "function_call_output", "call_id": call_id, "output": content})),
            }
        }
        if !prompt.is_empty() {
            items.push(json!({"role": "user", "content": prompt}));
        }
        serde_json::Value::Array(items)
    }

    /// The message's text (a tool result's content; an assistant's calls have no text form).
    fn text(&self) -> &str {
        match self {
            Message::User(t) | Message::Assistant { text: t, .. } | Message::ToolResult { content: t, .. } => t,
        }
    }

    /// The conversation as one text for an API that takes a single prompt: each message's text
    /// then `prompt`, a blank line between them (every turn extends the previous request's
    /// text, so the server's prefix cache can serve it).
    pub fn transcript(history: &[Message], prompt: &str) -> String {
        let mut out = String::with_capacity(history.iter().map(|m| m.text().len() + 2).sum::<usize>() + prompt.len());
        for m in history {
            out.push_str(m.text());
            out.push_str("\n\n");
        }
        out.push_str(prompt);
        out
    }

    /// Tool results in a history: the calls an agent loop made so far.
    pub fn calls_made(history: &[Message]) -> usize {
        history.iter().filter(|m| matches!(m, Message::ToolResult { .. })).count()
    }
}

/// Token counts reported by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of the completion, tokens spent reasoning, where the server says (chat
    /// `completion_tokens_details.reasoning_tokens`, Responses
    /// `output_tokens_details.reasoning_tokens`).
    pub reasoning_tokens: Option<u64>,
    /// Of the prompt, tokens served from the server's prefix cache, where it says (chat and
    /// completions `prompt_tokens_details.cached_tokens`, Responses
    /// `input_tokens_details.cached_tokens`, llama.cpp `timings.cache_n`).
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// Prompt and completion counts alone (the details unknown).
    pub fn counts(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage { prompt_tokens, completion_tokens, ..Usage::default() }
    }
}

/// Time the server says it spent on one request, by phase (absent when the API does not tell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerTiming {
    /// Waiting before work started (TGI `x-queue-time`; Ollama's `load_duration` is `load`).
    pub queue: Option<Duration>,
    /// Prompt processing (Ollama `prompt_eval_duration`, llama.cpp `timings.prompt_ms`).
    pub prefill: Option<Duration>,
    /// Token generation (Ollama `eval_duration`, llama.cpp `timings.predicted_ms`).
    pub decode: Option<Duration>,
    /// Whole request on the server (Ollama `total_duration`, TGI `x-inference-time` + queue).
    pub total: Option<Duration>,
    /// Model load (Ollama `load_duration`; large on a cold start).
    pub load: Option<Duration>,
}

impl ServerTiming {
    /// `(phase label, value)` for every phase that is known.
    pub fn phases(&self) -> impl Iterator<Item = (&'static str, Duration)> + '_ {
        [("queue", self.queue), ("prefill", self.prefill), ("decode", self.decode), ("total", self.total), ("load", self.load)]
            .into_iter()
            .filter_map(|(name, d)| d.map(|d| (name, d)))
    }

    /// Fills phases this one lacks from `other`.
    pub fn merge(&mut self, other: ServerTiming) {
        self.queue = self.queue.or(other.queue);
        self.prefill = self.prefill.or(other.prefill);
        self.decode = self.decode.or(other.decode);
        self.total = self.total.or(other.total);
        self.load = self.load.or(other.load);
    }

    pub fn is_empty(&self) -> bool {
        self.phases().next().is_none()
    }
}

/// What one frame carried. A frame may carry text, a finish reason and usage at once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamEvent {
    /// Bytes of generated answer text in this frame.
    pub content_bytes: usize,
    /// Bytes of generated reasoning text in this frame.
    pub reasoning_bytes: usize,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// The model that answered, when the frame names it.
    pub model: Option<String>,
    /// The protocol's end-of-stream marker (`data: [DONE]`, Ollama `done: true`, llama.cpp
    /// `stop: true`, TGI `details` present).
    pub done: bool,
    /// Tokens this frame carries when the API says so per frame (llama.cpp `tokens`, a TGI event
    /// is one token). vLLM's `continuous_usage_stats` is handled by the executor from `usage`.
    pub tokens: Option<u64>,
    /// The API's own counters when they are not OpenAI usage (Ollama `eval_count`, TGI
    /// `details.generated_tokens`, llama.cpp `timings.predicted_n`).
    pub counter: Option<Usage>,
    /// Server-reported timings carried in the body.
    pub server_timing: ServerTiming,
    /// When the server says it emitted this frame, nanoseconds since the request arrived (the
    /// mock's `mock_emitted_ns`, OpenAI APIs): ground truth for the harness's TTFT error.
    pub emitted_ns: Option<u64>,
}

impl StreamEvent {
    /// A frame with generated text (content or reasoning) counts as a token-bearing frame.
    pub fn has_text(&self) -> bool {
        self.content_bytes > 0 || self.reasoning_bytes > 0
    }
}

/// Per-request parser state (kept by the executor, handed to every `parse`).
#[derive(Debug, Default)]
pub struct StreamState {
    pub frames: u64,
    /// The answer's text and tool calls, filled by the parser as it decodes each frame; `Some`
    /// only when a behaviour check reads them (`StreamState::keeping_answer`). Families that
    /// cannot carry such checks leave it alone.
    pub answer: Option<super::answer::Collected>,
    /// A tool call came in this stream (Responses: the finish reason is then `tool_calls`).
    pub saw_tool_call: bool,
    /// What came so far of an API that resends the whole text in every event (SGLang).
    pub cumulative: CumulativeText,
    /// The last cumulative token position seen (TGI `index`, llama.cpp `tokens_predicted`), to
    /// tell how many tokens a frame carried.
    pub last_position: Option<u64>,
}

/// The length and last bytes of the text so far, to count only what an event adds.
#[derive(Debug, Default)]
pub struct CumulativeText {
    len: usize,
    tail: Vec<u8>,
}

/// Bytes of the previous text compared to tell "the whole text again" from "new text only".
const TAIL: usize = 32;

impl CumulativeText {
    /// New bytes in `text`: what it adds to the previous text when it repeats it (cumulative
    /// events), else all of it (incremental events).
    pub fn new_bytes(&mut self, text: &str) -> usize {
        let b = text.as_bytes();
        let repeats = b.len() >= self.len && b[self.len - self.tail.len()..self.len] == self.tail[..];
        let new = if repeats { b.len() - self.len } else { b.len() };
        self.len = b.len();
        self.tail = b[b.len().saturating_sub(TAIL)..].to_vec();
        new
    }
}

impl StreamState {
    /// State for a stream whose answer text is kept for the checks.
    pub fn keeping_answer() -> StreamState {
        StreamState { answer: Some(super::answer::Collected::new()), ..StreamState::default() }
    }

    /// Tokens since the last position: `position` counts from 1 (`tokens_predicted`) when
    /// `from_one`, else from 0 (an index).
    pub fn advance(&mut self, position: u64, from_one: bool) -> u64 {
        let base = if from_one { 0 } else { 1 };
        let n = match self.last_position {
            Some(last) => position.saturating_sub(last),
            None => position.saturating_add(base),
        };
        self.last_position = Some(position);
        n
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProtocolError {
    /// The server sent an error object inside a 2xx stream.
    #[error("error in stream: {0}")]
    Stream(String),
    /// The frame is not what the protocol allows (bad JSON, wrong shape).
    #[error("unparseable frame: {0}")]
    Parse(String),
}

/// What differs per API family in a request and its answer; the rest of a family is data in its
/// `Family` row (`family.rs`).
pub trait Protocol: Send + Sync {
    /// URL path appended to the target's base URL (`stream` = the target's `stream` setting).
    /// Owned when it depends on the request (an API with the model in its path).
    fn path(&self, stream: bool, req: &RequestSpec) -> Cow<'static, str>;
    /// JSON request body; streaming unless `target.stream` is false.
    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value;
    /// Reads one stream frame.
    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError>;
    /// Reads a whole non-streaming response body as one event (`done` set when it is complete).
    fn parse_whole(&self, body: &[u8]) -> Result<StreamEvent, ProtocolError>;
    /// `parse_whole`, keeping the answer's text and tool calls in `answer` as it reads them. Only
    /// the families that can carry text checks (`Family::checks`) keep anything.
    fn parse_whole_keeping(&self, body: &[u8], _answer: &mut super::answer::Collected) -> Result<StreamEvent, ProtocolError> {
        self.parse_whole(body)
    }
    /// Whether the end marker alone is not enough: OpenAI's `[DONE]` must follow a finish reason
    /// (llama-cpp-python sends a bare `[DONE]` when it cuts a stream short). The other APIs' end
    /// markers carry the completion themselves.
    fn end_needs_finish_reason(&self) -> bool {
        false
    }
    /// Reads server timings from response headers (TGI); most APIs send none. A header that is
    /// present but not a sane duration is a `parse` error.
    fn header_timing(&self, _headers: &reqwest::header::HeaderMap) -> Result<ServerTiming, ProtocolError> {
        Ok(ServerTiming::default())
    }
}

/// Longest server-reported duration taken as real; anything longer (or negative, or not a
/// number) is a malformed report and fails the probe as `parse`.
pub const MAX_SERVER_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Largest token count taken from a server's report (usage, API counters, per-frame steps);
/// larger values are capped so that sums and divisions stay exact and counters never wrap.
pub const MAX_REPORTED_TOKENS: u64 = 1 << 24;

/// Nanoseconds (Ollama) as a duration, checked against `MAX_SERVER_DURATION`.
pub(crate) fn from_ns(field: &str, ns: Option<u64>) -> Result<Option<Duration>, ProtocolError> {
    match ns {
        None => Ok(None),
        Some(n) => checked_server_duration(field, Duration::from_nanos(n), &format!("{n} ns")).map(Some),
    }
}

/// Milliseconds (llama.cpp, TGI headers) as a duration; negative, non-finite or absurd values
/// are a `parse` error naming the field.
pub(crate) fn from_ms(field: &str, ms: Option<f64>) -> Result<Option<Duration>, ProtocolError> {
    let Some(m) = ms else { return Ok(None) };
    let bad = || ProtocolError::Parse(format!("{field}: {m} ms is not a duration (negative, not finite or over {}h)", MAX_SERVER_DURATION.as_secs() / 3600));
    if !m.is_finite() || m < 0.0 {
        return Err(bad());
    }
    let d = Duration::try_from_secs_f64(m / 1000.0).map_err(|_| bad())?;
    checked_server_duration(field, d, &format!("{m} ms")).map(Some)
}

/// The sum of two server phases, `None` when either is missing; checked like a single value.
pub(crate) fn sum_durations(field: &str, a: Option<Duration>, b: Option<Duration>) -> Result<Option<Duration>, ProtocolError> {
    match (a, b) {
        (Some(a), Some(b)) => {
            let sum = a.checked_add(b).unwrap_or(Duration::MAX);
            checked_server_duration(field, sum, &format!("{:?} + {:?}", a, b)).map(Some)
        }
        _ => Ok(None),
    }
}

fn checked_server_duration(field: &str, d: Duration, shown: &str) -> Result<Duration, ProtocolError> {
    if d > MAX_SERVER_DURATION {
        return Err(ProtocolError::Parse(format!("{field}: {shown} is over {}h, not a real duration", MAX_SERVER_DURATION.as_secs() / 3600)));
    }
    Ok(d)
}
