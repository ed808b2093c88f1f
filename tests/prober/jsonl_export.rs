//! `jsonl:`: the prober appends each finished probe and each release marker to a file as one
//! JSON line, with no prompt text and no secret of the request or the release API.

use crate::common;

use std::time::Duration;

use common::start_mock;
use llmprobe::app::{self, RunOptions};
use llmprobe::mock::MockOptions;
use tokio_util::sync::CancellationToken;

const API_KEY: &str = "sk-jsonl-key-never-written";
const HEADER_SECRET: &str = "header-secret-never-written";
const RELEASE_TOKEN: &str = "release-token-never-written";

fn lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_probe_and_release_is_a_json_line_without_prompts_or_secrets() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-jsonl-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (path, key_file, token_file) = (dir.join("probes.jsonl"), dir.join("key"), dir.join("token"));
    std::fs::write(&key_file, API_KEY).unwrap();
    std::fs::write(&token_file, RELEASE_TOKEN).unwrap();
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 40, seed: 5, shutdown_grace: 2s}}\n\
         jsonl: {{path: {}, max_bytes: 1048576}}\n\
         detect: {{release_token_file: {}}}\n\
         targets:\n  - name: t\n    base_url: http://{mock}\n    api: openai-chat\n    model: mock-llama\n    api_key_file: {}\n    \
         headers: {{X-Secret: {HEADER_SECRET}}}\n\
         scenarios:\n  - {{name: a, input_tokens: 16, output_tokens: 4}}\n",
        path.display(),
        token_file.display(),
        key_file.display()
    );
    let config = llmprobe::app::loader::parse(&yaml, "jsonl.yaml").unwrap_or_else(|e| panic!("{e}"));
    let shutdown = CancellationToken::new();
    let running = app::start(config, RunOptions::default(), shutdown.clone()).await.unwrap();
    let posted = reqwest::Client::new()
        .post(format!("http://{}/api/v1/releases", running.metrics_addr))
        .bearer_auth(RELEASE_TOKEN)
        .body(r#"{"target":"t","version":"v2"}"#)
        .send()
        .await
        .unwrap();
    assert!(posted.status().is_success(), "{}", posted.status());
    // Until 20 probes are in the file (bounded wait).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while lines(&path).iter().filter(|l| l["kind"] == "probe").count() < 20 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    let report = running.wait().await.unwrap();

    let all = lines(&path);
    let probes: Vec<_> = all.iter().filter(|l| l["kind"] == "probe").collect();
    assert!(probes.len() >= 20, "{} probe lines", probes.len());
    assert_eq!(probes.len() as u64, report.accounting.recorded(), "every recorded probe is one line");
    assert!(probes.iter().all(|l| l["target"] == "t" && l["scenario"] == "a" && l["model"] == "mock-llama"));
    assert!(probes.iter().all(|l| l["sent_unix_s"].as_f64().is_some_and(|s| s > 1.0e9) && l["e2e_ms"].as_f64().is_some()));
    let ok = probes.iter().find(|l| l["outcome"] == "success").expect("a successful probe");
    assert!(ok["ttft_ms"].as_f64().is_some_and(|v| v > 0.0) && ok["output_tokens"].as_u64().is_some_and(|n| n > 0), "{ok}");
    let releases: Vec<_> = all.iter().filter(|l| l["kind"] == "release").collect();
    assert_eq!(releases.len(), 1, "{releases:?}");
    assert_eq!((releases[0]["target"].as_str(), releases[0]["version"].as_str(), releases[0]["source"].as_str()), (Some("t"), Some("v2"), Some("api")));

    let text = std::fs::read_to_string(&path).unwrap();
    for secret in [API_KEY, HEADER_SECRET, RELEASE_TOKEN] {
        assert!(!text.contains(secret), "{secret} in the file");
    }
    // What a probe line may hold: no prompt, answer, failure detail or header.
    let fields = [
        "kind",
        "sent_unix_s",
        "target",
        "scenario",
        "replica",
        "seq",
        "request_id",
        "model",
        "outcome",
        "error",
        "http_status",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "input_tokens",
        "output_tokens",
        "goodput",
    ];
    for l in &probes {
        let extra: Vec<_> = l.as_object().unwrap().keys().filter(|k| !fields.contains(&k.as_str())).collect();
        assert!(extra.is_empty(), "unexpected fields {extra:?} in {l}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
