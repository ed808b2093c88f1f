//! Tracing switched on by the standard environment alone (`OTEL_EXPORTER_OTLP_ENDPOINT`, no
//! `tracing:` section — how the chart's `env` and most platforms configure OpenTelemetry):
//! the binary's /metrics carries trace exemplars, as the documented default says.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::start_mock;
use llmprobe::mock::MockOptions;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exemplars_with_tracing_enabled_by_environment_only() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = std::env::temp_dir().join(format!("llmprobe-tracing-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.yaml");
    std::fs::write(
        &file,
        format!(
            "listen: 127.0.0.1:{port}\nprobe: {{rate: 10, shutdown_grace: 1s}}\ntargets:\n  - {{name: t, base_url: \"http://{mock}\", api: openai-chat, model: mock-llama}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n"
        ),
    )
    .unwrap();
    // Nothing listens at the collector address: export fails quietly, probing and exemplars go on.
    let mut child = tokio::process::Command::new(BIN)
        .args(["probe", "--config"])
        .arg(&file)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        let got = client.get(format!("http://127.0.0.1:{port}/metrics")).header("accept", "application/openmetrics-text; version=1.0.0").send().await;
        if let Ok(resp) = got {
            let text = resp.text().await.unwrap_or_default();
            if text.lines().any(|l| l.starts_with("llmprobe_ttft_seconds_bucket") && l.contains(" # {")) || Instant::now() > deadline {
                break text;
            }
        }
        assert!(Instant::now() < deadline, "prober did not come up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    child.kill().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let exemplar = text.lines().find(|l| l.starts_with("llmprobe_ttft_seconds_bucket") && l.contains(" # {"));
    let exemplar = exemplar.unwrap_or_else(|| panic!("no exemplar on the TTFT histogram:\n{text}"));
    assert!(exemplar.contains("trace_id=\"") && exemplar.contains("span_id=\""), "{exemplar}");
}
