//! `--probe-log`: the prober writes every finished probe as a JSON line, and the planner replays
//! that file in time order (`detect simulate --replay FILE --replay-order time`).

use crate::common;

use std::time::Duration;

use common::start_mock;
use llmprobe::app::{self, RunOptions};
use llmprobe::cmd::detect::read_replay;
use llmprobe::detect::sim::ReplayOrder;
use llmprobe::mock::MockOptions;
use llmprobe::sink::probe_log::ProbeLog;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_log_replays_in_time_order() {
    let (mock, _stop) = start_mock(MockOptions::default()).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-probe-log-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("probes.jsonl");
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 40, seed: 3, shutdown_grace: 2s}}\n\
         targets:\n  - {{name: t, base_url: \"http://{mock}\", api: openai-chat, model: mock-llama}}\n\
         scenarios:\n  - {{name: a, input_tokens: 16, output_tokens: 4}}\n  - {{name: b, input_tokens: 16, output_tokens: 4}}\n"
    );
    let config = llmprobe::app::loader::parse(&yaml, "test.yaml").unwrap();
    let log = std::sync::Arc::new(ProbeLog::open(&path, 1 << 20).unwrap());
    let shutdown = CancellationToken::new();
    let running = app::start(config, RunOptions { probe_log: Some(log), ..RunOptions::default() }, shutdown.clone()).await.unwrap();
    // Until at least 40 probes are in the file (bounded wait).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&path).map_or(0, |t| t.lines().count()) < 40 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    running.wait().await.unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 40, "{} lines", lines.len());
    assert!(lines.iter().all(|l| l["target"] == "t" && l["sent_unix_s"].as_f64().is_some_and(|s| s > 1.0e9)));
    assert!(lines.iter().any(|l| l["outcome"] == "success" && l["ttft_ms"].as_f64().is_some_and(|v| v > 0.0)));
    let replay = read_replay(&path, ReplayOrder::Time).unwrap();
    assert_eq!(replay.pools.len(), 2, "both scenarios");
    assert_eq!(replay.timeline.len(), lines.len(), "every probe on the timeline");
}
