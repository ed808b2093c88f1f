//! `llmprobe detect simulate` as a user runs it: a small planner run prints the table, and
//! invalid detector settings are rejected with the field named.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_llmprobe");

#[test]
fn simulate_prints_detection_and_false_alarms() {
    let out = Command::new(BIN).args(["detect", "simulate", "--trials", "2", "--regression", "2", "--horizon-min", "15", "--threads", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("detected within 15 min   1.000"), "{text}");
    assert!(text.contains("false alarms without a regression (2 simulated days"), "{text}");
    assert!(!text.contains("within 60 min"), "the horizon bounds the table: {text}");
}

#[test]
fn simulate_rejects_bad_settings_by_field() {
    let dir = std::env::temp_dir().join(format!("llmprobe-detect-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unknown = dir.join("unknown.yaml");
    std::fs::write(&unknown, "armed_alpha: 0.01\narmed_windows: 60\n").unwrap();
    let invalid = dir.join("invalid.yaml");
    std::fs::write(&invalid, "latency_tolerance: 1.2\n").unwrap();
    for (file, needle) in [(&unknown, "armed_windows"), (&invalid, "latency_tolerance:")] {
        let out = Command::new(BIN).args(["detect", "simulate", "--trials", "1", "--settings"]).arg(file).output().unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{stderr}");
    }
}
