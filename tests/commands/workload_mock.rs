//! Prompt-length accuracy against the mock engine over real HTTP (port 0): after warm-up the
//! server's prompt count is within ±2% (or ±2 tokens) of every requested length, with `/tokenize`
//! calibration and with usage learning only, on both APIs; output length equals max_tokens.

use llmprobe::cmd::accuracy;
use llmprobe::config;
use llmprobe::mock::{self, MockOptions};
use tokio_util::sync::CancellationToken;

async fn start_mock() -> (std::net::SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(mock::serve(listener, MockOptions::default(), stop.clone()));
    (addr, stop)
}

fn target(addr: std::net::SocketAddr, api: &str) -> config::Target {
    let api = config::ProtocolKind::ALL.into_iter().find(|k| k.as_str() == api).unwrap();
    config::Target::new("m", &format!("http://{addr}"), api).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_tokens_hit_their_targets_on_the_mock() {
    let (addr, stop) = start_mock().await;
    for api in ["openai-completions", "openai-chat"] {
        for use_tokenize in [true, false] {
            let report = accuracy::check(target(addr, api), &[128, 512, 2000], 8, 4, 1, use_tokenize).await.unwrap();
            for row in &report.rows {
                assert!(row.failures.is_empty(), "{api}: {:?}", row.failures);
                assert!(row.within_tolerance(1), "{api} tokenize={use_tokenize}:\n{}", accuracy::render(&report));
                assert!(row.output_tokens.iter().all(|&o| o == 8), "ignore_eos honoured: {:?}", row.output_tokens);
            }
            if use_tokenize {
                // With /tokenize the very first probe is already exact on the mock's tokenizer.
                assert!(report.rows.iter().all(|r| r.prompt_tokens[0] == r.requested as u64), "{}", accuracy::render(&report));
            }
        }
    }
    stop.cancel();
}
