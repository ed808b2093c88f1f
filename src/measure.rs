//! Outcome -> Sample: TTFT, TPOT, ITL, E2E, token counts and the SLO verdict (goodput).
//!
//! Definitions (README "How timing is defined"):
//! - TTFT = sent -> first frame carrying generated text (content or reasoning).
//! - TPOT = (E2E - TTFT) / (output_tokens - 1), tokens from server usage when present.
//! - ITL = gaps between consecutive text-bearing frames.
//! - Goodput: success AND every configured SLO threshold met.

use std::time::Duration;

use crate::config::Slo;
use crate::outcome::Outcome;

/// Where the output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// The server's usage report.
    Usage,
    /// No usage: one token per text-bearing frame (a lower bound).
    Events,
}

impl TokenSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Events => "events",
        }
    }
}

/// Which SLO thresholds a successful request missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SloMisses {
    pub ttft: bool,
    pub tpot: bool,
    pub e2e: bool,
}

impl SloMisses {
    pub fn any(&self) -> bool {
        self.ttft || self.tpot || self.e2e
    }
}

/// The numbers of one successful probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub ttft: Duration,
    /// `None` when fewer than two output tokens (TPOT undefined).
    pub tpot: Option<Duration>,
    pub itl: Vec<Duration>,
    pub e2e: Duration,
    pub input_tokens: Option<u64>,
    pub output_tokens: u64,
    pub token_source: TokenSource,
    pub slo_missed: SloMisses,
    /// Succeeded and met every configured threshold.
    pub goodput: bool,
}

/// Measures a probe. `None` unless it succeeded with at least one text frame.
pub fn measure(outcome: &Outcome, slo: &Slo) -> Option<Sample> {
    if !outcome.is_success() {
        return None;
    }
    let tl = &outcome.timeline;
    let first = tl.first_token()?;
    let ttft = first.saturating_duration_since(tl.sent);
    let e2e = tl.end.saturating_duration_since(tl.sent);
    let (output_tokens, token_source) = match outcome.usage {
        Some(u) if u.completion_tokens > 0 => (u.completion_tokens, TokenSource::Usage),
        _ => (tl.text_frames.len() as u64, TokenSource::Events),
    };
    let tpot = (output_tokens > 1).then(|| (e2e.saturating_sub(ttft)) / (output_tokens - 1) as u32);
    let itl = tl.text_frames.windows(2).map(|w| w[1].at.saturating_duration_since(w[0].at)).collect();
    let over = |value: Option<Duration>, limit: Option<Duration>| matches!((value, limit), (Some(v), Some(l)) if v > l);
    let slo_missed = SloMisses {
        ttft: over(Some(ttft), slo.ttft),
        tpot: over(tpot, slo.tpot),
        e2e: over(Some(e2e), slo.e2e),
    };
    Some(Sample {
        ttft,
        tpot,
        itl,
        e2e,
        input_tokens: outcome.usage.map(|u| u.prompt_tokens),
        output_tokens,
        token_source,
        slo_missed,
        goodput: !slo_missed.any(),
    })
}
