//! The release-regression detector end to end, against the mock engine at a high probe rate (so
//! a baseline fills in seconds): a simulated release (`POST /mock/control`: a new engine
//! version, and a slowdown or none) is a discovery marker; with a 2.5x slowdown the pooled TTFT
//! row becomes `regressed` by the release-armed test (`source="release"`) — the series
//! `LLMProbeReleaseRegression` selects — and without one it stays `watching` (`source="none"`). The marker API: 404 without a token file, 401 with a wrong token, 400 for an
//! unknown target, 202 from `llmprobe release mark`; the token never appears in metrics.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{metric, start_mock, wait_for_metrics};
use llmprobe::app::{self, RunOptions};
use llmprobe::mock::MockOptions;
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");
pub(crate) const TOKEN: &str = "release-token-do-not-print";
/// The read-only token of the tests that have one.
pub(crate) const READ_TOKEN: &str = "read-token-do-not-print";

/// A prober config with detector settings scaled for a test: one-second bins (so a minute of
/// baseline is 60 bins), a one-minute baseline, 30 baseline probes, a 2 s grace window, the
/// continuous test's windows scaled alike, markers re-read every 500 ms. The statistics are the
/// defaults', except that an alarm needs a 1.5x effect instead of 1.05x (and the recovery
/// alternatives move to 2x above it): the mock's engine steps
/// run on real timers beside other tests, and a busy machine moves a few seconds of its latency
/// by tens of percent. These tests check the path from marker to alert series; the detector's
/// error rates are measured by `scripts/detect-plan.sh`.
pub(crate) fn yaml(mock: SocketAddr, token_file: Option<&std::path::Path>) -> String {
    let token = token_file.map(|p| format!("  release_token_file: {}\n", p.display())).unwrap_or_default();
    format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 40, seed: 5, discovery_interval: 500ms, shutdown_grace: 2s}}\n\
         targets:\n  - {{name: t, base_url: \"http://{mock}\", api: openai-chat, model: mock-llama}}\n\
         scenarios:\n  - {{name: s, input_tokens: 32, output_tokens: 8}}\n\
         detect:\n{token}  tuning: {{bin_s: 1, history_s: 1800, latency_baseline_s: 60, goodput_baseline_s: 600, min_latency_baseline: 30, armed_window_s: 120, release_grace_s: 2, continuous_window_s: 60, continuous_reference_s: 600, continuous_look_s: 10, latency_tolerance: 1.5, latency_min_effect: 2.0, continuous_latency_min_effect: 2.0}}\n"
    )
}

async fn scrape(addr: SocketAddr) -> String {
    reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap()
}

/// The probes the tests' latency baseline is built from: 4 s at 40/s.
const BASELINE_PROBES: f64 = 160.0;
/// The goodput baseline needs 200 probes; a few more, so that the last bins are in.
pub(crate) const GOODPUT_BASELINE_PROBES: f64 = 240.0;

/// Waits until the prober at `addr` has recorded `n` probes of target `t`.
pub(crate) async fn wait_for_probes(addr: SocketAddr, n: f64) -> String {
    wait_for_metrics(addr, &format!("{n} probes"), |t| metric(t, "llmprobe_requests_total", &["target=\"t\""]) >= n).await
}

/// The series the `LLMProbeReleaseRegression` alert fires on (with `source="release"`), summed over
/// the `source` label.
fn regressed(text: &str, signal: &str) -> f64 {
    metric(text, "llmprobe_detect_state", &["target=\"t\"", "scenario=\"*\"", &format!("signal=\"{signal}\""), "state=\"regressed\""])
}

/// The pooled row's state series of `signal`: (state, source, value) each.
fn state_series(text: &str, signal: &str) -> Vec<String> {
    let prefix = format!("llmprobe_detect_state{{target=\"t\",scenario=\"*\",signal=\"{signal}\",");
    text.lines().filter(|l| l.starts_with(&prefix)).map(|l| l[prefix.len()..].to_owned()).collect()
}

pub(crate) async fn control(mock: SocketAddr, body: &str) {
    let resp = reqwest::Client::new().post(format!("http://{mock}/mock/control")).body(body.to_owned()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

/// Runs a prober against a mock `base` times slower than its profile, lets it build a baseline,
/// then releases with `slowdown` (absolute); returns the metrics text once `done` holds.
async fn release_and_watch(base: f64, slowdown: f64, what: &str, done: impl Fn(&str) -> bool) -> String {
    let (mock, _stop) = start_mock(MockOptions { slowdown: base, ..MockOptions::default() }).await;
    let config = llmprobe::app::loader::parse(&yaml(mock, None), "test.yaml").unwrap();
    let shutdown = CancellationToken::new();
    let running = app::start(config, RunOptions::default(), shutdown.clone()).await.unwrap();
    let addr = running.metrics_addr;
    let before = wait_for_probes(addr, BASELINE_PROBES).await;
    assert_eq!(regressed(&before, "ttft"), 0.0, "no regression before the release:\n{before}");
    control(mock, &format!(r#"{{"engine_version":"0.33.0","slowdown":{slowdown}}}"#)).await;
    let text = wait_for_metrics(addr, what, done).await;
    shutdown.cancel();
    running.wait().await.unwrap();
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slower_release_is_detected_as_regressed() {
    let text = release_and_watch(1.0, 2.5, "TTFT regressed", |t| regressed(t, "ttft") == 1.0).await;
    assert_eq!(regressed(&text, "ttft"), 1.0, "TTFT regressed after a 2.5x slower release:\n{text}");
    // Set by the release-armed test, one source per row (no stale `source="none"` series).
    let mut series = state_series(&text, "ttft");
    series.sort();
    assert_eq!(
        series,
        ["state=\"recovered\",source=\"release\"} 0", "state=\"regressed\",source=\"release\"} 1", "state=\"watching\",source=\"release\"} 0"],
        "{text}"
    );
    assert_eq!(metric(&text, "llmprobe_release_info", &["target=\"t\"", "version=\"0.33.0\"", "source=\"discovery\""]), 1.0, "{text}");
    assert!(metric(&text, "llmprobe_release_timestamp_seconds", &["target=\"t\""]) > 1.0e9);
    let ratio = metric(&text, "llmprobe_detect_latency_ratio", &["scenario=\"*\"", "signal=\"ttft\"", "percentile=\"p50\"", "bound=\"estimate\""]);
    assert!(ratio > 1.5, "median TTFT ratio estimate {ratio}");
    assert!(
        metric(&text, "llmprobe_detect_evidence", &["scenario=\"*\"", "signal=\"ttft\""])
            >= metric(&text, "llmprobe_detect_threshold", &["scenario=\"*\"", "signal=\"ttft\""])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_without_slowdown_stays_watching() {
    // 100 probes after the marker's grace period tested: the path from marker to rows. How
    // often the detector alarms without a change is measured by `scripts/detect-plan.sh`.
    let tested = |t: &str| metric(t, "llmprobe_detect_samples", &["scenario=\"*\"", "signal=\"ttft\""]) >= 100.0;
    let text = release_and_watch(1.0, 1.0, "100 probes tested after the marker", tested).await;
    assert_eq!(metric(&text, "llmprobe_release_info", &["target=\"t\"", "version=\"0.33.0\""]), 1.0, "the marker came:\n{text}");
    for signal in ["ttft", "tpot", "e2e", "goodput"] {
        assert_eq!(regressed(&text, signal), 0.0, "{signal} must not regress without a slowdown:\n{text}");
        assert_eq!(metric(&text, "llmprobe_detect_state", &["scenario=\"*\"", &format!("signal=\"{signal}\""), "state=\"watching\""]), 1.0);
        assert!(state_series(&text, signal).iter().all(|s| s.contains("source=\"none\"")), "watching rows carry source none:\n{text}");
    }
    assert!(metric(&text, "llmprobe_detect_samples", &["scenario=\"*\"", "signal=\"ttft\""]) > 50.0, "probes after the marker were tested:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_marker_api_needs_its_token() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-release-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();

    // Without a token file the endpoint is off.
    let off = app::start(llmprobe::app::loader::parse(&yaml(mock, None), "t.yaml").unwrap(), RunOptions::default(), CancellationToken::new()).await.unwrap();
    let client = reqwest::Client::new();
    let resp = client.post(format!("http://{}/api/v1/releases", off.metrics_addr)).body(r#"{"target":"t","version":"1"}"#).send().await.unwrap();
    assert_eq!(resp.status(), 404);

    let shutdown = CancellationToken::new();
    let running =
        app::start(llmprobe::app::loader::parse(&yaml(mock, Some(&token_file)), "t.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let url = format!("http://{}/api/v1/releases", running.metrics_addr);
    let post = |auth: Option<&str>, body: &str| {
        let mut req = client.post(&url).body(body.to_owned());
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        req.send()
    };
    assert_eq!(post(None, r#"{"target":"t","version":"1"}"#).await.unwrap().status(), 401);
    assert_eq!(post(Some("Bearer wrong"), r#"{"target":"t","version":"1"}"#).await.unwrap().status(), 401);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(post(Some(&bearer), r#"{"target":"nope","version":"1"}"#).await.unwrap().status(), 400);
    assert_eq!(post(Some(&bearer), r#"{"version":"1"}"#).await.unwrap().status(), 400);
    // A marker's own time: RFC 3339, not in the future.
    assert_eq!(post(Some(&bearer), r#"{"target":"t","version":"1","at":"yesterday"}"#).await.unwrap().status(), 400);
    assert_eq!(post(Some(&bearer), r#"{"target":"t","version":"1","at":"2999-01-01T00:00:00Z"}"#).await.unwrap().status(), 400);

    // The CLI posts it (token from the file).
    let out = tokio::process::Command::new(BIN)
        .args([
            "release",
            "mark",
            "--url",
            &format!("http://{}", running.metrics_addr),
            "--target",
            "t",
            "--version",
            "v2.1",
            "--note",
            "deploy 42",
            "--token-file",
        ])
        .arg(&token_file)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = scrape(running.metrics_addr).await;
    assert_eq!(metric(&text, "llmprobe_release_info", &["target=\"t\"", "version=\"v2.1\"", "source=\"api\""]), 1.0, "{text}");
    // A late marker with its own time: the release's time is the one given.
    let two_minutes_ago = llmprobe::util::rfc3339::format_unix(llmprobe::util::clock::unix_now() - 120.0, 0);
    let out = cli(
        &["release", "mark", "--url", &format!("http://{}", running.metrics_addr), "--target", "t", "--version", "v2.2", "--at", &two_minutes_ago],
        &token_file,
    )
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = scrape(running.metrics_addr).await;
    let at = llmprobe::util::rfc3339::parse_unix(&two_minutes_ago).unwrap();
    assert_eq!(metric(&text, "llmprobe_release_timestamp_seconds", &["target=\"t\""]), at, "{text}");
    // The markers so far, with their sources and times.
    let list: serde_json::Value = serde_json::from_str(&client.get(&url).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap()).unwrap();
    let versions: Vec<&str> = list["releases"].as_array().unwrap().iter().map(|m| m["version"].as_str().unwrap()).collect();
    assert!(versions.ends_with(&["v2.1", "v2.2"]), "{list}");
    assert_eq!(list["releases"].as_array().unwrap().last().unwrap()["at"].as_f64(), Some(at), "{list}");
    assert_eq!(client.get(&url).bearer_auth("wrong").send().await.unwrap().status(), 401);
    // A malformed --at fails before anything is sent.
    let out = cli(&["release", "mark", "--url", "http://127.0.0.1:9", "--target", "t", "--version", "v3", "--at", "noon"], &token_file).await;
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("RFC 3339"));
    assert!(!text.contains(TOKEN));
    // A wrong token through the CLI fails with a clear message and no token in it.
    std::fs::write(dir.join("bad"), "nope").unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["release", "mark", "--url", &format!("http://{}", running.metrics_addr), "--target", "t", "--version", "v3", "--token-file"])
        .arg(dir.join("bad"))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("401") && !stderr.contains(TOKEN), "{stderr}");
    shutdown.cancel();
    running.wait().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_baseline_and_release_still_detects_with_a_state_dir() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-detect-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let with_state = yaml(mock, None).replace("detect:\n", &format!("detect:\n  state_dir: {}\n", dir.display()));
    // The prober before the release: builds the baseline, saves it at shutdown.
    let shutdown = CancellationToken::new();
    let first = app::start(llmprobe::app::loader::parse(&with_state, "t.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    wait_for_probes(first.metrics_addr, BASELINE_PROBES).await;
    shutdown.cancel();
    first.wait().await.unwrap();
    assert!(dir.join(llmprobe::detect::persist::STATE_FILE).exists(), "state saved at shutdown");
    assert!(dir.join(llmprobe::app::release::IDENTITY_FILE).exists(), "the target's identity saved");

    // The release happens while no prober runs (a sidecar restarts with its pod).
    control(mock, r#"{"engine_version":"0.33.0","slowdown":2.5}"#).await;
    let shutdown = CancellationToken::new();
    let second = app::start(llmprobe::app::loader::parse(&with_state, "t.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let text = wait_for_metrics(second.metrics_addr, "TTFT regressed after the restart", |t| regressed(t, "ttft") == 1.0).await;
    shutdown.cancel();
    second.wait().await.unwrap();
    assert_eq!(
        metric(&text, "llmprobe_release_info", &["version=\"0.33.0\"", "source=\"discovery\""]),
        1.0,
        "the version change across the restart is a marker:\n{text}"
    );
    assert_eq!(regressed(&text, "ttft"), 1.0, "the restored baseline shows the slowdown:\n{text}");

    // A corrupt state file is ignored (with a warning) and the prober runs.
    std::fs::write(dir.join(llmprobe::detect::persist::STATE_FILE), b"{not json").unwrap();
    let shutdown = CancellationToken::new();
    let third = app::start(llmprobe::app::loader::parse(&with_state, "t.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    wait_for_probes(third.metrics_addr, 1.0).await;
    assert!(third.health.is_ready());
    shutdown.cancel();
    third.wait().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// The engine's offered-load readings reach the detector: a prober scraping the mock's
/// `/metrics` while bursts of long prompts come and go sees latency move with the offered load,
/// and exports the slope it would adjust for (`llmprobe_detect_load_slope`); without the
/// `sources:` section the slope stays 0. (How much the adjustment gains is measured by
/// `scripts/detect-plan.sh` and `scripts/release-drill.sh`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_readings_reach_the_detector() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let base = yaml(mock, None).replace("continuous_window_s: 60,", "continuous_window_s: 5,");
    let with = format!("{base}sources:\n  - {{kind: engine, target: t, interval: 500ms}}\n");
    let shutdown = CancellationToken::new();
    let running = app::start(llmprobe::app::loader::parse(&with, "t.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let without = app::start(llmprobe::app::loader::parse(&base, "t.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    // Background load that comes and goes: 2 s of 40 long prompts at once, then 2 s of nothing.
    let load = tokio::spawn(async move {
        let client = reqwest::Client::new();
        let prompt: String = (0..800).map(|i| format!("w{i} ")).collect();
        let body = format!(r#"{{"model":"mock-llama","max_tokens":4,"messages":[{{"role":"user","content":"{prompt}"}}]}}"#);
        loop {
            let burst: Vec<_> = (0..40).map(|_| client.post(format!("http://{mock}/v1/chat/completions")).body(body.clone()).send()).collect();
            futures_util::future::join_all(burst).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    });
    let slope = |text: &str| metric(text, "llmprobe_detect_load_slope", &["target=\"t\"", "scenario=\"*\"", "signal=\"ttft\""]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        let text = scrape(running.metrics_addr).await;
        if slope(&text) != 0.0 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let other = scrape(without.metrics_addr).await;
    load.abort();
    shutdown.cancel();
    running.wait().await.unwrap();
    without.wait().await.unwrap();
    assert!(slope(&text) > 0.0, "TTFT moves up with the offered load the engine reports:\n{text}");
    assert_eq!(slope(&other), 0.0, "no readings, no slope:\n{other}");
}

/// Runs the binary with `args` and `--token-file FILE`.
async fn cli(args: &[&str], token_file: &std::path::Path) -> std::process::Output {
    tokio::process::Command::new(BIN).args(args).arg("--token-file").arg(token_file).output().await.unwrap()
}

/// Runs `llmprobe release wait` against a prober; returns its exit code and what it printed.
async fn release_wait(addr: SocketAddr, token_file: &std::path::Path, version: &str) -> (i32, String) {
    let out = cli(
        &["release", "wait", "--url", &format!("http://{addr}"), "--target", "t", "--version", version, "--interval", "500ms", "--timeout", "90s"],
        token_file,
    )
    .await;
    (out.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Release verdicts end to end: a release without a slowdown is `passed` once its (20 s) window
/// closes with the power to rule out the required effect, and `release wait` exits 0 printing
/// what the window could have seen; a prober that must rule out a 1% slowdown cannot, and says
/// `inconclusive` (exit 3); a 2.5x slower release is `regressed` (exit 1). Bad input: an unknown
/// target, another version, a wrong token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_verdicts_for_pipelines() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-verdict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let short = yaml(mock, Some(&token_file))
        .replace("armed_window_s: 120,", "armed_window_s: 20,")
        .replace("latency_tolerance: 1.5,", "latency_tolerance: 1.5, verdict_latency_effect: 2.0, verdict_goodput_effect: 0.2,");
    let strict = short.replace("verdict_latency_effect: 2.0,", "verdict_latency_effect: 1.01,");
    let shutdown = CancellationToken::new();
    let a = app::start(llmprobe::app::loader::parse(&short, "a.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let b = app::start(llmprobe::app::loader::parse(&strict, "b.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    let client = reqwest::Client::new();
    let get = |addr: SocketAddr, query: &str, token: &str| client.get(format!("http://{addr}/api/v1/verdict?{query}")).bearer_auth(token).send();
    // Before any release: nothing to judge.
    assert_eq!(get(a.metrics_addr, "target=t", TOKEN).await.unwrap().status(), 404);
    // The goodput baseline: without one, goodput cannot be judged and the verdict could only be
    // inconclusive.
    tokio::join!(wait_for_probes(a.metrics_addr, GOODPUT_BASELINE_PROBES), wait_for_probes(b.metrics_addr, GOODPUT_BASELINE_PROBES));
    control(mock, r#"{"engine_version":"1.0.0","slowdown":1.0}"#).await;
    let ((code_a, out_a), (code_b, out_b)) =
        tokio::join!(release_wait(a.metrics_addr, &token_file, "1.0.0"), release_wait(b.metrics_addr, &token_file, "1.0.0"));
    assert_eq!(code_a, 0, "a release without a slowdown passed:\n{out_a}");
    assert!(out_a.contains("t 1.0.0: passed") && out_a.contains("could see x"), "{out_a}");
    assert_eq!(code_b, 3, "a 1% slowdown cannot be ruled out in 18 s:\n{out_b}");
    assert!(out_b.contains("inconclusive"), "{out_b}");
    let v: serde_json::Value = serde_json::from_str(&get(a.metrics_addr, "target=t&version=1.0.0", TOKEN).await.unwrap().text().await.unwrap()).unwrap();
    assert_eq!(v["state"], "passed", "{v}");
    // TTFT, TPOT, E2E, goodput, and the behaviour checks' failures.
    assert_eq!(v["signals"].as_array().unwrap().len(), 5, "{v}");
    assert!(v["signals"][0]["probes"].as_u64().unwrap() > 100, "{v}");
    // Bad input.
    assert_eq!(get(a.metrics_addr, "target=nope", TOKEN).await.unwrap().status(), 404);
    assert_eq!(get(a.metrics_addr, "target=t&version=9.9.9", TOKEN).await.unwrap().status(), 409);
    assert_eq!(get(a.metrics_addr, "target=t", "wrong").await.unwrap().status(), 401);
    assert_eq!(get(a.metrics_addr, "nothing=1", TOKEN).await.unwrap().status(), 400);
    // A pipeline's own mistake is exit 2, never a verdict's exit (1 would roll the release back).
    let wrong_file = dir.join("wrong-token");
    std::fs::write(&wrong_file, "not-the-token-7f3a").unwrap();
    let (code, out) = release_wait(a.metrics_addr, &wrong_file, "1.0.0").await;
    assert_eq!(code, 2, "a wrong token:\n{out}");
    assert!(out.contains("HTTP 401") && !out.contains("not-the-token-7f3a"), "{out}");
    let (code, out) = release_wait(a.metrics_addr, &dir.join("no-such-token-file"), "1.0.0").await;
    assert_eq!(code, 2, "an unreadable token file:\n{out}");
    // A 2.5x slower release.
    control(mock, r#"{"engine_version":"2.0.0","slowdown":2.5}"#).await;
    let (code, out) = release_wait(a.metrics_addr, &token_file, "2.0.0").await;
    assert_eq!(code, 1, "a 2.5x slower release regressed:\n{out}");
    assert!(out.contains("regressed") && !out.contains(TOKEN), "{out}");
    shutdown.cancel();
    a.wait().await.unwrap();
    b.wait().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// A release whose answers fail a behaviour check (the mock answers half the known-answer
/// questions wrongly from the release on): `release wait` exits 1 and the verdict names
/// the checks signal, with the failures counted before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_breaks_answers_is_regressed_on_checks() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-verdict-checks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let config = yaml(mock, Some(&token_file))
        .replace(
            "{name: s, input_tokens: 32, output_tokens: 8}",
            r#"{name: s, output_tokens: 16, checks: {known_answers: [{prompt: "What is the capital of France? Answer in one sentence.", expect: Paris}]}}"#,
        )
        .replace("armed_window_s: 120,", "armed_window_s: 20,");
    let shutdown = CancellationToken::new();
    let a = app::start(llmprobe::app::loader::parse(&config, "a.yaml").unwrap(), RunOptions::default(), shutdown.clone()).await.unwrap();
    // The goodput baseline before the release.
    wait_for_probes(a.metrics_addr, GOODPUT_BASELINE_PROBES).await;
    control(mock, r#"{"engine_version":"3.0.0","faults":"wrong_answer=0.5"}"#).await;
    let (code, out) = release_wait(a.metrics_addr, &token_file, "3.0.0").await;
    assert_eq!(code, 1, "answers that fail their checks are a regression:\n{out}");
    let v: serde_json::Value = serde_json::from_str(
        &reqwest::Client::new()
            .get(format!("http://{}/api/v1/verdict?target=t", a.metrics_addr))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    let checks = v["signals"].as_array().unwrap().iter().find(|s| s["signal"] == "checks").cloned().unwrap_or_default();
    assert_eq!(checks["state"], "regressed", "{v}");
    assert!(checks["bad_fraction_delta"]["value"].as_f64().unwrap() > 0.2, "{v}");
    shutdown.cancel();
    a.wait().await.unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// The read-only token (`detect.release_read_token_file`) reads verdicts and markers and is
/// refused for posting one (403), by the API and through `llmprobe release mark`; a prober
/// whose two token files hold one token does not start. Neither token appears in the prober's
/// debug log, in an answer or in the CLI's errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_only_token_reads_and_cannot_mark() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-read-token-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (marker_file, read_file, log) = (dir.join("marker"), dir.join("read"), dir.join("stderr.log"));
    std::fs::write(&marker_file, format!("{TOKEN}\n")).unwrap();
    std::fs::write(&read_file, format!("{READ_TOKEN}\n")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.join("config.yaml");
    let text = yaml(mock, Some(&marker_file))
        .replace("listen: 127.0.0.1:0", &format!("listen: 127.0.0.1:{port}"))
        .replace("detect:\n", &format!("detect:\n  release_read_token_file: {}\n", read_file.display()));
    std::fs::write(&config, &text).unwrap();
    let mut child = std::process::Command::new(BIN)
        .args(["--log", "debug", "probe", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(format!("{base}/readyz")).send().await.map(|r| r.status()).ok() != Some(reqwest::StatusCode::OK) {
        assert!(Instant::now() < deadline, "prober not ready:\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let get = |path: &str, token: &str| client.get(format!("{base}{path}")).bearer_auth(token).send();
    let post = |token: &str| client.post(format!("{base}/api/v1/releases")).bearer_auth(token).body(r#"{"target":"t","version":"v1"}"#).send();
    let mut answers = String::new();
    // Reads: the read-only token is accepted (404: no release yet, not 401).
    let r = get("/api/v1/verdict?target=t", READ_TOKEN).await.unwrap();
    assert_eq!(r.status(), 404);
    answers += &r.text().await.unwrap();
    assert_eq!(get("/api/v1/releases", READ_TOKEN).await.unwrap().status(), 200);
    // Markers: the read-only token is forbidden, a wrong one unauthorized, the marker token marks.
    let r = post(READ_TOKEN).await.unwrap();
    assert_eq!(r.status(), 403);
    let forbidden = r.text().await.unwrap();
    assert!(forbidden.contains("read-only token"), "{forbidden}");
    answers += &forbidden;
    let r = post("wrong").await.unwrap();
    assert_eq!(r.status(), 401);
    answers += &r.text().await.unwrap();
    assert_eq!(post(TOKEN).await.unwrap().status(), 202);
    // Both tokens read the verdict and the markers of that release.
    for token in [READ_TOKEN, TOKEN] {
        let r = get("/api/v1/verdict?target=t&version=v1", token).await.unwrap();
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        assert!(body.contains("\"version\":\"v1\""), "{body}");
        answers += &body;
        let list = get("/api/v1/releases", token).await.unwrap().text().await.unwrap();
        assert!(list.contains("\"version\":\"v1\""), "{list}");
        answers += &list;
    }
    assert_eq!(get("/api/v1/verdict?target=t", "wrong").await.unwrap().status(), 401);
    // The CLI with the read-only token: the marker is refused, with the reason and no token.
    let out = cli(&["release", "mark", "--url", &base, "--target", "t", "--version", "v2"], &read_file).await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success() && stderr.contains("403") && stderr.contains("read-only token"), "{stderr}");
    let metrics = scrape(format!("127.0.0.1:{port}").parse().unwrap()).await;
    assert!(!metrics.contains("version=\"v2\""), "no marker from the read-only token:\n{metrics}");
    std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("marker posted"), "the log is the prober's debug log:\n{logged}");

    // One token in both files: the prober refuses to start, naming the setting, not the token.
    std::fs::write(&read_file, TOKEN).unwrap();
    let refused = std::process::Command::new(BIN).args(["probe", "--config"]).arg(&config).output().unwrap();
    let refusal = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success() && refusal.contains("detect.release_read_token_file: holds the same token"), "{refusal}");

    for (what, text) in [("the prober's log", &logged), ("the answers", &answers), ("the metrics", &metrics), ("the CLI", &stderr), ("the refusal", &refusal)] {
        assert!(!text.contains(TOKEN) && !text.contains(READ_TOKEN), "a token in {what}:\n{text}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
