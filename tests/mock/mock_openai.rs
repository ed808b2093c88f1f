//! The mock's OpenAI-compatible endpoints over real HTTP: wire shape as vLLM writes it.

use llmprobe::mock::{MockOptions, serve};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

async fn start(opts: MockOptions) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, opts, stop.clone()));
    (base, stop)
}

fn fast() -> MockOptions {
    let mut o = MockOptions::default();
    o.profile.step_base_us = 500.0;
    o.profile.decode_us_per_seq = 10.0;
    o.profile.prefill_us_per_token = 1.0;
    o
}

/// SSE `data:` payloads of a body, checking every event is `data: ...\n\n`.
fn sse_events(body: &str) -> Vec<String> {
    assert!(body.ends_with("\n\n"), "body ends with a blank line");
    body.split("\n\n").filter(|e| !e.is_empty()).map(|e| e.strip_prefix("data: ").unwrap_or_else(|| panic!("bad event {e:?}")).to_string()).collect()
}

async fn post(base: &str, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new().post(format!("{base}{path}")).header("content-type", "application/json").body(body.to_string()).send().await.unwrap()
}

#[tokio::test]
async fn chat_stream_has_role_chunk_usage_chunk_and_done() {
    let (base, stop) = start(fast()).await;
    let body = serde_json::json!({"model":"mock-llama","messages":[{"role":"user","content":"hello there"}],
        "max_tokens":8,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}});
    let r = post(&base, "/v1/chat/completions", body).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream; charset=utf-8");
    let ev = sse_events(&r.text().await.unwrap());
    assert_eq!(ev.len(), 1 + 8 + 1 + 1);
    let first: Value = serde_json::from_str(&ev[0]).unwrap();
    assert_eq!(first["choices"][0]["delta"], serde_json::json!({"role":"assistant","content":""}));
    assert_eq!(first["object"], "chat.completion.chunk");
    for e in &ev[1..8] {
        let v: Value = serde_json::from_str(e).unwrap();
        assert!(v["choices"][0]["finish_reason"].is_null());
        assert!(!v["choices"][0]["delta"]["content"].as_str().unwrap().is_empty());
    }
    let last: Value = serde_json::from_str(&ev[8]).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    let usage: Value = serde_json::from_str(&ev[9]).unwrap();
    assert_eq!(usage["choices"], serde_json::json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 8);
    assert_eq!(usage["usage"]["prompt_tokens"], 2 + 4 + 3);
    assert_eq!(ev[10], "[DONE]");
    stop.cancel();
}

#[tokio::test]
async fn completions_stream_continuous_usage_and_no_usage_by_default() {
    let (base, stop) = start(fast()).await;
    let body = serde_json::json!({"prompt":"a b c","max_tokens":5,"ignore_eos":true,"stream":true,
        "stream_options":{"include_usage":true,"continuous_usage_stats":true}});
    let ev = sse_events(&post(&base, "/v1/completions", body).await.text().await.unwrap());
    assert_eq!(ev.len(), 5 + 1 + 1);
    for (i, e) in ev[..5].iter().enumerate() {
        let v: Value = serde_json::from_str(e).unwrap();
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["usage"]["completion_tokens"], i + 1);
        assert_eq!(v["usage"]["prompt_tokens"], 3);
    }
    let body = serde_json::json!({"prompt":"a b c","max_tokens":5,"ignore_eos":true,"stream":true});
    let ev = sse_events(&post(&base, "/v1/completions", body).await.text().await.unwrap());
    assert_eq!(ev.len(), 5 + 1);
    assert!(!ev[4].contains("usage"));
    stop.cancel();
}

#[tokio::test]
async fn non_streaming_and_eos_and_min_tokens() {
    let (base, stop) = start(fast()).await;
    let body = serde_json::json!({"messages":[{"role":"user","content":"hi"}],"max_tokens":7,"ignore_eos":true});
    let v: Value = post(&base, "/v1/chat/completions", body).await.text().await.unwrap().parse::<Value>().unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["usage"]["completion_tokens"], 7);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["choices"][0]["message"]["content"].as_str().unwrap().split_whitespace().count(), 7);
    for _ in 0..5 {
        let body = serde_json::json!({"prompt":"x","max_tokens":400,"min_tokens":20});
        let v: Value = post(&base, "/v1/completions", body).await.text().await.unwrap().parse::<Value>().unwrap();
        let n = v["usage"]["completion_tokens"].as_u64().unwrap();
        assert!((20..=400).contains(&n), "{n}");
        let fr = v["choices"][0]["finish_reason"].as_str().unwrap();
        assert_eq!(fr == "length", n == 400);
    }
    stop.cancel();
}

#[tokio::test]
async fn errors_like_vllm() {
    let (base, stop) = start(fast()).await;
    let r = post(&base, "/v1/completions", serde_json::json!({"model":"nope","prompt":"x"})).await;
    assert_eq!(r.status(), 404);
    let v: Value = r.text().await.unwrap().parse::<Value>().unwrap();
    assert_eq!(v["error"]["type"], "NotFoundError");
    assert_eq!(v["error"]["code"], 404);
    let r = post(&base, "/v1/completions", serde_json::json!({"prompt":"x","max_tokens":5000})).await;
    assert_eq!(r.status(), 400);
    let v: Value = r.text().await.unwrap().parse::<Value>().unwrap();
    assert_eq!(v["error"]["param"], "max_tokens");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("max_tokens=5000 cannot be greater than max_model_len=4096"));
    stop.cancel();
}

#[tokio::test]
async fn api_key_guards_v1_only() {
    let mut o = fast();
    o.api_key = Some("sekret".into());
    let (base, stop) = start(o).await;
    let c = reqwest::Client::new();
    let r = c.get(format!("{base}/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.text().await.unwrap(), r#"{"error":"Unauthorized"}"#);
    let r = c.get(format!("{base}/v1/models")).bearer_auth("sekret").send().await.unwrap();
    let v: Value = r.text().await.unwrap().parse::<Value>().unwrap();
    assert_eq!(v["data"][0]["id"], "mock-llama");
    assert_eq!(c.get(format!("{base}/health")).send().await.unwrap().status(), 200);
    stop.cancel();
}

#[tokio::test]
async fn tokenize_counts_words_and_chat_template() {
    let (base, stop) = start(fast()).await;
    let v: Value = post(&base, "/tokenize", serde_json::json!({"prompt":"one two  three"})).await.text().await.unwrap().parse::<Value>().unwrap();
    assert_eq!(v["count"], 3);
    assert_eq!(v["max_model_len"], 4096);
    assert_eq!(v["tokens"].as_array().unwrap().len(), 3);
    let v: Value =
        post(&base, "/tokenize", serde_json::json!({"messages":[{"role":"user","content":"one two"}]})).await.text().await.unwrap().parse::<Value>().unwrap();
    assert_eq!(v["count"], 2 + 4 + 3);
    let v: Value = reqwest::get(format!("{base}/version")).await.unwrap().text().await.unwrap().parse::<Value>().unwrap();
    assert!(v["version"].is_string());
    stop.cancel();
}
