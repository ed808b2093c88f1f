//! Ollama, llama.cpp native and TGI front-ends, `/metrics` and the DCGM page over real HTTP.

use llmprobe::mock::{MockOptions, serve};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

async fn start() -> (String, CancellationToken) {
    let mut o = MockOptions::default();
    o.profile.step_base_us = 2_000.0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, o, stop.clone()));
    (base, stop)
}

async fn post(base: &str, path: &str, body: Value, fault: Option<&str>) -> reqwest::Response {
    let mut rb = reqwest::Client::new().post(format!("{base}{path}")).body(body.to_string());
    if let Some(f) = fault {
        rb = rb.header("x-mock-fault", f);
    }
    rb.send().await.unwrap()
}

async fn get(base: &str, path: &str) -> String {
    reqwest::get(format!("{base}{path}")).await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn ollama_generate_ndjson_with_ns_durations() {
    let (b, stop) = start().await;
    let r = post(
        &b,
        "/api/generate",
        serde_json::json!({"model":"mock-llama","prompt":"why is the sky blue",
        "options":{"num_predict":6,"ignore_eos":true}}),
        None,
    )
    .await;
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let text = r.text().await.unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 7);
    for l in &lines[..6] {
        assert_eq!(l["done"], false);
        assert!(l["response"].is_string());
        assert!(l["created_at"].as_str().unwrap().ends_with('Z'));
    }
    let last = &lines[6];
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "length");
    assert_eq!(last["eval_count"], 6);
    assert_eq!(last["prompt_eval_count"], 5);
    // Five 2 ms steps at least: nanoseconds, not milliseconds.
    assert!(last["eval_duration"].as_u64().unwrap() >= 10_000_000);
    assert!(last["total_duration"].as_u64().unwrap() >= last["eval_duration"].as_u64().unwrap());
    stop.cancel();
}

#[tokio::test]
async fn ollama_chat_and_error_shape() {
    let (b, stop) = start().await;
    let r = post(
        &b,
        "/api/chat",
        serde_json::json!({"messages":[{"role":"user","content":"hi"}],
        "options":{"num_predict":3,"ignore_eos":true}}),
        None,
    )
    .await;
    let lines: Vec<Value> = r.text().await.unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["message"]["role"], "assistant");
    assert_eq!(lines.last().unwrap()["done"], true);
    let r = post(&b, "/api/generate", serde_json::json!({"prompt":"x"}), Some("http_500")).await;
    assert_eq!(r.status(), 500);
    let v: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert!(v["error"].is_string());
    stop.cancel();
}

#[tokio::test]
async fn llamacpp_completion_ends_with_timings() {
    let (b, stop) = start().await;
    let r = post(&b, "/completion", serde_json::json!({"prompt":"a b c d","n_predict":5,"stream":true,"ignore_eos":true}), None).await;
    let text = r.text().await.unwrap();
    let ev: Vec<Value> = text.split("\n\n").filter(|e| !e.is_empty()).map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap()).collect();
    assert_eq!(ev.len(), 6);
    assert_eq!(ev[0]["stop"], false);
    assert!(ev[0]["content"].is_string());
    let t = &ev[5]["timings"];
    assert_eq!(ev[5]["stop"], true);
    assert_eq!(t["prompt_n"], 4);
    assert_eq!(t["predicted_n"], 5);
    assert!(t["predicted_ms"].as_f64().unwrap() >= 8.0);
    assert!(t["predicted_per_second"].as_f64().unwrap() > 0.0);
    stop.cancel();
}

#[tokio::test]
async fn tgi_stream_has_no_space_after_data_and_details_at_end() {
    let (b, stop) = start().await;
    let r = post(&b, "/generate_stream", serde_json::json!({"inputs":"hello world","parameters":{"max_new_tokens":4,"ignore_eos":true}}), None).await;
    assert_eq!(r.headers()["x-prompt-tokens"], "2");
    assert_eq!(r.headers()["x-generated-tokens"], "4");
    let text = r.text().await.unwrap();
    let ev: Vec<Value> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            assert!(e.starts_with("data:{"), "no space: {e}");
            serde_json::from_str(&e[5..]).unwrap()
        })
        .collect();
    assert_eq!(ev.len(), 4);
    for e in &ev[..3] {
        assert!(e["generated_text"].is_null() && e["details"].is_null());
        assert!(e["token"]["id"].is_u64() && e["token"]["special"] == false);
    }
    assert_eq!(ev[3]["details"]["finish_reason"], "length");
    assert_eq!(ev[3]["details"]["generated_tokens"], 4);
    assert_eq!(ev[3]["details"]["input_length"], 2);
    assert_eq!(ev[3]["generated_text"].as_str().unwrap().split_whitespace().count(), 4);
    stop.cancel();
}

#[tokio::test]
async fn metrics_have_vllm_names_and_labels() {
    let (b, stop) = start().await;
    post(&b, "/v1/completions", serde_json::json!({"prompt":"a b","max_tokens":3,"ignore_eos":true}), None).await.text().await.unwrap();
    let page = get(&b, "/metrics").await;
    let l = r#"{engine="0",model_name="mock-llama"}"#;
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count",
    ] {
        assert!(page.contains(&format!("{name}{l}")), "{name}");
    }
    assert!(page.contains(r#"vllm:request_success_total{engine="0",finished_reason="length",model_name="mock-llama"} 1.0"#));
    assert!(page.contains(r#"vllm:generation_tokens_total{engine="0",model_name="mock-llama"} 3.0"#));
    assert!(page.contains(r#"vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="mock-llama"}"#));
    assert!(page.contains(r#"vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="mock-llama"} 2.0"#));
    assert!(page.contains("# TYPE vllm:time_to_first_token_seconds histogram"));
    let dcgm = get(&b, "/dcgm/metrics").await;
    for f in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    ] {
        assert!(dcgm.contains(&format!("{f}{{gpu=\"0\",UUID=")), "{f}");
    }
    assert!(dcgm.contains("modelName=\"NVIDIA L4\"") && dcgm.contains("pci_bus_id=") && dcgm.contains("hostname="));
    stop.cancel();
}
