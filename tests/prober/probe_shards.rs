//! Several probers, one schedule: two probers with `probe.shard` 0/2 and 1/2 and their own
//! `prober` names against one mock each run half the configured rate (independent Poisson
//! streams at rate/2 add up to a Poisson stream at the rate; the rate each achieves is a timing
//! claim, measured by `scripts/bench-prober.sh`, not here), both probe, and every series they
//! export carries its prober's name.

use crate::common;

use std::time::{Duration, Instant};

use common::{metric, start_mock};
use llmprobe::app::{self, RunOptions};
use llmprobe::mock::{MockOptions, profile::Profile};
use tokio_util::sync::CancellationToken;

const RATE: f64 = 200.0;
const WAIT: Duration = Duration::from_secs(30);

fn config(mock: std::net::SocketAddr, index: u32, prober: &str) -> llmprobe::config::Config {
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: {RATE}, seed: 21, max_in_flight: 1000, shard: {{index: {index}, count: 2}}, prober: {prober}}}\n\
         targets:\n  - {{name: t, base_url: \"http://{mock}\", api: openai-completions, model: mock-llama}}\n\
         scenarios:\n  - {{name: a, weight: 1, input_tokens: 8, output_tokens: 2}}\n  - {{name: b, weight: 1, input_tokens: 8, output_tokens: 2}}\n"
    );
    llmprobe::app::loader::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
}

async fn scheduled(addr: std::net::SocketAddr) -> (f64, String) {
    let text = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    (metric(&text, "llmprobe_probes_scheduled_total", &[]), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_together_send_the_configured_rate() {
    let (mock, _stop) = start_mock(MockOptions { profile: Profile::load_test(), ..MockOptions::default() }).await;
    let stop = CancellationToken::new();
    let a = app::start(config(mock, 0, "zone-a"), RunOptions::default(), stop.child_token()).await.unwrap();
    let b = app::start(config(mock, 1, "zone-b"), RunOptions::default(), stop.child_token()).await.unwrap();
    // Both shards probe: poll until each has scheduled 100 probes (a second at its rate).
    let deadline = Instant::now() + WAIT;
    let (text_a, text_b) = loop {
        let ((a, text_a), (b, text_b)) = (scheduled(a.metrics_addr).await, scheduled(b.metrics_addr).await);
        if a >= 100.0 && b >= 100.0 {
            break (text_a, text_b);
        }
        assert!(Instant::now() < deadline, "shards scheduled {a} and {b} probes in {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (text, name) in [(&text_a, "zone-a"), (&text_b, "zone-b")] {
        let samples: Vec<&str> = text.lines().filter(|l| l.starts_with("llmprobe_") && !l.starts_with('#')).collect();
        assert!(samples.iter().all(|l| l.contains(&format!("prober=\"{name}\""))), "every series carries prober={name}");
        assert_eq!(metric(text, "llmprobe_target_rate_per_second", &[]), RATE / 2.0, "each shard reports its share");
    }
    stop.cancel();
    a.wait().await.unwrap();
    b.wait().await.unwrap();
}

#[test]
fn shard_settings_are_checked() {
    let base =
        "targets: [{name: t, base_url: \"http://127.0.0.1:1\", api: openai-chat, model: m}]\nscenarios: [{name: s, input_tokens: 8, output_tokens: 8}]\n";
    let err =
        llmprobe::app::loader::parse(&format!("probe: {{shard: {{index: 2, count: 2}}, prober: \"bad name\"}}\n{base}"), "t.yaml").unwrap_err().to_string();
    assert!(err.contains("probe.shard.index") && err.contains("probe.prober"), "{err}");
    assert_eq!(llmprobe::config::Shard::parse("1/3"), Ok(llmprobe::config::Shard { index: 1, count: 3 }));
    assert!(llmprobe::config::Shard::parse("3/3").is_err() && llmprobe::config::Shard::parse("x").is_err());
    let mut cfg = llmprobe::app::loader::parse(&format!("probe: {{rate: 6}}\n{base}"), "t.yaml").unwrap();
    cfg.override_probe(Some(llmprobe::config::Shard { index: 0, count: 3 }), Some("eu-1"));
    assert_eq!(cfg.scenarios[0].rate, 2.0, "the command-line shard count divides the rate");
}
