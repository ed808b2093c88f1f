//! The exact `/metrics` text is a contract: names, labels, buckets and zero-initialised series.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test metrics_golden`, then review the diff.

mod metrics_common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use llmprobe::sink::prometheus::{BUILD_REVISION, BUILD_VERSION};
use llmprobe::sink::{Metrics, Sink};
use metrics_common::{config, golden_outcomes, ms, outcome, sample, with_server_report};

const GOLDEN: &str = "tests/fixtures/golden/metrics.openmetrics.txt";

fn recorded_metrics() -> Metrics {
    let metrics = Metrics::new(&config());
    let t0 = Instant::now();
    // Plus an Ollama-style success: API counter, server phase times, several tokens per frame.
    let server_reported = with_server_report(outcome(t0 + ms(2000), 4, 300, &[50, 60, 70, 80], 90));
    for (i, mut o) in golden_outcomes(t0).into_iter().chain([server_reported]).enumerate() {
        if i == 0 {
            // A traced probe: its latency observations carry trace_id/span_id exemplars.
            o.trace = Some(llmprobe::trace::TraceIds { trace_id: [0x4b; 16], span_id: [0x1f; 8], sampled: true });
        }
        metrics.record(&o, sample(&o).as_ref());
    }
    metrics.set_in_flight("local", 1);
    metrics.set_target_info("local", "Qwen/Qwen3-0.6B", "vllm", "0.11.0");
    metrics.set_target_info_change("local", 1_767_225_600.0);
    metrics.set_source_up("engine-local", true);
    metrics.set_source_scrape_duration("engine-local", 0.0125);
    metrics
}

/// The build identity varies with the version and CI revision; the golden file uses placeholders.
fn normalise(text: &str) -> String {
    let actual = format!("version=\"{BUILD_VERSION}\",revision=\"{BUILD_REVISION}\"");
    text.replace(&actual, "version=\"VERSION\",revision=\"REVISION\"")
}

#[test]
fn openmetrics_matches_golden() {
    let text = normalise(&recorded_metrics().encode_openmetrics());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path).expect("golden file; run with UPDATE_GOLDEN=1 to create");
    assert!(text == want, "OpenMetrics output differs from {GOLDEN}; rerun with UPDATE_GOLDEN=1 and review.\n{text}");
}

#[test]
fn encoding_is_stable_across_registries() {
    // Series order must not depend on hash-map iteration order.
    let a = normalise(&recorded_metrics().encode_openmetrics());
    for _ in 0..5 {
        assert_eq!(a, normalise(&recorded_metrics().encode_openmetrics()));
    }
}

/// Runs `promtool check metrics` when promtool is installed; returns its stdout+stderr and status.
fn promtool_check(text: &str) -> Option<(bool, String)> {
    let mut child = Command::new("promtool").args(["check", "metrics"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().ok()?;
    child.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    let msg = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), msg))
}

#[test]
fn prometheus_text_passes_promtool() {
    let text = recorded_metrics().encode_prometheus_text();
    assert!(!text.contains("# EOF") && !text.contains("# UNIT") && !text.contains("_created"));
    let Some((ok, msg)) = promtool_check(&text) else {
        eprintln!("promtool not installed; skipping");
        return;
    };
    assert!(ok, "promtool check metrics failed:\n{msg}");
}

#[test]
fn openmetrics_passes_promtool_except_known_counter_help_false_positive() {
    // promtool 2.x `check metrics` reads the text format, which has no exemplars: strip them
    // (`tests/otlp_export.rs` checks them against exported spans).
    // Its parser has no `info` type either: an OpenMetrics info family `x` is what the text
    // format calls the gauge `x_info` (which `encode_prometheus_text` writes), so rename it.
    let text: String = recorded_metrics()
        .encode_openmetrics()
        .lines()
        .map(|l| l.split(" # {").next().unwrap_or(l))
        .map(info_as_text_format_gauge)
        .map(|l| format!("{l}\n"))
        .collect();
    let Some((_, msg)) = promtool_check(&text) else {
        eprintln!("promtool not installed; skipping");
        return;
    };
    // promtool 2.x reports `x_total no help text` for OpenMetrics counters (family `x`).
    let real: Vec<&str> = msg.lines().filter(|l| !l.trim().is_empty() && !l.ends_with("no help text")).collect();
    assert!(real.is_empty(), "promtool check metrics:\n{msg}");
}

/// `# TYPE x info` -> `# TYPE x_info gauge`, `# HELP x ...` -> `# HELP x_info ...` for info families.
fn info_as_text_format_gauge(line: &str) -> String {
    const INFO: [&str; 3] = ["llmprobe_target", "llmprobe_build", "llmprobe_workload"];
    for family in INFO {
        if line == format!("# TYPE {family} info") {
            return format!("# TYPE {family}_info gauge");
        }
        if let Some(help) = line.strip_prefix(&format!("# HELP {family} ")) {
            return format!("# HELP {family}_info {help}");
        }
    }
    line.to_owned()
}

#[test]
fn info_families_keep_their_scraped_names_in_both_formats() {
    let m = recorded_metrics();
    let (om, text) = (m.encode_openmetrics(), m.encode_prometheus_text());
    for family in ["llmprobe_target", "llmprobe_build", "llmprobe_workload"] {
        assert!(om.contains(&format!("\n# TYPE {family} info\n{family}_info{{")), "{family} is an OpenMetrics info family:\n{om}");
        assert!(text.contains(&format!("\n# TYPE {family}_info gauge\n{family}_info{{")), "{family}_info is a text-format gauge:\n{text}");
    }
}
