//! Incremental frame decoders for streamed bodies: Server-Sent Events and NDJSON.
//!
//! Both accept bytes in chunks cut at any offset (mid-line, mid-UTF-8, between `\r` and `\n`)
//! and yield the same frames as if the body had arrived in one piece.

use super::Framing;

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
        match self {
            FrameDecoder::Sse(d) => d.feed(chunk, out),
            FrameDecoder::Ndjson(d) => d.feed(chunk, out),
        }
    }

    /// End of body: yields a final frame that lacked its terminator.
    pub fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        match self {
            FrameDecoder::Sse(d) => d.finish(out),
            FrameDecoder::Ndjson(d) => d.finish(out),
        }
    }

    /// Bytes held back waiting for a line end (bounded by the caller's size cap).
    pub fn pending_bytes(&self) -> usize {
        match self {
            FrameDecoder::Sse(d) => d.line.len() + d.data.len(),
            FrameDecoder::Ndjson(d) => d.line.len(),
        }
    }
}

/// Server-Sent Events (WHATWG rules): lines end in `\n`, `\r\n` or `\r`; `data:` with or without
/// one space; several `data` lines join with `\n`; `:` comments and other fields are ignored; a
/// blank line dispatches the event. One extension: an `error:` line (llama.cpp's way to fail a
/// stream) becomes the frame `{"error": <value>}` so the parser sees the error object.
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// The previous chunk ended in `\r`: a leading `\n` belongs to that line end.
    after_cr: bool,
}

impl SseDecoder {
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Vec<u8>>) {
        // Copy whole runs between line ends rather than byte by byte (this is per token).
        if std::mem::take(&mut self.after_cr) && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        while let Some(i) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&chunk[..i]);
            let was_cr = chunk[i] == b'\r';
            self.end_line(out);
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

    pub fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        if !self.line.is_empty() {
            self.end_line(out);
        }
        self.dispatch(out);
    }

    fn end_line(&mut self, out: &mut Vec<Vec<u8>>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"error" {
            out.push(error_frame(value));
        } else if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        self.line = line;
        self.line.clear();
    }

    fn dispatch(&mut self, out: &mut Vec<Vec<u8>>) {
        if std::mem::take(&mut self.has_data) {
            out.push(std::mem::take(&mut self.data));
        }
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

/// Newline-delimited JSON: one frame per non-blank line; a trailing `\r` is dropped.
#[derive(Debug, Default)]
pub struct NdjsonDecoder {
    line: Vec<u8>,
}

impl NdjsonDecoder {
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Vec<u8>>) {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&chunk[..i]);
            self.end_line(out);
            chunk = &chunk[i + 1..];
        }
        self.line.extend_from_slice(chunk);
    }

    pub fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        self.end_line(out);
    }

    fn end_line(&mut self, out: &mut Vec<Vec<u8>>) {
        let mut line = std::mem::take(&mut self.line);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            out.push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(framing: Framing, body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut d = FrameDecoder::new(framing);
        let mut out = Vec::new();
        let mut start = 0;
        for &c in cuts {
            d.feed(&body[start..c], &mut out);
            start = c;
        }
        d.feed(&body[start..], &mut out);
        d.finish(&mut out);
        out
    }

    #[test]
    fn sse_basic_fields_comments_and_spaces() {
        let body = b": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\nevent: x\ndata: one\ndata: two\n\nid: 7\n\n";
        let frames = decode_in_pieces(Framing::Sse, body, &[]);
        assert_eq!(frames, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec(), b"one\ntwo".to_vec()]);
    }

    #[test]
    fn sse_lone_cr_line_ends_and_unterminated_last_event() {
        let body = b"data: a\r\rdata: b";
        assert_eq!(decode_in_pieces(Framing::Sse, body, &[]), vec![b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn sse_every_two_way_split_is_identical() {
        let body = "data: {\"t\":\"h\u{e9}llo \u{1F600}\"}\r\n\r\n: c\r\ndata:[DONE]\r\n\r\n".as_bytes();
        let whole = decode_in_pieces(Framing::Sse, body, &[]);
        assert_eq!(whole.len(), 2);
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Sse, body, &[i]), whole, "split at {i}");
        }
    }

    #[test]
    fn sse_error_field_becomes_an_error_frame() {
        let body = b"data: {\"a\":1}\n\nerror: {\"code\":500,\"message\":\"x\"}\n\nerror: plain text\n\n";
        let frames = decode_in_pieces(Framing::Sse, body, &[]);
        assert_eq!(frames[1], b"{\"error\":{\"code\":500,\"message\":\"x\"}}".to_vec());
        assert_eq!(frames[2], b"{\"error\":\"plain text\"}".to_vec());
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Sse, body, &[i]), frames);
        }
    }

    #[test]
    fn ndjson_lines_crlf_and_blank_lines() {
        let body = b"{\"a\":1}\r\n\n  \n{\"b\":2}";
        let whole = decode_in_pieces(Framing::Ndjson, body, &[]);
        assert_eq!(whole, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        for i in 0..=body.len() {
            assert_eq!(decode_in_pieces(Framing::Ndjson, body, &[i]), whole);
        }
    }
}
