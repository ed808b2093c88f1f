//! The metric contract beyond the golden file: every error class is exported, gauges replace
//! their series, both exposition formats carry the same families.

use crate::metrics_common;

use std::time::Instant;

use llmprobe::probe::outcome::ErrorClass;
use llmprobe::sink::prometheus::ALL_FAMILIES;
use llmprobe::sink::{Metrics, Sink};
use metrics_common::{config, failed, golden_outcomes, outcome, sample, scenario, target};

fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn every_error_class_is_precreated_with_its_outcome_label() {
    let text = Metrics::new(&config()).encode_openmetrics();
    for class in ErrorClass::ALL {
        let series =
            format!("llmprobe_requests_total{{target=\"local\",scenario=\"chat\",outcome=\"{}\",error=\"{}\"}} 0", class.outcome_label(), class.as_str());
        assert!(text.contains(&series), "missing {series}");
    }
    assert!(text.contains("outcome=\"success\",error=\"none\"} 0"));
    assert_eq!(lines_with(&text, "llmprobe_requests_total{").len(), ErrorClass::ALL.len() + 1);
}

#[test]
fn every_target_scenario_pair_is_precreated() {
    let mut cfg = config();
    cfg.targets.push(target("remote"));
    cfg.scenarios.push(scenario("long", 0.5));
    let text = Metrics::new(&cfg).encode_openmetrics();
    for t in ["local", "remote"] {
        for s in ["chat", "long"] {
            let ts = format!("{{target=\"{t}\",scenario=\"{s}\"}}");
            for family in ["llmprobe_goodput_requests_total", "llmprobe_ttft_seconds_count", "llmprobe_output_tokens_total"] {
                assert!(text.contains(&format!("{family}{ts} 0")), "missing {family}{ts}");
            }
        }
        assert!(text.contains(&format!("llmprobe_in_flight_requests{{target=\"{t}\"}} 0")));
        assert!(text.contains(&format!("llmprobe_schedule_lag_seconds_count{{target=\"{t}\"}} 0")));
    }
    assert!(text.contains("llmprobe_target_rate_per_second{target=\"remote\",scenario=\"long\"} 0.5"));
}

#[test]
fn unconfigured_slos_have_no_series() {
    let text = Metrics::new(&config()).encode_openmetrics();
    assert!(!text.contains("slo=\"e2e\""), "e2e has no threshold in the test config");
    assert!(text.contains("llmprobe_slo_violations_total{target=\"local\",scenario=\"chat\",slo=\"ttft\"} 0"));
}

#[test]
fn all_names_are_exported() {
    let metrics = Metrics::new(&config());
    metrics.set_target_info("local", "m", "vllm", "1");
    // Series that exist only once their event happened: a release, a configured source's scrape.
    metrics.set_target_info_change("local", 1.0);
    metrics.detect.set_release("local", "v1", "api", 1.0);
    metrics_common::record_replica_series(&metrics);
    metrics_common::record_check_series(&metrics, Instant::now());
    metrics_common::record_sequence_series(&metrics, Instant::now());
    llmprobe::source::scrape::ScrapeReport::scraped(&metrics, "engine-local", true, 0.01);
    let om = metrics.encode_openmetrics();
    let prom = metrics.encode_prometheus_text();
    // Server phase times exist only for APIs that report them; the test target speaks OpenAI.
    let api_dependent = [llmprobe::sink::prometheus::SERVER_TIME_SECONDS.name];
    for name in ALL_FAMILIES.map(|f| f.name).into_iter().filter(|n| !api_dependent.contains(n)) {
        let sample = |text: &str| text.lines().any(|l| !l.starts_with('#') && l.starts_with(name));
        assert!(sample(&om), "{name} missing from OpenMetrics");
        assert!(sample(&prom), "{name} missing from Prometheus text");
    }
}

#[test]
fn in_flight_is_set_not_added() {
    let metrics = Metrics::new(&config());
    metrics.set_in_flight("local", 5);
    metrics.set_in_flight("local", 2);
    assert_eq!(lines_with(&metrics.encode_openmetrics(), "llmprobe_in_flight_requests{"), ["llmprobe_in_flight_requests{target=\"local\"} 2"]);
}

#[test]
fn target_info_change_replaces_the_old_series() {
    let metrics = Metrics::new(&config());
    metrics.set_target_info("local", "m", "vllm", "0.10.0");
    metrics.set_target_info("other", "x", "sglang", "0.5");
    metrics.set_target_info("local", "m", "vllm", "0.11.0");
    metrics.set_target_info("local", "m", "vllm", "0.11.0");
    let text = metrics.encode_openmetrics();
    let info = lines_with(&text, "llmprobe_target_info{");
    assert_eq!(
        info,
        [
            "llmprobe_target_info{target=\"local\",model=\"m\",engine=\"vllm\",engine_version=\"0.11.0\"} 1",
            "llmprobe_target_info{target=\"other\",model=\"x\",engine=\"sglang\",engine_version=\"0.5\"} 1",
        ]
    );
}

/// `llmprobe_detect_state` carries `source` (which detector set the state): one label value per
/// row at a time, so a row whose source changes leaves no stale series, and a reload does not reset
/// an exported row.
#[test]
fn detect_state_has_one_source_per_row() {
    let cfg = config();
    let metrics = Metrics::new(&cfg);
    let pooled_ttft = |text: &str| -> Vec<String> {
        lines_with(text, "llmprobe_detect_state{").into_iter().filter(|l| l.contains("scenario=\"*\",signal=\"ttft\"")).map(str::to_owned).collect()
    };
    let rows = |text: &str| lines_with(text, "llmprobe_detect_state{").len();
    let text = metrics.encode_openmetrics();
    let all = rows(&text);
    assert_eq!(all, 2 * 4 * 3, "two rows (pooled, chat) x four signals x three states");
    assert!(lines_with(&text, "llmprobe_detect_state{").iter().all(|l| l.contains(",source=\"none\"}")), "precreated rows are watching, source none:\n{text}");
    for (state, source) in [("regressed", "continuous"), ("recovered", "continuous"), ("watching", "none"), ("regressed", "release")] {
        metrics.detect.set_state("local", "*", "ttft", state, source);
        let text = metrics.encode_openmetrics();
        let series = pooled_ttft(&text);
        assert_eq!(series.len(), 3, "{state}/{source}: one series per state, none stale:\n{}", series.join("\n"));
        for s in &series {
            assert!(s.contains(&format!(",source=\"{source}\"}}")), "{s}");
            assert_eq!(s.ends_with(" 1"), s.contains(&format!("state=\"{state}\"")), "{s}");
        }
        assert_eq!(rows(&text), all, "other rows untouched");
    }
    metrics.reconfigure(&cfg, &cfg);
    assert!(
        pooled_ttft(&metrics.encode_openmetrics())
            .contains(&"llmprobe_detect_state{target=\"local\",scenario=\"*\",signal=\"ttft\",state=\"regressed\",source=\"release\"} 1".to_owned()),
        "a reload keeps an exported row"
    );
    let mut fewer = cfg.clone();
    fewer.targets.clear();
    metrics.reconfigure(&cfg, &fewer);
    assert_eq!(rows(&metrics.encode_openmetrics()), 0, "a removed target leaves no detector state");
}

#[test]
fn config_reload_gauge_follows_the_last_result() {
    let metrics = Metrics::new(&config());
    assert!(metrics.encode_openmetrics().contains("llmprobe_config_last_reload_successful 1\n"));
    metrics.set_config_reload_ok(false);
    assert!(metrics.encode_openmetrics().contains("llmprobe_config_last_reload_successful 0\n"));
}

#[test]
fn error_detail_never_becomes_a_label() {
    let metrics = Metrics::new(&config());
    let o = failed(outcome(Instant::now(), 0, 0, &[], 10), ErrorClass::Http5xx, "secret-ish upstream text");
    metrics.record(&o, None);
    let text = metrics.encode_openmetrics();
    assert!(!text.contains("secret-ish"));
    assert!(text.contains("outcome=\"error\",error=\"http_5xx\"} 1"));
}

#[test]
fn every_probe_counts_once() {
    let metrics = Metrics::new(&config());
    let outcomes = golden_outcomes(Instant::now());
    for o in &outcomes {
        metrics.record(o, sample(o).as_ref());
    }
    let total: u64 =
        lines_with(&metrics.encode_openmetrics(), "llmprobe_requests_total{").iter().map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(total, outcomes.len() as u64);
}

#[test]
fn prometheus_text_types_counters_by_their_sample_name() {
    let text = Metrics::new(&config()).encode_prometheus_text();
    assert!(text.contains("# TYPE llmprobe_requests_total counter\n"));
    assert!(text.contains("# TYPE llmprobe_ttft_seconds histogram\n"));
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"));
    print!("{text}");
}

#[test]
fn stream_encoding_counts_responses_by_coding() {
    let metrics = Metrics::new(&config());
    let mut o = outcome(Instant::now(), 1, 0, &[10, 20], 30);
    o.content_encoding = Some(llmprobe::protocol::coding::ContentCoding::Gzip);
    metrics.record(&o, None);
    let text = metrics.encode_openmetrics();
    let series = lines_with(&text, "llmprobe_stream_encoding_total{");
    assert_eq!(series.len(), 3, "identity, gzip, deflate pre-created: {series:?}");
    assert!(series.contains(&"llmprobe_stream_encoding_total{target=\"local\",encoding=\"gzip\"} 1"), "{series:?}");
    assert!(series.contains(&"llmprobe_stream_encoding_total{target=\"local\",encoding=\"identity\"} 0"), "{series:?}");
}
