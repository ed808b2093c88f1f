//! Every fault kind on every streaming front-end besides chat (which `mock_faults.rs`
//! covers in detail): OpenAI completions, Ollama NDJSON, llama.cpp native SSE and TGI SSE, read
//! by a raw HTTP client and checked against each family's framing.

use crate::mock_wire;

use std::time::Duration;

use llmprobe::mock::{MockOptions, serve};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use mock_wire::Got;

struct Family {
    name: &'static str,
    path: &'static str,
    body: fn(u32) -> Value,
    /// SSE (`\n\n`-separated) or NDJSON (`\n`-separated).
    sse: bool,
    /// Frames after the last token frame in a normal stream (usage chunk, final object, [DONE]).
    trailer: usize,
    has_done: bool,
}

const FAMILIES: &[Family] = &[
    Family {
        name: "completions",
        path: "/v1/completions",
        sse: true,
        trailer: 2,
        has_done: true,
        body: |n| json!({"prompt":"a b c","max_tokens":n,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}),
    },
    Family {
        name: "ollama",
        path: "/api/generate",
        sse: false,
        trailer: 1,
        has_done: false,
        body: |n| json!({"model":"mock-llama","prompt":"a b c","options":{"num_predict":n,"ignore_eos":true}}),
    },
    Family {
        name: "llama.cpp",
        path: "/completion",
        sse: true,
        trailer: 1,
        has_done: false,
        body: |n| json!({"prompt":"a b c","n_predict":n,"ignore_eos":true,"stream":true}),
    },
    Family {
        name: "tgi",
        path: "/generate_stream",
        sse: true,
        trailer: 0,
        has_done: false,
        body: |n| json!({"inputs":"a b c","parameters":{"max_new_tokens":n,"ignore_eos":true}}),
    },
    Family {
        name: "sglang",
        path: "/generate",
        sse: true,
        trailer: 1,
        has_done: true,
        body: |n| json!({"text":"a b c","sampling_params":{"max_new_tokens":n,"ignore_eos":true},"stream":true}),
    },
];

impl Got {
    /// Frame payloads without their `data:` / `error:` prefix.
    fn frames(&self, f: &Family) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.body()).into_owned();
        let sep = if f.sse { "\n\n" } else { "\n" };
        text.split(sep)
            .filter(|e| !e.is_empty())
            .map(|e| ["data: ", "data:", "error: "].iter().find_map(|p| e.strip_prefix(p)).unwrap_or(e).to_string())
            .collect()
    }
}

async fn start() -> (String, CancellationToken) {
    let mut o = MockOptions::default();
    o.profile.step_base_us = 10_000.0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    (base, stop)
}

async fn send(base: &str, f: &Family, fault: &str, extra: &[(&str, &str)], n: u32) -> Result<Got, reqwest::Error> {
    let mut rb = reqwest::Client::new()
        .post(format!("{base}{}", f.path))
        .header("content-type", "application/json")
        .header("x-mock-fault", fault)
        .body((f.body)(n).to_string());
    for (k, v) in extra {
        rb = rb.header(*k, *v);
    }
    mock_wire::collect(rb).await
}

fn is_json(s: &str) -> bool {
    serde_json::from_str::<Value>(s).is_ok()
}

/// Checks every kind on one family; returns the kinds checked.
async fn check_family(b: &str, f: &Family) -> Vec<&'static str> {
    let name = f.name;
    let normal = |n: usize| n + f.trailer;
    let mut checked = Vec::new();
    let ok = send(b, f, "none", &[], 6).await.unwrap();
    assert_eq!(ok.frames(f).len(), normal(6), "{name}: normal stream");

    assert!(send(b, f, "refuse", &[], 4).await.is_err(), "{name} refuse");
    assert!(send(b, f, "close_before_response", &[], 4).await.is_err(), "{name} close_before_response");
    let g = send(b, f, "reset_mid_stream", &[("x-mock-fault-after", "2")], 10).await.unwrap();
    assert!(g.status == 200 && g.error && !g.body().is_empty(), "{name} reset_mid_stream");
    assert_eq!(g.frames(f).len(), 2, "{name} reset after two frames");
    checked.extend(["refuse", "close_before_response", "reset_mid_stream"]);

    let g = send(b, f, "stall_ttft", &[("x-mock-stall-ms", "400")], 3).await.unwrap();
    assert!(g.chunks[0].0 >= Duration::from_millis(400), "{name} stall_ttft {:?}", g.chunks[0].0);
    assert_eq!(g.frames(f).len(), normal(3), "{name} stall_ttft completes");
    let g = send(b, f, "stall_mid_stream", &[("x-mock-stall-ms", "400"), ("x-mock-fault-after", "1")], 4).await.unwrap();
    assert!(g.chunks[0].0 < Duration::from_millis(300) && g.chunks.last().unwrap().0 >= Duration::from_millis(400), "{name} stall_mid_stream");
    assert_eq!(g.frames(f).len(), normal(4), "{name} stall_mid_stream completes");
    let g = send(b, f, "slow_drip", &[("x-mock-drip-ms", "1")], 1).await.unwrap();
    assert!(g.chunks.len() > 50, "{name} slow_drip: {} chunks", g.chunks.len());
    assert_eq!(g.frames(f).len(), normal(1), "{name} slow_drip completes");
    checked.extend(["stall_ttft", "stall_mid_stream", "slow_drip"]);

    for (fault, status) in [("http_429", 429), ("http_500", 500), ("http_503", 503), ("http_400", 400)] {
        let g = send(b, f, fault, &[], 4).await.unwrap();
        assert_eq!(g.status, status, "{name} {fault}");
        let v: Value = serde_json::from_slice(&g.body()).unwrap_or_else(|e| panic!("{name} {fault}: {e}"));
        assert!(!v["error"].is_null(), "{name} {fault} body {v}");
        if status == 429 {
            assert_eq!(g.headers["retry-after"], "1", "{name}");
        }
        checked.push(fault);
    }

    let fr = send(b, f, "error_in_stream", &[("x-mock-fault-after", "2")], 10).await.unwrap().frames(f);
    let err: Value = serde_json::from_str(&fr[2]).unwrap_or_else(|e| panic!("{name} error frame {:?}: {e}", fr[2]));
    // llama.cpp writes the error object itself after `error: `; the others wrap it in `error`.
    assert!(!err["error"].is_null() || err["message"].is_string(), "{name} error frame {err}");
    assert_eq!(fr.len(), 3 + usize::from(f.has_done), "{name} error_in_stream frames {fr:?}");
    let g = send(b, f, "empty_stream", &[], 5).await.unwrap();
    assert_eq!(g.status, 200);
    assert_eq!(g.frames(f), if f.has_done { vec!["[DONE]".to_string()] } else { vec![] }, "{name} empty_stream");
    let fr = send(b, f, "no_done", &[], 3).await.unwrap().frames(f);
    assert!(!fr.iter().any(|e| e == "[DONE]"), "{name} no_done");
    assert_eq!(fr.len(), normal(3) - usize::from(f.has_done), "{name} no_done keeps every other frame");
    checked.extend(["error_in_stream", "empty_stream", "no_done"]);

    let fr = send(b, f, "malformed_json", &[("x-mock-fault-after", "1")], 4).await.unwrap().frames(f);
    let bad: Vec<usize> = (0..fr.len()).filter(|i| fr[*i] != "[DONE]" && !is_json(&fr[*i])).collect();
    assert_eq!(bad, vec![1], "{name} malformed_json");
    let g = send(b, f, "invalid_utf8", &[], 5).await.unwrap();
    assert!(std::str::from_utf8(&g.body()).is_err(), "{name} invalid_utf8");
    let fr = send(b, f, "oversized_frame", &[], 5).await.unwrap().frames(f);
    // Frame number 3 (the default fault-after) carries the padding; TGI's final event repeats it
    // in `generated_text`, which is the whole text.
    let big: Vec<usize> = (0..fr.len()).filter(|i| fr[*i].len() > 1 << 20).collect();
    assert!(big.first() == Some(&3) && big.len() <= 2, "{name} oversized_frame {big:?}");
    let g = send(b, f, "wrong_content_type", &[], 2).await.unwrap();
    assert!(g.headers["content-type"].to_str().unwrap().starts_with("text/html"), "{name}");
    assert_eq!(g.frames(f).len(), normal(2), "{name} wrong_content_type keeps the body");
    checked.extend(["malformed_json", "invalid_utf8", "oversized_frame", "wrong_content_type"]);

    let g = send(b, f, "buffered", &[], 8).await.unwrap();
    let first = Got { chunks: vec![g.chunks[0].clone()], ..g };
    assert_eq!(first.frames(f).len(), normal(8), "{name} buffered: everything in the first burst");
    assert!(g.chunks[0].0 >= Duration::from_millis(70), "{name} buffered arrives at the end");
    let fr = send(b, f, "multi_token_frames", &[], 8).await.unwrap().frames(f);
    assert_eq!(fr.len(), normal(2), "{name} multi_token_frames: two 4-token frames");
    let fr = send(b, f, "truncate_after_one", &[], 8).await.unwrap().frames(f);
    assert_eq!(fr.len(), 1 + usize::from(f.has_done), "{name} truncate_after_one {fr:?}");
    checked.extend(["buffered", "multi_token_frames", "truncate_after_one"]);

    let g = send(b, f, "gzip_stream", &[], 6).await.unwrap();
    assert_eq!(g.headers["content-encoding"], "gzip", "{name} gzip_stream");
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&g.body()[..]), &mut plain).unwrap();
    let decoded = Got { status: g.status, headers: g.headers.clone(), chunks: vec![(Duration::ZERO, plain)], error: false };
    assert_eq!(decoded.frames(f).len(), normal(6), "{name} gzip_stream: the normal frames, compressed");
    assert!(g.chunks.len() > 6, "{name} gzip_stream still streams: {} chunks", g.chunks.len());
    checked.push("gzip_stream");
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_on_every_streaming_family() {
    let (b, stop) = start().await;
    for f in FAMILIES {
        let checked = check_family(&b, f).await;
        assert_eq!(checked.len(), 21, "{}: {checked:?}", f.name);
    }
    stop.cancel();
}
