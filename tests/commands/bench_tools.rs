//! The tools over result directories: knee selection on synthetic records, the `compare` gate's
//! exit codes, `report` merging two directories, `capacity` (the 0 case) and the matrix
//! `--dry-run`. One tiny real sweep against the mock (loopback, port 0) supplies the evidence.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use llmprobe::bench::records::{self, Phase, Record, SloVerdict};
use llmprobe::bench::summary::SummaryFile;
use llmprobe::bench::{self, BenchOptions, BenchPlan, knee};
use llmprobe::mock::{MockOptions, Profile};

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llmprobe-{tag}-{}", uuid::Uuid::new_v4()))
}

fn llmprobe(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_llmprobe")).args(args).output().expect("run llmprobe");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A real two-point sweep against the mock.
async fn sweep(dir: &Path) {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    let text = format!(
        "targets:\n  - {{name: t, base_url: 'http://{addr}', api: openai-completions}}\nscenarios:\n  - {{name: s, input_tokens: 32, output_tokens: 4}}\nslo: {{ttft: 2s, objective: 0.9}}\nbench: {{mode: concurrency, concurrency: [1, 2], repeats: 2, requests: 15}}\n"
    );
    let cfg = llmprobe::app::loader::parse(&text, "t.yaml").unwrap();
    let plan = BenchPlan::new(cfg, "t.yaml", &text).unwrap();
    let opts = BenchOptions { output: dir.to_path_buf(), target: None, server_pid: None, sample_every: Duration::from_secs(1), quiet: true };
    bench::run(&plan, &opts).await.unwrap();
    stop.cancel();
}

/// Copies a result directory under a new run ID, changing each measured record with `edit`.
fn derive(from: &Path, to: &Path, edit: impl Fn(&mut Record)) {
    std::fs::create_dir_all(to).unwrap();
    let run_id = uuid::Uuid::new_v4().to_string();
    let mut m = bench::manifest::read(from).unwrap();
    m.run_id = run_id.clone();
    bench::manifest::write(to, &m).unwrap();
    let mut recs = records::read(from).unwrap();
    for r in &mut recs {
        r.run_id = run_id.clone();
        if r.phase == Phase::Measure {
            edit(r);
        }
    }
    records::append(to, &recs).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_report_merge_and_capacity_over_real_results() {
    let root = temp_dir("bench-tools");
    let (a, slow, twin, merged) = (root.join("a"), root.join("slow"), root.join("twin"), root.join("merged"));
    sweep(&a).await;
    let s = |p: &Path| p.to_str().unwrap().to_owned();

    // Identical inputs pass the gate.
    let (code, out, _) = llmprobe(&["compare", &s(&a), &s(&a)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result: no regression"));

    // Three times the TTFT and half the requests missing the SLO: a regression.
    derive(&a, &slow, |r| {
        if let Some(t) = r.ttft_ms.as_mut() {
            *t *= 3.0;
        }
        if r.seq % 2 == 0 {
            r.slo = Some(SloVerdict { ttft_ok: Some(false), tpot_ok: None, e2e_ok: None, goodput: false });
        }
    });
    let (code, out, _) = llmprobe(&["compare", &s(&a), &s(&slow)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.lines().any(|l| l.contains("ttft_p95_ms") && l.contains("REGRESSION")), "{out}");
    assert!(out.lines().any(|l| l.contains("goodput_ratio") && l.contains("REGRESSION")), "{out}");
    // A loose enough gate lets it through (goodput drop allowed up to 0.6, latency up to 300%).
    let (code, out, _) = llmprobe(&["compare", &s(&a), &s(&slow), "--max-latency-increase-pct", "300", "--max-goodput-drop", "0.6"]);
    assert_eq!(code, 0, "{out}");
    // Unusable input is not a pass.
    assert_eq!(llmprobe(&["compare", &s(&a), &s(&root.join("missing"))]).0, 2);

    // Merging two runs (e.g. two pods that each sent half the load): records pool exactly,
    // loads add up.
    derive(&a, &twin, |_| {});
    let (code, out, err) = llmprobe(&["report", &s(&a), &s(&twin), "--output", &s(&merged)]);
    assert_eq!(code, 0, "{out}{err}");
    let (ra, rm) = (records::read(&a).unwrap(), records::read(&merged).unwrap());
    assert_eq!(rm.len(), 2 * ra.len());
    let single: SummaryFile = bench::read_json(&a.join("summary.json")).unwrap();
    let both: SummaryFile = bench::read_json(&merged.join("summary.json")).unwrap();
    assert_eq!(both.run_ids.len(), 2);
    assert_eq!(both.points.iter().map(|p| p.load).collect::<Vec<_>>(), vec![2.0, 4.0]);
    for (p1, p2) in single.points.iter().zip(&both.points) {
        assert_eq!(p2.pooled.requests, 2 * p1.pooled.requests);
        assert_eq!(p2.pooled.ttft_p99_ms, p1.pooled.ttft_p99_ms, "the same records twice: same percentiles");
    }
    let html = std::fs::read_to_string(merged.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Goodput ratio vs load"));
    assert_ne!(llmprobe(&["report", &s(&a), &s(&a), "--output", &s(&root.join("dup"))]).0, 0, "the same run twice is refused");

    // Capacity with the bench result as measured input.
    let (code, out, _) = llmprobe(&[
        "capacity",
        "--params-billion",
        "1",
        "--layers",
        "16",
        "--kv-heads",
        "8",
        "--head-dim",
        "64",
        "--context-tokens",
        "2048",
        "--gpu-memory-gib",
        "24",
        "--from-bench",
        &s(&a),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("measured input"), "{out}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn capacity_zero_is_an_answer_not_an_error() {
    let (code, out, err) = llmprobe(&[
        "capacity",
        "--params-billion",
        "70",
        "--layers",
        "80",
        "--kv-heads",
        "8",
        "--head-dim",
        "128",
        "--context-tokens",
        "8192",
        "--gpu-memory-gib",
        "80",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("recommended concurrency      0"), "{out}");
    assert!(out.contains("warning: the weights"), "{out}");
    let (code, _, err) = llmprobe(&["capacity", "--layers", "2"]);
    assert_eq!(code, 2);
    assert!(err.contains("params_billion: required"));
}

#[test]
fn matrix_dry_run_lists_runs_and_sends_nothing() {
    let dir = temp_dir("bench-matrix");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("m.yaml");
    // Port 9 (discard) is not listened on: a dry run must not try.
    std::fs::write(&file, "targets:\n  - {name: t, base_url: 'http://127.0.0.1:9', api: openai-chat}\nscenarios:\n  - {name: s, input_tokens: 8, output_tokens: 8}\nbench:\n  mode: rate\n  rates: [1]\n  requests: 10\n  repeats: 2\n  matrix: {rates: [1, 2, 4], input_tokens: [128, 1024], output_tokens: [64, 256]}\n").unwrap();
    let (code, out, err) = llmprobe(&["bench", "--config", file.to_str().unwrap(), "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    let runs: Vec<&str> = out.lines().filter(|l| l.starts_with("in") && !l.contains("planned duration")).collect();
    assert_eq!(runs.len(), 4, "{out}");
    assert_eq!(out.lines().filter(|l| l.contains(": planned duration: about")).count(), 4, "a duration per run:\n{out}");
    assert!(runs[0].starts_with("in128-out64") && runs[0].contains("1,2,4"));
    let hashes: std::collections::HashSet<&str> = runs.iter().map(|l| l.rsplit(' ').next().unwrap()).collect();
    assert_eq!(hashes.len(), 4, "every run has its own hash");
    assert!(out.contains("4 run(s); 240 requests in total"), "{out}");
    assert!(!dir.join("records.jsonl").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

fn synthetic(point: usize, load: f64, ttft_ms: f64, good: bool, repeat: u32, seq: u64) -> Record {
    Record {
        run_id: "r".into(),
        point,
        load,
        repeat: Some(repeat),
        phase: Phase::Measure,
        request_id: format!("{point}-{repeat}-{seq}"),
        seq,
        target: "t".into(),
        scenario: "s".into(),
        model: "m".into(),
        requested_input_tokens: 8,
        requested_output_tokens: 10,
        input_tokens: Some(8),
        output_tokens: Some(10),
        token_source: Some("usage".into()),
        intended_s: seq as f64 / load,
        sent_s: seq as f64 / load,
        first_token_s: None,
        end_s: seq as f64 / load + 1.0,
        intended_unix_s: 1e9 + seq as f64 / load,
        sent_unix_s: 1e9 + seq as f64 / load,
        first_token_unix_s: None,
        end_unix_s: 1e9 + seq as f64 / load + 1.0,
        first_token_time: None,
        schedule_lag_ms: 0.0,
        ttft_ms: Some(ttft_ms),
        server_first_token_ms: None,
        tpot_ms: Some(10.0),
        itl: None,
        itl_gaps_ms: vec![],
        e2e_ms: Some(1000.0),
        outcome: "success".into(),
        error_class: None,
        error_detail: None,
        http_status: Some(200),
        finish_reason: Some("length".into()),
        slo: Some(SloVerdict { ttft_ok: Some(good), tpot_ok: None, e2e_ok: None, goodput: good }),
        checks_failed: Vec::new(),
        fingerprint: None,
    }
}

#[test]
fn knee_is_the_last_load_meeting_the_objective_and_saturation_is_found() {
    // Loads 1, 2, 4, 8. Throughput (requests per window) grows to 2 then stays flat at 4 while
    // TTFT doubles; goodput falls below 0.95 at 8 only.
    let mut recs = Vec::new();
    for (point, load, n, ttft, bad) in [(0, 1.0, 20, 50.0, 0), (1, 2.0, 40, 60.0, 0), (2, 4.0, 40, 130.0, 1), (3, 8.0, 40, 400.0, 20)] {
        for repeat in 0..2 {
            for seq in 0..n {
                // Requests spread over 20 s, so throughput is n / 21 requests/s.
                let mut r = synthetic(point, load, ttft, seq >= bad, repeat, seq);
                r.intended_unix_s = 1e9 + seq as f64 * 20.0 / n as f64;
                r.end_unix_s = r.intended_unix_s + 1.0;
                recs.push(r);
            }
        }
    }
    let points = llmprobe::bench::summary::points(&recs, false);
    let k = knee::find(&points, 0.95);
    assert_eq!(k.candidate, Some(4.0), "{k:?}");
    assert!(k.candidate_reason.contains("at load 8"), "{}", k.candidate_reason);
    assert_eq!(k.saturation, Some(2.0), "{k:?}");
    assert!(k.saturation_reason.starts_with("2 -> 4"), "{}", k.saturation_reason);
    // A stricter objective: load 4 (39/40 good) no longer meets it.
    assert_eq!(knee::find(&points, 0.98).candidate, Some(2.0));
    // Below the objective from the lightest load on: no knee, and it says why.
    let none = knee::find(&points[3..], 0.95);
    assert_eq!(none.candidate, None);
    assert!(none.candidate_reason.contains("already at the lightest load 8"), "{}", none.candidate_reason);
}
