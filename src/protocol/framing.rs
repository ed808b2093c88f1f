//! Incremental frame decoders for streamed bodies: Server-Sent Events and NDJSON.
//!
//! Both accept bytes in chunks cut at any offset (mid-line, mid-UTF-8, inside the BOM, between
//! `\r` and `\n`) and yield the same frames as if the body had arrived in one piece. They copy
//! whole runs between line ends (never byte by byte): they run once per token. `feed_with`
//! lends each frame to a callback, so a stream allocates nothing per frame.

use super::Framing;

/// The UTF-8 byte order mark; stripped once, at the very start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Cuts a byte stream into frames; one decoder per response.
#[derive(Debug)]
pub enum FrameDecoder {
    Sse(SseDecoder),
    Ndjson(NdjsonDecoder),
}

impl FrameDecoder {
    pub fn new(framing: Framing) -> Self {
        match framing {
            Framing::Sse => FrameDecoder::Sse(SseDecoder::default()),
            Framing::Ndjson => FrameDecoder::Ndjson(NdjsonDecoder::default()),
        }
    }

    /// Feeds a chunk; complete frames are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Vec<u8>>) {
        self.feed_with(chunk, |frame| out.push(frame.to_vec()));
    }

    /// Feeds a chunk; each complete frame is lent to `frame`, in order (the same frames `feed`
    /// appends, without a copy of each).
    pub fn feed_with(&mut self, chunk: &[u8], frame: impl FnMut(&[u8])) {
        match self {
            FrameDecoder::Sse(d) => d.feed_into(chunk, &mut Frames(frame)),
            FrameDecoder::Ndjson(d) => d.feed_with(chunk, frame),
        }
    }

    /// End of body. NDJSON: a last line without its newline is a complete frame (appended to
    /// `out`). SSE: an event not closed by a blank line is, by the WHATWG rules, never dispatched;
    /// it is returned instead (its data so far, the error frame of an event named `error`, or
    /// that of an unterminated `error:` line) so that the executor can classify how the stream
    /// ended.
    pub fn finish(&mut self, out: &mut Vec<Vec<u8>>) -> Option<Vec<u8>> {
        match self {
            FrameDecoder::Sse(d) => d.finish(),
            FrameDecoder::Ndjson(d) => {
                d.finish(out);
                None
            }
        }
    }

    /// Bytes held back waiting for a line end or a blank line (bounded by the caller's size cap).
    pub fn pending_bytes(&self) -> usize {
        match self {
            FrameDecoder::Sse(d) => d.line.len() + d.data.len(),
            FrameDecoder::Ndjson(d) => d.line.len(),
        }
    }
}

/// One dispatched event, as the WHATWG "event stream interpretation" defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field, `message` when the event had none.
    pub event: String,
    /// The `data` lines joined with `\n`.
    pub data: Vec<u8>,
    /// The last event ID at dispatch (it persists across events until an `id` field changes it).
    pub last_event_id: Vec<u8>,
}

/// Where a decoder's output goes: frames for the protocol parsers, or whole events.
trait Sink {
    fn event(&mut self, event_type: &[u8], data: &[u8], last_event_id: &[u8]);
    /// llama.cpp's `error:` line (not a WHATWG field).
    fn error_line(&mut self, value: &[u8], last_event_id: &[u8]);
}

/// Frames for the protocol parsers, lent to a callback.
struct Frames<F>(F);

impl<F: FnMut(&[u8])> Sink for Frames<F> {
    fn event(&mut self, event_type: &[u8], data: &[u8], _last_event_id: &[u8]) {
        // An event with empty (or blank) data carries nothing to parse: a keep-alive, not a frame.
        if data.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if event_type == b"error" {
            // Rare: only an error event is copied (into an error frame); a token event never is.
            (self.0)(&error_frame(data));
        } else {
            (self.0)(data);
        }
    }

    fn error_line(&mut self, value: &[u8], _last_event_id: &[u8]) {
        (self.0)(&error_frame(value));
    }
}

impl Sink for Vec<SseEvent> {
    fn event(&mut self, event_type: &[u8], data: &[u8], last_event_id: &[u8]) {
        let event = if event_type.is_empty() { "message".to_owned() } else { String::from_utf8_lossy(event_type).into_owned() };
        self.push(SseEvent { event, data: data.to_vec(), last_event_id: last_event_id.to_vec() });
    }

    fn error_line(&mut self, value: &[u8], last_event_id: &[u8]) {
        self.push(SseEvent { event: "error".to_owned(), data: error_frame(value), last_event_id: last_event_id.to_vec() });
    }
}

/// Server-Sent Events, the WHATWG "event stream interpretation" in full: one leading UTF-8 BOM
/// stripped; lines end in CRLF, LF or a lone CR (also when the CR and LF arrive in different
/// chunks); a line starting with `:` is a comment; a line without a colon is a field name with
/// an empty value; exactly one space after the colon is removed; fields `data` (several lines
/// join with `\n`), `event`, `id` (ignored when it contains NUL; persists across events) and
/// `retry` (ASCII digits only); other fields are ignored; a blank line dispatches the event, and
/// an event whose data buffer is empty is not dispatched. At end of stream an event not closed
/// by a blank line is not dispatched (see `FrameDecoder::finish`).
///
/// Three choices beyond the spec, for the prober: an `error:` line (llama.cpp's way to fail a
/// stream) becomes the frame `{"error": <value>}` at once so the parser sees the error object;
/// an event named `error` (`event: error`) is lent to the parsers as `{"error": <its data>}`,
/// whatever its data looks like, so every family reads it as an error object; and frames for
/// the parsers (`feed`) skip events whose data is blank. Bytes stay bytes (the
/// spec decodes UTF-8 with replacement first): invalid UTF-8 reaches the JSON parser and fails
/// the probe as `parse` instead of being silently replaced.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    event_type: Vec<u8>,
    last_event_id: Vec<u8>,
    retry_ms: Option<u64>,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to that line end.
    after_cr: bool,
    /// The first line has ended (only it can start with the BOM).
    started: bool,
}

impl SseDecoder {
    /// Feeds a chunk; the data of each dispatched event is appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Vec<u8>>) {
        self.feed_into(chunk, &mut Frames(|frame: &[u8]| out.push(frame.to_vec())));
    }

    /// Feeds a chunk; whole events (type, data, last event ID) are appended to `out`.
    pub fn feed_events(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        self.feed_into(chunk, out);
    }

    /// The reconnection time the stream asked for (`retry:`), if any.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// End of stream: the incomplete last event, if there is one (see `FrameDecoder::finish`).
    /// An unterminated last line is read for this purpose as if it had ended.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let line = std::mem::take(&mut self.line);
        // A non-empty line never dispatches: it can only yield an `error:` frame.
        let mut error = None;
        if !line.is_empty() {
            self.end_line(&line, &mut Frames(|frame: &[u8]| error = Some(frame.to_vec())));
        }
        // `end_line` may only have added to the data buffer (no blank line was seen): collect it.
        let tail = if error.is_some() {
            error
        } else if self.has_data && self.event_type == b"error" {
            Some(error_frame(&self.data))
        } else if self.has_data {
            Some(std::mem::take(&mut self.data))
        } else {
            None
        };
        self.has_data = false;
        self.data.clear();
        self.event_type.clear();
        tail
    }

    fn feed_into<S: Sink>(&mut self, mut chunk: &[u8], sink: &mut S) {
        if chunk.is_empty() {
            return;
        }
        if std::mem::take(&mut self.after_cr) && chunk[0] == b'\n' {
            chunk = &chunk[1..];
        }
        while let Some(i) = memchr::memchr2(b'\n', b'\r', chunk) {
            if self.line.is_empty() {
                // The whole line is in this chunk: read it in place, no copy.
                self.end_line(&chunk[..i], sink);
            } else {
                self.line.extend_from_slice(&chunk[..i]);
                let line = std::mem::take(&mut self.line);
                self.end_line(&line, sink);
                self.line = line;
                self.line.clear();
            }
            let was_cr = chunk[i] == b'\r';
            chunk = &chunk[i + 1..];
            if was_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    // `\r` ended this chunk: a `\n` opening the next one belongs to it.
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(chunk);
    }

    fn end_line<S: Sink>(&mut self, mut line: &[u8], sink: &mut S) {
        if !std::mem::replace(&mut self.started, true) {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(sink);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event_type.clear();
                self.event_type.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => {
                self.last_event_id.clear();
                self.last_event_id.extend_from_slice(value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry_ms = Some(value.iter().fold(0u64, |n, d| n.saturating_mul(10).saturating_add(u64::from(d - b'0'))));
            }
            b"error" => sink.error_line(value, &self.last_event_id),
            _ => {}
        }
    }

    fn dispatch<S: Sink>(&mut self, sink: &mut S) {
        if std::mem::take(&mut self.has_data) {
            sink.event(&self.event_type, &self.data, &self.last_event_id);
            // Cleared, not taken: the buffer is reused by the next event.
            self.data.clear();
        }
        self.event_type.clear();
    }
}

/// `{"error": value}`, with the value kept as JSON when it is JSON and quoted otherwise.
fn error_frame(value: &[u8]) -> Vec<u8> {
    let inner = if serde_json::from_slice::<serde::de::IgnoredAny>(value).is_ok() {
        value.to_vec()
    } else {
        serde_json::to_vec(&String::from_utf8_lossy(value)).unwrap_or_default()
    };
    [&b"{\"error\":"[..], &inner, b"}"].concat()
}

/// Newline-delimited JSON: one frame per line that is not blank; lines end in `\n` (a `\r`
/// before it is dropped, so CRLF works); one leading UTF-8 BOM is stripped; a last line without
/// its newline is still a frame (JSON Lines allows it, and it is complete JSON or a `parse`
/// error either way).
#[derive(Debug, Default)]
pub struct NdjsonDecoder {
    line: Vec<u8>,
    /// The first line has ended (only it can start with the BOM).
    started: bool,
}

impl NdjsonDecoder {
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Vec<u8>>) {
        self.feed_with(chunk, |frame| out.push(frame.to_vec()));
    }

    /// Feeds a chunk; each complete line that is not blank is lent to `frame`.
    pub fn feed_with(&mut self, mut chunk: &[u8], mut frame: impl FnMut(&[u8])) {
        while let Some(i) = memchr::memchr(b'\n', chunk) {
            if self.line.is_empty() {
                self.end_line(&chunk[..i], &mut frame);
            } else {
                self.line.extend_from_slice(&chunk[..i]);
                let line = std::mem::take(&mut self.line);
                self.end_line(&line, &mut frame);
                self.line = line;
                self.line.clear();
            }
            chunk = &chunk[i + 1..];
        }
        self.line.extend_from_slice(chunk);
    }

    pub fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        let line = std::mem::take(&mut self.line);
        self.end_line(&line, &mut |frame: &[u8]| out.push(frame.to_vec()));
    }

    fn end_line(&mut self, mut line: &[u8], frame: &mut impl FnMut(&[u8])) {
        if !std::mem::replace(&mut self.started, true) {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.iter().all(u8::is_ascii_whitespace) {
            frame(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(framing: Framing, body: &[u8], cuts: &[usize]) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
        let mut d = FrameDecoder::new(framing);
        let mut out = Vec::new();
        let mut start = 0;
        for &c in cuts {
            d.feed(&body[start..c], &mut out);
            start = c;
        }
        d.feed(&body[start..], &mut out);
        let tail = d.finish(&mut out);
        (out, tail)
    }

    fn frames(framing: Framing, body: &[u8]) -> Vec<Vec<u8>> {
        decode_in_pieces(framing, body, &[]).0
    }

    fn events(body: &[u8]) -> Vec<(String, String, String)> {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        d.feed_events(body, &mut out);
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        out.into_iter().map(|e| (e.event, s(&e.data), s(&e.last_event_id))).collect()
    }

    fn ev(event: &str, data: &str, id: &str) -> (String, String, String) {
        (event.into(), data.into(), id.into())
    }

    #[test]
    fn sse_basic_fields_comments_and_spaces() {
        let body = b": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\nevent: x\ndata: one\ndata: two\n\nid: 7\n\n";
        assert_eq!(frames(Framing::Sse, body), vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec(), b"one\ntwo".to_vec()]);
    }

    // The examples of the WHATWG HTML standard, section "Event stream interpretation".
    #[test]
    fn whatwg_example_multi_line_data() {
        assert_eq!(events(b"data: YHOO\ndata: +2\ndata: 10\n\n"), vec![ev("message", "YHOO\n+2\n10", "")]);
    }

    #[test]
    fn whatwg_example_comment_ids_and_spaces() {
        let body = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n";
        assert_eq!(events(body), vec![ev("message", "first event", "1"), ev("message", "second event", ""), ev("message", " third event", "")]);
    }

    #[test]
    fn whatwg_example_empty_data_and_unterminated_last_event() {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        d.feed_events(b"data\n\ndata\ndata\n\ndata:", &mut out);
        let data: Vec<&[u8]> = out.iter().map(|e| &e.data[..]).collect();
        assert_eq!(data, vec![&b""[..], b"\n"]);
        // The third event never saw its blank line: not dispatched, handed back as the tail.
        assert_eq!(d.finish(), Some(Vec::new()));
    }

    #[test]
    fn whatwg_example_space_after_colon_is_optional() {
        assert_eq!(events(b"data:test\n\ndata: test\n\n"), vec![ev("message", "test", ""), ev("message", "test", "")]);
    }

    #[test]
    fn sse_event_type_id_retry_and_unknown_fields() {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        let body = b"event: add\nid: a\x00b\nretry: 15x\nfoo: bar\ndata: 1\n\nretry: 2500\ndata: 2\n\nevent\ndata: 3\n\n";
        d.feed_events(body, &mut out);
        let got: Vec<(String, String)> = out.iter().map(|e| (e.event.clone(), String::from_utf8_lossy(&e.data).into_owned())).collect();
        assert_eq!(got, vec![("add".into(), "1".into()), ("message".into(), "2".into()), ("message".into(), "3".into())]);
        assert!(out.iter().all(|e| e.last_event_id.is_empty()), "an id with NUL is ignored");
        assert_eq!(d.retry_ms(), Some(2500));
    }

    #[test]
    fn sse_bom_is_stripped_once_even_when_split() {
        let body = b"\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\ndata: c\n\n";
        let (whole, _) = decode_in_pieces(Framing::Sse, body, &[]);
        // The second BOM is part of a field name (`\u{feff}data`), an unknown field: ignored.
        assert_eq!(whole, vec![b"a".to_vec(), b"c".to_vec()]);
        for i in 0..=body.len() {
            for j in i..=body.len().min(i + 4) {
                assert_eq!(decode_in_pieces(Framing::Sse, body, &[i, j]).0, whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn sse_lone_cr_line_ends_and_unterminated_last_event() {
        let (out, tail) = decode_in_pieces(Framing::Sse, b"data: a\r\rdata: b", &[]);
        assert_eq!(out, vec![b"a".to_vec()]);
        assert_eq!(tail, Some(b"b".to_vec()), "the unterminated event is handed back, not dispatched");
        let (out, tail) = decode_in_pieces(Framing::Sse, b"data: a\r\n\r\n: bye", &[]);
        assert_eq!((out, tail), (vec![b"a".to_vec()], None), "a trailing comment is no event");
    }

    #[test]
    fn sse_cr_then_lf_in_the_next_chunk_and_empty_chunks() {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for piece in [&b"data: a\r"[..], b"", b"\n", b"\r", b"", b"\n", b"data: b\n\n"] {
            d.feed(piece, &mut out);
        }
        assert_eq!(out, vec![b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn sse_every_two_way_split_is_identical() {
        let body = "data: {\"t\":\"h\u{e9}llo \u{1F600}\"}\r\n\r\n: c\r\ndata:[DONE]\r\n\r\n".as_bytes();
        let whole = decode_in_pieces(Framing::Sse, body, &[]);
        assert_eq!(whole.0.len(), 2);
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Sse, body, &[i]), whole, "split at {i}");
        }
    }

    #[test]
    fn sse_error_field_becomes_an_error_frame() {
        let body = b"data: {\"a\":1}\n\nerror: {\"code\":500,\"message\":\"x\"}\n\nerror: plain text\n\n";
        let (frames, _) = decode_in_pieces(Framing::Sse, body, &[]);
        assert_eq!(frames[1], b"{\"error\":{\"code\":500,\"message\":\"x\"}}".to_vec());
        assert_eq!(frames[2], b"{\"error\":\"plain text\"}".to_vec());
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Sse, body, &[i]).0, frames);
        }
        let (_, tail) = decode_in_pieces(Framing::Sse, b"data: {\"a\":1}\n\nerror: boom", &[]);
        assert_eq!(tail, Some(b"{\"error\":\"boom\"}".to_vec()), "an unterminated error line is the tail");
    }

    #[test]
    fn sse_error_event_becomes_an_error_frame() {
        let body = b"data: {\"a\":1}\n\nevent: error\ndata: {\"object\":\"error\",\"message\":\"x\"}\n\nevent: error\ndata: plain\n\nevent: message\ndata: {\"b\":2}\n\n";
        let (frames, _) = decode_in_pieces(Framing::Sse, body, &[]);
        let want: Vec<Vec<u8>> = vec![
            b"{\"a\":1}".to_vec(),
            b"{\"error\":{\"object\":\"error\",\"message\":\"x\"}}".to_vec(),
            b"{\"error\":\"plain\"}".to_vec(),
            b"{\"b\":2}".to_vec(),
        ];
        assert_eq!(frames, want, "the event name lasts one event only");
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Sse, body, &[i]).0, frames, "split at {i}");
        }
        let (_, tail) = decode_in_pieces(Framing::Sse, b"event: error\ndata: {\"message\":\"boom\"}\n", &[]);
        assert_eq!(tail, Some(b"{\"error\":{\"message\":\"boom\"}}".to_vec()), "an unterminated error event is an error frame");
    }

    #[test]
    fn sse_blank_data_is_no_frame() {
        assert_eq!(frames(Framing::Sse, b"data:\n\ndata: \n\ndata: x\n\n"), vec![b"x".to_vec()]);
    }

    #[test]
    fn ndjson_lines_crlf_bom_and_blank_lines() {
        let body = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \r\n{\"b\":2}";
        let whole = decode_in_pieces(Framing::Ndjson, body, &[]);
        assert_eq!(whole, (vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()], None));
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Ndjson, body, &[i]), whole);
        }
    }
}
