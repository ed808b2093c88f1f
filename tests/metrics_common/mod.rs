//! Hand-built configs and outcomes shared by the metrics, summary and server tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::config::{Config, LengthSpec, ProbeSettings, Scenario, Slo, Target, Timeouts};
use llmprobe::probe::measure::{Sample, measure};
use llmprobe::probe::outcome::{ErrorClass, Failure, Outcome, TextFrame, Timeline};
use llmprobe::protocol::{ProtocolKind, Usage};

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn slo() -> Slo {
    Slo { ttft: Some(ms(500)), tpot: Some(ms(50)), e2e: None, objective: 0.99 }
}

pub fn target(name: &str) -> Target {
    Target::new(name, "http://127.0.0.1:8000", ProtocolKind::OpenaiChat).unwrap().with_timeouts(Timeouts {
        connect: ms(1000),
        ttft: ms(5000),
        idle: ms(5000),
        total: ms(60_000),
    })
}

pub fn scenario(name: &str, rate: f64) -> Scenario {
    Scenario::synthetic(name, rate, LengthSpec::Fixed(128), LengthSpec::Fixed(4))
}

/// One target `local`, one scenario `chat` at 2/s, TTFT 500 ms and TPOT 50 ms thresholds.
pub fn config() -> Config {
    Config {
        listen: "127.0.0.1:9090".parse().unwrap(),
        probe: ProbeSettings {
            seed: Some(1),
            max_in_flight: 8,
            shutdown_grace: ms(1000),
            discovery_interval: ms(60_000),
            shard: Default::default(),
            prober: None,
        },
        targets: vec![target("local")],
        scenarios: vec![scenario("chat", 2.0)],
        slo: slo(),
        tracing: Default::default(),
        jsonl: None,
        sources: vec![],
        bench: None,
        detect: Default::default(),
        warnings: vec![],
    }
}

/// A probe intended at `t0`, sent `lag_us` later, with text frames at the given ms after send.
pub fn outcome(t0: Instant, seq: u64, lag_us: u64, frames_ms: &[u64], end_ms: u64) -> Outcome {
    let sent = t0 + Duration::from_micros(lag_us);
    let text_frames = frames_ms.iter().map(|&f| TextFrame { at: sent + ms(f), content_bytes: 4, reasoning_bytes: 0, tokens: None }).collect();
    Outcome {
        target: Arc::from("local"),
        scenario: Arc::from("chat"),
        replica: None,
        seq,
        request_id: format!("req-{seq}"),
        probe_id: format!("run-local-chat-{seq}"),
        dataset_index: None,
        prompt_sha256: String::new(),
        model: Arc::from("m"),
        requested_input_tokens: 128,
        requested_output_tokens: 4,
        timeline: Timeline {
            intended: t0,
            sent,
            first_byte: Some(sent + ms(1)),
            text_frames,
            text_frames_beyond_cap: 0,
            end: sent + ms(end_ms),
            first_emitted_ns: None,
            first_token_stamped: false,
        },
        http_status: Some(200),
        usage: None,
        api_counter: None,
        server_timing: Default::default(),
        streamed: true,
        content_encoding: None,
        finish_reason: Some("length".to_owned()),
        response_model: None,
        result: Ok(()),
        trace: None,
        checks: None,
        step: None,
    }
}

pub fn with_usage(mut o: Outcome, prompt: u64, completion: u64) -> Outcome {
    o.usage = Some(Usage::counts(prompt, completion));
    o
}

pub fn failed(mut o: Outcome, class: ErrorClass, detail: &str) -> Outcome {
    o.result = Err(Failure::new(class, detail));
    o
}

/// A dropped probe: never sent (`sent == intended`), no status.
pub fn dropped(t0: Instant, seq: u64) -> Outcome {
    let mut o = failed(outcome(t0, seq, 0, &[], 0), ErrorClass::InFlightCap, "in-flight cap reached");
    o.http_status = None;
    o.timeline.first_byte = None;
    o
}

/// The golden set: success with usage (cached prompt tokens and reasoning reported), success
/// counted from frames, a TTFT timeout, a drop.
pub fn golden_outcomes(t0: Instant) -> Vec<Outcome> {
    let mut reported = with_usage(outcome(t0, 0, 2000, &[100, 120, 150], 160), 128, 4);
    reported.usage = reported.usage.map(|u| Usage { cached_tokens: Some(96), reasoning_tokens: Some(1), ..u });
    vec![
        reported,
        outcome(t0 + ms(500), 1, 500, &[700, 800], 850),
        failed(outcome(t0 + ms(1000), 2, 1000, &[], 5000), ErrorClass::TimeoutTtft, "no token within 5s"),
        dropped(t0 + ms(1500), 3),
    ]
}

/// An Ollama-style success: 8 tokens from the API's counter in 4 frames, server phase times.
pub fn with_server_report(mut o: Outcome) -> Outcome {
    o.api_counter = Some(Usage::counts(20, 8));
    o.server_timing = llmprobe::protocol::ServerTiming { prefill: Some(ms(40)), decode: Some(ms(35)), total: Some(ms(80)), load: Some(ms(2)), queue: None };
    o
}

/// Measures with the test SLO, as the recorder does.
pub fn sample(o: &Outcome) -> Option<Sample> {
    measure(o, &slo())
}

/// Series that exist only after replica events: a discovered replica, a rollout's canary
/// verdict and an outlier check.
pub fn record_replica_series(metrics: &llmprobe::sink::Metrics) {
    metrics.set_replica_info("local", "vllm-0", "0.11.0", "node-a", "zone-1");
    metrics.set_replica_counts("local", 2, 2);
    let verdict = llmprobe::detect::compare::Comparison {
        regressed: false,
        judged: true,
        effect: Some(llmprobe::detect::Estimate { value: 1.02, low: 0.98, high: 1.06 }),
        log_evidence: -1.5,
        threshold: 6.0,
        new_samples: 40,
        reference_samples: 40,
    };
    metrics.replicas.set_canary("local", "0.12.0", "ttft", &verdict);
    metrics.replicas.set_outlier("local", "vllm-0", "ttft", false);
}

/// Series that exist only once a behaviour check ran: a probe whose answer ran to the cap
/// instead of stopping by EOS, and a temperature-0 answer whose fingerprint changed.
pub fn record_check_series(metrics: &llmprobe::sink::Metrics, t0: Instant) {
    use llmprobe::checks::{Check, CheckFailure, CheckReport};
    use llmprobe::sink::Sink;
    let report = CheckReport {
        failed: vec![CheckFailure { check: Check::NaturalStop, detail: "ended by \"length\" after 4 tokens, not by EOS (\"stop\") within 2".into() }],
        ran: vec![Check::NaturalStop],
        fingerprint: Some("00112233445566ff".into()),
        changed_from: Some("8899aabbccddeeff".into()),
        calls: Vec::new(),
    };
    let mut o = failed(outcome(t0 + ms(3000), 9, 200, &[40, 50, 60, 70], 80), ErrorClass::InvalidOutput, "natural_stop: ended by length");
    o.checks = Some(Box::new(report));
    metrics.record(&o, None);
}

/// Series that exist only for conversations, cache pairs and agent loops: a two-turn
/// conversation (the second turn served partly from the prefix cache), a cache pair, a
/// conversation cut short, a turn that moved replicas, and a two-step agent loop that called a
/// tool and answered. Their target and scenarios are their own, so no single probe's
/// series moves.
pub fn record_sequence_series(metrics: &llmprobe::sink::Metrics, t0: Instant) {
    use llmprobe::probe::step::{Step, StepOf};
    use llmprobe::sink::{Event, Sink};
    let probe = |scenario: &str, seq: u64, step: Step, cached: u64| {
        let mut o = with_usage(outcome(t0 + ms(3000 + 100 * seq), seq, 300, &[40, 60], 80), 128, 2);
        o.usage = o.usage.map(|u| Usage { cached_tokens: Some(cached), ..u });
        o.target = Arc::from("local-sequences");
        o.scenario = Arc::from(scenario);
        o.step = Some(StepOf { step, sequence: Arc::from(format!("run-local-sequences-{scenario}-0").as_str()) });
        o
    };
    for o in [
        probe("conversation", 10, Step::Turn(1), 0),
        probe("conversation", 11, Step::Turn(2), 64),
        probe("cache-pair", 12, Step::Cold, 0),
        probe("cache-pair", 13, Step::Warm, 112),
    ] {
        metrics.record(&o, sample(&o).as_ref());
    }
    for (seq, k, calls) in [(14, 1, vec!["get_weather".to_owned()]), (15, 2, Vec::new())] {
        let mut o = probe("agent", seq, Step::Agent(k), 0);
        let ran = vec![llmprobe::checks::Check::ToolCall, llmprobe::checks::Check::AgentLoop];
        o.checks = Some(Box::new(llmprobe::checks::CheckReport { ran, calls, ..Default::default() }));
        metrics.record(&o, sample(&o).as_ref());
    }
    metrics.event(&Event::AgentLoop { target: "local-sequences", scenario: "agent", result: "answered", steps: 2, seconds: 0.58 });
    metrics.event(&Event::SequenceCut { target: "local-sequences", scenario: "conversation", reason: "error", probes: 2 });
    metrics.event(&Event::ReplicaMoved { target: "local-sequences", scenario: "conversation" });
}
