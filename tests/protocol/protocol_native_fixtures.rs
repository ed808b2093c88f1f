//! Ollama, llama.cpp native and TGI streams through the frame decoders and parsers: streams
//! captured from the mock engine's front-ends (`mock-*`) and hand-written cases built from the
//! engines' documented wire format (`hand-*`; see tests/fixtures/streams/README.md). The whole
//! body, the body split at every byte offset, and byte-at-a-time delivery give the same events.

use crate::stream_fixtures;

use llmprobe::protocol::{ProtocolError, ProtocolKind, StreamEvent};
use stream_fixtures::{events, fixture};

/// Every split gives the events of the whole body; returns them.
fn split_invariant(name: &str, kind: ProtocolKind) -> Vec<Result<StreamEvent, ProtocolError>> {
    let body = fixture(name);
    let whole = events(kind, &[&body]);
    for cut in 0..=body.len() {
        assert_eq!(events(kind, &[&body[..cut], &body[cut..]]), whole, "{name} split at byte {cut}");
    }
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(events(kind, &bytes), whole, "{name} one byte at a time");
    whole
}

#[derive(Debug, PartialEq)]
struct Totals {
    text_frames: usize,
    reasoning_frames: usize,
    counter_tokens: Option<u64>,
    frame_tokens: Option<u64>,
    finish_reason: Option<String>,
    done_at_last_frame: bool,
    server_phases: usize,
}

fn totals(events: &[Result<StreamEvent, ProtocolError>]) -> Totals {
    let ok: Vec<&StreamEvent> = events.iter().map(|e| e.as_ref().expect("frames parse")).collect();
    let text: Vec<&&StreamEvent> = ok.iter().filter(|e| e.has_text()).collect();
    let frame_tokens: Option<u64> = text.iter().map(|e| e.tokens).sum();
    Totals {
        text_frames: text.len(),
        reasoning_frames: ok.iter().filter(|e| e.reasoning_bytes > 0).count(),
        counter_tokens: ok.iter().rev().find_map(|e| e.counter).map(|c| c.completion_tokens),
        frame_tokens,
        finish_reason: ok.iter().rev().find_map(|e| e.finish_reason.clone()),
        done_at_last_frame: ok.last().is_some_and(|e| e.done) && ok.iter().filter(|e| e.done).count() == 1,
        server_phases: ok.iter().map(|e| e.server_timing.phases().count()).sum(),
    }
}

fn t(text: usize, reasoning: usize, counter: Option<u64>, frame_tokens: Option<u64>, finish: &str, phases: usize) -> Totals {
    Totals {
        text_frames: text,
        reasoning_frames: reasoning,
        counter_tokens: counter,
        frame_tokens,
        finish_reason: Some(finish.into()),
        done_at_last_frame: true,
        server_phases: phases,
    }
}

#[test]
fn ollama_generate_from_the_mock() {
    let ev = split_invariant("mock-ollama_generate_stream.ndjson", ProtocolKind::OllamaGenerate);
    // 8 tokens, one per line, then `done: true` with counters and four durations.
    assert_eq!(totals(&ev), t(8, 0, Some(8), None, "length", 4));
}

#[test]
fn ollama_chat_from_the_mock() {
    let ev = split_invariant("mock-ollama_chat_stream.ndjson", ProtocolKind::OllamaChat);
    assert_eq!(totals(&ev), t(8, 0, Some(8), None, "length", 4));
}

#[test]
fn ollama_thinking_first_with_crlf_and_a_blank_line() {
    let ev = split_invariant("hand-ollama_generate_thinking_crlf.ndjson", ProtocolKind::OllamaGenerate);
    assert_eq!(totals(&ev), t(4, 2, Some(4), None, "stop", 4));
    let first_content = ev.iter().position(|e| e.as_ref().unwrap().content_bytes > 0);
    assert_eq!(first_content, Some(2), "reasoning came first: TTFT on frame 0, first content on frame 2");
}

#[test]
fn ollama_error_line_under_200() {
    let ev = split_invariant("mock-ollama_generate_error_in_stream.ndjson", ProtocolKind::OllamaGenerate);
    assert_eq!(ev.len(), 4);
    assert!(matches!(ev[3], Err(ProtocolError::Stream(ref m)) if m.contains("error_in_stream")));
}

#[test]
fn llamacpp_from_the_mock() {
    let ev = split_invariant("mock-llamacpp_completion_stream.sse.txt", ProtocolKind::Llamacpp);
    // Per-chunk tokens from the `tokens_predicted` steps; `timings` give prefill, decode, total.
    assert_eq!(totals(&ev), t(8, 0, Some(8), Some(8), "length", 3));
}

#[test]
fn llamacpp_without_token_ids_ends_on_stop_eos() {
    let ev = split_invariant("hand-llamacpp_no_token_ids_eos.sse.txt", ProtocolKind::Llamacpp);
    assert_eq!(totals(&ev), t(2, 0, Some(3), None, "stop", 3));
}

#[test]
fn llamacpp_error_line_is_a_stream_error() {
    let ev = split_invariant("mock-llamacpp_error_in_stream.sse.txt", ProtocolKind::Llamacpp);
    assert!(matches!(ev.last().unwrap(), Err(ProtocolError::Stream(m)) if m.contains("error_in_stream")));
}

#[test]
fn tgi_from_the_mock() {
    let ev = split_invariant("mock-tgi_generate_stream.sse.txt", ProtocolKind::Tgi);
    assert_eq!(totals(&ev), t(8, 0, Some(8), Some(8), "length", 0));
}

#[test]
fn tgi_multi_token_events_from_the_mock() {
    let ev = split_invariant("mock-tgi_multi_token_frames.sse.txt", ProtocolKind::Tgi);
    // Two events carry four tokens each: the `index` jumps by four.
    assert_eq!(totals(&ev), t(2, 0, Some(8), Some(8), "length", 0));
    let per: Vec<_> = ev.iter().map(|e| e.as_ref().unwrap().tokens).collect();
    assert_eq!(per, [Some(4), Some(4)]);
}

#[test]
fn tgi_index_from_one_as_real_tgi_numbers_its_events() {
    let ev = split_invariant("hand-tgi_generate_stream_index_from_1.sse.txt", ProtocolKind::Tgi);
    // 16 events, indices 1..=16, one token each: 16 tokens, no event counted as two.
    assert_eq!(totals(&ev), t(16, 0, Some(16), Some(16), "length", 0));
    assert!(ev.iter().all(|e| e.as_ref().unwrap().tokens == Some(1)), "every event is one token");
}

#[test]
fn tgi_special_eos_token_is_not_text_but_ends_the_stream() {
    let ev = split_invariant("hand-tgi_special_eos_last.sse.txt", ProtocolKind::Tgi);
    assert_eq!(totals(&ev), t(2, 0, Some(3), Some(2), "eos_token", 0));
}

#[test]
fn tgi_error_event() {
    let ev = split_invariant("hand-tgi_error_midstream.sse.txt", ProtocolKind::Tgi);
    assert!(matches!(ev.last().unwrap(), Err(ProtocolError::Stream(m)) if m.contains("CUDA out of memory")));
}
