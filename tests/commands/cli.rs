//! The binary as a user runs it: exit codes, config errors, and an API key that never shows up
//! in output, logs, metrics or error messages.

use crate::common;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::start_mock;
use llmprobe::mock::MockOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn write_config(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
    path
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("llmprobe-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn invalid_config_prints_every_problem_with_path_and_line_and_exits_2() {
    let fixture = format!("{}/tests/fixtures/config/bad/several_problems.yaml", env!("CARGO_MANIFEST_DIR"));
    for args in [vec!["check-config", fixture.as_str()], vec!["probe", "--config", fixture.as_str()]] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("probe.rate: must be a rate between 0.0001 and 100000 probes per second, got 0 (") && stderr.contains("several_problems.yaml:4)"),
            "{stderr}"
        );
        assert!(stderr.lines().filter(|l| l.contains("several_problems.yaml:")).count() >= 5, "{stderr}");
    }
}

#[test]
fn check_config_reports_unknown_keys_wrong_types_and_invalid_values_in_one_run() {
    let fixture = format!("{}/tests/fixtures/config/bad/every_stage_at_once.yaml", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(BIN).args(["check-config", fixture.as_str()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (path, line) in [
        ("targets[0].colour: unknown field", 7),
        ("targets[0].timeouts.total: invalid type", 10),
        ("scenarios[0].tempo: unknown field", 15),
        ("probe.rate: must be", 17),
        ("probe.shard.count: invalid type", 18),
    ] {
        assert!(stderr.lines().any(|l| l.starts_with(path) && l.ends_with(&format!("every_stage_at_once.yaml:{line})"))), "{path} at {line}:\n{stderr}");
    }
    assert_eq!(stderr.lines().count(), 5, "{stderr}");
}

#[test]
fn every_example_config_passes_check_config() {
    for entry in std::fs::read_dir(format!("{}/config", env!("CARGO_MANIFEST_DIR"))).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let out = Command::new(BIN).arg("check-config").arg(&path).output().unwrap();
            assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[test]
fn help_is_available_for_every_command() {
    for cmd in ["probe", "check-config", "mock", "demo", "merge", "release"] {
        let out = Command::new(BIN).args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: llmprobe"));
    }
}

#[test]
fn config_schema_is_printed_and_a_bad_chart_file_is_named() {
    let out = Command::new(BIN).arg("config-schema").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["$defs"]["RawProbe"]["additionalProperties"], false);
    let missing = std::env::temp_dir().join("llmprobe-no-such-values-schema.json");
    let out = Command::new(BIN).arg("config-schema").arg("--chart-values").arg(&missing).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("llmprobe-no-such-values-schema.json"));
}

#[test]
fn bench_dry_run_prints_the_planned_duration() {
    let out = Command::new(BIN).args(["bench", "--dry-run", "--config", "config/bench-demo.yaml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // concurrency mode by request counts: the server sets the length, point_timeout bounds it
    assert!(text.contains("planned duration: set by the server (16 phase(s)"), "{text}");
    assert!(text.contains("at most 16m00s"), "{text}");
}

const SECRET: &str = "sk-live-DO-NOT-LEAK-7f3a9c";
/// A `headers_from` value: redacted like the key.
const HEADER_SECRET: &str = "org-token-NEVER-SHOWN-41d2";

/// A server that answers every request with 401 and echoes the Authorization header back in
/// the body: the worst case for leaking a key into error details.
async fn echo_auth_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16384];
                let n = sock.read(&mut buf).await.unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let line = |name: &str| req.lines().find(|l| l.to_ascii_lowercase().starts_with(name)).unwrap_or("").to_string();
                let (auth, org) = (line("authorization"), line("x-org-token"));
                let body = format!("{{\"error\":{{\"message\":\"invalid key, you sent {auth} and {org}\"}}}}");
                let resp =
                    format!("HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    addr
}

fn probe_config(base_url: &str, listen_port: u16) -> String {
    format!(
        "listen: 127.0.0.1:{listen_port}\nprobe: {{rate: 10, seed: 5, shutdown_grace: 1s}}\ntargets:\n  - name: t\n    base_url: {base_url}\n    api: openai-chat\n    model: mock-llama\n    api_key_env: LLMPROBE_TEST_KEY\n    headers_from: {{X-Org-Token: {{env: LLMPROBE_TEST_HEADER}}}}\n    timeouts: {{connect: 1s, ttft: 5s, idle: 5s, total: 10s}}\nscenarios:\n  - {{name: s, input_tokens: 16, output_tokens: 8}}\n"
    )
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "the API key leaked into {what}:\n{text}");
    assert!(!text.contains("DO-NOT-LEAK"), "part of the API key leaked into {what}:\n{text}");
    assert!(!text.contains("NEVER-SHOWN"), "the headers_from value leaked into {what}:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_never_appears_in_output_logs_metrics_or_errors() {
    let dir = temp_dir("secret");
    // 1. `--once` against a mock that requires the key: success, and the key is not printed.
    let (mock, _stop) = start_mock(MockOptions { api_key: Some(SECRET.into()), ..MockOptions::default() }).await;
    let cfg = write_config(&dir, "ok.yaml", &probe_config(&format!("http://{mock}"), free_port()));
    let out = tokio::process::Command::new(BIN)
        .args(["--log", "debug", "probe", "--once", "--config"])
        .arg(&cfg)
        .env("LLMPROBE_TEST_KEY", SECRET)
        .env("LLMPROBE_TEST_HEADER", HEADER_SECRET)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("verdict        success"), "{stdout}");
    // Plain http: the lean client, which times frames at their arrival on the host.
    assert!(!cfg!(target_os = "linux") || stdout.contains("(arrival)"), "{stdout}");
    assert_no_secret("--once stdout", &stdout);
    assert_no_secret("--once stderr", &String::from_utf8_lossy(&out.stderr));

    // 2. A server that echoes the key back in its 401 body: error details are redacted.
    let echo = echo_auth_server().await;
    let cfg = write_config(&dir, "echo.yaml", &probe_config(&format!("http://{echo}"), free_port()));
    let out = tokio::process::Command::new(BIN)
        .args(["--log", "debug", "probe", "--once", "--config"])
        .arg(&cfg)
        .env("LLMPROBE_TEST_KEY", SECRET)
        .env("LLMPROBE_TEST_HEADER", HEADER_SECRET)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("error http_4xx") && stdout.contains("Bearer ***"), "{stdout}");
    assert_no_secret("--once error output", &stdout);

    // 3. The continuous prober against the echoing server: logs, /metrics and /debug/probes.
    let port = free_port();
    let cfg = write_config(&dir, "run.yaml", &probe_config(&format!("http://{echo}"), port));
    let mut child = tokio::process::Command::new(BIN)
        .args(["--log", "debug", "probe", "--config"])
        .arg(&cfg)
        .env("LLMPROBE_TEST_KEY", SECRET)
        .env("LLMPROBE_TEST_HEADER", HEADER_SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // A probe answered (the echoing server answers 4xx) and its request in the debug history.
    let prober: SocketAddr = ([127, 0, 0, 1], port).into();
    let metrics = common::wait_for_metrics(prober, "an answered probe", |t| t.contains("error=\"http_4xx\"")).await;
    let deadline = std::time::Instant::now() + common::PATIENCE;
    let debug = loop {
        let debug = reqwest::get(format!("http://127.0.0.1:{port}/debug/probes")).await.unwrap().text().await.unwrap();
        if debug.contains("Bearer ***") || std::time::Instant::now() > deadline {
            break debug;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(metrics.contains("error=\"http_4xx\""), "{metrics}");
    assert!(debug.contains("Bearer ***"), "{debug}");
    assert!(debug.to_ascii_lowercase().contains("x-org-token: ***"), "the header was sent, echoed and redacted: {debug}");
    Command::new("kill").args(["-TERM", &child.id().unwrap().to_string()]).status().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), async {
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).await.unwrap();
        (child.wait().await.unwrap(), stderr)
    })
    .await
    .expect("prober stops on SIGTERM");
    assert!(out.0.success());
    assert!(out.1.contains("probe failed"), "{}", out.1);
    assert_no_secret("logs", &out.1);
    assert_no_secret("/metrics", &metrics);
    assert_no_secret("/debug/probes", &debug);

    // 4. A missing key variable is a clear startup error that names the variable.
    let out =
        Command::new(BIN).args(["probe", "--config"]).arg(&cfg).env_remove("LLMPROBE_TEST_KEY").env("LLMPROBE_TEST_HEADER", HEADER_SECRET).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("LLMPROBE_TEST_KEY is not set"));
    std::fs::remove_dir_all(&dir).ok();
}
