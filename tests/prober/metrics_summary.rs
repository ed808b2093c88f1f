//! The live summary line and the debug history, fed with hand-built outcomes.

use crate::metrics_common;

use std::time::{Duration, Instant};

use llmprobe::probe::outcome::ErrorClass;
use llmprobe::sink::{History, Sink, Summary};
use metrics_common::{dropped, failed, golden_outcomes, ms, outcome, sample, with_usage};

fn record_all(sink: &dyn Sink, outcomes: &[llmprobe::probe::outcome::Outcome]) {
    for o in outcomes {
        sink.record(o, sample(o).as_ref());
    }
}

#[test]
fn empty_summary_line() {
    let t0 = Instant::now();
    let summary = Summary::starting_at(Duration::from_secs(30), t0);
    assert_eq!(summary.line_at(t0 + ms(5000)), "rate 0.0/s | ok 0/0 (-) | goodput - | ttft p50 - p95 - | tpot p50 - | errors: none");
}

#[test]
fn golden_set_summary_line() {
    let t0 = Instant::now();
    let summary = Summary::starting_at(Duration::from_secs(30), t0);
    record_all(&summary, &golden_outcomes(t0));
    // 3 sent in 10 s; 2 of 4 ok; 1 goodput; TTFT 100 and 700 ms; TPOT 20 and 150 ms.
    assert_eq!(
        summary.line_at(t0 + ms(10_000)),
        "rate 0.3/s | ok 2/4 (50.0%) | goodput 25.0% | ttft p50 100ms p95 700ms | tpot p50 20.0ms | errors: in_flight_cap=1 timeout_ttft=1"
    );
}

#[test]
fn percentiles_are_nearest_rank_over_the_window() {
    let t0 = Instant::now();
    let summary = Summary::starting_at(Duration::from_secs(30), t0);
    // TTFTs 10, 20, ..., 200 ms, each with usage of 5 tokens.
    let outcomes: Vec<_> = (1..=20u64).map(|i| with_usage(outcome(t0 + ms(i * 100), i, 0, &[i * 10], i * 10 + 40), 10, 5)).collect();
    record_all(&summary, &outcomes);
    let stats = summary.stats_at(t0 + ms(20_000));
    assert_eq!(stats.ttft_p50_ms, Some(100.0));
    assert_eq!(stats.ttft_p95_ms, Some(190.0));
    assert_eq!(stats.tpot_p50_ms, Some(10.0));
    assert_eq!(stats.succeeded, 20);
    assert_eq!(stats.rate, 1.0);
}

#[test]
fn old_probes_leave_the_window() {
    let t0 = Instant::now();
    let summary = Summary::starting_at(Duration::from_secs(10), t0);
    let old = failed(outcome(t0, 0, 0, &[], 100), ErrorClass::Http5xx, "boom");
    let new = with_usage(outcome(t0 + ms(15_000), 1, 0, &[50], 90), 10, 2);
    record_all(&summary, &[old, new]);
    let stats = summary.stats_at(t0 + ms(16_000));
    assert_eq!(stats.scheduled, 1);
    assert!(stats.errors.is_empty());
    // Rate uses the full window once the prober has run that long.
    assert_eq!(stats.rate, 0.1);
    let line = summary.line_at(t0 + ms(16_000));
    assert!(line.ends_with("errors: none"), "{line}");
}

#[test]
fn errors_are_listed_most_frequent_first() {
    let t0 = Instant::now();
    let summary = Summary::starting_at(Duration::from_secs(30), t0);
    let fail = |seq, class| failed(outcome(t0, seq, 0, &[], 10), class, "x");
    record_all(&summary, &[fail(0, ErrorClass::Http5xx), fail(1, ErrorClass::TimeoutTtft), fail(2, ErrorClass::TimeoutTtft), dropped(t0, 3)]);
    assert!(summary.line_at(t0 + ms(1000)).ends_with("errors: timeout_ttft=2 http_5xx=1 in_flight_cap=1"));
}

#[test]
fn history_keeps_failures_longer_than_recent() {
    let t0 = Instant::now();
    let history = History::new(3, 2);
    let mut outcomes = vec![failed(outcome(t0, 0, 0, &[], 10), ErrorClass::Connect, "refused")];
    outcomes.extend((1..=5).map(|i| with_usage(outcome(t0 + ms(i * 10), i, 0, &[5], 20), 1, 2)));
    outcomes.push(dropped(t0 + ms(100), 6));
    record_all(&history, &outcomes);
    let view = history.view_at(t0 + ms(1000));
    let seqs: Vec<u64> = view.recent.iter().map(|p| p.seq).collect();
    assert_eq!(seqs, [6, 5, 4], "newest first, bounded");
    assert_eq!(view.failures.len(), 1, "drops are not failures");
    assert_eq!(view.failures[0].error, Some("connect"));
    assert_eq!(view.failures[0].error_detail.as_deref(), Some("refused"));
    assert_eq!(view.failures[0].age_ms, 990.0);
    assert_eq!(view.recent[0].outcome, "dropped");
    assert_eq!(view.recent[0].schedule_lag_ms, None);
}

#[test]
fn history_json_has_every_field() {
    let t0 = Instant::now();
    let history = History::default();
    record_all(&history, &golden_outcomes(t0));
    let json: serde_json::Value = serde_json::from_str(&history.to_json()).unwrap();
    let recent = json["recent"].as_array().unwrap();
    assert_eq!(recent.len(), 4);
    assert_eq!(json["failures"].as_array().unwrap().len(), 1);
    let ok = &recent[3];
    assert_eq!(ok["target"], "local");
    assert_eq!(ok["scenario"], "chat");
    assert_eq!(ok["seq"], 0);
    assert_eq!(ok["request_id"], "req-0");
    assert_eq!(ok["outcome"], "success");
    assert!(ok["error"].is_null());
    assert_eq!(ok["http_status"], 200);
    assert_eq!(ok["ttft_ms"], 100.0);
    assert_eq!(ok["tpot_ms"], 20.0);
    assert_eq!(ok["e2e_ms"], 160.0);
    assert_eq!(ok["output_tokens"], 4);
    assert_eq!(ok["token_source"], "usage");
    assert_eq!(ok["schedule_lag_ms"], 2.0);
    assert!(ok["age_ms"].as_f64().unwrap() >= 0.0);
    let timeout = &recent[1];
    assert_eq!(timeout["outcome"], "error");
    assert_eq!(timeout["error"], "timeout_ttft");
    assert_eq!(timeout["error_detail"], "no token within 5s");
    assert!(timeout["ttft_ms"].is_null());
}
