//! The regression detector from outside: baselines that survive a restart through the state
//! file, a corrupt or stale file ignored with a warning, settings parsing and validation, the
//! planner on a small run, and replayed bench records.

use std::path::PathBuf;

use llmprobe::cmd::detect::parse_replay;
use llmprobe::detect::persist::{self, STATE_FILE};
use llmprobe::detect::sim::{self, PlanParams};
use llmprobe::detect::{DetectSettings, Detector, MarkerTime, Observation, Signal, State};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("llmprobe-detect-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A deterministic lognormal-ish stream: median 200 ms, spread from a fixed sequence.
fn ttft(i: usize, factor: f64) -> Observation {
    let u = ((i as f64 * 0.618_033_988_75).fract() - 0.5) * 2.0; // low-discrepancy in (-1, 1)
    Observation { ttft: Some(0.2 * (0.8 * u).exp() * factor), tpot: None, e2e: None, good: Some(true), ..Default::default() }
}

fn settings() -> DetectSettings {
    DetectSettings { continuous: false, ..DetectSettings::default() }
}

fn feed(d: &mut Detector, from: usize, n: usize, t0: f64, factor: f64) {
    for i in from..from + n {
        d.observe("gpu-a", ["chat", "rag"][i % 2], ttft(i, factor), t0 + (i - from) as f64);
    }
}

fn ttft_state(d: &Detector) -> State {
    d.report().iter().find(|r| r.scenario.is_none() && r.signal == Signal::Ttft).unwrap().state
}

#[test]
fn restart_between_baseline_and_release_still_detects() {
    let dir = temp_dir("restart");
    let mut before = Detector::new(settings());
    feed(&mut before, 0, 1200, 1000.0, 1.0);
    persist::save(&dir, &before).unwrap();
    assert!(dir.join(STATE_FILE).is_file());
    let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).filter(|e| e.file_name() != STATE_FILE).collect();
    assert!(leftovers.is_empty(), "no temporary file left: {leftovers:?}");

    // The process restarts 60 s later; the release comes right after.
    let mut after = Detector::new(settings());
    assert_eq!(persist::load(&dir, &mut after, 2260.0, 3600.0), None);
    // The first look comes 4 bins after the 5-minute grace window.
    after.mark_release("gpu-a", "v2", 2270.0, MarkerTime::Stated, 2270.0);
    feed(&mut after, 1200, 700, 2270.0, 2.0);
    assert_eq!(ttft_state(&after), State::Regressed);

    // Without the file the same release has no baseline to test against.
    let mut fresh = Detector::new(settings());
    fresh.mark_release("gpu-a", "v2", 2270.0, MarkerTime::Stated, 2270.0);
    feed(&mut fresh, 1200, 700, 2270.0, 2.0);
    assert_eq!(ttft_state(&fresh), State::Watching);
}

#[test]
fn corrupt_or_stale_state_is_ignored_with_a_warning() {
    let dir = temp_dir("corrupt");
    std::fs::write(dir.join(STATE_FILE), b"{\"version\":1,\"saved_at\":5,\"targets\":[{\"oops\"").unwrap();
    let mut d = Detector::new(settings());
    let warning = persist::load(&dir, &mut d, 10.0, 3600.0).expect("a warning");
    assert!(warning.contains("corrupt"), "{warning}");
    assert_eq!(d.keys(), 0);

    let mut old = Detector::new(settings());
    feed(&mut old, 0, 100, 0.0, 1.0);
    persist::save(&dir, &old).unwrap();
    let warning = persist::load(&dir, &mut d, 100.0 + 7200.0, 3600.0).expect("a warning");
    assert!(warning.contains("stale"), "{warning}");
    assert_eq!(d.keys(), 0);

    // Missing file: nothing to say.
    assert_eq!(persist::load(&temp_dir("missing"), &mut d, 0.0, 3600.0), None);
}

#[test]
fn settings_default_to_the_documented_values_and_name_bad_fields() {
    let d = DetectSettings::default();
    assert!(d.validate().is_ok());
    assert_eq!((d.armed_alpha, d.armed_window_s, d.latency_min_effect, d.goodput_min_effect), (0.015, 3600.0, 1.10, 0.01));
    assert_eq!((d.continuous_arl_days, d.max_keys, d.baseline_max_samples), (60.0, 256, 2048));

    let partial: DetectSettings = serde_json::from_str(r#"{"armed_window_s": 1800}"#).unwrap();
    assert_eq!(partial, DetectSettings { armed_window_s: 1800.0, ..DetectSettings::default() });
    let unknown = serde_json::from_str::<DetectSettings>(r#"{"armed_windows": 1800}"#).unwrap_err().to_string();
    assert!(unknown.contains("armed_windows"), "{unknown}");

    let bad = DetectSettings { armed_alpha: 0.0, latency_min_effect: 0.9, max_keys: 0, ..DetectSettings::default() };
    let errors = bad.validate().unwrap_err();
    for field in ["armed_alpha", "latency_min_effect", "max_keys"] {
        assert!(errors.iter().any(|e| e.starts_with(&format!("{field}:"))), "{field} missing in {errors:?}");
    }
}

#[test]
fn planner_detects_a_doubling_on_a_small_run() {
    let mut p = PlanParams::new(DetectSettings::default());
    p.regression = 2.0;
    p.trials = 4;
    p.horizon_s = 900.0;
    p.warmup_s = 3600.0;
    let d = sim::run_detection(&p);
    assert_eq!(d.len(), 4);
    // Decided at the first look: 4 one-minute bins after the 5-minute grace window.
    assert!(d.iter().all(|t| t.is_some_and(|t| t < 660.0)), "{d:?}");
}

#[test]
fn replay_reads_bench_records() {
    let lines = [
        r#"{"phase":"warmup","scenario":"chat","outcome":"success","ttft_ms":900.0,"tpot_ms":10.0,"e2e_ms":2000.0,"slo":{"goodput":true}}"#,
        r#"{"phase":"measure","scenario":"chat","outcome":"success","ttft_ms":200.0,"tpot_ms":10.0,"e2e_ms":900.0,"slo":{"goodput":true}}"#,
        r#"{"phase":"measure","scenario":"chat","outcome":"success","ttft_ms":2500.0,"tpot_ms":10.0,"e2e_ms":3000.0,"slo":{"goodput":false}}"#,
        r#"{"phase":"measure","scenario":"rag","outcome":"error","ttft_ms":null,"tpot_ms":null,"e2e_ms":null,"slo":null}"#,
        r#"{"phase":"measure","scenario":"rag","outcome":"dropped","ttft_ms":null,"tpot_ms":null,"e2e_ms":null,"slo":null}"#,
    ];
    let pools = parse_replay(&lines.join("\n")).unwrap();
    assert_eq!(pools.len(), 2);
    assert_eq!(pools[0].len(), 2, "warm-up skipped");
    assert_eq!((pools[0][0].ttft, pools[0][0].good), (Some(0.2), true));
    assert!(!pools[0][1].good, "SLO miss is bad");
    assert_eq!(pools[1].len(), 1, "dropped skipped");
    assert!(!pools[1][0].good && pools[1][0].ttft.is_none());
    assert!(parse_replay("").is_err());
}
