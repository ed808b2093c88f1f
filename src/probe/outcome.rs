//! What one scheduled probe produced: its timeline, what the server said, and how it ended.
//! `exec` fills it, `measure` turns it into numbers, sinks record both.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::probe::trace::TraceIds;
use crate::protocol::{ServerTiming, Usage};

/// Why a probe did not succeed. The closed set of `error` label values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorClass {
    Connect,
    Tls,
    TimeoutConnect,
    TimeoutTtft,
    TimeoutIdle,
    TimeoutTotal,
    /// A redirect, not followed (`follow_redirects: false`, the default).
    Http3xx,
    Http429,
    Http4xx,
    Http5xx,
    /// An error object inside a 2xx stream.
    StreamError,
    /// The stream ended without any generated text.
    EmptyStream,
    /// The stream ended without the protocol's end marker (or the body broke off).
    Truncated,
    Parse,
    /// A complete answer that fails a behaviour check on its form (`checks:` schema, tool call,
    /// stop sequence, output cap, end by EOS, finish reason).
    InvalidOutput,
    /// A complete answer that fails a known-answer check.
    WrongAnswer,
    /// Shutdown came before the probe finished.
    Cancelled,
    /// Not sent: the target's in-flight cap was reached (`outcome="dropped"`).
    InFlightCap,
    /// The prober caught a bug of its own while running this probe (counted, never silent).
    Internal,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 19] = [
        ErrorClass::Connect,
        ErrorClass::Tls,
        ErrorClass::TimeoutConnect,
        ErrorClass::TimeoutTtft,
        ErrorClass::TimeoutIdle,
        ErrorClass::TimeoutTotal,
        ErrorClass::Http3xx,
        ErrorClass::Http429,
        ErrorClass::Http4xx,
        ErrorClass::Http5xx,
        ErrorClass::StreamError,
        ErrorClass::EmptyStream,
        ErrorClass::Truncated,
        ErrorClass::Parse,
        ErrorClass::InvalidOutput,
        ErrorClass::WrongAnswer,
        ErrorClass::Cancelled,
        ErrorClass::InFlightCap,
        ErrorClass::Internal,
    ];

    /// The `error` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Tls => "tls",
            ErrorClass::TimeoutConnect => "timeout_connect",
            ErrorClass::TimeoutTtft => "timeout_ttft",
            ErrorClass::TimeoutIdle => "timeout_idle",
            ErrorClass::TimeoutTotal => "timeout_total",
            ErrorClass::Http3xx => "http_3xx",
            ErrorClass::Http429 => "http_429",
            ErrorClass::Http4xx => "http_4xx",
            ErrorClass::Http5xx => "http_5xx",
            ErrorClass::StreamError => "stream_error",
            ErrorClass::EmptyStream => "empty_stream",
            ErrorClass::Truncated => "truncated",
            ErrorClass::Parse => "parse",
            ErrorClass::InvalidOutput => "invalid_output",
            ErrorClass::WrongAnswer => "wrong_answer",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::InFlightCap => "in_flight_cap",
            ErrorClass::Internal => "internal",
        }
    }

    /// The `outcome` label value for a probe that ended with this class.
    pub fn outcome_label(self) -> &'static str {
        match self {
            ErrorClass::InFlightCap => "dropped",
            _ => "error",
        }
    }

    /// The class for an HTTP status that is not a success.
    pub fn from_status(status: u16) -> ErrorClass {
        match status {
            300..=399 => ErrorClass::Http3xx,
            429 => ErrorClass::Http429,
            500..=599 => ErrorClass::Http5xx,
            // Not a status HTTP defines (parsers take any three digits, e.g. 999): an invalid
            // answer, not a server error.
            600.. => ErrorClass::Parse,
            _ => ErrorClass::Http4xx,
        }
    }
}

/// A classified failure. `detail` is for logs and traces only (bounded, secrets redacted),
/// never a metric label.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub class: ErrorClass,
    pub detail: String,
}

impl Failure {
    pub fn new(class: ErrorClass, detail: impl Into<String>) -> Self {
        Failure { class, detail: detail.into() }
    }
}

/// One frame that carried generated text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextFrame {
    pub at: Instant,
    pub content_bytes: usize,
    pub reasoning_bytes: usize,
    /// Tokens in this frame when the API says so per frame (llama.cpp `tokens`, TGI events,
    /// vLLM `continuous_usage_stats`); `None` when unknown.
    pub tokens: Option<u64>,
}

/// When things happened, on one monotonic clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// When the schedule said this probe should go.
    pub intended: Instant,
    /// When the request was handed to the HTTP client.
    pub sent: Instant,
    /// Response headers received.
    pub first_byte: Option<Instant>,
    /// Text-bearing frames in arrival order (the first one is the first token), at most
    /// `MAX_TEXT_FRAMES`; later ones are only counted in `text_frames_beyond_cap`.
    pub text_frames: Vec<TextFrame>,
    /// Text frames after the first `MAX_TEXT_FRAMES`: counted (tokens, E2E) but not timed (ITL).
    pub text_frames_beyond_cap: u64,
    /// End of the stream, or the moment the failure was detected.
    pub end: Instant,
    /// The server's own emission stamp of the first text frame, nanoseconds since the request
    /// arrived there (the mock's `mock_emitted_ns`); `None` unless the server stamps frames.
    pub first_emitted_ns: Option<u64>,
    /// Whether the first text frame's time is its arrival on the host (the kernel's receive
    /// stamp, `receive_stamp`) rather than when the prober read it.
    pub first_token_stamped: bool,
}

/// Text frames whose timestamps a probe keeps (~3 MiB at most): a stream of millions of tiny
/// frames cannot take the prober's memory, and 65,536 frames cover any real answer's ITL.
const MAX_TEXT_FRAMES: usize = 65_536;

impl Timeline {
    /// A timeline with no frames yet, everything at `sent`.
    pub fn new(intended: Instant, sent: Instant) -> Self {
        Timeline {
            intended,
            sent,
            first_byte: None,
            text_frames: Vec::new(),
            text_frames_beyond_cap: 0,
            end: sent,
            first_emitted_ns: None,
            first_token_stamped: false,
        }
    }

    /// Keeps a text frame, or only counts it once `MAX_TEXT_FRAMES` are kept.
    pub fn push_text_frame(&mut self, frame: TextFrame) {
        if self.text_frames.len() < MAX_TEXT_FRAMES {
            self.text_frames.push(frame);
        } else {
            self.text_frames_beyond_cap = self.text_frames_beyond_cap.saturating_add(1);
        }
    }

    /// Every text frame seen, kept or only counted.
    pub fn text_frame_count(&self) -> u64 {
        (self.text_frames.len() as u64).saturating_add(self.text_frames_beyond_cap)
    }

    pub fn first_token(&self) -> Option<Instant> {
        self.text_frames.first().map(|f| f.at)
    }

    /// First frame with answer content (later than `first_token` when reasoning came first).
    pub fn first_content(&self) -> Option<Instant> {
        self.text_frames.iter().find(|f| f.content_bytes > 0).map(|f| f.at)
    }

    pub fn schedule_lag(&self) -> Duration {
        self.sent.saturating_duration_since(self.intended)
    }
}

/// The full record of one scheduled probe.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub target: Arc<str>,
    pub scenario: Arc<str>,
    /// The replica probed, when the target's replicas are discovered (pod name or `ip:port`).
    pub replica: Option<Arc<str>>,
    /// Sequence number within (target, scenario), from 0.
    pub seq: u64,
    /// UUID sent as `x-request-id`.
    pub request_id: String,
    /// Readable id `{run}-{target}-{scenario}-{n}` (records, spans, `/debug/probes`).
    pub probe_id: String,
    /// Index of a replayed dataset prompt.
    pub dataset_index: Option<u64>,
    /// SHA-256 (hex) of the prompt as sent.
    pub prompt_sha256: String,
    pub model: Arc<str>,
    /// Requested prompt tokens; 0 for a replayed prompt.
    pub requested_input_tokens: u32,
    /// The request's length limit (`max_tokens`): the output length plus any reasoning budget.
    pub requested_output_tokens: u32,
    pub timeline: Timeline,
    pub http_status: Option<u16>,
    /// Server-reported usage (the last one seen in the stream).
    pub usage: Option<Usage>,
    /// The API's own token counters when it has no OpenAI usage (Ollama `eval_count`, TGI
    /// `details.generated_tokens`, llama.cpp `timings.predicted_n`).
    pub api_counter: Option<Usage>,
    /// Server-reported time per phase (body fields or response headers), where the API gives it.
    pub server_timing: ServerTiming,
    /// Whether the request streamed. A non-streaming probe has one "frame" (the whole body) at
    /// its end: only E2E is meaningful.
    pub streamed: bool,
    /// The content coding a 2xx response body came in (`None`: no 2xx headers, or a coding the
    /// prober cannot decode, which fails the probe as `parse`).
    pub content_encoding: Option<crate::protocol::coding::ContentCoding>,
    pub finish_reason: Option<String>,
    pub response_model: Option<String>,
    /// `Ok` = success; otherwise the classified failure.
    pub result: Result<(), Failure>,
    /// Trace context sent as `traceparent` (only while tracing is on).
    pub trace: Option<TraceIds>,
    /// What the behaviour checks found (`checks:`); `None` when none ran (none configured, or
    /// the probe failed before its answer was complete).
    pub checks: Option<Box<CheckReport>>,
    /// Its place in a conversation or cache pair; `None` for a probe on its own.
    pub step: Option<crate::probe::step::StepOf>,
}

impl Outcome {
    pub fn is_success(&self) -> bool {
        self.result.is_ok()
    }

    pub fn error_class(&self) -> Option<ErrorClass> {
        self.result.as_ref().err().map(|f| f.class)
    }
}

// What the behaviour checks (`checks:`, judged in `crate::checks`) found on one probe.

/// One check: the `check` label of `llmprobe_check_failures_total`. The order is the precedence
/// of a probe's error class when several fail (the first failed one names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    FinishReason,
    OutputCap,
    NaturalStop,
    Stop,
    StructuredOutput,
    ToolCall,
    /// The length limit was spent on reasoning: no answer.
    ReasoningExhausted,
    KnownAnswer,
    /// An agent loop's step: it must end with an answer within the loop's steps, after the
    /// expected calls.
    AgentLoop,
}

impl Check {
    pub const ALL: [Check; 9] = [
        Check::FinishReason,
        Check::OutputCap,
        Check::NaturalStop,
        Check::Stop,
        Check::StructuredOutput,
        Check::ToolCall,
        Check::ReasoningExhausted,
        Check::KnownAnswer,
        Check::AgentLoop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Check::FinishReason => "finish_reason",
            Check::OutputCap => "output_cap",
            Check::NaturalStop => "natural_stop",
            Check::Stop => "stop",
            Check::StructuredOutput => "structured_output",
            Check::ToolCall => "tool_call",
            Check::ReasoningExhausted => "reasoning_exhausted",
            Check::KnownAnswer => "known_answer",
            Check::AgentLoop => "agent_loop",
        }
    }

    /// The error class a failure of this check gives the probe.
    pub fn class(self) -> ErrorClass {
        match self {
            Check::KnownAnswer => ErrorClass::WrongAnswer,
            _ => ErrorClass::InvalidOutput,
        }
    }
}

/// The checks a section configures (a known answer is checked where a prompt has one).
pub fn configured(checks: &crate::config::Checks) -> Vec<Check> {
    Check::ALL
        .into_iter()
        .filter(|c| match c {
            Check::FinishReason => checks.finish_reasons.is_some(),
            Check::OutputCap => checks.output_cap,
            Check::NaturalStop => checks.natural_stop.is_some(),
            Check::Stop => !checks.stop.is_empty(),
            Check::StructuredOutput => checks.structured_output.is_some(),
            Check::ToolCall => checks.tool_call.is_some(),
            Check::ReasoningExhausted => checks.reasoning_exhausted,
            Check::KnownAnswer => !checks.known_answers.is_empty() || checks.dataset_answers,
            // An agent scenario's checks come with its `agent:`, not `checks:`.
            Check::AgentLoop => false,
        })
        .collect()
}

/// A failed check and why (bounded, control characters escaped; secrets are redacted by the
/// executor like every failure detail).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckFailure {
    pub check: Check,
    pub detail: String,
}

/// What the checks found on one probe (`Outcome::checks`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckReport {
    /// Failed checks in `Check` order; empty when all passed.
    pub failed: Vec<CheckFailure>,
    /// Checks that ran (for span attributes and `--once`).
    pub ran: Vec<Check>,
    /// Hash of the normalised answer (`checks.fingerprint`).
    pub fingerprint: Option<String>,
    /// The previous fingerprint for this prompt when it differs: a behaviour change.
    pub changed_from: Option<String>,
    /// An agent step's tool calls, by name in order (declared names only; others as
    /// `undeclared`).
    pub calls: Vec<String>,
}

impl CheckReport {
    /// Records that `check` ran, and its failure when `verdict` says why it failed.
    pub fn add(&mut self, check: Check, verdict: Option<String>) {
        self.ran.push(check);
        if let Some(detail) = verdict {
            self.failed.push(CheckFailure { check, detail });
        }
    }

    /// The probe's failure: the first failed check's class, every failure in the detail.
    pub fn failure(&self) -> Option<Failure> {
        let first = self.failed.first()?;
        let detail = self.failed.iter().map(|f| format!("{}: {}", f.check.as_str(), f.detail)).collect::<Vec<_>>().join("; ");
        Some(Failure::new(first.check.class(), detail))
    }
}
