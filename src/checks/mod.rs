//! Behaviour checks: what a probe's answer must be, beyond arriving in time (`checks:` in the
//! config). A release can keep every latency SLO and still break the service (a chat template
//! that loses EOS, a tool-call parser that no longer parses, structured output that no longer
//! constrains); these checks make that an error that costs goodput.
//!
//! `protocol::checks` adds what the checks need to the request (pinned temperature, `stop`,
//! `response_format`, tools); `probe::outcome` holds what they found on a probe; the family's
//! parser keeps the answer's text and tool calls while it streams (`protocol::Collected`,
//! bounded, filled as each frame is decoded); `judge.rs` judges the finished answer with pure functions; `fingerprint.rs`
//! tells when a temperature-0 answer to the same prompt changed. The executor runs them where it
//! classifies every probe, so the prober, `--once` and `bench` judge alike.

pub mod fingerprint;
mod judge;
#[cfg(test)]
mod tests;

pub use crate::probe::outcome::{Check, CheckFailure, CheckReport, configured};
pub use crate::protocol::{Collected, MAX_TEXT};
pub use judge::{Answer, UNDECLARED, agent_step, evaluate, excerpt};
