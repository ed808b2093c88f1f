//! HTTP content codings of a response body, decoded incrementally: each chunk from the network
//! is decoded as it arrives, so frames are timed as they come out of the decoder (a compressed
//! stream flushed per frame still streams), never at the end of the body.
//!
//! Decoded here rather than by the HTTP client: reqwest's own decompression would also pick the
//! `Accept-Encoding` header and hide which coding a response came in, and the prober must both
//! send `identity` by default and count the codings servers use anyway. `gzip` (`x-gzip`) and
//! `deflate` (zlib, or raw deflate as some servers send it) are decoded with flate2's pure-Rust
//! backend; any other coding (`br`, `zstd`, ...) is a `parse` error that names it.

use std::borrow::Cow;

pub use crate::config::ContentCoding;

use flate2::{Crc, Decompress, FlushDecompress, Status};

impl ContentCoding {
    /// The coding of a response from its `Content-Encoding` header(s): absent is `identity`;
    /// `identity` entries are skipped; more than one real coding (stacked), or one the prober
    /// cannot decode, is an error that names it.
    pub fn from_headers(headers: &reqwest::header::HeaderMap) -> Result<ContentCoding, String> {
        let mut found = ContentCoding::Identity;
        for value in headers.get_all(reqwest::header::CONTENT_ENCODING) {
            let text = value.to_str().map_err(|_| "content-encoding header is not ASCII".to_owned())?;
            for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                let coding = ContentCoding::parse(name).ok_or_else(|| {
                    let name = crate::protocol::truncate_chars(name, 40);
                    format!("content-encoding {name:?} is not supported (llmprobe decodes gzip and deflate)")
                })?;
                if coding == ContentCoding::Identity {
                    continue;
                }
                if found != ContentCoding::Identity {
                    return Err(format!("stacked content codings {text:?} are not supported"));
                }
                found = coding;
            }
        }
        Ok(found)
    }
}

/// Input fed to the inflater per step.
const STEP_INPUT: usize = 4096;
/// Room given to the inflater per step: it writes no more than this before the caps are
/// checked again, so a bomb overshoots them by at most this much (deflate itself expands up to
/// ~1032:1, 4 MiB from one input step).
const STEP_OUTPUT: usize = 64 << 10;
/// Largest ratio of decoded to coded bytes a body may reach once it has decoded
/// `RATIO_FREE_BYTES`: real answers (JSON, SSE, even a model repeating one token) stay well
/// under it; a bomb (zeros compress ~1000:1) is refused after about 1 MiB decoded, before the
/// decoded-size cap (the caller's `limit`, `max_response_bytes`) is near.
const MAX_RATIO: u64 = 256;
/// Decoded bytes allowed before the ratio is checked (short, very repetitive answers are fine).
const RATIO_FREE_BYTES: u64 = 1 << 20;

/// Decodes one response body, chunk by chunk.
#[derive(Debug)]
pub struct ContentDecoder {
    state: State,
    /// Coded bytes fed and decoded bytes given out so far, for the ratio cap.
    coded: u64,
    decoded: u64,
}

#[derive(Debug)]
enum State {
    Identity,
    /// `deflate` before its first two bytes tell zlib from raw deflate (held here until then).
    DeflateStart(Vec<u8>),
    Deflate(Box<Decompress>),
    /// gzip: collecting a member's header.
    GzHeader(Vec<u8>),
    GzBody(Box<Decompress>, Crc),
    /// gzip: collecting a member's CRC-32 and size.
    GzTrailer(Vec<u8>, Crc),
    /// The (last) compressed stream ended; only more gzip members may follow.
    Done,
}

impl ContentDecoder {
    pub fn new(coding: ContentCoding) -> Self {
        let state = match coding {
            ContentCoding::Identity => State::Identity,
            ContentCoding::Gzip => State::GzHeader(Vec::new()),
            ContentCoding::Deflate => State::DeflateStart(Vec::with_capacity(2)),
        };
        ContentDecoder { state, coded: 0, decoded: 0 }
    }

    /// Decodes a chunk; `limit` is the most decoded bytes this chunk may yield (the caller's
    /// remaining response budget, the decoded-size cap). Errors say what is wrong with the coded
    /// data, or which cap it broke: more than `limit` decoded bytes, or more than `MAX_RATIO`
    /// decoded bytes per coded byte over the body once `RATIO_FREE_BYTES` are decoded. The
    /// inflater never writes more than `STEP_OUTPUT` past either cap, so a refused bomb costs
    /// about 1 MiB, not the size it claims.
    pub fn decode<'a>(&mut self, input: &'a [u8], limit: usize) -> Result<Cow<'a, [u8]>, String> {
        if matches!(self.state, State::Identity) {
            return Ok(Cow::Borrowed(input));
        }
        let input_len = input.len();
        // The ratio counts coded bytes as the inflater consumes them, not the whole chunk at
        // once: a large chunk (a client that reads 512 KiB at a time) must not lend a bomb the
        // budget of all its bytes before the first of them is decoded.
        let allowed = Allowed { limit, decoded_before: self.decoded, coded_before: self.coded, coded_now: std::cell::Cell::new(0) };
        let mut out = Vec::new();
        let mut input = input;
        while !input.is_empty() {
            input = self.step(input, &mut out, &allowed)?;
        }
        self.decoded += out.len() as u64;
        self.coded += input_len as u64;
        Ok(Cow::Owned(out))
    }

    /// Consumes a prefix of `input` (at least one byte, or all of it), appending decoded bytes.
    fn step<'a>(&mut self, input: &'a [u8], out: &mut Vec<u8>, limit: &Allowed) -> Result<&'a [u8], String> {
        match &mut self.state {
            State::Identity => {
                out.extend_from_slice(input);
                Ok(&[])
            }
            State::DeflateStart(head) => {
                let take = input.len().min(2 - head.len());
                head.extend_from_slice(&input[..take]);
                if head.len() < 2 {
                    return Ok(&input[take..]);
                }
                // zlib: CM = 8 in the low nibble, a window of at most 32 KiB, header checksum.
                let zlib = head[0] & 0x0F == 8 && head[0] >> 4 <= 7 && (u16::from(head[0]) << 8 | u16::from(head[1])) % 31 == 0;
                let head = std::mem::take(head);
                let mut z = Box::new(Decompress::new(zlib));
                let (used, end) = inflate(&mut z, &head, out, limit, None)?;
                if used < head.len() && !end {
                    return Err("corrupt compressed data at its start".to_owned());
                }
                self.state = if end { State::Done } else { State::Deflate(z) };
                Ok(&input[take..])
            }
            State::Deflate(z) => {
                let (used, end) = inflate(z, input, out, limit, None)?;
                if end {
                    self.state = State::Done;
                }
                Ok(&input[used..])
            }
            State::GzHeader(buf) => {
                let take = input.len().min(STEP_INPUT);
                buf.extend_from_slice(&input[..take]);
                match gzip_header_len(buf)? {
                    None => Ok(&input[take..]),
                    Some(n) => {
                        // Bytes after the header went into `buf` too: hand them back.
                        let extra = buf.len() - n;
                        self.state = State::GzBody(Box::new(Decompress::new(false)), Crc::new());
                        Ok(&input[take - extra..])
                    }
                }
            }
            State::GzBody(z, crc) => {
                let (used, end) = inflate(z, input, out, limit, Some(crc))?;
                if end {
                    let crc = std::mem::replace(crc, Crc::new());
                    self.state = State::GzTrailer(Vec::with_capacity(8), crc);
                }
                Ok(&input[used..])
            }
            State::GzTrailer(buf, crc) => {
                let take = input.len().min(8 - buf.len());
                buf.extend_from_slice(&input[..take]);
                if buf.len() == 8 {
                    let want_crc = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
                    let want_len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
                    if want_crc != crc.sum() || want_len != crc.amount() {
                        return Err("gzip data fails its CRC-32 or length check".to_owned());
                    }
                    self.state = State::Done;
                }
                Ok(&input[take..])
            }
            State::Done => {
                if input[0] == 0x1f {
                    // Another gzip member (concatenated gzip is one valid body).
                    self.state = State::GzHeader(Vec::new());
                    Ok(input)
                } else {
                    Err("bytes after the end of the compressed body".to_owned())
                }
            }
        }
    }
}

/// What one `decode` call may yield.
struct Allowed {
    /// Decoded bytes this call may yield (the caller's budget).
    limit: usize,
    /// Decoded bytes of the body before this call.
    decoded_before: u64,
    /// Coded bytes of the body before this call, and consumed by the inflater in it.
    coded_before: u64,
    coded_now: std::cell::Cell<u64>,
}

impl Allowed {
    /// Total decoded bytes the ratio cap allows for the coded bytes consumed so far.
    fn ratio_budget(&self) -> u64 {
        (self.coded_before + self.coded_now.get()).saturating_mul(MAX_RATIO).max(RATIO_FREE_BYTES)
    }

    /// Why `out` (this call's output so far) breaks a cap, if it does.
    fn check(&self, out: usize) -> Result<(), String> {
        if out > self.limit {
            return Err(format!("decoded body exceeded {} bytes", self.limit));
        }
        if self.decoded_before + out as u64 > self.ratio_budget() {
            return Err(format!("decoded body grew past {MAX_RATIO} times its compressed size (a compression bomb)"));
        }
        Ok(())
    }
}

/// Runs the inflater over `input`; returns bytes consumed and whether the stream ended.
fn inflate(z: &mut Decompress, input: &[u8], out: &mut Vec<u8>, allowed: &Allowed, mut crc: Option<&mut Crc>) -> Result<(usize, bool), String> {
    let mut used = 0;
    // The inflater writes into this, at most `STEP_OUTPUT` per step; the caps are checked
    // before a step's output joins `out`, so `out` never grows past them.
    let mut buf = vec![0; STEP_OUTPUT];
    loop {
        let piece = &input[used..(used + STEP_INPUT).min(input.len())];
        let (in_before, out_before) = (z.total_in(), z.total_out());
        let status = z.decompress(piece, &mut buf, FlushDecompress::None).map_err(|e| format!("corrupt compressed data: {e}"))?;
        let consumed = (z.total_in() - in_before) as usize;
        let produced = (z.total_out() - out_before) as usize;
        used += consumed;
        allowed.coded_now.set(allowed.coded_now.get() + consumed as u64);
        allowed.check(out.len() + produced)?;
        if let Some(c) = crc.as_deref_mut() {
            c.update(&buf[..produced]);
        }
        out.extend_from_slice(&buf[..produced]);
        if status == Status::StreamEnd {
            return Ok((used, true));
        }
        if consumed == 0 && produced == 0 {
            if used < input.len() {
                return Err("compressed data makes no progress".to_owned());
            }
            // All input taken and nothing more to give until the next chunk.
            return Ok((used, false));
        }
    }
}

/// The length of a complete gzip member header at the start of `buf` (RFC 1952), `None` while
/// more bytes are needed.
fn gzip_header_len(buf: &[u8]) -> Result<Option<usize>, String> {
    if buf.len() < 10 {
        if buf.len() >= 2 && buf[..2] != [0x1f, 0x8b] {
            return Err("content-encoding gzip, but the body is not gzip data".to_owned());
        }
        return Ok(None);
    }
    if buf[..2] != [0x1f, 0x8b] || buf[2] != 8 {
        return Err("content-encoding gzip, but the body is not gzip data".to_owned());
    }
    let flags = buf[3];
    let mut at = 10;
    if flags & 0x04 != 0 {
        let Some(len) = buf.get(at..at + 2) else { return Ok(None) };
        at += 2 + usize::from(u16::from_le_bytes([len[0], len[1]]));
    }
    for bit in [0x08, 0x10] {
        if flags & bit != 0 {
            match buf.get(at..).and_then(|rest| rest.iter().position(|&b| b == 0)) {
                Some(i) => at += i + 1,
                None if buf.len() > 64 * 1024 => return Err("gzip header name or comment too long".to_owned()),
                None => return Ok(None),
            }
        }
    }
    if flags & 0x02 != 0 {
        at += 2;
    }
    Ok((buf.len() >= at).then_some(at))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(parts: &[&[u8]]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        for p in parts {
            e.write_all(p).unwrap();
            e.flush().unwrap();
        }
        e.finish().unwrap()
    }

    fn decode_all(coding: ContentCoding, body: &[u8], cut: usize) -> Result<Vec<u8>, String> {
        let mut d = ContentDecoder::new(coding);
        let mut out = d.decode(&body[..cut], usize::MAX)?.into_owned();
        out.extend_from_slice(&d.decode(&body[cut..], usize::MAX)?);
        Ok(out)
    }

    #[test]
    fn gzip_decodes_at_every_split() {
        let body = gzip(&[b"data: one\n\n", b"data: two\n\n"]);
        for cut in 0..=body.len() {
            assert_eq!(decode_all(ContentCoding::Gzip, &body, cut).unwrap(), b"data: one\n\ndata: two\n\n", "cut {cut}");
        }
    }

    #[test]
    fn a_flushed_gzip_stream_yields_each_part_as_it_arrives() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut d = ContentDecoder::new(ContentCoding::Gzip);
        for part in [&b"data: a\n\n"[..], b"data: b\n\n"] {
            e.write_all(part).unwrap();
            e.flush().unwrap();
            let wire = std::mem::take(e.get_mut());
            assert_eq!(&*d.decode(&wire, usize::MAX).unwrap(), part);
        }
    }

    #[test]
    fn deflate_zlib_and_raw_and_concatenated_gzip() {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"{\"a\":1}\n").unwrap();
        let zlib = z.finish().unwrap();
        for cut in 0..=zlib.len() {
            assert_eq!(decode_all(ContentCoding::Deflate, &zlib, cut).unwrap(), b"{\"a\":1}\n", "cut {cut}");
        }
        let mut r = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        r.write_all(b"{\"a\":1}\n").unwrap();
        assert_eq!(decode_all(ContentCoding::Deflate, &r.finish().unwrap(), 0).unwrap(), b"{\"a\":1}\n");
        let two = [gzip(&[b"ab"]), gzip(&[b"cd"])].concat();
        assert_eq!(decode_all(ContentCoding::Gzip, &two, 5).unwrap(), b"abcd");
    }

    #[test]
    fn corrupt_data_and_bombs_are_errors_not_panics() {
        assert!(decode_all(ContentCoding::Gzip, b"data: plain text\n\n", 3).is_err());
        let mut body = gzip(&[b"data: x\n\n"]);
        let n = body.len();
        body[n - 6] ^= 0xff; // CRC
        assert!(decode_all(ContentCoding::Gzip, &body, 0).unwrap_err().contains("CRC"));
        let bomb = gzip(&[&vec![b'a'; 8 << 20]]);
        let mut d = ContentDecoder::new(ContentCoding::Gzip);
        assert!(d.decode(&bomb, 1 << 20).unwrap_err().contains("exceeded"));
    }

    #[test]
    fn the_ratio_cap_refuses_a_bomb_early_and_passes_real_text() {
        // 32 MiB of zeros is ~32 KiB of gzip: refused once past 1 MiB decoded, whatever the limit.
        let bomb = gzip(&[&vec![0; 32 << 20]]);
        let mut d = ContentDecoder::new(ContentCoding::Gzip);
        let err = bomb.chunks(512).find_map(|piece| d.decode(piece, usize::MAX).err()).expect("refused");
        assert!(err.contains("compression bomb"), "{err}");
        assert!(d.decoded <= RATIO_FREE_BYTES + STEP_OUTPUT as u64, "stopped at {} decoded bytes", d.decoded);
        // Repetitive SSE far past RATIO_FREE_BYTES, at a real ratio, decodes whole.
        let text: Vec<u8> =
            (0..60_000).flat_map(|i| format!("data: {{\"id\":\"c-1\",\"choices\":[{{\"text\":\" w{}\"}}]}}\n\n", i * 7919 % 10007).into_bytes()).collect();
        assert!(text.len() > 2 << 20);
        assert_eq!(decode_all(ContentCoding::Gzip, &gzip(&[&text]), 100).unwrap(), text);
    }

    #[test]
    fn a_bomb_in_one_large_chunk_gets_no_budget_from_the_bytes_after_it() {
        // 8 MiB of zeros, then 512 KiB of noise: about 100:1 over the whole body, but the zeros
        // alone are ~1000:1. Read in one chunk (as a client with large reads does), the ratio
        // counts only the bytes inflated so far, so the zeros are refused past 1 MiB.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let noise: Vec<u8> = (0..512 << 10)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let body = gzip(&[&vec![0; 8 << 20], &noise]);
        assert!(((8 << 20) + noise.len()) as u64 <= body.len() as u64 * MAX_RATIO, "the whole body is under the ratio");
        let err = ContentDecoder::new(ContentCoding::Gzip).decode(&body, usize::MAX).unwrap_err();
        assert!(err.contains("compression bomb"), "{err}");
    }

    #[test]
    fn codings_from_headers() {
        let h = |v: &str| {
            let mut m = reqwest::header::HeaderMap::new();
            m.insert(reqwest::header::CONTENT_ENCODING, v.parse().unwrap());
            ContentCoding::from_headers(&m)
        };
        assert_eq!(ContentCoding::from_headers(&reqwest::header::HeaderMap::new()), Ok(ContentCoding::Identity));
        assert_eq!(h("GZIP"), Ok(ContentCoding::Gzip));
        assert_eq!(h("x-gzip, identity"), Ok(ContentCoding::Gzip));
        assert_eq!(h("deflate"), Ok(ContentCoding::Deflate));
        assert!(h("br").unwrap_err().contains("\"br\" is not supported"));
        assert!(h("zstd").unwrap_err().contains("zstd"));
        assert!(h("gzip, deflate").unwrap_err().contains("stacked"));
    }
}
