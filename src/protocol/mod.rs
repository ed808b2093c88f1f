//! The `Protocol` seam: how a request is built for an API and how each stream frame is read.
//!
//! `parse` is pure: it sees one complete frame (an SSE `data` payload or an NDJSON line) and the
//! per-request `StreamState`, and says what the frame carried. The executor owns clocks and I/O.

pub mod framing;
mod openai;
mod openai_chat;
mod openai_completions;

use serde::Deserialize;

pub(crate) use openai::{error_summary, truncate_chars};

use crate::config::Target;

/// The API family a target speaks. Chosen in config (`api:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProtocolKind {
    /// `POST /v1/completions` with a `prompt`.
    OpenaiCompletions,
    /// `POST /v1/chat/completions` with `messages`.
    OpenaiChat,
}

impl ProtocolKind {
    pub const ALL: [ProtocolKind; 2] = [ProtocolKind::OpenaiCompletions, ProtocolKind::OpenaiChat];

    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolKind::OpenaiCompletions => "openai-completions",
            ProtocolKind::OpenaiChat => "openai-chat",
        }
    }

    /// The protocol implementation for this kind.
    pub fn protocol(self) -> &'static dyn Protocol {
        match self {
            ProtocolKind::OpenaiCompletions => &openai_completions::OpenAiCompletions,
            ProtocolKind::OpenaiChat => &openai_chat::OpenAiChat,
        }
    }
}

/// How the response body is cut into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Sse,
    Ndjson,
}

/// What one probe asks for.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub model: String,
    pub prompt: String,
    pub max_tokens: u32,
    pub ignore_eos: bool,
}

/// Token counts reported by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
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
    /// The protocol's end-of-stream marker (e.g. `data: [DONE]`).
    pub done: bool,
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

pub trait Protocol: Send + Sync {
    fn kind(&self) -> ProtocolKind;
    fn framing(&self) -> Framing;
    /// URL path appended to the target's base URL.
    fn path(&self) -> &'static str;
    /// JSON request body for a streaming request.
    fn body(&self, target: &Target, req: &RequestSpec) -> serde_json::Value;
    fn parse(&self, frame: &[u8], state: &mut StreamState) -> Result<StreamEvent, ProtocolError>;
}
