//! Every replica probed and compared, end to end over loopback: a DNS name (through an
//! injected resolver) maps to mock engines bound on 127.0.0.2, 127.0.0.3, ...; each replica gets
//! series of its own and its version from its own discovery; a replica that leaves DNS stops
//! being probed and its series go after the grace period; during a rollout (two versions) the
//! canary verdict says `regressed` for a 1.3x slower new version and `ok` for an equally fast
//! one; a replica twice as slow as its peers of the same version is an outlier; with 50 replicas
//! and `replicas.max: 8` the label set stays bounded.

use crate::common;

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::metric;
use llmprobe::app::{self, ResolverHandle, RunOptions};
use llmprobe::mock::{self, MockOptions};
use llmprobe::replicas::discover::StaticResolver;
use tokio_util::sync::CancellationToken;

/// Mocks on 127.0.0.(2..2+n), all on one port (DNS gives one port for every replica).
async fn mocks(n: u8) -> (u16, Vec<CancellationToken>) {
    let first = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = first.local_addr().unwrap().port();
    let mut listeners = vec![first];
    for i in 1..n {
        listeners.push(tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 2 + i], port))).await.unwrap());
    }
    let mut stops = Vec::new();
    for l in listeners {
        let stop = CancellationToken::new();
        tokio::spawn(mock::serve(l, MockOptions::default(), stop.clone()));
        stops.push(stop);
    }
    (port, stops)
}

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

fn config(port: u16, replicas: &str) -> llmprobe::config::Config {
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 40, seed: 2, discovery_interval: 1s, shutdown_grace: 2s}}\n\
         targets:\n  - name: t\n    base_url: \"http://llm.test:{port}\"\n    api: openai-chat\n    model: mock-llama\n\
         \x20   discover: {{kind: dns, name: llm.test, port: {port}, interval: 200ms}}\n    replicas: {replicas}\n\
         scenarios:\n  - {{name: s, input_tokens: 16, output_tokens: 8}}\n"
    );
    llmprobe::app::loader::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
}

async fn scrape(addr: SocketAddr) -> String {
    reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap()
}

async fn wait_for(addr: SocketAddr, what: &str, secs: u64, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let text = scrape(addr).await;
        if check(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{text}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn replica_label(port: u16, last: u8) -> String {
    format!("replica=\"127.0.0.{last}:{port}\"")
}

async fn control(port: u16, last: u8, body: &str) {
    let resp = reqwest::Client::new().post(format!("http://127.0.0.{last}:{port}/mock/control")).body(body.to_owned()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
}

async fn start(cfg: llmprobe::config::Config, resolver: &StaticResolver) -> (app::Running, CancellationToken) {
    let shutdown = CancellationToken::new();
    let options = RunOptions { resolver: Some(ResolverHandle(Arc::new(resolver.clone()))), ..RunOptions::default() };
    (app::start(cfg, options, shutdown.clone()).await.unwrap(), shutdown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_is_probed_and_a_vanished_one_goes_after_the_grace_period() {
    let (port, _stops) = mocks(3).await;
    let resolver = StaticResolver::new();
    resolver.set("llm.test", [ip(2), ip(3), ip(4)]);
    let (running, shutdown) = start(config(port, "{grace: 2s}"), &resolver).await;
    let addr = running.metrics_addr;
    let ok = |t: &str, last: u8| metric(t, "llmprobe_requests_total", &[&replica_label(port, last), "outcome=\"success\""]);
    let text = wait_for(addr, "probes on every replica", 20, |t| (2..=4).all(|i| ok(t, i) >= 5.0)).await;
    assert_eq!(metric(&text, "llmprobe_replicas", &["state=\"discovered\""]), 3.0);
    assert_eq!(
        metric(&text, "llmprobe_replica_info", &[&replica_label(port, 2), "version=\"0.32.0\""]),
        1.0,
        "the replica's own discovery gives its version:\n{text}"
    );
    // The target-level aggregate is the sum over replicas.
    let all = metric(&text, "llmprobe_requests_total", &["target=\"t\"", "outcome=\"success\""]);
    assert_eq!(all, (2..=4).map(|i| ok(&text, i)).sum::<f64>());

    resolver.set("llm.test", [ip(2), ip(3)]);
    let left = wait_for(addr, "the replica to leave", 10, |t| metric(t, "llmprobe_replicas", &["state=\"discovered\""]) == 2.0).await;
    let (before, others) = (ok(&left, 4), ok(&left, 2) + ok(&left, 3));
    // 28 more probes (0.7 s at 40/s) that could have gone to the vanished replica.
    let text = wait_for(addr, "probes on the remaining replicas", 20, |t| ok(t, 2) + ok(t, 3) >= others + 28.0).await;
    assert!(ok(&text, 4) <= before + 2.0, "no new probes to the vanished replica (in-flight ones may still land)");
    wait_for(addr, "its series to go after the grace period", 15, |t| !t.contains(&replica_label(port, 4))).await;
    shutdown.cancel();
    let report = running.wait().await.unwrap();
    assert_eq!(report.accounting.scheduled(), report.accounting.recorded());
}

/// A rollout half done: one replica of two serves 0.33.0, `slowdown` times slower. The release
/// is marked when the prober starts (a pipeline's marker, no baseline before it). Returns the
/// last scrape and the release verdict then.
async fn rollout(slowdown: f64) -> (String, serde_json::Value) {
    let (port, _stops) = mocks(2).await;
    control(port, 3, &format!(r#"{{"engine_version":"0.33.0","slowdown":{slowdown}}}"#)).await;
    let resolver = StaticResolver::new();
    resolver.set("llm.test", [ip(2), ip(3)]);
    let token_file = std::env::temp_dir().join(format!("llmprobe-canary-token-{}-{slowdown}", std::process::id()));
    std::fs::write(&token_file, "canary-token").unwrap();
    let mut cfg = config(port, "{rate: split}");
    cfg.detect.release_token_file = Some(token_file.clone());
    let (running, shutdown) = start(cfg, &resolver).await;
    let addr = running.metrics_addr;
    let client = reqwest::Client::new();
    let marked =
        client.post(format!("http://{addr}/api/v1/releases")).bearer_auth("canary-token").body(r#"{"target":"t","version":"0.33.0"}"#).send().await.unwrap();
    assert!(marked.status().is_success(), "{}", marked.status());
    // The mock's slowdown stretches every engine step, so TPOT (one step per token) shows it
    // directly; TTFT also holds HTTP and queueing, which a busy machine makes noisy.
    let regressed = |t: &str| metric(t, "llmprobe_canary_state", &["version=\"0.33.0\"", "signal=\"tpot\"", "state=\"regressed\""]) == 1.0;
    let judged = |t: &str| metric(t, "llmprobe_canary_evidence", &["version=\"0.33.0\"", "signal=\"tpot\""]) != 0.0;
    // A slower version: until it is regressed. An equal one: judged, over 200 probes of the
    // new version (10 s at 20/s) in which it could have been called regressed.
    let new_version = |t: &str| metric(t, "llmprobe_requests_total", &[&replica_label(port, 3)]);
    let done = |t: &str| if slowdown > 1.0 { regressed(t) } else { judged(t) && new_version(t) >= 200.0 };
    let text = wait_for(addr, "the canary's verdict", 90, done).await;
    let verdict = client.get(format!("http://{addr}/api/v1/verdict?target=t")).bearer_auth("canary-token").send().await.unwrap().text().await.unwrap();
    shutdown.cancel();
    running.wait().await.unwrap();
    let _ = std::fs::remove_file(&token_file);
    (text, serde_json::from_str(&verdict).unwrap_or_else(|e| panic!("{e}: {verdict}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slower_new_version_is_a_canary_regression() {
    let (text, verdict) = rollout(1.3).await;
    assert_eq!(metric(&text, "llmprobe_canary_state", &["version=\"0.33.0\"", "signal=\"tpot\"", "state=\"regressed\""]), 1.0, "{text}");
    // The release verdict says so while both versions serve, before the before/after window
    // (which has no baseline here) could.
    assert_eq!(verdict["state"], "regressed", "{verdict}");
    assert_eq!(verdict["canary"]["version"], "0.33.0", "{verdict}");
    let tpot = verdict["canary"]["signals"].as_array().and_then(|s| s.iter().find(|s| s["signal"] == "tpot")).cloned().unwrap_or_default();
    assert_eq!(tpot["regressed"], true, "{verdict}");
    let ratio = metric(&text, "llmprobe_canary_effect", &["version=\"0.33.0\"", "signal=\"tpot\"", "bound=\"estimate\""]);
    assert!(ratio > 1.15, "new/old TPOT ratio {ratio} for 1.3x slower steps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_equally_fast_new_version_is_ok() {
    let (text, verdict) = rollout(1.0).await;
    assert_ne!(verdict["state"], "regressed", "{verdict}");
    assert!(verdict["canary"]["signals"].as_array().is_some_and(|s| s.iter().all(|s| s["regressed"] == false)), "{verdict}");
    for signal in ["ttft", "tpot", "e2e", "goodput"] {
        let s = format!("signal=\"{signal}\"");
        assert_eq!(metric(&text, "llmprobe_canary_state", &["version=\"0.33.0\"", &s, "state=\"ok\""]), 1.0, "{signal}:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_slower_than_its_peers_is_an_outlier() {
    let (port, _stops) = mocks(3).await;
    control(port, 4, r#"{"slowdown":2.5}"#).await;
    let resolver = StaticResolver::new();
    resolver.set("llm.test", [ip(2), ip(3), ip(4)]);
    let (running, shutdown) = start(config(port, "{}"), &resolver).await;
    let outlier = |t: &str, last: u8| metric(t, "llmprobe_replica_outlier", &[&replica_label(port, last), "signal=\"ttft\""]);
    let text = wait_for(running.metrics_addr, "the slow replica to be flagged", 40, |t| outlier(t, 4) == 1.0).await;
    assert_eq!(outlier(&text, 2), 0.0, "{text}");
    assert_eq!(outlier(&text, 3), 0.0, "{text}");
    shutdown.cancel();
    running.wait().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_replicas_stay_within_the_label_cap() {
    // Nothing listens there: the probes fail as connect errors, which still makes series.
    let resolver = StaticResolver::new();
    resolver.set("llm.test", (0..50).map(|i| IpAddr::from([127, 0, 1, 10 + i])));
    let mut cfg = config(9, "{max: 8, grace: 1s}");
    cfg.targets[0].timeouts.connect = Duration::from_millis(200);
    let (running, shutdown) = start(cfg, &resolver).await;
    let text = wait_for(running.metrics_addr, "probes", 10, |t| metric(t, "llmprobe_requests_total", &["target=\"t\""]) >= 30.0).await;
    assert_eq!(metric(&text, "llmprobe_replicas", &["state=\"discovered\""]), 50.0);
    assert_eq!(metric(&text, "llmprobe_replicas", &["state=\"probed\""]), 8.0);
    let replicas: HashSet<&str> =
        text.lines().filter(|l| l.starts_with("llmprobe_requests_total{")).filter_map(|l| l.split("replica=\"").nth(1)?.split('"').next()).collect();
    assert!(replicas.len() <= 16, "{} replica label values (cap 8, plus those in their grace period)", replicas.len());
    shutdown.cancel();
    running.wait().await.unwrap();
}
