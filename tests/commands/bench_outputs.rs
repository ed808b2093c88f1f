//! The result files of a real sweep against the mock (loopback, port 0) conform to the JSON
//! Schemas in `src/bench/schema/` (which set `additionalProperties: false` everywhere, so a field
//! the code writes but the schema leaves out fails), and the HTML report is self-contained.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprobe::bench::{self, BenchOptions, BenchPlan, schema};
use llmprobe::mock::{MockOptions, Profile};
use serde_json::Value;

fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("llmprobe-{tag}-{}", uuid::Uuid::new_v4()))
}

/// A two-point sweep with warm-up, process and engine side samples, and engine agreement.
async fn run(dir: &Path, mode: &str) {
    run_with(dir, mode, "").await
}

/// As `run`, with `sources` (YAML list items, `{mock}` replaced by the mock's address).
async fn run_with(dir: &Path, mode: &str, sources: &str) {
    let (addr, stop) = common::start_mock(MockOptions { profile: Profile::large_gpu(), ..Default::default() }).await;
    let text = format!(
        "probe: {{seed: 5}}\ntargets:\n  - {{name: t, base_url: 'http://{addr}', api: openai-chat}}\nscenarios:\n  - {{name: s, input_tokens: 32, output_tokens: 4}}\nslo: {{ttft: 2s, tpot: 1s, e2e: 5s, objective: 0.9}}\nbench:\n{mode}  warmup_requests: 1\n  repeats: 2\n  requests: 5\n{}",
        if sources.is_empty() { String::new() } else { format!("sources:\n{}", sources.replace("{mock}", &addr.to_string())) }
    );
    let cfg = llmprobe::app::loader::parse(&text, "t.yaml").unwrap_or_else(|e| panic!("{e}"));
    let plan = BenchPlan::new(cfg, "t.yaml", &text).unwrap();
    let opts =
        BenchOptions { output: dir.to_path_buf(), target: None, server_pid: Some(std::process::id()), sample_every: Duration::from_millis(50), quiet: true };
    bench::run(&plan, &opts).await.unwrap();
    stop.cancel();
}

fn conform(value: &Value, schema_text: &str, what: &str) {
    let errors = schema::validate(value, &schema::parse(schema_text));
    assert!(errors.is_empty(), "{what} does not conform to its schema:\n{}", errors.join("\n"));
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn check_dir(dir: &Path) {
    let summary: Value = bench::read_json(&dir.join("summary.json")).unwrap();
    conform(&summary, schema::SUMMARY, "summary.json");
    let agreement = &summary["points"][0]["repeats"][0]["engine_agreement"];
    assert!(agreement.is_object(), "the run wrote engine_agreement, so the schema's definition of it was checked");
    conform(&bench::read_json::<Value>(&dir.join("manifest.json")).unwrap(), schema::MANIFEST, "manifest.json");
    let records = json_lines(&dir.join("records.jsonl"));
    assert!(records.iter().any(|r| r["phase"] == "warmup") && records.iter().any(|r| !r["itl"].is_null()));
    for (i, r) in records.iter().enumerate() {
        conform(r, schema::RECORD, &format!("records.jsonl line {}", i + 1));
    }
    // Plain http goes through the lean client, which times frames at their arrival (after the
    // warm-up: the kernel turns stamping on a moment after the first socket asks).
    if cfg!(target_os = "linux") {
        let measured: Vec<&Value> = records.iter().filter(|r| r["phase"] == "measure" && !r["first_token_s"].is_null()).collect();
        assert!(!measured.is_empty() && measured.iter().all(|r| r["first_token_time"] == "arrival"), "{measured:?}");
    }
    let windows = json_lines(&dir.join("engine_window.jsonl"));
    assert_eq!(windows.len(), 4, "one window per measured repeat");
    for w in &windows {
        conform(w, schema::ENGINE_WINDOW, "engine_window.jsonl");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_files_conform_to_their_schemas() {
    let conc = temp_dir("schema-conc");
    run(&conc, "  mode: concurrency\n  concurrency: [1, 2]\n").await;
    check_dir(&conc);
    // Rate mode fills the fields concurrency leaves null (arrival, max_concurrency, rates).
    let rate = temp_dir("schema-rate");
    run(&rate, "  mode: rate\n  rates: [20, 40]\n  max_concurrency: 8\n").await;
    check_dir(&rate);
    let m: Value = bench::read_json(&rate.join("manifest.json")).unwrap();
    assert_eq!(m["arrival"], "poisson");
    for d in [conc, rate] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_field_the_schema_does_not_list_is_caught() {
    let mut record: Value = serde_json::from_str(include_str!("../fixtures/bench/record.json")).unwrap();
    conform(&record, schema::RECORD, "the fixture record");
    record["undocumented"] = Value::from(1);
    let errors = schema::validate(&record, &schema::parse(schema::RECORD));
    assert_eq!(errors, vec!["$.undocumented: field not in the schema"]);
}

/// No network asset: no scripts, and no `src`/`href` (or CSS `url(`/`@import`) to http(s).
fn external_references(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut found = Vec::new();
    for attr in ["src=", "href=", "url(", "@import"] {
        for (i, _) in lower.match_indices(attr) {
            let rest = lower[i + attr.len()..].trim_start_matches(['"', '\'', ' ']);
            if rest.starts_with("http://") || rest.starts_with("https://") || rest.starts_with("//") {
                found.push(html[i..(i + 80).min(html.len())].to_owned());
            }
        }
    }
    if lower.contains("<script") {
        found.push("<script".into());
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_makes_no_external_request() {
    let dir = temp_dir("html");
    run(&dir, "  mode: concurrency\n  concurrency: [1, 2]\n").await;
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(external_references(&html), Vec::<String>::new());
    assert!(html.contains("Engine queue over time") && html.contains("Engine KV cache usage over time") && html.contains("Engine agreement"));
    // The check itself catches each form.
    for bad in ["<img src=\"http://x/a.png\">", "<link href='https://cdn/x.css'>", "<script>1</script>", "<style>a{background:url(https://x)}</style>"] {
        assert_eq!(external_references(bad).len(), 1, "{bad}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_sources_are_sampled_with_the_run_id() {
    let dir = temp_dir("sources");
    let sources = "  - {kind: engine, target: t, interval: 1s, timeout: 1s}\n  - {kind: dcgm, url: 'http://{mock}/dcgm/metrics', interval: 1s, timeout: 1s}\n";
    run_with(&dir, "  mode: concurrency\n  concurrency: [2]\n", sources).await;
    let m = bench::manifest::read(&dir).unwrap();
    let files: Vec<&str> = m.side_samples.iter().map(|f| f.file.as_str()).collect();
    // The configured engine source covers the target, so no second `engine.jsonl` is sampled.
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files[0] == "process.jsonl" && files[1..].iter().all(|f| f.starts_with("source-")), "{files:?}");
    let lines: Vec<Value> = files[1..].iter().flat_map(|f| json_lines(&dir.join(f))).collect();
    assert!(lines.iter().all(|l| l["run_id"] == m.run_id.as_str() && l["t_s"].is_number() && l["unix_s"].is_number()));
    assert!(lines.iter().any(|l| l["gpu_power_watts"].is_number()), "dcgm samples");
    assert!(lines.iter().any(|l| l["requests_running"].is_number()), "engine samples");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Engine queue over time"), "the plot reads a configured engine source too");
    let _ = std::fs::remove_dir_all(&dir);
}
