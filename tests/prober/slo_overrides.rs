//! Per-target and per-scenario SLO overrides, end to end against the built-in mock: a scenario
//! with an impossible TTFT threshold loses its goodput, the other scenario keeps its own, and the
//! threshold and objective gauges carry each pair's effective SLO.

use crate::common;

use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_ttft_slo_changes_only_that_scenarios_goodput() {
    let (mock, mock_stop) = common::start_mock(Default::default()).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 16, seed: 5, shutdown_grace: 5s}}\n\
         targets:\n  - name: t\n    base_url: \"http://{mock}\"\n    api: openai-chat\n    slo: {{e2e: 30s, objective: 0.9}}\n\
         scenarios:\n  - {{name: easy, input_tokens: 16, output_tokens: 4}}\n  - name: strict\n    input_tokens: 16\n    output_tokens: 4\n    slo: {{ttft: 1us, objective: 0.5}}\n\
         slo: {{ttft: 20s, objective: 0.99}}\n"
    );
    let config = llmprobe::app::loader::parse(&yaml, "slo.yaml").unwrap_or_else(|e| panic!("{e}"));
    let stop = CancellationToken::new();
    let running = llmprobe::app::start(config, Default::default(), stop.clone()).await.unwrap();
    let ok_in = |t: &str, s: &str| common::metric(t, "llmprobe_requests_total", &["target=\"t\"", &format!("scenario=\"{s}\""), "outcome=\"success\""]);
    common::wait_for_metrics(running.metrics_addr, "4 successes in each scenario", |t| ok_in(t, "easy") >= 4.0 && ok_in(t, "strict") >= 4.0).await;
    stop.cancel();
    let text = running.wait().await.unwrap().metrics.encode_openmetrics();
    mock_stop.cancel();

    let m = |name: &str, labels: &[&str]| common::metric(&text, name, labels);
    let ok = |s: &str| m("llmprobe_requests_total", &["target=\"t\"", &format!("scenario=\"{s}\""), "outcome=\"success\""]);
    let good = |s: &str| m("llmprobe_goodput_requests_total", &[&format!("scenario=\"{s}\"")]);
    assert!(ok("easy") >= 4.0 && ok("strict") >= 4.0, "too few probes:\n{text}");
    assert_eq!(good("easy"), ok("easy"), "the global 20s TTFT is met by every easy probe");
    assert_eq!(good("strict"), 0.0, "no probe meets a 1us TTFT");
    assert_eq!(m("llmprobe_slo_violations_total", &["scenario=\"strict\"", "slo=\"ttft\""]), ok("strict"));
    assert_eq!(m("llmprobe_slo_violations_total", &["scenario=\"easy\"", "slo=\"ttft\""]), 0.0);

    // Gauges: scenario > target > global, field by field.
    let threshold = |s: &str, slo: &str| m("llmprobe_slo_threshold_seconds", &[&format!("scenario=\"{s}\""), &format!("slo=\"{slo}\"")]);
    assert_eq!((threshold("easy", "ttft"), threshold("strict", "ttft")), (20.0, 1e-6));
    assert_eq!((threshold("easy", "e2e"), threshold("strict", "e2e")), (30.0, 30.0), "the target's e2e applies to both");
    let objective = |s: &str| m("llmprobe_slo_objective_ratio", &[&format!("scenario=\"{s}\"")]);
    assert_eq!((objective("easy"), objective("strict")), (0.9, 0.5));
}
