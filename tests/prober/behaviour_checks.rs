//! Behaviour checks end to end: `config/behaviour.yaml` against the mock engine on loopback, with
//! no fault (every check passes) and with each behaviour fault (exactly the check it breaks
//! fails, with its class); then the prober's pipeline: counters, goodput, fingerprint changes as
//! release markers.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{metric, start_mock};
use llmprobe::mock::{Fault, MockOptions};
use llmprobe::sink::{Metrics, Sink};

/// The shipped example, pointed at a mock on `addr`.
fn behaviour_config(addr: std::net::SocketAddr) -> llmprobe::config::Config {
    behaviour_config_with(addr, "")
}

/// The example with `extra` YAML lines added to its target.
fn behaviour_config_with(addr: std::net::SocketAddr, extra: &str) -> llmprobe::config::Config {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/behaviour.yaml");
    let text = std::fs::read_to_string(path).unwrap().replace("127.0.0.1:18000", &addr.to_string());
    let text = text.replacen("    model: mock-llama\n", &format!("    model: mock-llama\n{extra}"), 1);
    llmprobe::app::loader::parse(&text, "behaviour.yaml").unwrap_or_else(|e| panic!("{e}"))
}

/// `--once` against a mock with `faults`: the report, and each scenario's verdict line.
async fn once(faults: &[(Fault, f64)]) -> (String, BTreeMap<String, String>) {
    once_with(faults, "").await
}

async fn once_with(faults: &[(Fault, f64)], target_extra: &str) -> (String, BTreeMap<String, String>) {
    let (addr, stop) = start_mock(MockOptions { fault_rates: faults.to_vec(), ..MockOptions::default() }).await;
    let mut out = String::new();
    llmprobe::pipeline::once::run(&behaviour_config_with(addr, target_extra), &mut out).await.unwrap();
    stop.cancel();
    let mut verdicts = BTreeMap::new();
    let mut scenario = String::new();
    for line in out.lines() {
        if let Some(s) = line.split(" scenario=").nth(1) {
            scenario = s.split(' ').next().unwrap().to_owned();
        }
        if let Some(v) = line.trim_start().strip_prefix("verdict") {
            verdicts.insert(scenario.clone(), v.trim().to_owned());
        }
    }
    assert_eq!(verdicts.len(), 5, "one probe per scenario:\n{out}");
    (out, verdicts)
}

#[tokio::test]
async fn without_faults_every_check_passes() {
    let (out, verdicts) = once(&[]).await;
    for (scenario, verdict) in &verdicts {
        assert!(verdict.starts_with("success"), "{scenario}: {verdict}\n{out}");
    }
    assert!(out.contains("checks         finish_reason, natural_stop, known_answer (all passed)"), "{out}");
    assert!(out.contains("checks         finish_reason, output_cap, structured_output (all passed)"), "{out}");
    assert!(out.contains("checks         finish_reason, tool_call (all passed)"), "{out}");
    assert!(out.contains("checks         natural_stop, stop (all passed)"), "{out}");
    assert!(out.contains("fingerprint    "), "{out}");
}

/// Each behaviour fault fails exactly the scenarios whose check it breaks, with what failed.
#[tokio::test]
async fn each_fault_fails_its_check() {
    let cases: [(Fault, &str, &str, &[&str]); 5] = [
        (Fault::InvalidJson, "structured", "error invalid_output: structured_output: truncated JSON", &[]),
        (Fault::BadToolCall, "tool-call", "error invalid_output: tool_call: arguments are truncated JSON", &[]),
        (Fault::WrongAnswer, "known-answers", "error wrong_answer: known_answer: expected \"paris\", answer \"I am not sure; perhaps Lyon.\"", &[]),
        (Fault::IgnoreStop, "stop-sequence", "error invalid_output: stop: stop sequence \"###\" in the answer", &[]),
        // An ignored EOS runs every planned answer on to its cap.
        (
            Fault::NoEos,
            "known-answers",
            "error invalid_output: finish_reason: finish_reason \"length\" is not one of stop; natural_stop: ended by \"length\" after 32 tokens",
            &["structured", "tool-call", "stop-sequence"],
        ),
    ];
    // The faults side by side, each against a mock of its own.
    let faults: Vec<[(Fault, f64); 1]> = cases.iter().map(|(fault, ..)| [(*fault, 1.0)]).collect();
    let runs = futures_util::future::join_all(faults.iter().map(|f| once(f))).await;
    for ((fault, broken, want, also), (out, verdicts)) in cases.into_iter().zip(runs) {
        assert!(verdicts[broken].starts_with(want), "{}: {broken}: {}\n{out}", fault.name(), verdicts[broken]);
        for (scenario, verdict) in verdicts.iter().filter(|(s, _)| *s != broken) {
            let failed = also.contains(&scenario.as_str());
            assert_eq!(verdict.starts_with("error invalid_output"), failed, "{}: {scenario}: {verdict}", fault.name());
            assert_eq!(verdict.starts_with("success"), !failed, "{}: {scenario}: {verdict}", fault.name());
        }
    }
}

/// A whole (non-streamed) answer is judged the same: its message's text and tool calls.
#[tokio::test]
async fn non_streamed_answers_are_checked_too() {
    let (out, verdicts) = once_with(&[], "    stream: false\n").await;
    for (scenario, verdict) in &verdicts {
        assert!(verdict.starts_with("success"), "{scenario}: {verdict}\n{out}");
    }
    assert!(out.contains("(not streamed"), "{out}");
    let (_, verdicts) = once_with(&[(Fault::BadToolCall, 1.0)], "    stream: false\n").await;
    assert!(verdicts["tool-call"].starts_with("error invalid_output: tool_call: arguments are truncated JSON"), "{}", verdicts["tool-call"]);
    let (_, verdicts) = once_with(&[(Fault::InvalidJson, 1.0)], "    stream: false\n").await;
    assert!(verdicts["structured"].starts_with("error invalid_output: structured_output: truncated JSON"), "{}", verdicts["structured"]);
}

/// `finish_reason: "error"` is a stream error, whatever the checks.
#[tokio::test]
async fn finish_error_is_a_stream_error_everywhere() {
    let (out, verdicts) = once(&[(Fault::FinishError, 1.0)]).await;
    for (scenario, verdict) in &verdicts {
        assert!(verdict.starts_with("error stream_error: finish_reason \"error\""), "{scenario}: {verdict}\n{out}");
    }
}

/// The prober's pipeline: the check counters and goodput from real probes, and a changed
/// temperature-0 answer counted as a behaviour change and marked as a release of source
/// `behaviour` (an answer that changes between two probes: `wrong_answer` on half of them).
#[tokio::test]
async fn counters_goodput_and_behaviour_changes() {
    use llmprobe::pipeline::scheduler::{Pacing, StopRule, Stream};
    use llmprobe::replicas::Endpoints;
    use llmprobe::workload::Mix;
    let (addr, stop) = start_mock(MockOptions { fault_rates: vec![(Fault::WrongAnswer, 0.5)], seed: 3, ..MockOptions::default() }).await;
    let config = behaviour_config(addr);
    let metrics = Arc::new(Metrics::new(&config));
    let releases = Arc::new(llmprobe::app::release::Releases::new(None));
    // Markers go out as events to the generation's sinks, here the metrics.
    releases.set_generation(llmprobe::sink::Sinks::new(vec![metrics.clone()]), vec!["mock".into()], Default::default(), None);
    let target = Arc::new(llmprobe::client::TargetRuntime::new(config.targets[0].clone()).unwrap());
    let scenario = config.scenarios.iter().find(|s| s.name == "known-answers").unwrap().clone();
    let sampler = llmprobe::workload::Sampler::uncalibrated(scenario, 1, target.config.api);
    let stream = Stream {
        endpoints: Arc::new(Endpoints::new(target)),
        draws: Mix::single("known-answers", sampler),
        pacing: Pacing::Closed { workers: 1 },
        id_prefix: "t".into(),
    };
    let sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), releases];
    let twelve = StopRule { requests: Some(12), ..StopRule::default() };
    llmprobe::pipeline::scheduler::drive(vec![stream], twelve, sinks, config.slo_table()).await.unwrap();
    stop.cancel();
    let text = metrics.encode_openmetrics();
    let ts = ["target=\"mock\"", "scenario=\"known-answers\""];
    let wrong = metric(&text, "llmprobe_requests_total", &[ts[0], ts[1], "error=\"wrong_answer\""]);
    let ok = metric(&text, "llmprobe_requests_total", &[ts[0], ts[1], "error=\"none\""]);
    assert_eq!(wrong + ok, 12.0, "{text}");
    assert!(wrong >= 1.0 && ok >= 1.0, "a coin per probe: {wrong} wrong, {ok} right");
    assert_eq!(metric(&text, "llmprobe_check_failures_total", &[ts[0], ts[1], "check=\"known_answer\""]), wrong);
    assert_eq!(metric(&text, "llmprobe_check_failures_total", &[ts[1], "check=\"natural_stop\""]), 0.0, "precreated, never failed");
    assert!(metric(&text, "llmprobe_goodput_requests_total", &ts) <= ok, "a wrong answer is never goodput");
    // Each of the three prompts came four times; a right and a wrong answer alternate by chance.
    let changes = metric(&text, "llmprobe_behaviour_changes_total", &ts);
    assert!(changes >= 1.0, "{text}");
    assert!(text.contains("source=\"behaviour\""), "a behaviour change marks a release:\n{text}");
}

/// A scenario without its own `checks:` is judged by the top-level section; its synthetic prompt
/// gets the mock's usual random words.
#[tokio::test]
async fn the_top_level_checks_judge_a_plain_scenario() {
    let (out, verdicts) = once(&[]).await;
    assert!(verdicts["chat"].starts_with("success"), "{out}");
    assert!(out.contains("checks         finish_reason, output_cap (all passed)"), "{out}");
}

/// `config/sessions.yaml` against the mock: the Responses API, reasoning within its budget, a
/// tool call, a four-turn conversation, an agent loop with two tools and a cache pair, every
/// check passing; under each fault of theirs, the scenario it breaks fails its check (or, for a
/// disabled cache, its warm probe reports no cached tokens) and the others still pass.
#[tokio::test]
async fn sessions_example_passes_every_check_on_the_mock() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/sessions.yaml");
    for fault in [None, Some(Fault::EndlessReasoning), Some(Fault::BadToolCall), Some(Fault::CacheDisabled)] {
        let (addr, stop) = start_mock(MockOptions { fault_rates: fault.map(|f| (f, 1.0)).into_iter().collect(), ..MockOptions::default() }).await;
        // The conversation's think time shortened: the test reads answers, not pauses.
        let text = std::fs::read_to_string(&path).unwrap().replace("127.0.0.1:18000", &addr.to_string()).replace("think_time: 1s", "think_time: 10ms");
        let config = llmprobe::app::loader::parse(&text, "sessions.yaml").unwrap_or_else(|e| panic!("{e}"));
        let mut out = String::new();
        llmprobe::pipeline::once::run(&config, &mut out).await.unwrap();
        stop.cancel();
        let verdicts: Vec<&str> = out.lines().filter_map(|l| l.trim_start().strip_prefix("verdict")).map(str::trim).collect();
        let failed: Vec<&&str> = verdicts.iter().filter(|v| !v.starts_with("success")).collect();
        // The usage line of the pair's warm probe.
        let warm = out.split("step           warm probe of cache pair").nth(1).and_then(|b| b.lines().find(|l| l.contains("usage"))).unwrap_or("");
        match fault {
            None | Some(Fault::CacheDisabled) => {
                // One probe of each single scenario, four turns, three agent steps, a cold and a
                // warm probe.
                assert_eq!(verdicts.len(), 12, "{out}");
                assert!(failed.is_empty(), "{out}");
                for k in 1..=4 {
                    assert!(out.contains(&format!("step           turn {k} of conversation")), "{out}");
                }
                for k in 1..=3 {
                    assert!(out.contains(&format!("step           step {k} of agent loop")), "{out}");
                }
                assert!(out.contains("checks         finish_reason, output_cap, reasoning_exhausted (all passed)"), "{out}");
                assert!(out.contains("checks         finish_reason, tool_call (all passed)"), "{out}");
                assert!(out.contains("checks         finish_reason, output_cap, tool_call, agent_loop (all passed)"), "{out}");
                assert!(out.contains("tool calls     get_weather\n") && out.contains("tool calls     get_time\n"), "{out}");
                let cached = warm.contains("(cached 0)");
                assert_eq!(cached, fault.is_some(), "the warm probe is served from the cache unless it is disabled: {warm}");
            }
            Some(Fault::EndlessReasoning) => {
                assert_eq!(verdicts.len(), 12, "{out}");
                let exhausted =
                    failed.iter().filter(|v| v.starts_with("error invalid_output: reasoning_exhausted: reasoning used the whole length limit")).count();
                assert_eq!((exhausted, failed.len()), (1, 1), "only the scenario that checks it fails:\n{out}");
            }
            Some(_) => {
                // The agent loop's first step fails, so it sends no second one.
                assert_eq!(verdicts.len(), 10, "{out}");
                let broken = failed.iter().filter(|v| v.starts_with("error invalid_output: tool_call:") && v.contains("arguments are truncated JSON")).count();
                assert_eq!((broken, failed.len()), (2, 2), "the tool call and the loop's first step fail:\n{out}");
            }
        }
    }
}
