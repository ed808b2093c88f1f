//! The streaming pipeline shared by every front-end: engine tokens in, framed bytes out, with
//! the stream faults applied on the way.
//!
//! A front-end supplies a `Render` (how its frames look); `Wire` pulls tokens from the request's
//! channel, groups them into frames and yields bytes. Per token that is one channel receive and
//! one small write: no timers, no tasks.

use std::collections::VecDeque;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Response, StatusCode, header};
use tokio::sync::mpsc::UnboundedReceiver;

use super::engine::{Emit, Finish};
use super::faults::{BAD_UTF8_MARK, Fault, FaultParams, corrupt_json, inject_bad_utf8};
use super::tokenizer::gen_token;

/// One frame's worth of generated tokens.
pub struct Tok<'a> {
    pub text: &'a str,
    /// Id of the last token in the frame.
    pub id: u32,
    /// Index of the last token in the frame.
    pub index: u32,
    /// Tokens generated so far, this frame included.
    pub completion_tokens: u32,
    pub finish: Option<Finish>,
    /// Prompt tokens the prefix cache supplied (SGLang's `meta_info.cached_tokens`).
    pub cached_tokens: u32,
}

/// Totals and engine-clock durations at the end of a request.
#[derive(Clone, Debug, Default)]
pub struct End {
    pub finish: Option<Finish>,
    pub prompt_tokens: u32,
    /// Of the prompt, tokens the prefix cache supplied.
    pub cached_tokens: u32,
    pub completion_tokens: u32,
    /// The answer's text (a whole answer: the tokens after the reasoning ones).
    pub text: String,
    /// A whole answer's reasoning text (its first tokens); empty in a stream.
    pub reasoning: String,
    pub queue_ns: u64,
    pub prompt_ns: u64,
    pub decode_ns: u64,
    pub total_ns: u64,
}

impl End {
    /// Accounts one emitted token.
    pub fn add(&mut self, e: &Emit, first_at: u64) {
        self.completion_tokens = e.index + 1;
        self.cached_tokens = e.cached_tokens;
        self.finish = e.finish;
        self.queue_ns = e.scheduled_ns.saturating_sub(e.arrival_ns);
        self.prompt_ns = first_at.saturating_sub(e.scheduled_ns);
        self.decode_ns = e.at_ns.saturating_sub(first_at);
        self.total_ns = e.at_ns.saturating_sub(e.arrival_ns);
    }
}

/// How one API family writes its frames. Each returned frame includes its framing bytes.
pub trait Render: Send + 'static {
    fn content_type(&self) -> &'static str;
    /// Frame sent before any token (the chat role-only chunk).
    fn start(&mut self) -> Option<String> {
        None
    }
    fn token(&mut self, t: &Tok<'_>) -> String;
    /// Frames after the last token (usage chunk, final object with timings).
    fn end(&mut self, e: &End) -> Vec<String>;
    /// The terminator (`data: [DONE]`), if the family has one.
    fn done(&self) -> Option<String>;
    /// An error frame inside a 200 stream.
    fn error(&mut self, msg: &str) -> String;
}

/// Per-request stream state.
pub struct Wire {
    render: Box<dyn Render>,
    rx: Option<UnboundedReceiver<Emit>>,
    fault: Option<Fault>,
    params: FaultParams,
    seed: u64,
    /// Request arrival, for `mock_emitted_ns`.
    started: Instant,
    timestamps: bool,
    pending: VecDeque<Bytes>,
    group: String,
    end: End,
    first_at: Option<u64>,
    frames_out: u32,
    tokens_framed: u32,
    finished: bool,
    stalled: bool,
    drip: Option<Bytes>,
    /// `gzip_stream`: the encoder every written frame goes through (sync-flushed per frame).
    gzip: Option<flate2::write::GzEncoder<Vec<u8>>>,
    /// The planned answer's token texts (`behaviour.rs`); random words when `None`.
    plan: Option<std::sync::Arc<super::behaviour::Plan>>,
}

pub struct WireSetup {
    pub render: Box<dyn Render>,
    pub rx: UnboundedReceiver<Emit>,
    pub fault: Option<Fault>,
    pub params: FaultParams,
    pub seed: u64,
    pub started: Instant,
    pub timestamps: bool,
    pub prompt_tokens: u32,
    pub plan: Option<std::sync::Arc<super::behaviour::Plan>>,
}

impl Wire {
    pub fn new(s: WireSetup) -> Wire {
        let mut w = Wire {
            render: s.render,
            rx: Some(s.rx),
            fault: s.fault,
            params: s.params,
            seed: s.seed,
            started: s.started,
            timestamps: s.timestamps,
            pending: VecDeque::new(),
            group: String::new(),
            end: End { prompt_tokens: s.prompt_tokens, ..End::default() },
            first_at: None,
            frames_out: 0,
            tokens_framed: 0,
            finished: false,
            stalled: false,
            drip: None,
            gzip: (s.fault == Some(Fault::GzipStream)).then(|| flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast())),
            plan: s.plan,
        };
        if w.fault == Some(Fault::EmptyStream) {
            w.rx = None;
            w.finish_with_done();
        } else if let Some(f) = w.render.start() {
            w.push(f);
        }
        w
    }

    /// Streaming response with this wire as body.
    pub fn into_response(self) -> Response<Body> {
        let ct = if self.fault == Some(Fault::WrongContentType) { "text/html; charset=utf-8" } else { self.render.content_type() };
        let gzip = self.gzip.is_some();
        let stream = futures_util::stream::unfold(self, |mut w| async move { w.next_coded().await.map(|item| (item, w)) });
        let mut resp = Response::new(Body::from_stream(stream));
        resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
        if gzip {
            resp.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        resp
    }

    /// The next write, through the gzip encoder under `gzip_stream`: each frame is compressed
    /// and sync-flushed at once (so the body still streams), the gzip trailer follows the end.
    async fn next_coded(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        use std::io::Write;
        if self.gzip.is_none() {
            return self.next().await;
        }
        match self.next().await {
            Some(Ok(b)) => {
                let gz = self.gzip.as_mut()?;
                let written = gz.write_all(&b).and_then(|()| gz.flush());
                Some(written.map(|()| Bytes::from(std::mem::take(gz.get_mut()))))
            }
            None => Some(self.gzip.take()?.finish().map(Bytes::from)),
            other => other,
        }
    }

    fn push(&mut self, frame: String) {
        self.pending.push_back(Bytes::from(frame));
    }

    fn finish_with_done(&mut self) {
        if self.fault != Some(Fault::NoDone)
            && let Some(d) = self.render.done()
        {
            self.push(d);
        }
        self.finished = true;
        self.rx = None; // dropping the receiver aborts an unfinished request in the engine
    }

    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        if let Some(b) = self.drip_next().await {
            return Some(b);
        }
        if !self.stall_before_first().await {
            return Some(Err(std::io::Error::other("mock: shutting down")));
        }
        loop {
            if self.may_release()
                && let Some(b) = self.pop_frame()
            {
                return self.release(b).await;
            }
            if self.finished {
                return None;
            }
            match self.rx.as_mut()?.recv().await {
                Some(e) => self.on_emit(e),
                None => self.finished = true,
            }
        }
    }

    fn may_release(&self) -> bool {
        self.fault != Some(Fault::Buffered) || self.finished
    }

    /// Next frame; a buffered stream releases everything in one write.
    fn pop_frame(&mut self) -> Option<Bytes> {
        if self.fault == Some(Fault::Buffered) && self.pending.len() > 1 {
            let all: Vec<u8> = self.pending.drain(..).flat_map(|b| b.to_vec()).collect();
            return Some(Bytes::from(all));
        }
        self.pending.pop_front()
    }

    /// `false` when shutdown cut the stall short.
    async fn stall_before_first(&mut self) -> bool {
        if self.fault == Some(Fault::StallTtft) && !self.stalled {
            self.stalled = true;
            return self.params.pause(self.params.stall).await;
        }
        true
    }

    async fn release(&mut self, b: Bytes) -> Option<Result<Bytes, std::io::Error>> {
        self.frames_out += 1;
        let after = self.params.after;
        match self.fault {
            Some(Fault::ResetMidStream) if self.frames_out > after => {
                return Some(Err(std::io::Error::other("mock fault: reset_mid_stream")));
            }
            Some(Fault::StallMidStream) if self.frames_out == after + 1 && !self.params.pause(self.params.stall).await => {
                return Some(Err(std::io::Error::other("mock: shutting down")));
            }
            Some(Fault::SlowDrip) if b.len() > 1 => {
                self.drip = Some(b.slice(1..));
                return Some(Ok(b.slice(..1)));
            }
            _ => {}
        }
        Some(Ok(self.stamp(b)))
    }

    async fn drip_next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        let rest = self.drip.take()?;
        if !self.params.pause(self.params.drip).await {
            return Some(Err(std::io::Error::other("mock: shutting down")));
        }
        if rest.len() > 1 {
            self.drip = Some(rest.slice(1..));
        }
        Some(Ok(rest.slice(..1)))
    }

    /// Adds `"mock_emitted_ns"` (since request arrival) into the frame's last JSON object.
    fn stamp(&self, b: Bytes) -> Bytes {
        if !self.timestamps {
            return b;
        }
        let Some(i) = b.iter().rposition(|c| *c == b'}') else { return b };
        let ns = self.started.elapsed().as_nanos();
        let field = format!(",\"mock_emitted_ns\":{ns}");
        Bytes::from([&b[..i], field.as_bytes(), &b[i..]].concat())
    }

    fn on_emit(&mut self, e: Emit) {
        let first_at = *self.first_at.get_or_insert(e.at_ns);
        self.end.add(&e, first_at);
        let (id, word) = gen_token(self.seed, e.index);
        push_token(&mut self.group, self.plan.as_deref(), word, e.index);
        push_token(&mut self.end.text, self.plan.as_deref(), word, e.index);
        let in_group = e.index + 1 - self.tokens_framed;
        let group_full = self.fault != Some(Fault::MultiTokenFrames) || in_group >= self.params.tokens_per_frame;
        if e.finish.is_some() || group_full || self.fault == Some(Fault::TruncateAfterOne) {
            self.frame_tokens(id, &e);
        }
    }

    fn frame_tokens(&mut self, id: u32, e: &Emit) {
        let truncate = self.fault == Some(Fault::TruncateAfterOne);
        let finish = if truncate { None } else { e.finish };
        let mut text = std::mem::take(&mut self.group);
        let n = self.frames_out + self.pending.len() as u32;
        let special = self.fault_frame_here(n);
        match special {
            Some(Fault::OversizedFrame) => text.push_str(&"x".repeat(self.params.frame_bytes)),
            Some(Fault::InvalidUtf8) => text.push_str(BAD_UTF8_MARK),
            _ => {}
        }
        let tok = Tok { text: &text, id, index: e.index, completion_tokens: e.index + 1, finish, cached_tokens: e.cached_tokens };
        let mut frame = self.render.token(&tok).into_bytes();
        match special {
            Some(Fault::InvalidUtf8) => frame = inject_bad_utf8(&frame),
            Some(Fault::MalformedJson) => frame = corrupt_json(&frame),
            _ => {}
        }
        self.pending.push_back(Bytes::from(frame));
        self.tokens_framed = e.index + 1;
        if self.fault == Some(Fault::ErrorInStream) && e.index + 1 >= self.params.after {
            let err = self.render.error("mock fault: error_in_stream");
            self.push(err);
            return self.finish_with_done();
        }
        if truncate {
            return self.finish_with_done();
        }
        if e.finish.is_some() {
            for f in self.render.end(&self.end) {
                self.push(f);
            }
            self.finish_with_done();
        }
    }

    /// The one-frame faults fire on the frame numbered `params.after` (0-based, all frames).
    fn fault_frame_here(&self, n: u32) -> Option<Fault> {
        match self.fault {
            Some(f @ (Fault::OversizedFrame | Fault::InvalidUtf8 | Fault::MalformedJson)) if n == self.params.after => Some(f),
            _ => None,
        }
    }
}

/// Collects a whole request (non-streaming endpoints); its first `reasoning` tokens are its
/// reasoning text.
pub async fn collect(mut rx: UnboundedReceiver<Emit>, seed: u64, prompt_tokens: u32, plan: Option<&super::behaviour::Plan>, reasoning: u32) -> End {
    let mut end = End { prompt_tokens, ..End::default() };
    let mut first_at = None;
    while let Some(e) = rx.recv().await {
        let first = *first_at.get_or_insert(e.at_ns);
        end.add(&e, first);
        let out = if e.index < reasoning { &mut end.reasoning } else { &mut end.text };
        push_token(out, plan, gen_token(seed, e.index).1, e.index);
        if e.finish.is_some() {
            break;
        }
    }
    end
}

/// Appends the text of token `index`: the plan's piece, else (past the plan, or without one)
/// the random word with its leading space.
fn push_token(out: &mut String, plan: Option<&super::behaviour::Plan>, word: &str, index: u32) {
    match plan.and_then(|p| p.pieces.get(index as usize)) {
        Some(piece) => out.push_str(piece),
        None => {
            out.push(' ');
            out.push_str(word);
        }
    }
}

/// A response whose body fails before its first byte: hyper drops the connection without
/// writing the status line.
pub fn drop_connection() -> Response<Body> {
    let stream = futures_util::stream::once(async { Err::<Bytes, _>(std::io::Error::other("mock fault: connection dropped")) });
    Response::new(Body::from_stream(stream))
}

/// A JSON response with the given status.
pub fn json_response(status: u16, body: String) -> Response<Body> {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// JSON string literal of `s`.
pub fn js(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_js(&mut out, s);
    out
}

/// Appends the JSON string literal of `s` to `out`, escaped as `serde_json` escapes it (frames
/// are built by appending: `format!` per frame was a tenth of the mock's own time).
pub fn push_js(out: &mut String, s: &str) {
    out.push('"');
    let mut plain = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..0x20 => "",
            _ => continue,
        };
        // Every byte that needs escaping is ASCII, so `plain..i` ends on a char boundary.
        out.push_str(&s[plain..i]);
        if escape.is_empty() {
            let hex = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(hex[usize::from(b >> 4)] as char);
            out.push(hex[usize::from(b & 15)] as char);
        } else {
            out.push_str(escape);
        }
        plain = i + 1;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::js;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut cases: Vec<String> = (0u32..0x3000).filter_map(char::from_u32).map(|c| format!("a{c}b{c}")).collect();
        cases.extend(["", "plain words", "\"quoted\" \\ back\\slash\n", "\u{1F600} ümlaut \u{7f}\u{0}\u{1f}"].map(String::from));
        for s in cases {
            assert_eq!(js(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }
}
