//! Under a load sweep the mock's own `vllm:time_to_first_token_seconds` agrees with what the
//! prober measures (`llmprobe_ttft_seconds`) over loopback: both count every first token, and
//! the client's TTFT is never earlier than the engine's. The prober runs in-process
//! (`app::start`) against the mock on port 0.
//!
//! How much later the client sees the first token (HTTP, loopback and parsing: a few
//! milliseconds) and how TTFT grows with load are figures, not assertions:
//! `cargo test --test mock mock_vs_prober::print_agreement_table -- --ignored --nocapture` prints
//! them (also `scripts/mock-vs-prober.sh`; docs/performance.md).

use crate::common;

use std::time::Duration;

use common::{config, start_mock, wait_for_metrics};
use llmprobe::app::{self, RunOptions};
use llmprobe::mock::MockOptions;
use tokio_util::sync::CancellationToken;

/// Cumulative buckets of every series of histogram `name`, summed by `le`; plus sum and count.
struct Hist {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

fn hist(text: &str, name: &str) -> Hist {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    let (mut sum, mut count) = (0.0, 0.0);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, v)) = line.rsplit_once(' ') else {
            continue;
        };
        let v: f64 = v.parse().unwrap_or(0.0);
        let (n, labels) = series.split_once('{').unwrap_or((series, ""));
        if n == format!("{name}_sum") {
            sum += v;
        } else if n == format!("{name}_count") {
            count += v;
        } else if n == format!("{name}_bucket") {
            let le = labels.split("le=\"").nth(1).and_then(|r| r.split('"').next()).unwrap();
            let le: f64 = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
            match buckets.iter_mut().find(|b| b.0 == le) {
                Some(b) => b.1 += v,
                None => buckets.push((le, v)),
            }
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Hist { buckets, sum, count }
}

impl Hist {
    fn mean(&self) -> f64 {
        self.sum / self.count.max(1.0)
    }
    /// `histogram_quantile`: linear interpolation inside the bucket holding rank q·count.
    fn quantile(&self, q: f64) -> f64 {
        let rank = q * self.count;
        let (mut lo, mut below) = (0.0, 0.0);
        for &(le, cum) in &self.buckets {
            if cum >= rank {
                if le.is_infinite() {
                    return lo;
                }
                return lo + (le - lo) * (rank - below) / (cum - below).max(1e-9);
            }
            (lo, below) = (le, cum);
        }
        lo
    }
}

struct Row {
    rate: f64,
    probes: f64,
    engine: Hist,
    client: Hist,
}

/// How long a sweep's step runs: a time (for the printed figures), or until the prober has
/// measured that many first tokens.
#[derive(Clone, Copy)]
enum Until {
    Secs(f64),
    Ttfts(f64),
}

/// Runs the prober at `rate` against a fresh mock; returns both TTFT histograms.
async fn measure(rate: f64, until: Until) -> Row {
    let (addr, mock_stop) = start_mock(MockOptions::default()).await;
    let base = format!("http://{addr}");
    let cfg = config(&base, "openai-completions", &format!("{{rate: {rate}, seed: 9, shutdown_grace: 10s}}"), "    model: mock-llama", 24);
    let stop = CancellationToken::new();
    let running = app::start(cfg, RunOptions::default(), stop.clone()).await.unwrap();
    match until {
        Until::Secs(secs) => tokio::time::sleep(Duration::from_secs_f64(secs)).await,
        Until::Ttfts(n) => {
            let counted = |t: &str| common::metric(t, "llmprobe_ttft_seconds_count", &[]) >= n;
            wait_for_metrics(running.metrics_addr, &format!("{n} TTFTs at {rate}/s"), counted).await;
        }
    }
    stop.cancel();
    let report = running.wait().await.unwrap();
    let client = hist(&report.metrics.encode_openmetrics(), "llmprobe_ttft_seconds");
    let page = reqwest::get(format!("{base}/metrics")).await.unwrap().text().await.unwrap();
    mock_stop.cancel();
    Row { rate, probes: client.count, engine: hist(&page, "vllm:time_to_first_token_seconds"), client }
}

async fn sweep(rates: &[f64], until: impl Fn(f64) -> Until) -> Vec<Row> {
    let mut rows = Vec::new();
    for &r in rates {
        rows.push(measure(r, until(r)).await);
    }
    rows
}

fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| rate/s | probes | engine mean (ms) | client mean (ms) | Δ mean (ms) | engine p50 | client p50 | engine p95 | client p95 |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let ms = |v: f64| v * 1e3;
        s.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:+.1} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            r.rate,
            r.probes,
            ms(r.engine.mean()),
            ms(r.client.mean()),
            ms(r.client.mean() - r.engine.mean()),
            ms(r.engine.quantile(0.5)),
            ms(r.client.quantile(0.5)),
            ms(r.engine.quantile(0.95)),
            ms(r.client.quantile(0.95)),
        ));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_and_client_ttft_agree_across_rates() {
    // Two seconds' worth of probes at each rate.
    let rows = sweep(&[5.0, 20.0, 50.0], |rate| Until::Ttfts(2.0 * rate)).await;
    println!("{}", table(&rows));
    for r in &rows {
        assert!(r.probes >= r.rate * 2.0, "rate {}: only {} probes", r.rate, r.probes);
        // Every probe's first token was counted by the engine too (it may also count none extra:
        // the prober drains in-flight probes before stopping).
        assert_eq!(r.engine.count, r.client.count, "rate {}", r.rate);
        // The client sees the token after the engine emitted it, never earlier (0.5 ms for the
        // two sides' clocks: the engine starts its own at the request's arrival). A busy
        // machine only makes the client later; how much later is a printed figure.
        let delta = r.client.mean() - r.engine.mean();
        assert!(delta > -0.0005, "rate {}: client {} vs engine {}", r.rate, r.client.mean(), r.engine.mean());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints the agreement table; run with --ignored --nocapture"]
async fn print_agreement_table() {
    let secs = std::env::var("SWEEP_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(10.0);
    let rows = sweep(&[5.0, 20.0, 50.0, 100.0], |_| Until::Secs(secs)).await;
    println!("small-gpu profile, openai-completions, 64-token prompt, 24 output tokens, {secs} s per rate:\n\n{}", table(&rows));
}
