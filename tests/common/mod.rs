//! Helpers shared by the prober's integration tests: a mock engine on 127.0.0.1:0, configs
//! pointed at it, a reader for exposition text, and waiting for the counts a test needs.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use llmprobe::app::loader;
use llmprobe::config::Config;
use llmprobe::mock::{self, MockOptions};
use tokio_util::sync::CancellationToken;

/// Starts the mock engine on a free loopback port; it stops when the token is cancelled.
pub async fn start_mock(opts: MockOptions) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(mock::serve(listener, opts, stop.clone()));
    (addr, stop)
}

/// How long a test waits for the counts or states it needs before it fails: far longer than
/// any of them takes on a busy machine, so that only a broken test reaches it. Tests wait for
/// what they need, never for a fixed time.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// A prober's (or the mock's) `/metrics` text; empty while it cannot be reached.
pub async fn scrape(addr: SocketAddr) -> String {
    match reqwest::get(format!("http://{addr}/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Scrapes `addr` until `enough` holds for its metrics text, and returns that text; fails the
/// test with `what` and the last text after `PATIENCE`.
pub async fn wait_for_metrics(addr: SocketAddr, what: &str, enough: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = scrape(addr).await;
        if enough(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {what}:\n{text}");
        // Often enough not to add to a test's time, seldom enough that encoding the page
        // (milliseconds in a debug build) does not load a shared machine.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs the prober with `cfg` until its metrics show `enough` (see `wait_for_metrics`), then
/// stops it (in-flight probes finish within the config's grace) and returns its final metrics
/// text and report.
pub async fn run_until(cfg: Config, what: &str, enough: impl Fn(&str) -> bool) -> (String, llmprobe::app::RunReport) {
    let stop = tokio_util::sync::CancellationToken::new();
    let running = llmprobe::app::start(cfg, llmprobe::app::RunOptions::default(), stop.clone()).await.unwrap();
    wait_for_metrics(running.metrics_addr, what, enough).await;
    stop.cancel();
    let report = running.wait().await.unwrap();
    (report.metrics.encode_openmetrics(), report)
}

/// A one-target config aimed at `base_url`, with `extra_target` YAML lines added to the target
/// and `probe` settings replaced.
pub fn config(base_url: &str, api: &str, probe: &str, extra_target: &str, output_tokens: u32) -> Config {
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {probe}\ntargets:\n  - name: t\n    base_url: {base_url}\n    api: {api}\n{extra_target}\nscenarios:\n  - name: s\n    input_tokens: 64\n    output_tokens: {output_tokens}\nslo: {{ttft: 2s, tpot: 200ms, e2e: 20s, objective: 0.99}}\n"
    );
    loader::parse(&yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// Sum of every sample of `name` whose label text contains all of `labels`.
pub fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|want| rest.contains(want))).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// A target named `t` at `addr` with the given flow-mapping fields (`api: openai-chat, model: m`,
/// ...) and one small scenario, as the prober would build it.
pub fn target_runtime(addr: SocketAddr, fields: &str) -> std::sync::Arc<llmprobe::client::TargetRuntime> {
    let yaml = format!("targets:\n  - {{name: t, base_url: \"http://{addr}\", {fields}}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n");
    let cfg = loader::parse(&yaml, "t.yaml").unwrap();
    std::sync::Arc::new(llmprobe::client::TargetRuntime::new(cfg.targets[0].clone()).unwrap())
}

/// A raw HTTP/1.1 server on a free loopback port: for each connection it reads one request (the
/// head and a `content-length` body) and hands the socket to `answer`, which writes whatever the
/// test needs. A connection closed before its request is complete is dropped.
pub async fn raw_server<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                        let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")?.trim().parse().ok()).unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                answer(sock).await;
            });
        }
    });
    addr
}
