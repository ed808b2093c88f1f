//! Outcome -> Sample: TTFT, TTFC, TPOT, ITL, E2E, token counts, frame shape and the SLO verdict.
//!
//! Definitions (docs/timing.md, "Definitions"):
//! - TTFT = sent -> first frame carrying generated text (content or reasoning).
//! - TTFC = sent -> first frame carrying answer content (equals TTFT when no reasoning came first).
//! - TPOT = (E2E - TTFT) / (output_tokens - 1).
//! - ITL = gaps between consecutive text-bearing frames (per frame, not per token).
//! - Output tokens: server usage, else the API's own counter, else one per text frame.
//! - Input tokens: server usage, else the API's own prompt counter (`input_tokens`).
//! - Reasoning tokens: usage's `reasoning_tokens` where reported, else one per frame that
//!   carried reasoning (a lower bound, as output tokens counted from frames); `None` when the
//!   probe neither reported nor streamed any reasoning.
//! - Cached prompt tokens: what the server reported served from its prefix cache (usage, else
//!   the API's counter); `None` when it does not say.
//! - Buffered stream: >= `BUFFERED_MIN_FRAMES` text frames whose first-to-last span is under 5 %
//!   of E2E and whose mean gap is under 1 ms: the text arrived in one burst, not as generated.
//! - Non-streaming probes (`stream: false`): E2E and tokens only; TTFT/TPOT/ITL are not observed.
//! - Goodput: success AND every configured SLO threshold met.

use std::time::Duration;

use crate::config::Slo;
use crate::probe::outcome::{Outcome, Timeline};

/// Where the output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    /// The server's OpenAI-style usage report.
    Usage,
    /// The API's own counter (Ollama `eval_count`, TGI `generated_tokens`, llama.cpp `predicted_n`).
    ApiCounter,
    /// Nothing reported: one token per text-bearing frame (a lower bound).
    Events,
}

impl TokenSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::ApiCounter => "api_counter",
            TokenSource::Events => "events",
        }
    }
}

/// Fewest text frames for the buffered-stream rule.
const BUFFERED_MIN_FRAMES: usize = 4;
/// Largest mean gap between text frames (first to last) for a burst.
const BUFFERED_MAX_MEAN_GAP: Duration = Duration::from_millis(1);
/// Largest share of E2E the text frames may span for a burst.
const BUFFERED_MAX_SPAN_RATIO: f64 = 0.05;

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
    /// Whether the probe streamed; when false only `e2e` and token counts mean anything
    /// (`ttft` then equals `e2e` and is not exported).
    pub streamed: bool,
    pub ttft: Duration,
    /// Time to first answer content; `None` when only reasoning came (or not streamed).
    pub ttfc: Option<Duration>,
    /// `None` when fewer than two output tokens (TPOT undefined) or not streamed.
    pub tpot: Option<Duration>,
    pub itl: Vec<Duration>,
    pub e2e: Duration,
    pub input_tokens: Option<u64>,
    pub output_tokens: u64,
    pub token_source: TokenSource,
    /// Of the output, tokens spent reasoning (see the module header).
    pub reasoning_tokens: Option<u64>,
    /// Of the prompt, tokens the server served from its prefix cache, where it says.
    pub cached_tokens: Option<u64>,
    /// Tokens per text frame: exact per frame where the API says, else the probe's mean
    /// (output tokens / text frames) for each frame; empty when tokens were counted from frames.
    pub tokens_per_frame: Vec<f64>,
    /// Text frames carrying more than one token (estimated when not reported per frame: the
    /// extra tokens spread one per frame, `min(frames, tokens - frames)`).
    pub multi_token_frames: u64,
    /// The text arrived in one burst at the end (fake streaming).
    pub buffered: bool,
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
    let streamed = outcome.streamed;
    let ttft = first.saturating_duration_since(tl.sent);
    let e2e = tl.end.saturating_duration_since(tl.sent);
    let (output_tokens, token_source) = output_tokens(outcome);
    let tpot = (streamed && output_tokens > 1).then(|| per(e2e.saturating_sub(ttft), output_tokens - 1));
    let itl = tl.text_frames.windows(2).map(|w| w[1].at.saturating_duration_since(w[0].at)).collect();
    let ttfc = tl.first_content().filter(|_| streamed).map(|t| t.saturating_duration_since(tl.sent));
    let (tokens_per_frame, multi_token_frames) = if streamed { frame_shape(tl, output_tokens, token_source) } else { (Vec::new(), 0) };
    let over = |value: Option<Duration>, limit: Option<Duration>| matches!((value, limit), (Some(v), Some(l)) if v > l);
    let slo_missed = SloMisses { ttft: streamed && over(Some(ttft), slo.ttft), tpot: over(tpot, slo.tpot), e2e: over(Some(e2e), slo.e2e) };
    Some(Sample {
        streamed,
        ttft,
        ttfc,
        tpot,
        itl,
        e2e,
        input_tokens: input_tokens(outcome),
        output_tokens,
        token_source,
        reasoning_tokens: reasoning_tokens(outcome),
        cached_tokens: outcome.usage.and_then(|u| u.cached_tokens).or(outcome.api_counter.and_then(|c| c.cached_tokens)),
        tokens_per_frame,
        multi_token_frames,
        buffered: streamed && is_buffered(tl, e2e),
        slo_missed,
        goodput: !slo_missed.any(),
    })
}

/// The prompt's tokens: server usage, else the API's own counter (Ollama `prompt_eval_count`,
/// TGI `input_length`, llama.cpp `prompt_n`, SGLang `prompt_tokens`); failed requests too.
pub fn input_tokens(outcome: &Outcome) -> Option<u64> {
    outcome.usage.or(outcome.api_counter).map(|u| u.prompt_tokens)
}

/// Usage's reasoning count, else one per reasoning frame (frames past the timed cap are not
/// told apart, so a stream that long counts its kept frames only).
fn reasoning_tokens(outcome: &Outcome) -> Option<u64> {
    if let Some(n) = outcome.usage.and_then(|u| u.reasoning_tokens) {
        return Some(n);
    }
    let frames = outcome.timeline.text_frames.iter().filter(|f| f.reasoning_bytes > 0).count() as u64;
    (frames > 0).then_some(frames)
}

/// Server usage, else the API's counter, else one token per text frame.
fn output_tokens(outcome: &Outcome) -> (u64, TokenSource) {
    match (outcome.usage, outcome.api_counter) {
        (Some(u), _) if u.completion_tokens > 0 => (u.completion_tokens, TokenSource::Usage),
        (_, Some(c)) if c.completion_tokens > 0 => (c.completion_tokens, TokenSource::ApiCounter),
        _ => (outcome.timeline.text_frame_count(), TokenSource::Events),
    }
}

/// Tokens per text frame and how many frames carried several.
fn frame_shape(tl: &Timeline, tokens: u64, source: TokenSource) -> (Vec<f64>, u64) {
    let frames = &tl.text_frames;
    if frames.iter().all(|f| f.tokens.is_some()) {
        let per: Vec<u64> = frames.iter().filter_map(|f| f.tokens).collect();
        let multi = per.iter().filter(|&&n| n > 1).count() as u64;
        return (per.into_iter().map(|n| n as f64).collect(), multi);
    }
    if source == TokenSource::Events {
        return (Vec::new(), 0);
    }
    let n = frames.len() as u64;
    let mean = tokens as f64 / n as f64;
    (vec![mean; frames.len()], n.min(tokens.saturating_sub(n)))
}

/// `total / n` for any `n >= 1` (a `u32` divisor would truncate huge counts to 0).
fn per(total: Duration, n: u64) -> Duration {
    let nanos = total.as_nanos() / u128::from(n.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The buffered-stream rule (see the module header).
fn is_buffered(tl: &Timeline, e2e: Duration) -> bool {
    let frames = &tl.text_frames;
    if frames.len() < BUFFERED_MIN_FRAMES {
        return false;
    }
    let span = frames[frames.len() - 1].at.saturating_duration_since(frames[0].at);
    let mean_gap = per(span, (frames.len() - 1) as u64);
    mean_gap < BUFFERED_MAX_MEAN_GAP && span.as_secs_f64() < BUFFERED_MAX_SPAN_RATIO * e2e.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::outcome::TextFrame;
    use std::time::Instant;

    fn timeline(offsets_ms: &[u64], reasoning_first: usize) -> Timeline {
        let t0 = Instant::now();
        let frames = offsets_ms
            .iter()
            .enumerate()
            .map(|(i, ms)| {
                let r = i < reasoning_first;
                TextFrame { at: t0 + Duration::from_millis(*ms), content_bytes: usize::from(!r), reasoning_bytes: usize::from(r), tokens: None }
            })
            .collect();
        let mut tl = Timeline::new(t0, t0);
        tl.text_frames = frames;
        tl.end = t0 + Duration::from_millis(offsets_ms.last().unwrap() + 1);
        tl
    }

    #[test]
    fn buffered_rule() {
        assert!(is_buffered(&timeline(&[1000, 1000, 1000, 1001], 0), Duration::from_millis(1002)));
        assert!(!is_buffered(&timeline(&[1000, 1000, 1001], 0), Duration::from_millis(1002)), "too few frames");
        assert!(!is_buffered(&timeline(&[100, 110, 120, 130], 0), Duration::from_millis(131)), "a real stream");
        // Fast decode after a long prefill: span is < 5 % of E2E but the gaps are ordinary.
        assert!(!is_buffered(&timeline(&[10_000, 10_003, 10_006, 10_009], 0), Duration::from_millis(10_010)));
        // A burst that fills most of a short request is not a buffered stream either.
        assert!(!is_buffered(&timeline(&[0, 0, 0, 1], 0), Duration::from_millis(2)));
    }

    #[test]
    fn frame_shape_from_per_frame_counts_or_mean() {
        let mut tl = timeline(&[1, 2, 3], 0);
        assert_eq!(frame_shape(&tl, 6, TokenSource::Usage), (vec![2.0, 2.0, 2.0], 3));
        assert_eq!(frame_shape(&tl, 4, TokenSource::Usage), (vec![4.0 / 3.0; 3], 1));
        assert_eq!(frame_shape(&tl, 3, TokenSource::Events), (vec![], 0));
        for (f, n) in tl.text_frames.iter_mut().zip([1, 3, 1]) {
            f.tokens = Some(n);
        }
        assert_eq!(frame_shape(&tl, 5, TokenSource::ApiCounter), (vec![1.0, 3.0, 1.0], 1));
    }

    #[test]
    fn ttfc_follows_reasoning() {
        let tl = timeline(&[10, 20, 30, 40], 2);
        assert_eq!(tl.first_token().unwrap() - tl.sent, Duration::from_millis(10));
        assert_eq!(tl.first_content().unwrap() - tl.sent, Duration::from_millis(30));
    }
}
