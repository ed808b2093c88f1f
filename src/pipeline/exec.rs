//! Runs one probe: build the request, send it, read frames, and produce an `Outcome` with a
//! timeline and a classified result. Every clock reading is an `Instant` taken as soon as the
//! HTTP client hands over headers or a body chunk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use reqwest::header::{HeaderMap, HeaderValue};
use std::panic::AssertUnwindSafe;
use tokio_util::sync::CancellationToken;

use crate::checks::CheckReport;
use crate::client::{PreparedRequest, ProbeResponse, TargetRuntime};
use crate::probe::deadline::after;
use crate::probe::handover::{Opened, Written};
use crate::probe::outcome::{ErrorClass, Failure, Outcome, TextFrame, Timeline};
use crate::protocol::coding::{ContentCoding, ContentDecoder};
use crate::protocol::framing::FrameDecoder;
use crate::protocol::{Collected, Framing, MAX_REPORTED_TOKENS, Protocol, ProtocolError, RequestSpec, ServerTiming, StreamEvent, StreamState, Usage};
use crate::workload::Draw;

/// One frame may not exceed this.
const MAX_FRAME_BYTES: usize = 1 << 20;
/// Bytes of an HTTP error body kept for the log line.
const ERROR_BODY_BYTES: usize = 2048;

/// One scheduled probe, ready to run.
pub struct Probe {
    pub target: Arc<TargetRuntime>,
    pub scenario: Arc<str>,
    pub seq: u64,
    pub draw: Draw,
    pub intended: Instant,
    /// Sampling ratio when the run traces its probes (`RunContext::trace_ratio`).
    pub trace_ratio: Option<f64>,
}

/// When a probe's request goes out.
pub enum SendAt {
    /// As soon as it is built (closed loop: due once drawn).
    Now,
    /// At its intended time, on the runtime's timer (up to about a millisecond late; lag is
    /// measured either way).
    Timer,
    /// When the scheduler's dispatcher opens this gate at the intended time, from its own
    /// precisely sleeping thread; it writes the request itself where it can (`handover`).
    Gate(crate::probe::handover::Gate),
}

/// Runs a probe to its end, sent at its intended time on the runtime's timer (`SendAt::Timer`).
/// `abort` (shutdown past the grace period) ends it as `cancelled`.
pub async fn execute(probe: Probe, abort: &CancellationToken) -> Outcome {
    execute_when(probe, abort, SendAt::Timer).await
}

/// Runs a probe to its end, its request sent as `send_at` says: the request is built first, so
/// building it never counts as lag.
pub async fn execute_when(probe: Probe, abort: &CancellationToken, send_at: SendAt) -> Outcome {
    execute_keeping(probe, abort, send_at).await.0
}

/// As `execute_when`, and the answer's text and tool calls where the probe kept them (a check
/// reads them, or `Draw::keep_answer`: a conversation sends them back in its next turn).
pub async fn execute_keeping(probe: Probe, abort: &CancellationToken, send_at: SendAt) -> (Outcome, Option<Collected>) {
    let mut outcome = blank_outcome(&probe);
    // The answer's text, kept only when a check or the next turn reads it.
    let keep = probe.draw.keep_answer || probe.draw.agent.is_some() || probe.draw.checks.as_ref().is_some_and(|c| c.needs_text());
    let mut collected = keep.then(Collected::new);
    // A bug in a parser or here must cost one probe (`internal`), never the prober.
    let guarded = AssertUnwindSafe(run(&probe, &mut outcome, send_at, &mut collected)).catch_unwind();
    let mut result = tokio::select! {
        r = guarded => r.unwrap_or_else(|panic| Err(Failure::new(ErrorClass::Internal, format!("internal error: {}", crate::util::health::panic_message(panic.as_ref()))))),
        _ = abort.cancelled() => Err(Failure::new(ErrorClass::Cancelled, "shut down before the probe finished")),
    };
    // A complete answer is judged by the behaviour checks: a failed check is the probe's error.
    if result.is_ok() && (probe.draw.checks.is_some() || probe.draw.agent.is_some()) {
        let report = judge(&probe, collected.as_ref(), &outcome);
        if let Some(failure) = report.failure() {
            result = Err(failure);
        }
        outcome.checks = Some(Box::new(report));
    }
    if result.is_err() && outcome.checks.is_none() {
        // Success stamped its own end (the end marker); a failure ends when it was detected.
        outcome.timeline.end = Instant::now();
    }
    outcome.result = result.map_err(|f| Failure { detail: probe.target.redact(&f.detail), ..f });
    (outcome, collected)
}

/// Runs the probe's behaviour checks on its complete answer, its fingerprint, and an agent
/// step's checks.
fn judge(probe: &Probe, collected: Option<&Collected>, out: &Outcome) -> CheckReport {
    let none = crate::config::Checks::default();
    let checks = probe.draw.checks.as_deref().unwrap_or(&none);
    let completion_tokens = out.usage.or(out.api_counter).map(|u| u.completion_tokens).or_else(|| out.streamed.then(|| out.timeline.text_frame_count()));
    let frames = &out.timeline.text_frames;
    let answer = crate::checks::Answer {
        collected,
        finish_reason: out.finish_reason.as_deref(),
        completion_tokens,
        max_tokens: probe.draw.max_tokens(),
        answered: frames.iter().any(|f| f.content_bytes > 0),
        reasoned: frames.iter().any(|f| f.reasoning_bytes > 0),
    };
    let mut report = crate::checks::evaluate(checks, probe.draw.expect.as_ref(), &answer);
    if let (Some(agent), Some(crate::probe::step::Step::Agent(k))) = (&probe.draw.agent, probe.draw.step) {
        let empty = Collected::new();
        let got = collected.unwrap_or(&empty);
        crate::checks::agent_step(agent, k, crate::protocol::Message::calls_made(&probe.draw.history), got, &mut report);
    }
    for f in &mut report.failed {
        f.detail = probe.target.redact(&f.detail);
    }
    if let (true, Some(c)) = (checks.fingerprint, collected) {
        let now = crate::checks::fingerprint::fingerprint(c);
        report.changed_from = probe.target.fingerprints.observe(&probe.scenario, &out.prompt_sha256, &now);
        report.fingerprint = Some(now);
    }
    report
}

/// Waits for the send time; returns what the dispatcher wrote of the request, if it did, or
/// the in-flight cap's refusal (the probe is then never sent).
async fn send_time(send_at: SendAt, intended: Instant, request: &mut PreparedRequest) -> Result<Option<Written>, Failure> {
    match send_at {
        SendAt::Now => {
            request.connect_first().await;
            Ok(None)
        }
        SendAt::Timer => {
            crate::probe::deadline::wait_until(intended).await;
            Ok(None)
        }
        SendAt::Gate(gate) => {
            // Handed over early: a connection opened now keeps TCP set-up out of the send.
            request.connect_before(intended).await;
            match gate.pass(request.handover()).await {
                Opened::Written(written) => Ok(Some(written)),
                Opened::Released => Ok(None),
                Opened::Refused => {
                    // Refused before a byte was written: the connection stays reusable.
                    request.withdraw();
                    Err(Failure::new(ErrorClass::InFlightCap, "in-flight cap reached"))
                }
                // The scheduler stopped: keep the time on the runtime's timer.
                Opened::Abandoned => {
                    crate::probe::deadline::wait_until(intended).await;
                    Ok(None)
                }
            }
        }
    }
}

/// Waits for the send time of a probe that will not be sent.
async fn send_time_unsent(send_at: SendAt, intended: Instant) {
    match send_at {
        SendAt::Now => {}
        SendAt::Timer => crate::probe::deadline::wait_until(intended).await,
        SendAt::Gate(gate) => {
            if let Opened::Abandoned = gate.pass(None).await {
                crate::probe::deadline::wait_until(intended).await;
            }
        }
    }
}

/// The probe's request, ready to send: model, body and headers.
async fn build(probe: &Probe, out: &mut Outcome) -> Result<PreparedRequest, Failure> {
    let target = &probe.target;
    out.model = target.model().await?;
    let family = target.config.api.family();
    let protocol = family.protocol;
    let stream = target.config.stream;
    let spec = RequestSpec {
        model: &out.model,
        prompt: &probe.draw.prompt,
        max_tokens: probe.draw.max_tokens(),
        checks: probe.draw.checks.as_deref(),
        reasoning: probe.draw.reasoning,
        history: &probe.draw.history,
        agent: probe
            .draw
            .agent
            .as_deref()
            .map(|agent| crate::protocol::AgentStep { agent, must_call: agent.must_call(crate::protocol::Message::calls_made(&probe.draw.history)) }),
    };
    let mut body = protocol.body(&target.config, &spec);
    if let (Some(salt), true) = (&probe.draw.cache_salt, family.cache_salt) {
        // vLLM's prefix-cache isolation field; only sent when a scenario configures it.
        body["cache_salt"] = serde_json::json!(salt);
    }
    let body = serde_json::to_vec(&body).expect("JSON body");
    let mut headers = HeaderMap::with_capacity(5);
    headers.append(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.append(reqwest::header::ACCEPT, HeaderValue::from_static(family.accept(stream)));
    // Explicit, so no layer picks a coding for us: `identity` unless the target asks for
    // compression (then frames are timed as they leave the decoder).
    headers.append(reqwest::header::ACCEPT_ENCODING, header_value(&target.config.accept_encoding_header())?);
    headers.append("x-request-id", header_value(&out.request_id)?);
    if let Some(ids) = out.trace {
        headers.append("traceparent", header_value(&ids.traceparent())?);
    }
    let path = protocol.path(stream, &spec);
    target.prepare(&path, headers, body)
}

fn blank_outcome(probe: &Probe) -> Outcome {
    let now = Instant::now();
    Outcome {
        target: probe.target.name.clone(),
        scenario: probe.scenario.clone(),
        replica: probe.target.replica.clone(),
        seq: probe.seq,
        request_id: uuid::Uuid::new_v4().to_string(),
        probe_id: probe.draw.probe_id.clone(),
        dataset_index: probe.draw.dataset_index,
        prompt_sha256: probe.draw.prompt_sha256.clone(),
        model: Arc::from(probe.target.config.model.as_deref().unwrap_or("")),
        requested_input_tokens: probe.draw.input_tokens,
        requested_output_tokens: probe.draw.max_tokens(),
        timeline: Timeline::new(probe.intended, now),
        http_status: None,
        usage: None,
        api_counter: None,
        server_timing: ServerTiming::default(),
        streamed: probe.target.config.stream,
        content_encoding: None,
        finish_reason: None,
        response_model: None,
        result: Ok(()),
        // A later probe of a sequence joins its first probe's trace with a span of its own.
        trace: probe.trace_ratio.map(|ratio| probe.draw.trace.map_or_else(|| crate::probe::trace::TraceIds::random(ratio), |t| t.next_span())),
        checks: None,
        step: probe
            .draw
            .step
            .map(|step| crate::probe::step::StepOf { step, sequence: probe.draw.sequence.clone().unwrap_or_else(|| Arc::from(probe.draw.probe_id.as_str())) }),
    }
}

/// `collected`, when given, receives the answer's text (on success; a failed probe is not judged).
async fn run(probe: &Probe, out: &mut Outcome, send_at: SendAt, collected: &mut Option<Collected>) -> Result<(), Failure> {
    let target = &probe.target;
    let stream = target.config.stream;
    let family = target.config.api.family();
    let protocol = family.protocol;
    let mut request = match build(probe, out).await {
        Ok(request) => request,
        Err(failure) => {
            // A probe that fails before its send time (model discovery, a bad header) is
            // still counted scheduled at that time: ending it there keeps every probe's record
            // after its count, never before.
            send_time_unsent(send_at, probe.intended).await;
            return Err(failure);
        }
    };

    let timeouts = target.config.timeouts;
    // The scheduler hands probes over a little before their intended time so that waking a
    // worker thread does not count as lag; the request is built, now wait for the send time.
    let written = send_time(send_at, probe.intended, &mut request).await?;
    out.timeline.sent = written.as_ref().map_or_else(Instant::now, |w| w.at);
    let sent = out.timeline.sent;
    let total_deadline = after(sent, timeouts.total);
    // A non-streaming answer comes whole after generation: only the total limit applies.
    let (header_deadline, header_class) =
        if stream { earliest(after(sent, timeouts.ttft), ErrorClass::TimeoutTtft, total_deadline) } else { (total_deadline, ErrorClass::TimeoutTotal) };

    let mut response = match tokio::time::timeout_at(header_deadline.into(), target.send(request, written)).await {
        Err(_) => {
            return Err(Failure::new(header_class, "no response headers before the deadline"));
        }
        Ok(Err(failure)) => return Err(failure),
        Ok(Ok(r)) => r,
    };
    out.timeline.first_byte = Some(arrival(response.arrived(), sent, Instant::now()));
    let status = response.status();
    out.http_status = Some(status.as_u16());
    if !status.is_success() {
        let text = read_error_body(&mut response, total_deadline).await;
        return Err(Failure::new(ErrorClass::from_status(status.as_u16()), format!("HTTP {status}: {text}")));
    }
    out.server_timing = protocol.header_timing(response.headers()).map_err(protocol_failure)?;
    let coding = ContentCoding::from_headers(response.headers()).map_err(|e| Failure::new(ErrorClass::Parse, e))?;
    out.content_encoding = Some(coding);
    if !stream {
        check_content_type(&response, None)?;
        return read_whole(response, protocol, coding, total_deadline, target.config.max_response_bytes, out, collected.as_mut()).await;
    }
    check_content_type(&response, Some(family.framing))?;

    let mut reader = StreamReader::new(family.framing, coding, target.config.max_response_bytes);
    // The parser keeps the answer as it decodes each frame (only when a check reads it).
    reader.state.answer = collected.take();
    // Frames are timed from their arrival, which cannot come before the head's.
    reader.last_chunk = out.timeline.first_byte.unwrap_or(sent);
    // One timer for the whole stream: re-arming a timeout for every chunk would cost a timer
    // wheel update per frame. It is moved only when the deadline comes earlier, or when it fires
    // before the current deadline (which moved later); so it times out exactly when a fresh
    // timeout per chunk would.
    let timer = tokio::time::sleep_until(after(sent, timeouts.ttft).min(total_deadline).into());
    tokio::pin!(timer);
    loop {
        let (deadline, class) = match out.timeline.first_token() {
            None => earliest(after(sent, timeouts.ttft), ErrorClass::TimeoutTtft, total_deadline),
            Some(_) => earliest(after(reader.last_chunk, timeouts.idle), ErrorClass::TimeoutIdle, total_deadline),
        };
        let at = tokio::time::Instant::from_std(deadline);
        if at < timer.deadline() {
            timer.as_mut().reset(at);
        }
        let chunk = tokio::select! {
            biased;
            chunk = response.chunk() => chunk,
            () = &mut timer => {
                // tokio's clock, as the timer's (it is the virtual one when time is paused).
                if tokio::time::Instant::now() < at {
                    timer.as_mut().reset(at);
                    continue;
                }
                return Err(Failure::new(class, timeout_detail(class, out)));
            }
        };
        let chunk = match chunk {
            Err(e) => return Err(Failure::new(ErrorClass::Truncated, format!("body broke off: {e}"))),
            Ok(None) => break,
            Ok(Some(chunk)) => chunk,
        };
        reader.feed(chunk, protocol)?;
        let stamp = response.arrived();
        let now = arrival(stamp, reader.last_chunk.max(sent), Instant::now());
        reader.last_chunk = now;
        let had_first = out.timeline.first_token().is_some();
        let done = reader.apply(now, out)?;
        if !had_first {
            out.timeline.first_token_stamped = stamp.is_some() && out.timeline.first_token().is_some();
        }
        if done {
            out.timeline.end = now;
            // The outcome is decided and stamped; only the connection's reuse waits on this.
            response.settle().await;
            *collected = reader.state.answer.take();
            return finish(true, protocol, out);
        }
    }
    let now = Instant::now();
    out.timeline.end = now;
    let (frames, tail) = reader.finish();
    let done = apply_frames(frames, now, &mut reader, protocol, out)?;
    if let (false, Some(tail)) = (done, tail) {
        return Err(unterminated_event(&tail, protocol, &mut reader.state));
    }
    *collected = reader.state.answer.take();
    finish(done, protocol, out)
}

/// When a piece of the answer came: the client's receive stamp where it has one (see
/// `receive_stamp`), kept between the exchange's previous event `floor` and the read time
/// `now`; else `now`.
fn arrival(stamp: Option<Instant>, floor: Instant, now: Instant) -> Instant {
    stamp.map_or(now, |at| at.max(floor).min(now))
}

/// A stream that ended cleanly inside an SSE event (no blank line after it). The WHATWG rules
/// never dispatch such an event, and neither do the clients built on them (browsers, the OpenAI
/// SDKs), so its text does not count and its end marker does not complete the stream: the
/// stream is `truncated`. It is still read, for the one thing it can tell: an error object in it
/// is the server's own account of why it stopped (`stream_error`).
fn unterminated_event(tail: &[u8], protocol: &dyn Protocol, state: &mut StreamState) -> Failure {
    match protocol.parse(tail, state) {
        Err(ProtocolError::Stream(msg)) => Failure::new(ErrorClass::StreamError, format!("{msg} (in an event the stream ended inside)")),
        _ => Failure::new(ErrorClass::Truncated, "stream ended inside an event (no blank line after its last event)"),
    }
}

/// A non-streaming answer: the whole body (bounded in size and time) read as one event.
async fn read_whole(
    mut response: ProbeResponse,
    protocol: &dyn Protocol,
    coding: ContentCoding,
    deadline: Instant,
    max_bytes: usize,
    out: &mut Outcome,
    collect: Option<&mut Collected>,
) -> Result<(), Failure> {
    let mut decoder = ContentDecoder::new(coding);
    let mut body = Vec::new();
    // When the last piece came (the answer's end), by the receive stamps where there are any.
    let mut last_arrived = None;
    loop {
        let chunk = match tokio::time::timeout_at(deadline.into(), response.chunk()).await {
            Err(_) => {
                return Err(Failure::new(ErrorClass::TimeoutTotal, "body not complete before the total deadline"));
            }
            Ok(Err(e)) => return Err(Failure::new(ErrorClass::Truncated, format!("body broke off: {e}"))),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => chunk,
        };
        let chunk = decoder.decode(chunk, max_bytes - body.len()).map_err(|e| Failure::new(ErrorClass::Parse, e))?;
        if body.len() + chunk.len() > max_bytes {
            return Err(Failure::new(ErrorClass::Parse, format!("response exceeded {max_bytes} bytes")));
        }
        body.extend_from_slice(&chunk);
        last_arrived = response.arrived();
    }
    let now = arrival(last_arrived, out.timeline.first_byte.unwrap_or(out.timeline.sent), Instant::now());
    out.timeline.end = now;
    let event = match collect {
        Some(c) => protocol.parse_whole_keeping(&body, c),
        None => protocol.parse_whole(&body),
    }
    .map_err(protocol_failure)?;
    let done = event.done;
    apply_event(event, now, None, out);
    out.timeline.first_token_stamped = last_arrived.is_some() && out.timeline.first_token().is_some();
    finish(done, protocol, out)
}

/// Whether a stream that ended this way is a success. `done` is the protocol's end marker
/// (`[DONE]`, Ollama `done: true`, llama.cpp `stop: true`, TGI's last event).
fn finish(done: bool, protocol: &dyn Protocol, out: &Outcome) -> Result<(), Failure> {
    if out.timeline.text_frames.is_empty() {
        return Err(Failure::new(ErrorClass::EmptyStream, "stream ended without generated text"));
    }
    if !done {
        return Err(Failure::new(ErrorClass::Truncated, "stream ended without its end marker"));
    }
    if protocol.end_needs_finish_reason() && out.finish_reason.is_none() {
        // e.g. a server that cut this stream to serve another: `[DONE]` with no finish reason.
        return Err(Failure::new(ErrorClass::Truncated, "end marker without a finish reason"));
    }
    plausible_output_count(out)
}

/// A server's count of the tokens it generated (usage, or the API's own counter) that no
/// server keeping to `max_tokens` could report: more than twice what was asked, plus
/// `OUTPUT_COUNT_SLACK`. Trusted, it would make a TPOT of nanoseconds and count as goodput, so
/// the probe fails as `parse`, as a server-reported duration out of range does. A count a little
/// over `max_tokens` (reasoning or end tokens counted) stays, for the `max_tokens` check to judge.
fn plausible_output_count(out: &Outcome) -> Result<(), Failure> {
    let bound = 2 * u64::from(out.requested_output_tokens) + OUTPUT_COUNT_SLACK;
    for (field, count) in [("usage.completion_tokens", out.usage), ("the API's output token counter", out.api_counter)] {
        if let Some(n) = count.map(|u| u.completion_tokens).filter(|&n| n > bound) {
            let detail = format!("{field} reports {n} generated tokens for max_tokens {} (at most {bound} is believed)", out.requested_output_tokens);
            return Err(Failure::new(ErrorClass::Parse, detail));
        }
    }
    Ok(())
}

/// Tokens a server's output count may exceed twice `max_tokens` by before it is not believed.
const OUTPUT_COUNT_SLACK: u64 = 16;

/// Applies parsed frames to the outcome; returns whether the end marker was seen.
fn apply_frames(frames: Vec<Vec<u8>>, at: Instant, reader: &mut StreamReader, protocol: &dyn Protocol, out: &mut Outcome) -> Result<bool, Failure> {
    for frame in frames {
        let event = protocol.parse(&frame, &mut reader.state).map_err(protocol_failure)?;
        if apply_event(event, at, Some(&mut reader.usage_seen), out) {
            return Ok(true);
        }
    }
    Ok(false)
}

fn protocol_failure(e: ProtocolError) -> Failure {
    match e {
        ProtocolError::Stream(msg) => Failure::new(ErrorClass::StreamError, msg),
        ProtocolError::Parse(msg) => Failure::new(ErrorClass::Parse, msg),
    }
}

/// Records one event. `usage_seen` is the completion count of the last usage report, so that
/// per-chunk usage (vLLM `continuous_usage_stats`) yields the tokens of each frame.
fn apply_event(ev: StreamEvent, at: Instant, usage_seen: Option<&mut u64>, out: &mut Outcome) -> bool {
    // Server-reported counts are capped once here, so everything downstream can add and divide.
    let cap = |u: Usage| Usage {
        prompt_tokens: u.prompt_tokens.min(MAX_REPORTED_TOKENS),
        completion_tokens: u.completion_tokens.min(MAX_REPORTED_TOKENS),
        reasoning_tokens: u.reasoning_tokens.map(|n| n.min(MAX_REPORTED_TOKENS)),
        cached_tokens: u.cached_tokens.map(|n| n.min(MAX_REPORTED_TOKENS)),
    };
    let ev = StreamEvent { usage: ev.usage.map(cap), counter: ev.counter.map(cap), tokens: ev.tokens.map(|n| n.min(MAX_REPORTED_TOKENS)), ..ev };
    let mut tokens = ev.tokens;
    if let (Some(seen), Some(u)) = (usage_seen, ev.usage) {
        if tokens.is_none() && ev.has_text() && u.completion_tokens > *seen {
            tokens = Some(u.completion_tokens - *seen);
        }
        *seen = (*seen).max(u.completion_tokens);
    }
    if ev.has_text() {
        if out.timeline.text_frames.is_empty() {
            out.timeline.first_emitted_ns = ev.emitted_ns;
        }
        let frame = TextFrame { at, content_bytes: ev.content_bytes, reasoning_bytes: ev.reasoning_bytes, tokens };
        out.timeline.push_text_frame(frame);
    }
    if ev.usage.is_some() {
        out.usage = ev.usage;
    }
    if ev.counter.is_some() {
        out.api_counter = ev.counter;
    }
    out.server_timing.merge(ev.server_timing);
    if ev.finish_reason.is_some() {
        out.finish_reason = ev.finish_reason;
    }
    if ev.model.is_some() && out.response_model.is_none() {
        out.response_model = ev.model;
    }
    ev.done
}

/// Cuts the body into frames, parses them and enforces the size caps.
struct StreamReader {
    /// The content coding, undone before framing.
    body: ContentDecoder,
    decoder: FrameDecoder,
    state: StreamState,
    total_bytes: usize,
    max_bytes: usize,
    last_chunk: Instant,
    /// Completion tokens of the last usage report seen.
    usage_seen: u64,
    /// The parsed frames of the last chunk, up to the first end marker or protocol error
    /// (reused: nothing is allocated per frame).
    events: Vec<Result<StreamEvent, ProtocolError>>,
}

impl StreamReader {
    fn new(framing: Framing, coding: ContentCoding, max_bytes: usize) -> Self {
        StreamReader {
            body: ContentDecoder::new(coding),
            decoder: FrameDecoder::new(framing),
            state: StreamState::default(),
            total_bytes: 0,
            max_bytes,
            last_chunk: Instant::now(),
            usage_seen: 0,
            events: Vec::new(),
        }
    }

    /// Decodes a chunk and parses its frames into `events`, each parsed where the decoder lends
    /// it. Frames after an end marker or a protocol error are not parsed, as they were never
    /// applied; the size caps cover every frame of the chunk before any event is applied.
    fn feed(&mut self, chunk: &[u8], protocol: &dyn Protocol) -> Result<(), Failure> {
        // The cap is on decoded bytes (what the prober holds); a bomb stops at the cap.
        let chunk = self.body.decode(chunk, self.max_bytes - self.total_bytes.min(self.max_bytes)).map_err(|e| Failure::new(ErrorClass::Parse, e))?;
        self.total_bytes += chunk.len();
        if self.total_bytes > self.max_bytes {
            return Err(Failure::new(ErrorClass::Parse, format!("response exceeded {} bytes", self.max_bytes)));
        }
        self.events.clear();
        let (state, events) = (&mut self.state, &mut self.events);
        let (mut largest, mut stopped) = (0, false);
        self.decoder.feed_with(&chunk, |frame| {
            largest = largest.max(frame.len());
            if !stopped {
                let event = protocol.parse(frame, state);
                stopped = !matches!(&event, Ok(ev) if !ev.done);
                events.push(event);
            }
        });
        if largest.max(self.decoder.pending_bytes()) > MAX_FRAME_BYTES {
            return Err(Failure::new(ErrorClass::Parse, format!("frame exceeded {MAX_FRAME_BYTES} bytes")));
        }
        Ok(())
    }

    /// Applies the events of the last chunk; returns whether the end marker was seen.
    fn apply(&mut self, at: Instant, out: &mut Outcome) -> Result<bool, Failure> {
        for event in self.events.drain(..) {
            if apply_event(event.map_err(protocol_failure)?, at, Some(&mut self.usage_seen), out) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The last frames, and an SSE event the stream ended inside (see `FrameDecoder::finish`).
    fn finish(&mut self) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
        let mut frames = Vec::new();
        let tail = self.decoder.finish(&mut frames);
        (frames, tail)
    }
}

/// The earlier of a phase deadline and the total deadline, with the class to report.
fn earliest(phase: Instant, phase_class: ErrorClass, total: Instant) -> (Instant, ErrorClass) {
    if phase < total { (phase, phase_class) } else { (total, ErrorClass::TimeoutTotal) }
}

fn timeout_detail(class: ErrorClass, out: &Outcome) -> String {
    format!("{} after {} text frames", class.as_str(), out.timeline.text_frame_count())
}

/// A header value made of request data (an id, a configured coding list): never fails for
/// what the prober makes, but a bad one is this probe's error, not a panic.
fn header_value(text: &str) -> Result<HeaderValue, Failure> {
    HeaderValue::from_str(text).map_err(|_| Failure::new(ErrorClass::Internal, "a request header value is not valid"))
}

/// `framing`: the stream's framing, or `None` for a whole JSON answer.
fn check_content_type(response: &ProbeResponse, framing: Option<Framing>) -> Result<(), Failure> {
    let Some(value) = response.headers().get(reqwest::header::CONTENT_TYPE) else {
        return Ok(());
    };
    let value = value.to_str().unwrap_or("").to_ascii_lowercase();
    let ok = match framing {
        Some(Framing::Sse) => value.starts_with("text/event-stream"),
        Some(Framing::Ndjson) => value.contains("ndjson") || value.starts_with("application/json"),
        None => value.contains("json"),
    };
    if ok { Ok(()) } else { Err(Failure::new(ErrorClass::Parse, format!("unexpected content-type {value:?} for a stream"))) }
}

/// Reads at most `ERROR_BODY_BYTES` of an error body (bounded in time too) as one log line.
async fn read_error_body(response: &mut ProbeResponse, total_deadline: Instant) -> String {
    let deadline = total_deadline.min(Instant::now() + Duration::from_secs(2));
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match tokio::time::timeout_at(deadline.into(), response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(chunk),
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
