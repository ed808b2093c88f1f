//! Agent tool loops (`agent:`) end to end against the mock engine on loopback, through the
//! scheduler every driver shares: each step sends the calls the server made and the tools'
//! canned results back, the loop ends with an answer, every step and call is checked and
//! counted, and the faults a loop meets (arguments cut at step k, calls that never stop, an
//! answer before the expected calls) fail the right step with the right check.

use crate::common;

use std::sync::Arc;

use common::{metric, start_mock};
use llmprobe::config::Config;
use llmprobe::mock::{Fault, MockOptions};
use llmprobe::pipeline::scheduler::{self, Pacing, StopRule, Stream};
use llmprobe::probe::measure::Sample;
use llmprobe::probe::outcome::Outcome;
use llmprobe::probe::step::Step;
use llmprobe::replicas::Endpoints;
use llmprobe::sink::{Collect, Metrics, Sink};
use llmprobe::workload::{Mix, Sampler};

/// Two tools, expected in order, then an answer: three steps.
const AGENT: &str = "  - name: agent
    input_tokens: 32
    output_tokens: 48
    agent:
      max_steps: MAX
      tool_choice: CHOICE
      expect_calls: [get_weather, get_time]
      tools:
        - name: get_weather
          parameters: {type: object, properties: {city: {type: string}}, required: [city]}
          result: {temperature: 18}
        - name: get_time
          parameters: {type: object, properties: {city: {type: string}}, required: [city]}
          result: '14:05'
";

fn agent(max_steps: u32, choice: &str) -> String {
    AGENT.replace("MAX", &max_steps.to_string()).replace("CHOICE", choice)
}

fn config(addr: std::net::SocketAddr, api: &str, headers: &str, scenarios: &str) -> Config {
    let yaml = format!(
        "targets:\n  - name: t\n    base_url: http://{addr}\n    api: {api}\n    model: mock-llama\n{headers}scenarios:\n{scenarios}slo: {{ttft: 5s, e2e: 20s, objective: 0.99}}\n"
    );
    llmprobe::app::loader::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// What a test reads of each recorded step.
#[derive(Debug, Clone)]
struct Seen {
    step: Option<Step>,
    ok: bool,
    class: Option<&'static str>,
    failed: Vec<&'static str>,
    detail: String,
    calls: Vec<String>,
    prompt_tokens: Option<u64>,
}

fn seen(o: &Outcome, _: Option<&Sample>) -> Seen {
    Seen {
        step: o.step.as_ref().map(|s| s.step),
        ok: o.is_success(),
        class: o.error_class().map(|c| c.as_str()),
        failed: o.checks.as_ref().map(|c| c.failed.iter().map(|f| f.check.as_str()).collect()).unwrap_or_default(),
        detail: o.result.as_ref().err().map(|f| f.detail.clone()).unwrap_or_default(),
        calls: o.checks.as_ref().map(|c| c.calls.clone()).unwrap_or_default(),
        prompt_tokens: o.usage.map(|u| u.prompt_tokens),
    }
}

/// Runs `starts` loops of the config's only scenario (closed loop, one worker).
async fn run(config: &Config, starts: u64) -> (String, Vec<Seen>) {
    let metrics = Arc::new(Metrics::new(config));
    let collect = Arc::new(Collect::new(seen));
    let target = Arc::new(llmprobe::client::TargetRuntime::new(config.targets[0].clone()).unwrap());
    let scenario = config.scenarios[0].clone();
    let name = scenario.name.clone();
    let stream = Stream {
        endpoints: Arc::new(Endpoints::new(target.clone())),
        draws: Mix::single(&name, Sampler::uncalibrated(scenario, 5, target.config.api)),
        pacing: Pacing::Closed { workers: 1 },
        id_prefix: "r".into(),
    };
    let sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), collect.clone()];
    scheduler::drive(vec![stream], StopRule { requests: Some(starts), ..StopRule::default() }, sinks, config.slo_table()).await.unwrap();
    (metrics.encode_openmetrics(), collect.take())
}

const TS: [&str; 2] = ["target=\"t\"", "scenario=\"agent\""];

#[tokio::test]
async fn a_loop_sends_calls_and_results_back_until_the_answer() {
    for api in ["openai-chat", "openai-responses"] {
        for choice in ["auto", "required"] {
            let (addr, stop) = start_mock(MockOptions { prompt_tokens_details: true, ..MockOptions::default() }).await;
            let config = config(addr, api, "", &agent(4, choice));
            let (text, seen) = run(&config, 2).await;
            let at = format!("{api} {choice}");
            assert_eq!(seen.len(), 6, "{at}: two loops of three steps: {seen:?}");
            assert!(seen.iter().all(|s| s.ok), "{at}: {seen:?}");
            for steps in seen.chunks(3) {
                assert_eq!(steps.iter().map(|s| s.step).collect::<Vec<_>>(), [1, 2, 3].map(|k| Some(Step::Agent(k))), "{at}");
                let calls: Vec<&[String]> = steps.iter().map(|s| &s.calls[..]).collect();
                assert_eq!(calls, [&["get_weather".to_owned()][..], &["get_time".to_owned()], &[]], "{at}");
                // Each step carries the loop so far: its calls and the tools' results.
                assert!(steps[1].prompt_tokens > steps[0].prompt_tokens && steps[2].prompt_tokens > steps[1].prompt_tokens, "{at}: {steps:?}");
            }
            assert_eq!(metric(&text, "llmprobe_agent_loops_total", &[TS[1], "result=\"answered\""]), 2.0, "{at}:\n{text}");
            assert_eq!(metric(&text, "llmprobe_agent_loop_duration_seconds_count", &[TS[1]]), 2.0, "{at}");
            for step in ["1", "2", "3"] {
                let label = format!("step=\"{step}\"");
                assert_eq!(metric(&text, "llmprobe_agent_steps_total", &[TS[1], &label]), 2.0, "{at} step {step}:\n{text}");
                assert_eq!(metric(&text, "llmprobe_agent_step_ttft_seconds_count", &[TS[1], &label]), 2.0, "{at} step {step}");
            }
            for tool in ["get_weather", "get_time"] {
                assert_eq!(metric(&text, "llmprobe_agent_tool_calls_total", &[TS[1], &format!("tool=\"{tool}\"")]), 2.0, "{at}");
            }
            assert_eq!(metric(&text, "llmprobe_agent_tool_calls_total", &[TS[1], "tool=\"undeclared\""]), 0.0);
            assert_eq!(metric(&text, "llmprobe_check_failures_total", &[TS[1]]), 0.0, "{at}");
            // Bounded labels: a loop of at most four steps has series for steps 1 to 4 only.
            assert!(text.contains("step=\"4\"") && !text.contains("step=\"5\""));
            stop.cancel();
        }
    }
}

#[tokio::test]
async fn arguments_cut_at_step_two_fail_that_step_and_cut_the_loop() {
    for api in ["openai-chat", "openai-responses"] {
        let (addr, stop) = start_mock(MockOptions::default()).await;
        let headers = "    headers: {x-mock-fault: bad_tool_call, x-mock-fault-step: '2'}\n";
        let config = config(addr, api, headers, &agent(4, "auto"));
        let (text, seen) = run(&config, 2).await;
        assert_eq!(seen.len(), 4, "{api}: two loops of two steps: {seen:?}");
        for steps in seen.chunks(2) {
            assert!(steps[0].ok, "{api}: step 1 is whole: {steps:?}");
            assert_eq!((steps[1].ok, steps[1].class), (false, Some("invalid_output")), "{api}: {steps:?}");
            assert_eq!(steps[1].failed, ["tool_call"], "{api}: {steps:?}");
            assert!(steps[1].detail.contains("get_time: arguments are truncated JSON"), "{api}: {}", steps[1].detail);
        }
        assert_eq!(metric(&text, "llmprobe_agent_loops_total", &[TS[1], "result=\"failed\""]), 2.0, "{api}:\n{text}");
        assert_eq!(metric(&text, "llmprobe_agent_loops_total", &[TS[1], "result=\"answered\""]), 0.0);
        // The step that was due after the failed one is accounted for as cut.
        assert_eq!(metric(&text, "llmprobe_sequence_probes_cut_total", &[TS[1], "reason=\"error\""]), 2.0, "{api}:\n{text}");
        assert_eq!(metric(&text, "llmprobe_agent_steps_total", &[TS[1], "step=\"2\"", "result=\"error\""]), 2.0);
        assert_eq!(metric(&text, "llmprobe_check_failures_total", &[TS[1], "check=\"tool_call\""]), 2.0);
        stop.cancel();
    }
}

#[tokio::test]
async fn a_loop_that_keeps_calling_hits_its_step_limit() {
    // Two expected calls in two steps leave no step to answer in: the last step still calls.
    let (addr, stop) = start_mock(MockOptions::default()).await;
    let yaml = agent(2, "auto").replace("      expect_calls: [get_weather, get_time]\n", "");
    let config = config(addr, "openai-chat", "", &yaml);
    let (text, seen) = run(&config, 1).await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].ok, "{seen:?}");
    assert_eq!(seen[1].failed, ["agent_loop"], "{seen:?}");
    assert!(seen[1].detail.contains("still calling tools at step 2, the last of max_steps 2"), "{}", seen[1].detail);
    assert_eq!(metric(&text, "llmprobe_agent_loops_total", &[TS[1], "result=\"step_limit\""]), 1.0, "{text}");
    // Nothing was due after the last step.
    assert_eq!(metric(&text, "llmprobe_sequence_probes_cut_total", &[TS[1]]), 0.0);
    stop.cancel();
}

#[tokio::test]
async fn an_answer_before_the_expected_calls_fails_the_loop() {
    // The mock calls the first tool, then answers; the loop expects a third call first.
    let (addr, stop) = start_mock(MockOptions::default()).await;
    let yaml = agent(4, "auto").replace("expect_calls: [get_weather, get_time]", "expect_calls: [get_weather, get_time, get_weather]");
    let config = config(addr, "openai-chat", "", &yaml);
    let (text, seen) = run(&config, 1).await;
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[2].failed, ["agent_loop"], "{seen:?}");
    assert!(seen[2].detail.contains("answered after 2 of 3 expected calls (next expected: get_weather)"), "{}", seen[2].detail);
    assert_eq!(metric(&text, "llmprobe_agent_loops_total", &[TS[1], "result=\"failed\""]), 1.0, "{text}");
    // An answer ends the loop: nothing was due.
    assert_eq!(metric(&text, "llmprobe_sequence_probes_cut_total", &[TS[1]]), 0.0);
    stop.cancel();
}

#[tokio::test]
async fn every_call_is_checked_against_its_tool() {
    // Broken arguments on every request: the loop's first step fails, as a tool-call regression
    // in a release would make it.
    let (addr, stop) = start_mock(MockOptions { fault_rates: vec![(Fault::BadToolCall, 1.0)], ..MockOptions::default() }).await;
    let config = config(addr, "openai-chat", "", &agent(4, "required"));
    let (text, seen) = run(&config, 1).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].failed, ["tool_call"], "{seen:?}");
    assert!(seen[0].detail.contains("get_weather: arguments are truncated JSON"), "{}", seen[0].detail);
    assert_eq!(metric(&text, "llmprobe_agent_loops_total", &[TS[1], "result=\"failed\""]), 1.0, "{text}");
    assert_eq!(metric(&text, "llmprobe_agent_tool_calls_total", &[TS[1], "tool=\"get_weather\""]), 1.0);
    stop.cancel();
}
