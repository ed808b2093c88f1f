//! Conversations (`turns:`) and prefix-cache pairs (`cache_pair:`) end to end against the mock
//! engine on loopback, through the scheduler every driver shares: later turns send the earlier
//! answers and are served from the prefix cache, every turn is counted per turn index, a pair's
//! warm probe is cached and its cold one is not (and neither under `cache_disabled`), and a
//! conversation cut short accounts for the turns it never sent.

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

const CONVERSATION: &str = "  - name: chat\n    turns:\n      - {input_tokens: 96, output_tokens: 12}\n      - {input_tokens: 24, output_tokens: 12}\n      - {input_tokens: 24, output_tokens: 12}\n      - {input_tokens: 24, output_tokens: 12}\n    think_time: 5ms\n";
const PAIR: &str = "  - name: pair\n    input_tokens: 256\n    output_tokens: 4\n    cache_pair: {prefix_tokens: 224}\n";

fn config(addr: std::net::SocketAddr, api: &str, scenarios: &str) -> Config {
    let yaml = format!(
        "targets:\n  - name: t\n    base_url: http://{addr}\n    api: {api}\n    model: mock-llama\nscenarios:\n{scenarios}slo: {{ttft: 5s, e2e: 20s, objective: 0.99}}\n"
    );
    llmprobe::app::loader::parse(&yaml, "t.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

/// What a test reads of each recorded probe.
#[derive(Debug, Clone)]
struct Seen {
    step: Option<Step>,
    sequence: Option<String>,
    ok: bool,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    cached: Option<u64>,
    trace: Option<[u8; 16]>,
}

fn seen(o: &Outcome, _: Option<&Sample>) -> Seen {
    Seen {
        step: o.step.as_ref().map(|s| s.step),
        sequence: o.step.as_ref().map(|s| s.sequence.to_string()),
        ok: o.is_success(),
        prompt_tokens: o.usage.map(|u| u.prompt_tokens),
        completion_tokens: o.usage.map(|u| u.completion_tokens),
        cached: o.usage.and_then(|u| u.cached_tokens),
        trace: o.trace.map(|t| t.trace_id),
    }
}

/// Runs `starts` sequences of the config's only scenario (closed loop, one worker) into the
/// metrics and a collecting sink.
async fn run(config: &Config, starts: u64, stop: Option<tokio_util::sync::CancellationToken>) -> (Arc<Metrics>, Vec<Seen>) {
    let metrics = Arc::new(Metrics::new(config));
    let collect = Arc::new(Collect::new(seen));
    let target = Arc::new(llmprobe::client::TargetRuntime::new(config.targets[0].clone()).unwrap());
    let scenario = config.scenarios[0].clone();
    let name = scenario.name.clone();
    let sampler = Sampler::uncalibrated(scenario, 7, target.config.api);
    let stream = Stream {
        endpoints: Arc::new(Endpoints::new(target)),
        draws: Mix::single(&name, sampler),
        pacing: Pacing::Closed { workers: 1 },
        id_prefix: "r".into(),
    };
    let sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), collect.clone()];
    let rule = StopRule { requests: Some(starts), ..StopRule::default() };
    match stop {
        Some(stop) => scheduler::drive_until(vec![stream], rule, sinks, config.slo_table(), stop).await.unwrap(),
        None => scheduler::drive(vec![stream], rule, sinks, config.slo_table()).await.unwrap(),
    };
    (metrics, collect.take())
}

#[tokio::test]
async fn a_conversation_sends_its_answers_back_and_later_turns_are_cached() {
    for api in ["openai-chat", "openai-completions", "openai-responses"] {
        // A mock of its own: the same seed draws the same prompts for every API.
        let (addr, stop) = start_mock(MockOptions { prompt_tokens_details: true, ..MockOptions::default() }).await;
        let config = config(addr, api, CONVERSATION);
        let (metrics, seen) = run(&config, 3, None).await;
        assert_eq!(seen.len(), 12, "{api}: three conversations of four turns: {seen:?}");
        assert!(seen.iter().all(|s| s.ok), "{api}: {seen:?}");
        let mut conversations: Vec<&str> = seen.iter().filter_map(|s| s.sequence.as_deref()).collect();
        conversations.dedup();
        assert_eq!(conversations.len(), 3, "{api}: each turn names its conversation: {seen:?}");
        for turns in seen.chunks(4) {
            let steps: Vec<Option<Step>> = turns.iter().map(|s| s.step).collect();
            assert_eq!(steps, [1, 2, 3, 4].map(|k| Some(Step::Turn(k))), "{api}: in order");
            for pair in turns.windows(2) {
                let (before, after) = (&pair[0], &pair[1]);
                // The next turn carries the earlier prompt and the answer the server gave.
                let carried = before.prompt_tokens.unwrap() + before.completion_tokens.unwrap();
                assert!(after.prompt_tokens.unwrap() > carried, "{api}: {before:?} then {after:?}");
                assert!(after.cached.unwrap() > 0, "{api}: a later turn is served from the prefix cache: {after:?}");
            }
            assert_eq!(turns[0].cached, Some(0), "{api}: a first turn starts fresh");
            // The prompt calibration learns from first turns only (later ones carry history).
            assert!(turns[0].prompt_tokens.unwrap() > 80, "{api}: {turns:?}");
        }
        let text = metrics.encode_openmetrics();
        let ts = ["target=\"t\"", "scenario=\"chat\""];
        assert_eq!(metric(&text, "llmprobe_requests_total", &[ts[0], ts[1], "outcome=\"success\""]), 12.0, "{api}:\n{text}");
        for turn in ["1", "2", "3", "4"] {
            let label = format!("turn=\"{turn}\"");
            let sent = metric(&text, "llmprobe_conversation_turns_total", &[ts[0], ts[1], &label]);
            assert_eq!(sent, 3.0, "{api} turn {turn}:\n{text}");
            assert_eq!(metric(&text, "llmprobe_conversation_ttft_seconds_count", &[ts[1], &label]), 3.0, "{api} turn {turn}");
        }
        assert_eq!(metric(&text, "llmprobe_conversation_cached_tokens_total", &[ts[1], "turn=\"1\""]), 0.0);
        assert!(metric(&text, "llmprobe_conversation_cached_tokens_total", &[ts[1], "turn=\"4\""]) > 0.0, "{text}");
        assert_eq!(metric(&text, "llmprobe_sequence_probes_cut_total", &[ts[1]]), 0.0);
        // Bounded labels: a four-turn conversation has series for turns 1 to 4 only.
        assert!(!text.contains("turn=\"5\"") && !text.contains("turn=\"8+\""));
        stop.cancel();
    }
}

#[tokio::test]
async fn a_conversation_is_one_trace_with_a_span_per_turn() {
    let (addr, stop) = start_mock(MockOptions::default()).await;
    let config = config(addr, "openai-chat", CONVERSATION);
    let metrics = Arc::new(Metrics::new(&config));
    let collect = Arc::new(Collect::new(seen));
    let target = Arc::new(llmprobe::client::TargetRuntime::new(config.targets[0].clone()).unwrap());
    let sampler = Sampler::uncalibrated(config.scenarios[0].clone(), 3, target.config.api);
    let stream = Stream {
        endpoints: Arc::new(Endpoints::new(target)),
        draws: Mix::single("chat", sampler),
        pacing: Pacing::Closed { workers: 1 },
        id_prefix: "r".into(),
    };
    let (recorder, recorded) = llmprobe::pipeline::recorder::spawn_unlogged(vec![metrics, collect.clone()], config.slo_table());
    let ctx = llmprobe::pipeline::scheduler::RunContext {
        recorder,
        stop: Default::default(),
        abort: Default::default(),
        tracker: Default::default(),
        on_in_flight: Arc::new(|_: &str, _| {}),
        trace_ratio: Some(1.0),
    };
    let running = scheduler::start(vec![stream], StopRule { requests: Some(2), ..StopRule::default() }, ctx.clone(), None).unwrap();
    running.stopped().await.unwrap();
    ctx.tracker.close();
    ctx.tracker.wait().await;
    drop(ctx);
    recorded.await.unwrap();
    let seen = collect.take();
    assert_eq!(seen.len(), 8, "{seen:?}");
    for turns in seen.chunks(4) {
        assert!(turns.iter().all(|s| s.trace.is_some() && s.trace == turns[0].trace), "one trace per conversation: {turns:?}");
    }
    assert_ne!(seen[0].trace, seen[4].trace);
    stop.cancel();
}

#[tokio::test]
async fn a_cache_pair_warm_probe_is_cached_unless_the_cache_is_disabled() {
    for fault in [None, Some(Fault::CacheDisabled)] {
        let faults = fault.map(|f| (f, 1.0)).into_iter().collect();
        let (addr, stop) = start_mock(MockOptions { prompt_tokens_details: true, fault_rates: faults, ..MockOptions::default() }).await;
        let config = config(addr, "openai-chat", PAIR);
        let (metrics, seen) = run(&config, 4, None).await;
        assert_eq!(seen.len(), 8, "four pairs: {seen:?}");
        for pair in seen.chunks(2) {
            assert_eq!((pair[0].step, pair[1].step), (Some(Step::Cold), Some(Step::Warm)), "{pair:?}");
            assert_eq!(pair[0].cached, Some(0), "the cold probe's prefix is fresh: {pair:?}");
            match fault {
                None => assert!(pair[1].cached.unwrap() >= 128, "the warm probe reuses the cold one's prefix: {pair:?}"),
                Some(_) => assert_eq!(pair[1].cached, Some(0), "no reuse: {pair:?}"),
            }
        }
        let text = metrics.encode_openmetrics();
        let warm = ["scenario=\"pair\"", "cache=\"warm\""];
        assert_eq!(metric(&text, "llmprobe_prefix_cache_ttft_seconds_count", &warm), 4.0, "{text}");
        assert_eq!(metric(&text, "llmprobe_prefix_cache_ttft_seconds_count", &["scenario=\"pair\"", "cache=\"cold\""]), 4.0);
        assert!(metric(&text, "llmprobe_prefix_cache_input_tokens_total", &warm) > 0.0);
        let cached = metric(&text, "llmprobe_prefix_cache_cached_tokens_total", &warm);
        match fault {
            None => assert!(cached > 0.0, "{text}"),
            // The alert's condition: warm probes run, their cached tokens stay at 0.
            Some(_) => assert_eq!(cached, 0.0, "{text}"),
        }
        stop.cancel();
    }
}

#[tokio::test]
async fn a_conversation_cut_short_counts_its_unsent_turns() {
    // Every first turn fails: the three turns after it are never sent, and say so.
    let (addr, stop) = start_mock(MockOptions { fault_rates: vec![(Fault::Http500, 1.0)], ..MockOptions::default() }).await;
    let failing = config(addr, "openai-chat", CONVERSATION);
    let (metrics, seen) = run(&failing, 5, None).await;
    stop.cancel();
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.iter().all(|s| !s.ok && s.step == Some(Step::Turn(1))));
    let text = metrics.encode_openmetrics();
    let ts = ["target=\"t\"", "scenario=\"chat\""];
    assert_eq!(metric(&text, "llmprobe_sequence_probes_cut_total", &[ts[1], "reason=\"error\""]), 15.0, "{text}");
    assert_eq!(metric(&text, "llmprobe_probes_scheduled_total", &ts), 5.0);
    assert_eq!(metric(&text, "llmprobe_requests_total", &ts), 5.0);
    assert_eq!(metric(&text, "llmprobe_conversation_turns_total", &[ts[1], "turn=\"1\"", "result=\"error\""]), 5.0);

    // A run stopped while conversations think: their next turns are cut as `stopped`.
    let (addr, stop) = start_mock(MockOptions::default()).await;
    let long_think = CONVERSATION.replace("think_time: 5ms", "think_time: 10m");
    let config = config(addr, "openai-chat", &long_think);
    let halt = tokio_util::sync::CancellationToken::new();
    let stopper = {
        let halt = halt.clone();
        // Stops the run once the first turn is recorded.
        Arc::new(Collect::new(move |_: &Outcome, _: Option<&Sample>| halt.cancel()))
    };
    let metrics = Arc::new(Metrics::new(&config));
    let target = Arc::new(llmprobe::client::TargetRuntime::new(config.targets[0].clone()).unwrap());
    let sampler = Sampler::uncalibrated(config.scenarios[0].clone(), 5, target.config.api);
    let stream = Stream {
        endpoints: Arc::new(Endpoints::new(target)),
        draws: Mix::single("chat", sampler),
        pacing: Pacing::Closed { workers: 1 },
        id_prefix: "r".into(),
    };
    let sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), stopper];
    scheduler::drive_until(vec![stream], StopRule { requests: Some(100), ..StopRule::default() }, sinks, config.slo_table(), halt).await.unwrap();
    stop.cancel();
    let text = metrics.encode_openmetrics();
    let sent = metric(&text, "llmprobe_requests_total", &ts);
    let cut = metric(&text, "llmprobe_sequence_probes_cut_total", &[ts[1], "reason=\"stopped\""]);
    assert_eq!(sent, 1.0, "one turn ran before the stop:\n{text}");
    assert_eq!(sent + cut, 4.0, "every planned turn is sent or cut:\n{text}");
}
