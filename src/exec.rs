//! Runs one probe: build the request, send it, read frames, and produce an `Outcome` with a
//! timeline and a classified result. Every clock reading is an `Instant` taken as soon as the
//! HTTP client hands over headers or a body chunk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use tokio_util::sync::CancellationToken;

use crate::outcome::{ErrorClass, Failure, Outcome, TextFrame, Timeline};
use crate::protocol::framing::FrameDecoder;
use crate::protocol::{Framing, ProtocolError, RequestSpec, StreamEvent, StreamState};
use crate::target::{classify_send_error, error_chain, TargetRuntime};
use crate::workload::Draw;

/// A whole response may not exceed this (a runaway stream must not eat memory).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// One frame may not exceed this.
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// Bytes of an HTTP error body kept for the log line.
const ERROR_BODY_BYTES: usize = 2048;

/// One scheduled probe, ready to run.
pub struct Probe {
    pub target: Arc<TargetRuntime>,
    pub scenario: Arc<str>,
    pub seq: u64,
    pub draw: Draw,
    pub intended: Instant,
}

/// Runs a probe to its end. `abort` (shutdown past the grace period) ends it as `cancelled`.
pub async fn execute(probe: Probe, abort: &CancellationToken) -> Outcome {
    let mut outcome = blank_outcome(&probe);
    let result = tokio::select! {
        r = run(&probe, &mut outcome) => r,
        _ = abort.cancelled() => Err(Failure::new(ErrorClass::Cancelled, "shut down before the probe finished")),
    };
    if result.is_err() {
        // Success stamped its own end (the end marker); a failure ends when it was detected.
        outcome.timeline.end = Instant::now();
    }
    outcome.result = result.map_err(|f| Failure { detail: probe.target.redact(&f.detail), ..f });
    outcome
}

/// An outcome for a probe that was never sent (in-flight cap).
pub fn dropped(probe: &Probe) -> Outcome {
    let mut outcome = blank_outcome(probe);
    outcome.result = Err(Failure::new(ErrorClass::InFlightCap, "in-flight cap reached"));
    outcome
}

fn blank_outcome(probe: &Probe) -> Outcome {
    let now = Instant::now();
    Outcome {
        target: probe.target.name.clone(),
        scenario: probe.scenario.clone(),
        seq: probe.seq,
        request_id: uuid::Uuid::new_v4().to_string(),
        model: Arc::from(probe.target.config.model.as_deref().unwrap_or("")),
        requested_input_tokens: probe.draw.input_tokens,
        requested_output_tokens: probe.draw.output_tokens,
        timeline: Timeline { intended: probe.intended, sent: now, first_byte: None, text_frames: Vec::new(), end: now },
        http_status: None,
        usage: None,
        finish_reason: None,
        response_model: None,
        result: Ok(()),
        trace: crate::trace::TraceIds::new_if_enabled(),
    }
}

async fn run(probe: &Probe, out: &mut Outcome) -> Result<(), Failure> {
    let target = &probe.target;
    out.model = target.model().await?;
    let protocol = target.config.api.protocol();
    let spec = RequestSpec {
        model: out.model.to_string(),
        prompt: probe.draw.prompt.clone(),
        max_tokens: probe.draw.output_tokens,
        ignore_eos: true,
    };
    let body = serde_json::to_vec(&protocol.body(&target.config, &spec)).expect("JSON body");
    let request = target
        .request(Method::POST, protocol.path())
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .header("x-request-id", &out.request_id)
        .body(body);
    let request = match out.trace {
        Some(ids) => request.header("traceparent", ids.traceparent()),
        None => request,
    };

    let timeouts = target.config.timeouts;
    out.timeline.sent = Instant::now();
    let sent = out.timeline.sent;
    let total_deadline = sent + timeouts.total;
    let (header_deadline, header_class) = earliest(sent + timeouts.ttft, ErrorClass::TimeoutTtft, total_deadline);

    let mut response = match tokio::time::timeout_at(header_deadline.into(), request.send()).await {
        Err(_) => return Err(Failure::new(header_class, "no response headers before the deadline")),
        Ok(Err(e)) => return Err(classify_send_error(&e, target)),
        Ok(Ok(r)) => r,
    };
    out.timeline.first_byte = Some(Instant::now());
    let status = response.status();
    out.http_status = Some(status.as_u16());
    if !status.is_success() {
        let text = read_error_body(&mut response, total_deadline).await;
        return Err(Failure::new(ErrorClass::from_status(status.as_u16()), format!("HTTP {status}: {text}")));
    }
    check_content_type(&response, protocol.framing())?;

    let mut reader = StreamReader::new(protocol.framing());
    loop {
        let (deadline, class) = match out.timeline.first_token() {
            None => earliest(sent + timeouts.ttft, ErrorClass::TimeoutTtft, total_deadline),
            Some(_) => earliest(reader.last_chunk + timeouts.idle, ErrorClass::TimeoutIdle, total_deadline),
        };
        let chunk = match tokio::time::timeout_at(deadline.into(), response.chunk()).await {
            Err(_) => return Err(Failure::new(class, timeout_detail(class, out))),
            Ok(Err(e)) => return Err(Failure::new(ErrorClass::Truncated, format!("body broke off: {}", error_chain(&e)))),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => chunk,
        };
        let now = Instant::now();
        reader.last_chunk = now;
        let frames = reader.feed(&chunk)?;
        if apply_frames(frames, now, &mut reader.state, protocol, out)? {
            out.timeline.end = now;
            return finish(true, out);
        }
    }
    let now = Instant::now();
    out.timeline.end = now;
    let frames = reader.finish();
    let done = apply_frames(frames, now, &mut reader.state, protocol, out)?;
    finish(done, out)
}

/// Whether a stream that ended this way is a success.
fn finish(done: bool, out: &Outcome) -> Result<(), Failure> {
    if out.timeline.text_frames.is_empty() {
        return Err(Failure::new(ErrorClass::EmptyStream, "stream ended without generated text"));
    }
    if !done {
        return Err(Failure::new(ErrorClass::Truncated, "stream ended without its end marker"));
    }
    if out.finish_reason.is_none() {
        // e.g. a server that cut this stream to serve another: `[DONE]` with no finish reason.
        return Err(Failure::new(ErrorClass::Truncated, "end marker without a finish reason"));
    }
    Ok(())
}

/// Applies parsed frames to the outcome; returns whether the end marker was seen.
fn apply_frames(
    frames: Vec<Vec<u8>>,
    at: Instant,
    state: &mut StreamState,
    protocol: &dyn crate::protocol::Protocol,
    out: &mut Outcome,
) -> Result<bool, Failure> {
    for frame in frames {
        let event = protocol.parse(&frame, state).map_err(|e| match e {
            ProtocolError::Stream(msg) => Failure::new(ErrorClass::StreamError, msg),
            ProtocolError::Parse(msg) => Failure::new(ErrorClass::Parse, msg),
        })?;
        if apply_event(event, at, out) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn apply_event(ev: StreamEvent, at: Instant, out: &mut Outcome) -> bool {
    if ev.has_text() {
        out.timeline.text_frames.push(TextFrame { at, content_bytes: ev.content_bytes, reasoning_bytes: ev.reasoning_bytes });
    }
    if ev.usage.is_some() {
        out.usage = ev.usage;
    }
    if ev.finish_reason.is_some() {
        out.finish_reason = ev.finish_reason;
    }
    if ev.model.is_some() && out.response_model.is_none() {
        out.response_model = ev.model;
    }
    ev.done
}

/// Cuts the body into frames and enforces the size caps.
struct StreamReader {
    decoder: FrameDecoder,
    state: StreamState,
    total_bytes: usize,
    last_chunk: Instant,
}

impl StreamReader {
    fn new(framing: Framing) -> Self {
        StreamReader { decoder: FrameDecoder::new(framing), state: StreamState::default(), total_bytes: 0, last_chunk: Instant::now() }
    }

    fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Vec<u8>>, Failure> {
        self.total_bytes += chunk.len();
        if self.total_bytes > MAX_RESPONSE_BYTES {
            return Err(Failure::new(ErrorClass::Parse, format!("response exceeded {MAX_RESPONSE_BYTES} bytes")));
        }
        let mut frames = Vec::new();
        self.decoder.feed(chunk, &mut frames);
        let largest = frames.iter().map(Vec::len).max().unwrap_or(0).max(self.decoder.pending_bytes());
        if largest > MAX_FRAME_BYTES {
            return Err(Failure::new(ErrorClass::Parse, format!("frame exceeded {MAX_FRAME_BYTES} bytes")));
        }
        Ok(frames)
    }

    fn finish(&mut self) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        self.decoder.finish(&mut frames);
        frames
    }
}

/// The earlier of a phase deadline and the total deadline, with the class to report.
fn earliest(phase: Instant, phase_class: ErrorClass, total: Instant) -> (Instant, ErrorClass) {
    if phase < total { (phase, phase_class) } else { (total, ErrorClass::TimeoutTotal) }
}

fn timeout_detail(class: ErrorClass, out: &Outcome) -> String {
    format!("{} after {} text frames", class.as_str(), out.timeline.text_frames.len())
}

fn check_content_type(response: &reqwest::Response, framing: Framing) -> Result<(), Failure> {
    let Some(value) = response.headers().get(reqwest::header::CONTENT_TYPE) else { return Ok(()) };
    let value = value.to_str().unwrap_or("").to_ascii_lowercase();
    let ok = match framing {
        Framing::Sse => value.starts_with("text/event-stream"),
        Framing::Ndjson => value.contains("ndjson") || value.starts_with("application/json"),
    };
    if ok { Ok(()) } else { Err(Failure::new(ErrorClass::Parse, format!("unexpected content-type {value:?} for a stream"))) }
}

/// Reads at most `ERROR_BODY_BYTES` of an error body (bounded in time too) as one log line.
async fn read_error_body(response: &mut reqwest::Response, total_deadline: Instant) -> String {
    let deadline = total_deadline.min(Instant::now() + Duration::from_secs(2));
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match tokio::time::timeout_at(deadline.into(), response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_BYTES);
    let text = String::from_utf8_lossy(&body);
    let summary = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("error").map(crate::protocol::error_summary))
        .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" "));
    crate::protocol::truncate_chars(&summary, 300)
}
