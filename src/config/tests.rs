//! Unit tests of the loader as a whole: defaults, rate resolution, warnings, formatting.
//! Invalid files are covered by the fixture table in `tests/commands/config_errors.rs`.

use std::time::Duration;

use super::*;

/// Tests read their configs as the program does.
fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
    crate::app::loader::parse(text, file)
}

const MINIMAL: &str = "\
targets:
  - name: a
    base_url: http://127.0.0.1:8000/
    api: openai-completions
scenarios:
  - name: s
    input_tokens: 16
    output_tokens: {min: 1, max: 8}
";

fn ok(text: &str) -> Config {
    parse(text, "test.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> Vec<String> {
    let e = parse(text, "test.yaml").expect_err("should fail");
    e.to_string().lines().map(str::to_owned).collect()
}

#[test]
fn minimal_file_gets_every_default() {
    let c = ok(MINIMAL);
    assert_eq!(c.listen, "127.0.0.1:9464".parse().unwrap());
    assert_eq!(c.probe.seed, None);
    assert_eq!(c.probe.max_in_flight, 64);
    assert_eq!(c.probe.shutdown_grace, Duration::from_secs(10));
    assert_eq!(c.probe.discovery_interval, Duration::from_secs(60));
    let t = &c.targets[0];
    assert_eq!(t.base_url, "http://127.0.0.1:8000");
    assert_eq!(t.api, ProtocolKind::OpenaiCompletions);
    assert_eq!((t.model.clone(), t.api_key.clone(), t.headers.len()), (None, None, 0));
    assert!(t.ignore_eos);
    assert_eq!(
        t.timeouts,
        Timeouts { connect: Duration::from_secs(2), ttft: Duration::from_secs(30), idle: Duration::from_secs(10), total: Duration::from_secs(120) }
    );
    assert_eq!(c.scenarios[0].rate, 1.0);
    assert_eq!(c.scenarios[0].input_tokens, LengthSpec::Fixed(16));
    assert_eq!(c.scenarios[0].output_tokens, LengthSpec::Uniform { min: 1, max: 8 });
    assert_eq!(c.slo, Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 });
}

#[test]
fn defaults_warn_that_the_in_flight_cap_may_drop_probes() {
    // 1 req/s × 120s total timeout needs up to 120 slots; the default cap is 64.
    let c = ok(MINIMAL);
    let lines: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        vec![
            "probe.max_in_flight: 64 is below rate × total timeout for target \"a\" \
             (1/s × 120s = 120): probes will be dropped if responses get that slow"
        ]
    );
    let raised = format!("probe: {{max_in_flight: 120}}\n{MINIMAL}");
    assert!(ok(&raised).warnings.is_empty());
}

#[test]
fn own_rates_are_kept_and_weights_share_probe_rate() {
    let text = "\
probe: {rate: 6}
targets: [{name: a, base_url: 'http://h', api: openai-chat}]
scenarios:
  - {name: x, weight: 2, input_tokens: 1, output_tokens: 1}
  - {name: y, input_tokens: 1, output_tokens: 1}
  - {name: z, rate: 0.25, input_tokens: 1, output_tokens: 1}
";
    let rates: Vec<f64> = ok(text).scenarios.iter().map(|s| s.rate).collect();
    assert_eq!(rates, vec![4.0, 2.0, 0.25]);
}

#[test]
fn unused_probe_rate_is_a_warning() {
    let text = "\
probe: {rate: 6, max_in_flight: 1000}
targets: [{name: a, base_url: 'http://h', api: openai-chat}]
scenarios: [{name: z, rate: 0.5, input_tokens: 1, output_tokens: 1}]
";
    let c = ok(text);
    assert_eq!(c.scenarios[0].rate, 0.5);
    assert_eq!(c.warnings.len(), 1);
    assert_eq!(c.warnings[0].to_string(), "probe.rate: unused: every scenario sets its own rate (line 1)");
}

#[test]
fn base_url_keeps_a_path_prefix_and_warns_about_v1() {
    let text = MINIMAL.replace("http://127.0.0.1:8000/", "https://Proxy.example/llm/");
    assert_eq!(ok(&text).targets[0].base_url, "https://proxy.example/llm");
    let v1 = format!("probe: {{max_in_flight: 500}}\n{}", MINIMAL.replace("8000/", "8000/v1"));
    let c = ok(&v1);
    assert_eq!(c.targets[0].base_url, "http://127.0.0.1:8000/v1");
    assert_eq!(c.warnings[0].path, "targets[0].base_url");
    assert_eq!(c.warnings[0].line, Some(4));
}

#[test]
fn api_key_is_only_a_reference() {
    // The variable does not exist: loading must not care, it never reads it.
    let text = MINIMAL.replace("    api: openai-completions\n", "    api: openai-completions\n    api_key_env: LLMPROBE_TEST_UNSET_VARIABLE\n");
    let c = ok(&text);
    assert_eq!(c.targets[0].api_key, Some(SecretRef::Env("LLMPROBE_TEST_UNSET_VARIABLE".into())));
}

#[test]
fn authorization_header_is_allowed_without_an_api_key() {
    let text = MINIMAL.replace("    api: openai-completions\n", "    api: openai-completions\n    headers: {Authorization: Basic abc, X-Num: 5}\n");
    let headers = ok(&text).targets[0].headers.clone();
    assert_eq!(headers, vec![("Authorization".into(), "Basic abc".into()), ("X-Num".into(), "5".into())]);
}

#[test]
fn serde_errors_carry_path_and_line() {
    let text = MINIMAL.replace("input_tokens: 16", "input_tokens: many");
    assert_eq!(
        err(&text),
        vec![
            "scenarios[0].input_tokens: invalid type: string \"many\", expected a token count, \
             {min: N, max: M}, or a distribution {kind: ..., ...} (test.yaml:7)"
        ]
    );
    let text = MINIMAL.replace("{min: 1, max: 8}", "{min: 1, max: 8, average: 4}");
    let lines = err(&text);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("scenarios[0].output_tokens.average: unknown field `average`, expected one of `kind`") && lines[0].ends_with("(test.yaml:8)"),
        "{lines:?}"
    );
}

#[test]
fn a_non_mapping_file_says_what_is_expected() {
    assert_eq!(
        err("- 1\n"),
        vec![
            "invalid type: sequence, expected a mapping with the sections listen, probe, targets, \
             scenarios, slo, tracing, jsonl, sources, bench, detect, checks (test.yaml:1)"
        ]
    );
}

#[test]
fn an_empty_file_reports_the_missing_sections() {
    assert_eq!(err(""), vec!["targets: at least one target is required (test.yaml)", "scenarios: at least one scenario is required (test.yaml)",]);
}

#[test]
fn issues_format_with_and_without_a_file() {
    let issue = ConfigIssue { path: "slo.ttft".into(), line: Some(3), message: "bad".into() };
    assert_eq!(issue.to_string(), "slo.ttft: bad (line 3)");
    assert_eq!(issue.display_in("f.yaml").to_string(), "slo.ttft: bad (f.yaml:3)");
    let whole = ConfigIssue { path: String::new(), line: None, message: "cannot read".into() };
    assert_eq!(whole.display_in("f.yaml").to_string(), "cannot read (f.yaml)");
}

#[test]
fn a_value_with_a_newline_keeps_each_issue_on_one_line() {
    let text = MINIMAL.replace("api: openai-completions", "api: \"openai\\n(test.yaml:1) forged\"");
    let lines = err(&text);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("targets[0].api: ") && lines[0].contains("openai\\n(test.yaml:1) forged") && lines[0].ends_with("(test.yaml:4)"), "{lines:?}");
}

#[test]
fn past_fifty_issues_the_rest_are_counted() {
    let scenarios: String = (0..120).map(|i| format!("  - {{name: s{i}, input_tokens: 0, output_tokens: 1}}\n")).collect();
    let text = format!("targets:\n  - {{name: a, base_url: 'http://127.0.0.1:1', api: openai-chat}}\nscenarios:\n{scenarios}");
    let errors = parse(&text, "test.yaml").expect_err("invalid");
    assert!(errors.issues.len() > 100);
    let lines = err(&text);
    assert_eq!(lines.len(), MAX_SHOWN_ISSUES + 1, "{lines:?}");
    assert_eq!(lines[MAX_SHOWN_ISSUES], format!("... and {} more problems (test.yaml)", errors.issues.len() - MAX_SHOWN_ISSUES));
}

#[test]
fn hostile_yaml_is_refused_before_it_is_expanded() {
    let mut text = format!("a0: &a0 [{}]\n", vec!["1"; 100].join(","));
    for level in 1..=6 {
        text.push_str(&format!("a{level}: &a{level} [{}]\n", vec![format!("*a{}", level - 1); 100].join(",")));
    }
    assert_eq!(err(&text), vec![format!("more than {MAX_NODES} values once aliases are expanded (test.yaml:3)")]);
    let deep = format!("targets: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(err(&deep), vec![format!("collections nested more than {MAX_DEPTH} deep (test.yaml:1)")]);
}

#[test]
fn demo_parses() {
    let c = crate::app::loader::demo();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.slo.ttft, Some(Duration::from_millis(500)));
    assert_eq!(c.slo.tpot, Some(Duration::from_millis(50)));
    assert_eq!(c.slo.e2e, Some(Duration::from_secs(15)));
}

#[test]
fn connect_timeout_not_below_ttft_is_a_warning() {
    let text = "\
probe: {max_in_flight: 1000}
targets:
  - {name: a, base_url: 'http://h', api: openai-chat, timeouts: {connect: 30s, ttft: 10s}}
scenarios: [{name: z, input_tokens: 1, output_tokens: 1}]
";
    let c = ok(text);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].path, "targets[0].timeouts.connect");
    assert!(c.warnings[0].to_string().contains("reported as timeout_ttft"));
    assert!(ok(MINIMAL).warnings.iter().all(|w| !w.path.ends_with("connect")));
}

#[test]
fn slo_section_absent_empty_or_full() {
    let none = Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 };
    assert_eq!(ok(MINIMAL).slo, none, "absent");
    assert_eq!(ok(&format!("{MINIMAL}slo:\n")).slo, none, "present with no value");
    assert_eq!(ok(&format!("{MINIMAL}slo: {{}}\n")).slo, none, "present and empty");
    let full = ok(&format!("{MINIMAL}slo: {{ttft: 1s, tpot: 50ms, e2e: 10s, objective: 0.95}}\n")).slo;
    assert_eq!(full, Slo { ttft: Some(Duration::from_secs(1)), tpot: Some(Duration::from_millis(50)), e2e: Some(Duration::from_secs(10)), objective: 0.95 });
}

#[test]
fn tracing_section_absent_empty_or_full_keeps_exemplars_on_by_default() {
    for text in [MINIMAL.to_owned(), format!("{MINIMAL}tracing:\n"), format!("{MINIMAL}tracing: {{}}\n")] {
        let t = ok(&text).tracing;
        assert_eq!(t, Tracing::default(), "{text}");
        assert!(t.exemplars, "exemplars default to true:\n{text}");
    }
    let full = ok(&format!(
        "{MINIMAL}tracing: {{enabled: true, endpoint: \"http://c:4318\", protocol: grpc, service_name: p, sample_ratio: 0.5, exemplars: false, metrics: true}}\n"
    ))
    .tracing;
    assert_eq!(
        (full.enabled, full.protocol, full.sample_ratio, full.exemplars, full.metrics),
        (Some(true), Some(OtlpProtocol::Grpc), Some(0.5), false, Some(true))
    );
}

const TWO_BY_TWO: &str = "\
targets:
  - {name: a, base_url: \"http://127.0.0.1:8000\", api: openai-chat, slo: {ttft: 2s, e2e: 9s}}
  - {name: b, base_url: \"http://127.0.0.1:8001\", api: openai-chat}
scenarios:
  - {name: s, input_tokens: 16, output_tokens: 4, slo: {ttft: 300ms, tpot: off, objective: 0.9}}
  - {name: u, input_tokens: 16, output_tokens: 4}
";

#[test]
fn slo_overrides_scenario_over_target_over_global_field_by_field() {
    let ms = Duration::from_millis;
    let c = ok(&format!("{TWO_BY_TWO}slo: {{ttft: 1s, tpot: 50ms, objective: 0.99}}\n"));
    assert_eq!(c.slo_for("a", "s"), Slo { ttft: Some(ms(300)), tpot: None, e2e: Some(ms(9000)), objective: 0.9 });
    assert_eq!(c.slo_for("a", "u"), Slo { ttft: Some(ms(2000)), tpot: Some(ms(50)), e2e: Some(ms(9000)), objective: 0.99 });
    assert_eq!(c.slo_for("b", "s"), Slo { ttft: Some(ms(300)), tpot: None, e2e: None, objective: 0.9 });
    assert_eq!(c.slo_for("b", "u"), c.slo);
    let table = c.slo_table();
    assert_eq!(table.get("a", "s"), &c.slo_for("a", "s"));
    assert_eq!(table.get("gone", "s"), &c.slo, "unknown pairs get the global SLO");
    // Absent, empty and full global sections under the same overrides.
    for global in ["", "slo:\n", "slo: {}\n"] {
        let c = ok(&format!("{TWO_BY_TWO}{global}"));
        assert_eq!(c.slo_for("b", "u"), Slo { ttft: None, tpot: None, e2e: None, objective: 0.99 }, "{global:?}");
        assert_eq!(c.slo_for("a", "s").ttft, Some(ms(300)));
    }
}

#[test]
fn slo_override_errors_name_their_path() {
    let e = err(&format!("{MINIMAL}    slo: {{ttft: 0s, objective: 1.5}}\n"));
    assert!(e.iter().any(|l| l.starts_with("scenarios[0].slo.ttft: must be greater than 0")), "{e:?}");
    assert!(e.iter().any(|l| l.starts_with("scenarios[0].slo.objective: must be between 0 and 1")), "{e:?}");
    let e = err(&MINIMAL.replace("    api: openai-completions\n", "    api: openai-completions\n    slo: {ttfb: 1s}\n"));
    assert!(e.iter().any(|l| l.contains("targets[0].slo") && l.contains("ttfb")), "{e:?}");
}

#[test]
fn detect_section_absent_empty_and_full() {
    let base =
        "targets: [{name: t, base_url: \"http://127.0.0.1:1\", api: openai-chat, model: m}]\nscenarios: [{name: s, input_tokens: 8, output_tokens: 8}]\n";
    let defaults = crate::detect::DetectSettings::default();
    for section in ["", "detect:\n", "detect: {}\n"] {
        let c = parse(&format!("{base}{section}"), "t.yaml").unwrap_or_else(|e| panic!("{section:?}: {e}"));
        assert!(c.detect.enabled, "{section:?}");
        assert_eq!(c.detect.tuning, defaults, "{section:?}: the documented defaults");
        assert_eq!(c.detect.state_dir, None);
        assert_eq!(c.detect.state_max_age, std::time::Duration::from_secs(6 * 3600));
        assert_eq!((c.detect.release_token_file.as_deref(), c.detect.release_read_token_file.as_deref()), (None, None), "the release API is off");
    }
    let full = "detect:\n  enabled: false\n  state_dir: /var/lib/llmprobe\n  state_max_age: 1h\n  release_token_file: /run/token\n  \
                release_read_token_file: /run/read-token\n  tuning: {armed_alpha: 0.01}\n";
    let c = parse(&format!("{base}{full}"), "t.yaml").unwrap();
    assert!(!c.detect.enabled);
    assert_eq!(c.detect.release_token_file.as_deref(), Some(std::path::Path::new("/run/token")));
    assert_eq!(c.detect.release_read_token_file.as_deref(), Some(std::path::Path::new("/run/read-token")));
    assert_eq!(c.detect.state_dir.as_deref(), Some(std::path::Path::new("/var/lib/llmprobe")));
    assert_eq!(c.detect.tuning.armed_alpha, 0.01);
    assert_eq!(c.detect.tuning.armed_window_s, defaults.armed_window_s, "fields not given keep their defaults");
    // A read-only token file alone is allowed (verdicts without markers by API); empty or the
    // marker token's own file is not, named with its line.
    let c = parse(&format!("{base}detect: {{release_read_token_file: /run/read-token}}\n"), "t.yaml").unwrap();
    assert_eq!((c.detect.release_token_file, c.detect.release_read_token_file.as_deref()), (None, Some(std::path::Path::new("/run/read-token"))));
    let empty = parse(&format!("{base}detect:\n  release_read_token_file: \"\"\n"), "t.yaml").unwrap_err().to_string();
    assert!(empty.contains("detect.release_read_token_file: must not be empty (t.yaml:4)"), "{empty}");
    let same = parse(&format!("{base}detect:\n  release_token_file: /run/t\n  release_read_token_file: /run/t\n"), "t.yaml").unwrap_err().to_string();
    assert!(same.contains("detect.release_read_token_file: must not be the file of detect.release_token_file") && same.contains("t.yaml:5"), "{same}");
    let bad = parse(&format!("{base}detect: {{tuning: {{armed_alpha: 2}}, state_dir: \"\"}}\n"), "t.yaml").unwrap_err().to_string();
    assert!(bad.contains("detect.tuning.armed_alpha") && bad.contains("detect.state_dir"), "{bad}");
    let typo = parse(&format!("{base}detect: {{tunning: {{}}}}\n"), "t.yaml").unwrap_err().to_string();
    assert!(typo.contains("tunning"), "{typo}");
}

#[test]
fn a_built_target_equals_the_same_entry_read_from_a_file() {
    let built = Target::new("a", "http://127.0.0.1:8000/", ProtocolKind::OpenaiCompletions).unwrap();
    assert_eq!(format!("{built:?}"), format!("{:?}", ok(MINIMAL).targets[0]));
    let with = built.clone().with_model("m").with_timeouts(Timeouts { connect: Duration::from_secs(1), ..built.timeouts });
    assert_eq!((with.model.as_deref(), with.timeouts.connect), (Some("m"), Duration::from_secs(1)));
    let bad = Target::new("a b", "ftp://x", ProtocolKind::Tgi).unwrap_err();
    let paths: Vec<&str> = bad.iter().map(|i| i.path.as_str()).collect();
    assert_eq!(paths, ["target.name", "target.base_url"]);
}

#[test]
fn thousands_of_issues_cost_no_parse_each() {
    // 700 targets (under the series limit), each with a bad duration: every issue gets its line
    // from one index.
    let mut text = String::from("scenarios: [{name: s, input_tokens: 1, output_tokens: 1}]\ntargets:\n");
    for i in 0..700 {
        text.push_str(&format!("  - name: t{i}\n    base_url: http://127.0.0.1:8000\n    api: openai-chat\n    timeouts: {{ttft: soon}}\n"));
    }
    let before = super::locate::parses_on_this_thread();
    let e = parse(&text, "big.yaml").expect_err("700 bad durations");
    let parses = super::locate::parses_on_this_thread() - before;
    assert_eq!(e.issues.len(), 700);
    assert_eq!(e.issues[699].path, "targets[699].timeouts.ttft");
    assert_eq!(e.issues[699].line, Some(2 + 699 * 4 + 4));
    assert!(parses <= 3, "{parses} parses for one load (syntax, index, serde expected)");
    // The same with warnings (default timeouts above the in-flight cap), on a valid file.
    let before = super::locate::parses_on_this_thread();
    let c = ok(&text.replace("    timeouts: {ttft: soon}\n", ""));
    assert_eq!(c.warnings.len(), 700);
    assert!(super::locate::parses_on_this_thread() - before <= 3);
}

#[test]
fn problems_of_every_stage_are_reported_together() {
    // An unknown key, a wrong type and an invalid value: one run names all three.
    let text =
        MINIMAL.replace("    api: openai-completions\n", "    api: openai-completions\n    colour: blue\n").replace("input_tokens: 16", "input_tokens: [16]")
            + "probe: {rate: 0}\n";
    let lines = err(&text);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines[0].starts_with("targets[0].colour: unknown field `colour`") && lines[0].ends_with("(test.yaml:5)"), "{lines:#?}");
    assert!(lines[1].starts_with("scenarios[0].input_tokens: invalid type: sequence") && lines[1].ends_with("(test.yaml:8)"), "{lines:#?}");
    assert_eq!(lines[2], "probe.rate: must be a rate between 0.0001 and 100000 probes per second, got 0 (test.yaml:10)");
}

#[test]
fn a_repeated_key_is_reported_with_its_path_and_line() {
    let text = format!("# comment\n\n{MINIMAL}targets: []\n");
    assert_eq!(err(&text), vec!["targets: duplicate key (first set at line 3) (test.yaml:11)"]);
}

#[test]
fn a_length_mean_or_mu_that_is_not_finite_is_an_error_also_inside_a_mixture() {
    let with = |output: &str| MINIMAL.replace("output_tokens: {min: 1, max: 8}", output);
    let lines = err(&with("output_tokens: {kind: mixture, components: [{weight: 1, kind: normal, mean: .nan, stddev: 2, min: 1, max: 8}]}"));
    assert_eq!(lines, vec!["scenarios[0].output_tokens.components[0].mean: must be a finite number, got NaN (test.yaml:8)"]);
    let lines = err(&with("output_tokens: {kind: lognormal, mu: .inf, sigma: 1, min: 1, max: 8}"));
    assert_eq!(lines, vec!["scenarios[0].output_tokens.mu: must be a finite number, got inf (test.yaml:8)"]);
}

#[test]
fn a_weight_whose_share_is_out_of_range_is_reported_as_a_weight() {
    let text = "probe: {rate: 1}\ntargets:\n  - {name: a, base_url: 'http://127.0.0.1:1', api: openai-chat}\nscenarios:\n  - {name: big, weight: 1000000000}\n  - {name: tiny, weight: 0.000000001}\n"
        .replace("{name: big, weight: 1000000000}", "{name: big, weight: 1000000000, input_tokens: 8, output_tokens: 4}")
        .replace("{name: tiny, weight: 0.000000001}", "{name: tiny, weight: 0.000000001, input_tokens: 8, output_tokens: 4}");
    let lines = err(&text);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("scenarios[1].weight: weight 0.000000001 of 1000000000 in all gives this scenario"), "{lines:?}");
    assert!(lines[0].contains("change the weights or probe.rate") && !lines[0].contains("must be a rate"), "{lines:?}");
}
