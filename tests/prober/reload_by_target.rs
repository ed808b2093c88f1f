//! Reloads by target, on the binary over loopback: while one target hangs (a server that
//! accepts and never answers), a reload changes only that target; the other target's schedule
//! goes on where it stood (its intended send times keep their spacing across the reload, every
//! one recorded), its probes flow while the old generation's hung probes wait out their grace,
//! `/readyz` stays 200, and every scheduled probe is recorded. A signal ends the process while a
//! reload is still being prepared (a key file that is a named pipe nobody writes).

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{metric, raw_server, start_mock};
use llmprobe::mock::MockOptions;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");
/// Probes per second per schedule, evenly spaced: the spacing of intended times is exact.
const RATE: f64 = 20.0;
const GRACE_S: u64 = 4;

fn config(port: u16, mock: std::net::SocketAddr, hung: std::net::SocketAddr, hung_model: &str, steady_extra: &str) -> String {
    format!(
        "listen: 127.0.0.1:{port}\n\
         probe: {{rate: {RATE}, seed: 5, shutdown_grace: {GRACE_S}s, max_in_flight: 100000, arrival: {{kind: constant}}}}\n\
         targets:\n\
         \x20 - name: steady\n    base_url: http://{mock}\n    api: openai-chat\n    model: mock-llama\n{steady_extra}\
         \x20 - name: hung\n    base_url: http://{hung}\n    api: openai-chat\n    model: {hung_model}\n    timeouts: {{connect: 2s, ttft: 120s, idle: 120s, total: 120s}}\n\
         scenarios:\n  - {{name: s, input_tokens: 16, output_tokens: 4}}\n"
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A server that reads each request and never answers (the connection stays open).
async fn hung_server() -> std::net::SocketAddr {
    raw_server(|sock| async move {
        tokio::time::sleep(Duration::from_secs(600)).await;
        drop(sock);
    })
    .await
}

async fn scrape(port: u16) -> String {
    match reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

async fn wait_for(port: u16, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(port).await;
        if check(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// (target, outcome, intended unix time) of each probe-log line, in the order recorded.
fn probe_log(path: &std::path::Path) -> Vec<(String, String, f64)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["target"].as_str()?.to_owned(), v["outcome"].as_str()?.to_owned(), v["intended_unix_s"].as_f64()?))
        })
        .collect()
}

/// Waits up to `limit` for the child to exit; `None` if it did not.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `scheduled=N recorded=M` of each log line that contains `marker`.
fn accounting(log: &str, marker: &str) -> Vec<(u64, u64)> {
    let field = |line: &str, key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)?.parse::<u64>().ok());
    log.lines().filter(|l| l.contains(marker)).filter_map(|l| Some((field(l, "scheduled=")?, field(l, "recorded=")?))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_a_hung_target_blinds_no_other_target() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let hung = hung_server().await;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("llmprobe-reload-by-target-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (file, probes, log) = (dir.join("config.yaml"), dir.join("probes.jsonl"), dir.join("stderr.log"));
    std::fs::write(&file, config(port, mock, hung, "first", "")).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log", "info", "probe", "--web.enable-lifecycle", "--probe-log"])
        .arg(&probes)
        .arg("--config")
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();

    wait_for(port, "steady probes and hung ones in flight", |t| {
        metric(t, "llmprobe_requests_total", &["target=\"steady\"", "outcome=\"success\""]) >= 5.0
            && metric(t, "llmprobe_in_flight_requests", &["target=\"hung\""]) >= 3.0
    })
    .await;
    assert!(probe_log(&probes).iter().all(|(t, _, _)| t == "steady"), "no hung probe has ended before the reload");

    // Only the hung target changes.
    std::fs::write(&file, config(port, mock, hung, "second", "")).unwrap();
    let reload_at = unix_now();
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 202);

    // Until the old generation's hung probes are given up (its grace), readiness never drops.
    let deadline = Instant::now() + Duration::from_secs(GRACE_S + 30);
    let mut readyz = Vec::new();
    loop {
        let status = reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await.map(|r| r.status().as_u16()).unwrap_or(0);
        readyz.push(status);
        if probe_log(&probes).iter().any(|(t, _, _)| t == "hung") {
            break;
        }
        assert!(Instant::now() < deadline, "the old generation's hung probes were never given up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(readyz.iter().all(|s| *s == 200), "/readyz during the reload: {readyz:?}");
    let text = scrape(port).await;
    assert!(text.contains("llmprobe_config_last_reload_successful 1"), "{text}");

    // Ordering, not timing: probes of `steady` meant for after the reload were recorded before
    // the old generation's hung probes were (which happens only when its grace is over).
    let lines = probe_log(&probes);
    let first_hung = lines.iter().position(|(t, _, _)| t == "hung").unwrap();
    let steady_after = lines[..first_hung].iter().filter(|(t, _, at)| t == "steady" && *at > reload_at).count();
    assert!(steady_after >= 5, "{steady_after} steady probes sent after the reload before the hung ones were given up");

    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(GRACE_S + 1 + 20)).expect("exits after SIGTERM within its grace");
    assert!(status.success(), "{status}");
    let stderr = std::fs::read_to_string(&log).unwrap();

    // The steady schedule went on where it stood: its intended times keep their exact spacing
    // from the first probe to the last (no gap, no restart, none lost or sent twice).
    let mut steady: Vec<f64> = probe_log(&probes).into_iter().filter(|(t, _, _)| t == "steady").map(|(_, _, at)| at).collect();
    steady.sort_by(f64::total_cmp);
    assert!(steady.iter().any(|at| *at > reload_at + 0.5), "steady probes after the reload");
    let period = 1.0 / RATE;
    for pair in steady.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((gap - period).abs() < 0.005, "gap of {gap:.4} s between intended times (period {period} s) around {}", pair[0] - reload_at);
    }
    assert!(stderr.contains("schedules of unchanged targets go on where they stood"), "{stderr}");

    // Every scheduled probe recorded, in each generation.
    let old = accounting(&stderr, "previous config's probes finished");
    let last = accounting(&stderr, "stopped");
    assert_eq!(old.len(), 1, "{stderr}");
    assert_eq!(last.len(), 1, "{stderr}");
    for (scheduled, recorded) in old.into_iter().chain(last) {
        assert!(scheduled > 0 && scheduled == recorded, "scheduled {scheduled}, recorded {recorded}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_wins_over_a_reload_being_prepared() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let hung = hung_server().await;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("llmprobe-reload-signal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (file, log, pipe) = (dir.join("config.yaml"), dir.join("stderr.log"), dir.join("key.pipe"));
    assert!(Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    std::fs::write(&file, config(port, mock, hung, "first", "")).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log", "info", "probe", "--web.enable-lifecycle", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for(port, "steady probes", |t| metric(t, "llmprobe_requests_total", &["target=\"steady\"", "outcome=\"success\""]) >= 3.0).await;

    // Reading this key file blocks until someone writes the pipe: nobody will.
    let extra = format!("    api_key_file: {}\n", pipe.display());
    std::fs::write(&file, config(port, mock, hung, "first", &extra)).unwrap();
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    // Probing goes on meanwhile.
    let before = metric(&scrape(port).await, "llmprobe_requests_total", &["target=\"steady\""]);
    wait_for(port, "probing during the preparation", |t| metric(t, "llmprobe_requests_total", &["target=\"steady\""]) > before + 3.0).await;

    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(GRACE_S + 1 + 20)).expect("SIGTERM ends the process while a reload is being prepared");
    assert!(status.success(), "{status}");
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!stderr.contains("config reloaded") && !stderr.contains("reload rejected"), "the reload was still being prepared:\n{stderr}");
    assert!(stderr.contains("signal received"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_wins_over_the_first_preparation() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let hung = hung_server().await;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("llmprobe-start-signal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (file, log, pipe) = (dir.join("config.yaml"), dir.join("stderr.log"), dir.join("key.pipe"));
    assert!(Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    // Reading this key file at start blocks until someone writes the pipe: nobody will.
    std::fs::write(&file, config(port, mock, hung, "first", &format!("    api_key_file: {}\n", pipe.display()))).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log", "info", "probe", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The server is up before the preparation: /healthz answers while the key file blocks.
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.is_err() {
        assert!(Instant::now() < deadline, "the prober's server never came up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(GRACE_S + 1 + 20)).expect("SIGTERM ends the process while the first config is being prepared");
    assert!(status.success(), "{status}");
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("stopped before probing started"), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A reload from a long grace (60 s) to a short one (1 s) while the hung target's probes are in
/// flight: the replaced generation waits out its own grace in the background, but SIGTERM ends
/// everything within the running config's grace, so the process exits long before the old
/// grace would have let it (the limit below is 20 s against its 60).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_after_a_reload_waits_only_the_running_configs_grace() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let hung = hung_server().await;
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("llmprobe-reload-grace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (file, log) = (dir.join("config.yaml"), dir.join("stderr.log"));
    let with_grace =
        |model: &str, grace: &str| config(port, mock, hung, model, "").replace(&format!("shutdown_grace: {GRACE_S}s"), &format!("shutdown_grace: {grace}"));
    std::fs::write(&file, with_grace("first", "60s")).unwrap();
    let mut child = Command::new(BIN)
        .args(["--log", "info", "probe", "--web.enable-lifecycle", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for(port, "hung probes in flight", |t| metric(t, "llmprobe_in_flight_requests", &["target=\"hung\""]) >= 3.0).await;
    std::fs::write(&file, with_grace("second", "1s")).unwrap();
    let resp = reqwest::Client::new().post(format!("http://127.0.0.1:{port}/-/reload")).send().await.unwrap();
    assert_eq!(resp.status(), 202);
    let applied_by = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).unwrap().contains("config reloaded") {
        assert!(Instant::now() < applied_by, "the reload was never applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(20)).expect("exits within the running config's grace, not the replaced one's 60 s");
    assert!(status.success(), "{status}");
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("previous config's probes finished"), "the replaced generation recorded its probes: {stderr}");
    let last = accounting(&stderr, "stopped");
    assert!(last.iter().all(|(scheduled, recorded)| scheduled == recorded), "{last:?}");
    std::fs::remove_dir_all(&dir).ok();
}
