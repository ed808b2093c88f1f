//! The API families the prober speaks. Each is one row of the table in `family.rs` (name, chat or
//! not, framing, accept header, server phases, implied engine, discovery, tokenize body) and one
//! file with its `Protocol` impl (path, request body, the pure frame parsers). `api.rs` is the
//! seam they implement; `framing.rs` cuts bodies into frames; `coding.rs` decodes content codings.

mod answer;
mod api;
pub mod checks;
pub mod coding;
mod family;
pub mod framing;
mod llamacpp;
mod ollama;
mod openai;
mod openai_chat;
mod openai_completions;
mod openai_responses;
mod sglang;
mod tgi;

pub use crate::config::ProtocolKind;
pub use answer::{Collected, MAX_CALLS, MAX_TEXT, ToolCall};
pub use api::*;
pub use family::{Discovery, Family, ModelSource};
pub(crate) use openai::{error_summary, truncate_chars};
