//! OTLP metric export against in-process receivers (gRPC `MetricsService`, HTTP `POST
//! /v1/metrics`): the GenAI client metric names, units, bucket boundaries and required attributes
//! arrive, with llmprobe's own request and goodput counters, flushed when the run stops.

use crate::common;
use crate::otlp_receiver;

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric};
use tokio_util::sync::CancellationToken;

use otlp_receiver::{Received, grpc_metrics_receiver, http_metrics_receiver, metrics};

fn string<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s),
        _ => None,
    }
}

async fn run(endpoint: &str, protocol: &str) {
    let (mock, mock_stop) = common::start_mock(Default::default()).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 10, seed: 3, shutdown_grace: 5s}}\n\
         targets:\n  - {{name: t, base_url: \"http://{mock}\", api: openai-chat}}\n\
         scenarios:\n  - {{name: s, input_tokens: 16, output_tokens: 6}}\n  - {{name: agent, weight: 0.2, input_tokens: 16, output_tokens: 16, agent: {{tools: [{{name: f, parameters: {{type: object}}, result: ok}}]}}}}\n\
         slo: {{ttft: 1us}}\n\
         tracing: {{enabled: false, metrics: true, endpoint: \"{endpoint}\", protocol: {protocol}}}\n"
    );
    let config = llmprobe::app::loader::parse(&yaml, "m.yaml").unwrap_or_else(|e| panic!("{e}"));
    let stop = CancellationToken::new();
    let running = llmprobe::app::start(config, Default::default(), stop.clone()).await.unwrap();
    let successes = |t: &str| common::metric(t, "llmprobe_requests_total", &["scenario=\"s\"", "outcome=\"success\""]);
    let answered = |t: &str| common::metric(t, "llmprobe_agent_loops_total", &["result=\"answered\""]);
    common::wait_for_metrics(running.metrics_addr, "4 successes and an answered agent loop", |t| successes(t) >= 4.0 && answered(t) >= 1.0).await;
    stop.cancel();
    running.wait().await.unwrap();
    mock_stop.cancel();
}

fn find<'a>(all: &'a [Metric], name: &str) -> &'a Metric {
    all.iter().rev().find(|m| m.name == name).unwrap_or_else(|| panic!("{name} not exported; got {:?}", all.iter().map(|m| &m.name).collect::<Vec<_>>()))
}

fn check(received: &Received) {
    let all = metrics(received);
    assert!(!all.is_empty(), "no OTLP metrics received");
    let genai = [
        ("gen_ai.client.operation.duration", "s", vec![0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]),
        ("gen_ai.client.operation.time_to_first_chunk", "s", vec![0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]),
        ("gen_ai.client.operation.time_per_output_chunk", "s", vec![0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]),
        (
            "gen_ai.client.token.usage",
            "{token}",
            vec![1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0, 67108864.0],
        ),
    ];
    for (name, unit, bounds) in genai {
        let m = find(&all, name);
        assert_eq!(m.unit, unit, "{name} unit");
        let Some(metric::Data::Histogram(h)) = &m.data else { panic!("{name} is not a histogram: {:?}", m.data) };
        assert!(!h.data_points.is_empty(), "{name} has no points");
        let mut token_types = Vec::new();
        for p in &h.data_points {
            assert_eq!(p.explicit_bounds, bounds, "{name} buckets");
            assert!(p.count > 0);
            let a = &p.attributes;
            assert_eq!(string(a, "gen_ai.operation.name"), Some("chat"));
            assert!(string(a, "gen_ai.provider.name").is_some_and(|p| !p.is_empty()));
            assert_eq!(string(a, "gen_ai.request.model"), Some("mock-llama"));
            assert_eq!(string(a, "server.address"), Some("127.0.0.1"));
            assert!(a.iter().any(|kv| kv.key == "server.port"));
            assert_eq!(string(a, "llmprobe.target"), Some("t"));
            assert!(matches!(string(a, "llmprobe.scenario"), Some("s" | "agent")));
            token_types.extend(string(a, "gen_ai.token.type"));
        }
        if name == "gen_ai.client.token.usage" {
            assert!(token_types.contains(&"input") && token_types.contains(&"output"), "{token_types:?}");
        }
    }
    let sum_of = |name: &str, want: &[(&str, &str)]| -> u64 {
        let m = find(&all, name);
        assert_eq!(m.unit, if name.starts_with("llmprobe.agent") { "{loop}" } else { "{request}" });
        let Some(metric::Data::Sum(s)) = &m.data else { panic!("{name} is not a sum") };
        assert!(s.is_monotonic);
        s.data_points
            .iter()
            .filter(|p| want.iter().all(|(k, v)| string(&p.attributes, k) == Some(v)))
            .map(|p| match p.value {
                Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(n)) => n as u64,
                _ => 0,
            })
            .sum()
    };
    // Agent loops: counted by result, answered ones timed.
    assert!(sum_of("llmprobe.agent.loops", &[("llmprobe.scenario", "agent"), ("llmprobe.agent.result", "answered")]) >= 1);
    let loops = find(&all, "llmprobe.agent.loop.duration");
    assert!(matches!(&loops.data, Some(metric::Data::Histogram(h)) if h.data_points.iter().any(|p| p.count >= 1)), "{loops:?}");
    let ok = sum_of("llmprobe.requests", &[("llmprobe.target", "t"), ("llmprobe.scenario", "s"), ("llmprobe.outcome", "success")]);
    assert!(ok >= 4, "llmprobe.requests success = {ok}");
    // A 1 us TTFT threshold fails every probe: no goodput, one violation each.
    let violations = sum_of("llmprobe.slo.violations", &[("llmprobe.scenario", "s"), ("llmprobe.slo", "ttft")]);
    assert_eq!(violations, ok);
    assert!(all.iter().filter(|m| m.name == "llmprobe.goodput.requests").all(|m| match &m.data {
        Some(metric::Data::Sum(s)) =>
            s.data_points.iter().all(|p| matches!(p.value, Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(0)))),
        _ => true,
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genai_metrics_over_grpc_and_http() {
    for protocol in ["grpc", "http/protobuf"] {
        let received = Received::default();
        let endpoint = match protocol {
            "grpc" => grpc_metrics_receiver(received.clone()).await,
            _ => http_metrics_receiver(received.clone()).await,
        };
        run(&endpoint, protocol).await;
        check(&received);
    }
}
