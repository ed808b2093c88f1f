//! `llmprobe gate` end to end: two mock engines on loopback under the same background load (a
//! closed loop of requests to each that swells and ebbs together), the CLI probing both side by
//! side. A candidate 1.25x slower is regressed (exit 1), an equal one passes (exit 0), one whose
//! structured output breaks is regressed on the checks; bad input is a clear error (exit 2).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprobe::mock::{Fault, MockOptions};
use tokio_util::sync::CancellationToken;

use crate::common::start_mock;

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llmprobe-gate-{tag}-{}", uuid::Uuid::new_v4()))
}

async fn llmprobe(args: Vec<String>) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_llmprobe")).args(&args).output().await.expect("run llmprobe");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Background load on every mock at once: `workers` closed loops each, all of them busy during
/// the first half of every 4 s and a quarter of them during the second half, so the load both
/// engines are under swells and ebbs at the same moments.
fn background(addrs: &[SocketAddr], workers: usize, stop: &CancellationToken) {
    let client = reqwest::Client::new();
    for &addr in addrs {
        for w in 0..workers {
            let (client, stop) = (client.clone(), stop.clone());
            tokio::spawn(async move {
                let start = tokio::time::Instant::now();
                let body = serde_json::json!({"model": "mock-llama", "max_tokens": 48, "messages": [{"role": "user", "content": "background ".repeat(200)}]});
                while !stop.is_cancelled() {
                    let busy = (start.elapsed().as_secs() / 2) % 2 == 0;
                    if !busy && w % 4 != 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    let sent = client
                        .post(format!("http://{addr}/v1/chat/completions"))
                        .header("content-type", "application/json")
                        .body(body.to_string())
                        .send()
                        .await;
                    if let Ok(answer) = sent {
                        let _ = answer.bytes().await;
                    }
                }
            });
        }
    }
}

const WORKLOAD: &str = "probe: {rate: 12, seed: 5, max_in_flight: 256}\n\
targets:\n  - {name: m, base_url: 'http://127.0.0.1:1', api: openai-chat, model: mock-llama, timeouts: {connect: 1s, ttft: 10s, idle: 10s, total: 20s}}\n\
scenarios:\n  - {name: s, input_tokens: 64, output_tokens: {min: 8, max: 24}}\n\
slo: {ttft: 5s, objective: 0.9}\n";

const STRUCTURED: &str = "probe: {rate: 12, seed: 5, max_in_flight: 256}\n\
targets:\n  - {name: m, base_url: 'http://127.0.0.1:1', api: openai-chat, model: mock-llama, timeouts: {connect: 1s, ttft: 10s, idle: 10s, total: 20s}}\n\
scenarios:\n  - name: structured\n    input_tokens: 32\n    output_tokens: 128\n    checks:\n      finish_reasons: [stop]\n      structured_output:\n        name: city\n        schema: {type: object, properties: {city: {type: string}, population: {type: integer}}, required: [city, population]}\n\
slo: {ttft: 5s, objective: 0.9}\n";

/// Runs the gate against a baseline mock and a candidate mock built from `candidate`, under
/// background load; returns (exit code, stdout, stderr, output directory).
async fn gate(tag: &str, config: &str, candidate: MockOptions, extra: &[&str]) -> (i32, String, String, PathBuf) {
    let (base, stop_base) = start_mock(MockOptions::default()).await;
    let (cand, stop_cand) = start_mock(candidate).await;
    let load = CancellationToken::new();
    background(&[base, cand], 4, &load);
    let root = temp_dir(tag);
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("gate.yaml");
    std::fs::write(&file, config).unwrap();
    let out = root.join("out");
    let mut args: Vec<String> =
        ["gate", "--baseline", &format!("http://{base}"), "--candidate", &format!("http://{cand}"), "--config"].iter().map(|s| s.to_string()).collect();
    args.push(file.display().to_string());
    args.extend(["--output".to_string(), out.display().to_string(), "--block".into(), "2s".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let (code, stdout, stderr) = llmprobe(args).await;
    load.cancel();
    stop_base.cancel();
    stop_cand.cancel();
    (code, stdout, stderr, out)
}

fn row<'a>(table: &'a str, signal: &str) -> &'a str {
    table.lines().find(|l| l.starts_with(signal)).unwrap_or_else(|| panic!("no {signal} row:\n{table}"))
}

fn cleanup(out: &Path) {
    if let Some(root) = out.parent() {
        let _ = std::fs::remove_dir_all(root);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_a_quarter_slower_is_regressed_early() {
    let slow = MockOptions { slowdown: 1.25, ..Default::default() };
    let (code, out, err, dir) = gate("slow", WORKLOAD, slow, &["--duration", "24s", "--until-verdict", "--looks", "4"]).await;
    assert_eq!(code, 1, "a 1.25x slower candidate must be regressed:\n{out}{err}");
    assert!(row(&out, "tpot_ms").contains("regressed"), "{out}");
    assert!(out.contains("result: regressed"), "{out}");
    // Both sides are bench results that `compare` reads, and gate.json holds the verdict.
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("gate.json")).unwrap()).unwrap();
    assert_eq!(json["verdict"], "regressed");
    let tpot = json["signals"].as_array().unwrap().iter().find(|s| s["signal"] == "tpot").unwrap();
    let (lo, hi) = (tpot["interval"][0].as_f64().unwrap(), tpot["interval"][1].as_f64().unwrap());
    // The interval that first cleared 1.05x still covers the slowdown (the engine's TPOT rises
    // a little beyond its step time: a slower engine holds more requests in its batch).
    assert!(lo > 1.05 && hi > 1.25, "{tpot}");
    let (b, c) = (dir.join("baseline"), dir.join("candidate"));
    let (code, cmp, cerr) = llmprobe(vec!["compare".into(), b.display().to_string(), c.display().to_string()]).await;
    assert!(code == 0 || code == 1, "compare reads both sides: {cmp}{cerr}");
    assert!(cmp.contains("tpot_p95_ms"), "{cmp}");
    let (code, _, rerr) = llmprobe(vec!["report".into(), c.display().to_string()]).await;
    assert_eq!(code, 0, "report reads a side: {rerr}");
    cleanup(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_deployments_pass() {
    let (code, out, err, dir) = gate("equal", WORKLOAD, MockOptions::default(), &["--duration", "24s"]).await;
    assert_eq!(code, 0, "two equal engines under the same load must pass:\n{out}{err}");
    for signal in ["ttft_ms", "tpot_ms", "e2e_ms", "goodput"] {
        assert!(row(&out, signal).contains("passed"), "{signal}: {out}");
    }
    assert!(!out.contains("checks_fail"), "no checks configured, none judged: {out}");
    // Pair i went to both sides: the sides' records match one to one by sequence number.
    let read = |side: &str| std::fs::read_to_string(dir.join(side).join("records.jsonl")).unwrap();
    let seqs = |text: String| {
        text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"].as_u64().unwrap()).collect::<std::collections::BTreeSet<_>>()
    };
    let (b, c) = (seqs(read("baseline")), seqs(read("candidate")));
    assert!(b.len() > 200 && b == c, "{} vs {} requests", b.len(), c.len());
    // Neither side is always first: the side sent first alternates from pair to pair.
    let sent = |text: String| {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|r| (r["seq"].as_u64().unwrap(), r["sent_s"].as_f64().unwrap()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (bs, cs) = (sent(read("baseline")), sent(read("candidate")));
    let baseline_first = bs.iter().filter(|(seq, t)| **t < cs[*seq]).count() as f64 / bs.len() as f64;
    assert!((0.3..=0.7).contains(&baseline_first), "baseline sent first in {:.0}% of pairs", baseline_first * 100.0);
    cleanup(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_that_breaks_structured_output_is_regressed_on_checks() {
    let broken = MockOptions { fault_rates: vec![(Fault::InvalidJson, 0.3)], ..Default::default() };
    let (code, out, err, dir) = gate("checks", STRUCTURED, broken, &["--duration", "30s", "--until-verdict", "--looks", "5"]).await;
    assert_eq!(code, 1, "{out}{err}");
    let checks = row(&out, "checks_fail");
    assert!(checks.contains("regressed"), "{out}");
    assert!(row(&out, "goodput").contains("regressed"), "a failed check costs goodput too: {out}");
    cleanup(&dir);
}

#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let root = temp_dir("bad");
    let out = root.join("out").display().to_string();
    let run = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["gate".into(), "--output".into(), out.clone()];
        args.extend(extra.iter().map(|s| s.to_string()));
        llmprobe(args)
    };
    let (code, _, err) = run(&["--baseline", "not a url", "--candidate", "http://127.0.0.1:9"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--baseline:"), "{err}");
    let (code, _, err) = run(&["--baseline", "http://user:secret@127.0.0.1:9", "--candidate", "http://127.0.0.1:9"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("credentials") && !err.contains("secret"), "{err}");
    let (code, _, err) = run(&["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--alpha", "0.9", "--latency-effect", "1.0"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--alpha") && err.contains("--latency-effect"), "{err}");
    let (code, _, err) = run(&["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--duration", "ten minutes"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--duration"), "{err}");
    std::fs::create_dir_all(&root).unwrap();
    let bad = root.join("bad.yaml");
    std::fs::write(
        &bad,
        "targets:\n  - {name: m, base_url: 'http://127.0.0.1:1', api: openai-chat}\nscenarios:\n  - {name: s, input_tokens: -3, output_tokens: 8}\n",
    )
    .unwrap();
    let (code, _, err) = run(&["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9", "--config", bad.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("scenarios[0].input_tokens") && err.contains("bad.yaml:4"), "names the field and line: {err}");
    let _ = std::fs::remove_dir_all(&root);
}
