//! `POST /mock/control`: a simulated release changes the version the mock reports and how slow
//! its engine steps are, at run time; bad requests are refused and change nothing.

use crate::common;

use std::time::Instant;

use common::start_mock;
use llmprobe::mock::MockOptions;

async fn version(base: &str, path: &str) -> String {
    let text = reqwest::get(format!("{base}{path}")).await.unwrap().text().await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["version"].as_str().unwrap().to_owned()
}

/// Seconds for one 24-token completion (the whole answer, not streamed).
async fn completion_seconds(base: &str) -> f64 {
    let body = serde_json::json!({"model": "mock-llama", "prompt": "why", "max_tokens": 24, "ignore_eos": true});
    let t0 = Instant::now();
    let resp =
        reqwest::Client::new().post(format!("{base}/v1/completions")).header("content-type", "application/json").body(body.to_string()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.bytes().await.unwrap();
    t0.elapsed().as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_changes_version_and_speed() {
    let (addr, _stop) = start_mock(MockOptions::default()).await;
    let base = format!("http://{addr}");
    assert_eq!(version(&base, "/version").await, "0.32.0");
    assert_eq!(version(&base, "/api/version").await, "0.12.0");
    let before = completion_seconds(&base).await;

    let client = reqwest::Client::new();
    let resp = client.post(format!("{base}/mock/control")).body(r#"{"engine_version":"0.33.0","slowdown":6}"#).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let state: serde_json::Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(state, serde_json::json!({"engine_version": "0.33.0", "slowdown": 6.0, "faults": null}));
    assert_eq!(version(&base, "/version").await, "0.33.0");
    assert_eq!(version(&base, "/api/version").await, "0.33.0");
    let after = completion_seconds(&base).await;
    assert!(after > 2.0 * before, "six times slower steps: {before:.3}s -> {after:.3}s");

    for bad in [r#"{"slowdown":-1}"#, r#"{"slowdown":1e9}"#, r#"{"speed":2}"#, "not json"] {
        let resp = client.post(format!("{base}/mock/control")).body(bad).send().await.unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
    }
    let state: serde_json::Value = serde_json::from_str(&client.get(format!("{base}/mock/control")).send().await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(state["slowdown"], 6.0, "a refused request changes nothing");
}
