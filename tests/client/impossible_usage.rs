//! A server's count of generated tokens that no server keeping to `max_tokens` could report
//! (usage.completion_tokens of 2^32+1 or 2^64-1 on an 8-frame stream asked for 8 tokens) is not
//! believed: the probe is `parse`, on both clients, instead of a success with 2^24 tokens and a
//! TPOT of a nanosecond. A count a little over `max_tokens` is still taken (the behaviour checks
//! judge it). Raw loopback server.

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use llmprobe::client::TargetRuntime;
use llmprobe::config::{Slo, Target};
use llmprobe::pipeline::exec::{Probe, execute};
use llmprobe::probe::measure::{TokenSource, measure};
use llmprobe::probe::outcome::{ErrorClass, Outcome};
use llmprobe::protocol::ProtocolKind;
use llmprobe::workload::Draw;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// An 8-frame chat stream ending with `usage` reporting `completion` tokens.
fn stream(completion: &str) -> String {
    let frame = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n";
    let body = format!(
        "{}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\ndata: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{completion}}}}}\n\ndata: [DONE]\n\n",
        frame.repeat(8)
    );
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}", body.len())
}

async fn probe(completion: &str, general: bool) -> Outcome {
    let reply = Arc::new(stream(completion));
    let addr = common::raw_server(move |mut sock| {
        let reply = reply.clone();
        async move {
            let _ = sock.write_all(reply.as_bytes()).await;
        }
    })
    .await;
    let mut target = Target::new("t", &format!("http://{addr}"), ProtocolKind::OpenaiChat).unwrap().with_model("m");
    target.follow_redirects = general;
    let runtime = Arc::new(TargetRuntime::new(target).unwrap());
    let draw = Draw { input_tokens: 3, output_tokens: 8, prompt: "hi".into(), ..Draw::default() };
    execute(Probe { target: runtime, scenario: Arc::from("s"), seq: 0, draw, intended: Instant::now(), trace_ratio: None }, &CancellationToken::new()).await
}

#[tokio::test]
async fn an_output_count_no_server_could_report_is_parse_on_both_clients() {
    for general in [false, true] {
        for impossible in ["4294967297", "18446744073709551615", "33"] {
            let outcome = probe(impossible, general).await;
            let failure = outcome.result.as_ref().expect_err(impossible);
            assert_eq!(failure.class, ErrorClass::Parse, "general={general} {impossible}: {failure:?}");
            assert!(failure.detail.contains("usage.completion_tokens") && failure.detail.contains("max_tokens 8"), "{failure:?}");
        }
    }
}

#[tokio::test]
async fn a_count_within_twice_max_tokens_and_some_is_believed() {
    let slo = Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 };
    for (reported, expected) in [("8", 8), ("9", 9), ("32", 32)] {
        let outcome = probe(reported, false).await;
        assert!(outcome.result.is_ok(), "{reported}: {:?}", outcome.result);
        let sample = measure(&outcome, &slo).unwrap();
        assert_eq!((sample.output_tokens, sample.token_source), (expected, TokenSource::Usage), "{reported}");
    }
}
