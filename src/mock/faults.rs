//! Fault kinds, their selection (per request header or by rate) and error bodies.

use std::time::Duration;

use axum::http::HeaderMap;
use tokio_util::sync::CancellationToken;

/// Every misbehaviour the mock can put on the wire. Names are the `x-mock-fault` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Refuse,
    CloseBeforeResponse,
    ResetMidStream,
    StallTtft,
    StallMidStream,
    SlowDrip,
    Http429,
    Http500,
    Http503,
    Http400,
    ErrorInStream,
    EmptyStream,
    NoDone,
    MalformedJson,
    InvalidUtf8,
    OversizedFrame,
    WrongContentType,
    Buffered,
    MultiTokenFrames,
    TruncateAfterOne,
    /// The stream body gzip-compressed (`content-encoding: gzip`), flushed after every frame.
    GzipStream,
    /// Structured output (`response_format`) cut short: truncated JSON.
    InvalidJson,
    /// A known-answer question answered wrongly.
    WrongAnswer,
    /// The `stop` sequence and the text after it are sent.
    IgnoreStop,
    /// EOS ignored: every answer runs to `max_tokens` (`finish_reason: length`).
    NoEos,
    /// The last chunk's `finish_reason` is `"error"` (as some routers end a failed generation).
    FinishError,
    /// A tool call whose arguments are cut short (not JSON).
    BadToolCall,
    /// Reasoning that never ends: every token is reasoning until `max_tokens` (chat and
    /// Responses), so no answer comes.
    EndlessReasoning,
    /// No prefix-cache reuse: every request's prompt is computed in full (a namespace of its
    /// own), so cached tokens are 0 and a repeated prefix is as slow as a fresh one.
    CacheDisabled,
}

pub const ALL: &[(Fault, &str)] = &[
    (Fault::Refuse, "refuse"),
    (Fault::CloseBeforeResponse, "close_before_response"),
    (Fault::ResetMidStream, "reset_mid_stream"),
    (Fault::StallTtft, "stall_ttft"),
    (Fault::StallMidStream, "stall_mid_stream"),
    (Fault::SlowDrip, "slow_drip"),
    (Fault::Http429, "http_429"),
    (Fault::Http500, "http_500"),
    (Fault::Http503, "http_503"),
    (Fault::Http400, "http_400"),
    (Fault::ErrorInStream, "error_in_stream"),
    (Fault::EmptyStream, "empty_stream"),
    (Fault::NoDone, "no_done"),
    (Fault::MalformedJson, "malformed_json"),
    (Fault::InvalidUtf8, "invalid_utf8"),
    (Fault::OversizedFrame, "oversized_frame"),
    (Fault::WrongContentType, "wrong_content_type"),
    (Fault::Buffered, "buffered"),
    (Fault::MultiTokenFrames, "multi_token_frames"),
    (Fault::TruncateAfterOne, "truncate_after_one"),
    (Fault::GzipStream, "gzip_stream"),
    (Fault::InvalidJson, "invalid_json"),
    (Fault::WrongAnswer, "wrong_answer"),
    (Fault::IgnoreStop, "ignore_stop"),
    (Fault::NoEos, "no_eos"),
    (Fault::FinishError, "finish_error"),
    (Fault::BadToolCall, "bad_tool_call"),
    (Fault::EndlessReasoning, "endless_reasoning"),
    (Fault::CacheDisabled, "cache_disabled"),
];

impl Fault {
    pub fn parse(s: &str) -> Option<Fault> {
        ALL.iter().find(|(_, n)| *n == s.trim()).map(|(f, _)| *f)
    }

    pub fn name(self) -> &'static str {
        ALL.iter().find(|(f, _)| *f == self).map(|(_, n)| *n).unwrap_or("?")
    }

    /// The HTTP status of faults answered before the engine is involved.
    pub fn status(self) -> Option<u16> {
        match self {
            Fault::Http429 => Some(429),
            Fault::Http500 => Some(500),
            Fault::Http503 => Some(503),
            Fault::Http400 => Some(400),
            _ => None,
        }
    }
}

/// Parses `kind=rate` (the `--fault` flag).
pub fn parse_rate(s: &str) -> Result<(Fault, f64), String> {
    let (k, r) = s.split_once('=').ok_or_else(|| format!("expected KIND=RATE, got {s:?}"))?;
    let f = Fault::parse(k).ok_or_else(|| format!("unknown fault kind {k:?}"))?;
    let r: f64 = r.parse().map_err(|_| format!("bad rate {r:?}"))?;
    if !(0.0..=1.0).contains(&r) {
        return Err(format!("rate {r} outside 0..=1"));
    }
    Ok((f, r))
}

/// Tunables of the faults, per request.
#[derive(Clone, Debug)]
pub struct FaultParams {
    /// How long `stall_*` faults hold (header `x-mock-stall-ms`).
    pub stall: Duration,
    /// Frames sent before a mid-stream fault fires (header `x-mock-fault-after`).
    pub after: u32,
    /// Pause between bytes for `slow_drip` (header `x-mock-drip-ms`).
    pub drip: Duration,
    /// Bytes of padding in the `oversized_frame` frame (header `x-mock-frame-bytes`).
    pub frame_bytes: usize,
    /// Tokens per frame for `multi_token_frames`.
    pub tokens_per_frame: u32,
    /// Cancelled when the server shuts down: a stall or drip in progress ends there, so a
    /// graceful shutdown never waits out a fault.
    pub stop: CancellationToken,
}

impl Default for FaultParams {
    fn default() -> Self {
        FaultParams {
            stall: Duration::from_secs(60),
            after: 3,
            drip: Duration::from_millis(2),
            frame_bytes: 1 << 20,
            tokens_per_frame: 4,
            stop: CancellationToken::new(),
        }
    }
}

impl FaultParams {
    /// Sleeps for `d`; `false` if the server began shutting down first.
    pub async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.stop.cancelled() => false,
        }
    }

    /// Defaults overridden by `x-mock-*` request headers.
    pub fn from_headers(base: &FaultParams, h: &HeaderMap) -> FaultParams {
        let num = |name: &str| -> Option<u64> { h.get(name)?.to_str().ok()?.trim().parse().ok() };
        let mut p = base.clone();
        if let Some(v) = num("x-mock-stall-ms") {
            p.stall = Duration::from_millis(v);
        }
        if let Some(v) = num("x-mock-fault-after") {
            p.after = v as u32;
        }
        if let Some(v) = num("x-mock-drip-ms") {
            p.drip = Duration::from_millis(v);
        }
        if let Some(v) = num("x-mock-frame-bytes") {
            p.frame_bytes = v as usize;
        }
        if let Some(v) = num("x-mock-tokens-per-frame") {
            p.tokens_per_frame = (v as u32).max(2);
        }
        p
    }
}

/// The fault for one request: the `x-mock-fault` header wins, else a draw against the rates.
pub fn choose(h: &HeaderMap, rates: &[(Fault, f64)], draw: f64) -> Option<Fault> {
    if let Some(v) = h.get("x-mock-fault").and_then(|v| v.to_str().ok()) {
        return Fault::parse(v);
    }
    let mut acc = 0.0;
    for (f, r) in rates {
        acc += r;
        if draw < acc {
            return Some(*f);
        }
    }
    None
}

/// Makes the last JSON object of a frame unparseable (drops its closing brace).
pub fn corrupt_json(frame: &[u8]) -> Vec<u8> {
    let mut v = frame.to_vec();
    if let Some(i) = v.iter().rposition(|b| *b == b'}') {
        v.remove(i);
    }
    v
}

/// Marker a front-end writes verbatim into text; replaced by invalid UTF-8 bytes.
pub const BAD_UTF8_MARK: &str = "@@MOCK_BAD_UTF8@@";

/// Replaces the marker with a byte sequence that is not UTF-8 (0xE2 0x28 0xA1).
pub fn inject_bad_utf8(frame: &[u8]) -> Vec<u8> {
    let mark = BAD_UTF8_MARK.as_bytes();
    match frame.windows(mark.len()).position(|w| w == mark) {
        Some(i) => [&frame[..i], &[0xE2, 0x28, 0xA1][..], &frame[i + mark.len()..]].concat(),
        None => frame.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (f, n) in ALL {
            assert_eq!(Fault::parse(n), Some(*f));
            assert_eq!(f.name(), *n);
        }
        assert_eq!(parse_rate("stall_ttft=0.25"), Ok((Fault::StallTtft, 0.25)));
        assert!(parse_rate("nope=0.1").is_err());
    }

    #[test]
    fn bad_utf8_is_invalid() {
        let v = inject_bad_utf8(format!("{{\"t\":\"a{BAD_UTF8_MARK}\"}}").as_bytes());
        assert!(std::str::from_utf8(&v).is_err());
    }
}
