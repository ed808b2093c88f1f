//! Config reload on a running prober (the binary, over loopback): an invalid file, or a valid
//! one whose `api_key_file` is missing, is rejected (every problem logged,
//! `llmprobe_config_last_reload_successful` 0, probing goes on with the running config); a
//! valid one, by SIGHUP or `POST /-/reload` (only with `--web.enable-lifecycle`), applies, and
//! series the new config keeps go on counting instead of restarting from zero.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{metric, start_mock};
use llmprobe::mock::MockOptions;
use tokio::io::AsyncReadExt;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

fn config(port: u16, mock: std::net::SocketAddr, scenarios: &[&str]) -> String {
    let list: String = scenarios.iter().map(|s| format!("  - {{name: {s}, input_tokens: 16, output_tokens: 4}}\n")).collect();
    format!(
        "listen: 127.0.0.1:{port}\nprobe: {{rate: 20, seed: 3, shutdown_grace: 2s}}\ntargets:\n  - name: t\n    base_url: http://{mock}\n    api: openai-chat\n    model: mock-llama\nscenarios:\n{list}"
    )
}

/// Polls /metrics until `check` holds (or 15 s pass).
async fn wait_for(port: u16, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(resp) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
            let text = resp.text().await.unwrap_or_default();
            if check(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{text}");
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_reload_is_rejected_and_valid_reload_applies() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = std::env::temp_dir().join(format!("llmprobe-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(&file, config(port, mock, &["first"])).unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args(["probe", "--web.enable-lifecycle", "--config"])
        .arg(&file)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();

    wait_for(port, "probes of the first config", |t| metric(t, "llmprobe_requests_total", &["scenario=\"first\"", "outcome=\"success\""]) > 0.0).await;

    // An invalid file: rejected, reported, the running config goes on.
    std::fs::write(&file, config(port, mock, &["second"]).replace("rate: 20", "rate: -1")).unwrap();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    let text = wait_for(port, "the failed-reload gauge", |t| t.contains("llmprobe_config_last_reload_successful 0")).await;
    let before = metric(&text, "llmprobe_requests_total", &["scenario=\"first\""]);
    wait_for(port, "probing to go on", |t| metric(t, "llmprobe_requests_total", &["scenario=\"first\""]) > before).await;

    // A valid file whose key file does not exist: rejected before anything stops.
    let missing_key =
        config(port, mock, &["first", "second"]).replace("    model: mock-llama\n", "    model: mock-llama\n    api_key_file: /nonexistent/llmprobe-key\n");
    std::fs::write(&file, missing_key).unwrap();
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text =
        wait_for(port, "probing to go on after the rejected key file", |t| metric(t, "llmprobe_requests_total", &["scenario=\"first\""]) > before + 10.0).await;
    assert!(text.contains("llmprobe_config_last_reload_successful 0"), "{text}");
    assert!(!text.contains("scenario=\"second\""), "the rejected config never started:\n{text}");

    // A valid file via the HTTP endpoint: applies; `first` is kept, so its counters go on.
    std::fs::write(&file, config(port, mock, &["first", "second"])).unwrap();
    let first_before = metric(&text, "llmprobe_requests_total", &["scenario=\"first\""]);
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    let text =
        wait_for(port, "probes of the reloaded config", |t| metric(t, "llmprobe_requests_total", &["scenario=\"second\"", "outcome=\"success\""]) > 0.0).await;
    assert!(text.contains("llmprobe_config_last_reload_successful 1"), "{text}");
    let first_after = metric(&text, "llmprobe_requests_total", &["scenario=\"first\""]);
    assert!(first_after >= first_before, "unchanged series carry across the reload ({first_before} -> {first_after})");

    // Down to `second` only: the dropped scenario's series go away.
    std::fs::write(&file, config(port, mock, &["second"])).unwrap();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    let text = wait_for(port, "the dropped scenario to go", |t| !t.contains("scenario=\"first\"")).await;
    assert!(metric(&text, "llmprobe_requests_total", &["scenario=\"second\""]) > 0.0);

    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    assert!(child.wait().await.unwrap().success());
    assert!(stderr.contains("reload rejected") && stderr.contains("probe.rate") && stderr.contains("config.yaml:2"), "{stderr}");
    assert!(stderr.contains("reload rejected") && stderr.contains("llmprobe-key"), "the missing key file is named:\n{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_endpoint_is_forbidden_without_the_lifecycle_flag() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = std::env::temp_dir().join(format!("llmprobe-reload-off-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(&file, config(port, mock, &["first"])).unwrap();
    let mut child = tokio::process::Command::new(BIN).args(["probe", "--config"]).arg(&file).stderr(Stdio::null()).kill_on_drop(true).spawn().unwrap();
    wait_for(port, "probing", |t| metric(t, "llmprobe_requests_total", &["scenario=\"first\""]) > 0.0).await;
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    child.kill().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
