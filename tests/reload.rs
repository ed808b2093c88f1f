//! Config reload on a running prober (the binary, over loopback): an invalid file is rejected
//! (every problem logged, `llmprobe_config_last_reload_successful` 0, probing goes on with the
//! running config); a valid one, by SIGHUP or `POST /-/reload`, restarts probing with it.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{metric, start_mock};
use llmprobe::mock::MockOptions;
use tokio::io::AsyncReadExt;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

fn config(port: u16, mock: std::net::SocketAddr, scenario: &str) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nprobe: {{rate: 20, seed: 3, shutdown_grace: 2s}}\ntargets:\n  - name: t\n    base_url: http://{mock}\n    api: openai-chat\n    model: mock-llama\nscenarios:\n  - {{name: {scenario}, input_tokens: 16, output_tokens: 4}}\n"
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
    std::fs::write(&file, config(port, mock, "first")).unwrap();
    let mut child = tokio::process::Command::new(BIN).args(["probe", "--config"]).arg(&file).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id().unwrap().to_string();

    wait_for(port, "probes of the first config", |t| metric(t, "llmprobe_requests_total", &["scenario=\"first\"", "outcome=\"success\""]) > 0.0).await;

    // An invalid file: rejected, reported, the running config goes on.
    std::fs::write(&file, config(port, mock, "second").replace("rate: 20", "rate: -1")).unwrap();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    let text = wait_for(port, "the failed-reload gauge", |t| t.contains("llmprobe_config_last_reload_successful 0")).await;
    let before = metric(&text, "llmprobe_requests_total", &["scenario=\"first\""]);
    wait_for(port, "probing to go on", |t| metric(t, "llmprobe_requests_total", &["scenario=\"first\""]) > before).await;

    // A valid file via the HTTP endpoint: probing restarts with it.
    std::fs::write(&file, config(port, mock, "second")).unwrap();
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    let text =
        wait_for(port, "probes of the reloaded config", |t| metric(t, "llmprobe_requests_total", &["scenario=\"second\"", "outcome=\"success\""]) > 0.0).await;
    assert!(text.contains("llmprobe_config_last_reload_successful 1"), "{text}");
    assert!(!text.contains("scenario=\"first\""), "the old scenario's series are gone:\n{text}");

    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
    assert!(child.wait().await.unwrap().success());
    assert!(stderr.contains("reload rejected") && stderr.contains("probe.rate") && stderr.contains("config.yaml:2"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}
