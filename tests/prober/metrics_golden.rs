//! The exact `/metrics` text is a contract: names, labels, buckets and zero-initialised series.
//! Regenerate with `UPDATE_GOLDEN=1 cargo test --test prober metrics_golden`, then review the diff.

use crate::metrics_common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use llmprobe::sink::{Metrics, Sink};
use llmprobe::util::version::{BUILD_REVISION, BUILD_VERSION};
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
            o.trace = Some(llmprobe::probe::trace::TraceIds { trace_id: [0x4b; 16], span_id: [0x1f; 8], sampled: true });
        }
        metrics.record(&o, sample(&o).as_ref());
    }
    metrics.set_in_flight("local", 1);
    metrics.set_target_info("local", "Qwen/Qwen3-0.6B", "vllm", "0.11.0");
    metrics.set_target_info_change("local", 1_767_225_600.0);
    metrics.detect.set_release("local", "0.11.0", "discovery", 1_767_225_600.0);
    metrics_common::record_replica_series(&metrics);
    metrics_common::record_check_series(&metrics, t0);
    metrics_common::record_sequence_series(&metrics, t0);
    llmprobe::source::scrape::ScrapeReport::scraped(&metrics, "engine-local", true, 0.0125);
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
    // (`tests/prober/otlp_export.rs` checks them against exported spans).
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
    const INFO: [&str; 5] = ["llmprobe_target", "llmprobe_build", "llmprobe_workload", "llmprobe_release", "llmprobe_replica"];
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

/// The metric contract document, rendered from the registry's own exposition (name, type, unit,
/// labels, buckets, help) so it cannot drift from `src/sink/prometheus/contract.rs`.
const METRICS_DOC: &str = "src/sink/METRICS.md";

fn render_metrics_doc(text: &str) -> String {
    let mut out = String::from(
        "# Metric contract\n\n<!-- Generated from src/sink/prometheus/contract.rs by tests/prober/metrics_golden.rs; \
         rewrite with `UPDATE_METRICS_DOC=1 cargo test --test prober metrics_golden`. -->\n\n\
         Every family served on `/metrics`, in exposition order. Names are as scraped: counters end in \
         `_total`, histograms add `_bucket`/`_sum`/`_count`, info families are `x_info` gauges in the \
         Prometheus text format (OpenMetrics type `info`).\n\n\
         | Series | Type | Labels | Buckets | Help |\n|---|---|---|---|---|\n",
    );
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (family, kind) = rest.split_once(' ').unwrap();
        let help = lines[..i].iter().rev().find_map(|l| l.strip_prefix(&format!("# HELP {family} "))).unwrap_or("");
        let samples: Vec<&str> = lines[i + 1..].iter().take_while(|l| !l.starts_with("# TYPE")).filter(|l| !l.starts_with('#')).copied().collect();
        let series = match kind {
            "counter" => format!("{family}_total"),
            "info" => format!("{family}_info"),
            _ => family.to_owned(),
        };
        let label_names = |s: &str| -> Vec<String> {
            let Some((_, labels)) = s.split_once('{') else { return Vec::new() };
            let labels = labels.split('}').next().unwrap_or("");
            labels.split("\",").filter_map(|kv| kv.split_once('=')).map(|(k, _)| k.to_owned()).filter(|k| k != "le").collect()
        };
        let labels = samples.first().map(|s| label_names(s)).unwrap_or_default();
        let buckets: Vec<&str> = if kind == "histogram" {
            // One label set's buckets (a family may have several): the first bucket sample's
            // labels besides `le`.
            let others = |s: &str| -> String {
                let labels = s.split_once('{').map_or("", |(_, l)| l).split('}').next().unwrap_or("");
                labels.split("\",").filter(|kv| !kv.starts_with("le=")).collect::<Vec<_>>().join(",")
            };
            let bucket_samples: Vec<&&str> = samples.iter().filter(|s| s.contains("_bucket{")).collect();
            let key = bucket_samples.first().map(|s| others(s)).unwrap_or_default();
            bucket_samples
                .into_iter()
                .filter(|s| others(s) == key)
                .filter_map(|s| s.split("le=\"").nth(1)?.split('"').next())
                .filter(|b| *b != "+Inf")
                .collect()
        } else {
            Vec::new()
        };
        let labels = if labels.is_empty() { "—".to_owned() } else { labels.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ") };
        let buckets = if buckets.is_empty() { "—".to_owned() } else { buckets.join(", ") };
        out.push_str(&format!("| `{series}` | {kind} | {labels} | {buckets} | {} |\n", help.trim_end_matches('.')));
    }
    out
}

#[test]
fn metrics_doc_matches_the_registry() {
    let text = normalise(&recorded_metrics().encode_openmetrics());
    let doc = render_metrics_doc(&text);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(METRICS_DOC);
    if std::env::var_os("UPDATE_METRICS_DOC").is_some() || std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &doc).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(doc == want, "{METRICS_DOC} is out of date; rerun with UPDATE_METRICS_DOC=1 and review.\n{doc}");
    assert_eq!(doc.lines().filter(|l| l.starts_with("| `llmprobe_")).count(), llmprobe::sink::prometheus::ALL_FAMILIES.len());
}
