//! `probe --once`: one probe per target×scenario, one after another, each printed as a timeline.
//! Each is a scheduler run of its own: closed pacing with one worker, stopped after one request,
//! recorded into a sink that renders it.

use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::TargetRuntime;
use crate::client::tokenize::calibrate_with_tokenize;
use crate::config::{Config, Slo};
use crate::pipeline::scheduler::{self, Pacing, StopRule, Stream};
use crate::probe::measure::Sample;
use crate::probe::outcome::Outcome;
use crate::replicas::Endpoints;
use crate::sink::Collect;
use crate::util::logsafe::escape_control;
use crate::workload::{Calibration, Mix, Sampler};

/// Runs the probes one after another and returns the printed report; `Ok(false)` if any failed.
pub async fn run(config: &Config, out: &mut String) -> anyhow::Result<bool> {
    let mut all_ok = true;
    let run_id = crate::probe::trace::new_run_id();
    for target in &config.targets {
        let target = Arc::new(TargetRuntime::new(target.clone())?);
        // Discover the model first so the timeline shows the probe, not the discovery.
        if let Err(failure) = target.model().await {
            let _ = writeln!(out, "target={}: model discovery failed: {} ({})", target.name, failure.class.as_str(), escape_control(&failure.detail));
        }
        // Calibrate prompt length before timing anything (no effect on the timelines).
        let calibration = Arc::new(Calibration::new(target.config.api));
        let fit = match calibrate_with_tokenize(&target, &calibration).await {
            Ok(fit) => fit,
            Err(e) => {
                let _ = writeln!(out, "target={}: no /tokenize calibration ({}); using the prior", target.name, escape_control(&e));
                calibration.fit()
            }
        };
        let _ = writeln!(out, "target={} prompt calibration: {:.2} tokens/word + {:.1} ({})", target.name, fit.per_word, fit.overhead, fit.source.as_str());
        for scenario in &config.scenarios {
            let sampler = Sampler::new(scenario.clone(), config.probe.seed.unwrap_or_else(rand::random), calibration.clone());
            let stream = Stream {
                endpoints: Arc::new(Endpoints::new(target.clone())),
                draws: Mix::single(&scenario.name, sampler),
                pacing: Pacing::Closed { workers: 1 },
                id_prefix: format!("{run_id}-{}-{}", target.name, scenario.name),
            };
            let slo = config.slo_table();
            let shown = Arc::new(Collect::new(move |o, sample| {
                let mut text = String::new();
                render(o, sample, slo.get(&o.target, &o.scenario), &mut text);
                (o.is_success(), text)
            }));
            let one = StopRule { requests: Some(1), ..StopRule::default() };
            scheduler::drive(vec![stream], one, vec![shown.clone()], config.slo_table()).await?;
            for (ok, text) in shown.take() {
                all_ok &= ok;
                out.push_str(&text);
            }
        }
    }
    Ok(all_ok)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Prints the timeline of one outcome, times relative to the intended send time. Text from the
/// server (model, finish reason, error detail) is printed with its control characters escaped,
/// so that it cannot add lines to the report or drive the terminal.
pub fn render(o: &Outcome, sample: Option<&Sample>, slo: &Slo, out: &mut String) {
    let t = &o.timeline;
    let at = |i: Instant| format!("+{:>10}", ms(i.saturating_duration_since(t.intended)));
    let _ = writeln!(out, "target={} scenario={} model={} id={} request_id={}", o.target, o.scenario, escape_control(&o.model), o.probe_id, o.request_id);
    match o.dataset_index {
        Some(i) => {
            let _ = writeln!(out, "  requested      dataset prompt #{i}, output={} tokens", o.requested_output_tokens);
        }
        None => {
            let _ = writeln!(out, "  requested      input≈{} tokens, output={} tokens", o.requested_input_tokens, o.requested_output_tokens);
        }
    }
    if let Some(step) = &o.step {
        let place = match step.step {
            crate::probe::step::Step::Turn(k) => format!("turn {k} of conversation"),
            crate::probe::step::Step::Cold => "cold probe of cache pair".to_owned(),
            crate::probe::step::Step::Warm => "warm probe of cache pair".to_owned(),
            crate::probe::step::Step::Agent(k) => format!("step {k} of agent loop"),
        };
        let _ = writeln!(out, "  step           {place} {}", step.sequence);
    }
    let _ = writeln!(out, "  prompt sha256  {}", o.prompt_sha256);
    let _ = writeln!(out, "  intended       {}", at(t.intended));
    let _ = writeln!(out, "  sent           {}   schedule lag {}", at(t.sent), ms(t.schedule_lag()));
    if let Some(fb) = t.first_byte {
        let _ = writeln!(out, "  first byte     {}   HTTP {}", at(fb), o.http_status.unwrap_or(0));
    }
    for (i, f) in t.text_frames.iter().enumerate() {
        let label = if i == 0 { "first token" } else { "text frame" };
        let kind = if f.reasoning_bytes > 0 { format!(" reasoning {} B", f.reasoning_bytes) } else { String::new() };
        // Whether the times are the frames' arrival on the host or when they were read.
        let clock = match i {
            0 if t.first_token_stamped => "   (arrival)",
            0 => "   (read)",
            _ => "",
        };
        let _ = writeln!(out, "  {label:<14} {}   #{:<4} content {} B{kind}{clock}", at(f.at), i + 1, f.content_bytes);
    }
    let _ = writeln!(out, "  end            {}", at(t.end));
    match o.usage {
        Some(u) => {
            let _ = writeln!(out, "  usage          {}", counts(&u));
        }
        None => {
            let _ = writeln!(out, "  usage          (not reported)");
        }
    }
    if let Some(c) = o.api_counter {
        let _ = writeln!(out, "  api counters   {}", counts(&c));
    }
    for (phase, d) in o.server_timing.phases() {
        let _ = writeln!(out, "  server {phase:<8}{:>12}", ms(d));
    }
    if !o.streamed {
        let _ = writeln!(out, "  (not streamed: E2E only; TTFT, TPOT and ITL are not observed)");
    }
    if let Some(r) = &o.finish_reason {
        let _ = writeln!(out, "  finish reason  {}", escape_control(r));
    }
    if let Some(r) = &o.checks {
        let ran: Vec<&str> = r.ran.iter().map(|c| c.as_str()).collect();
        let failed: Vec<&str> = r.failed.iter().map(|f| f.check.as_str()).collect();
        let verdict = if failed.is_empty() { "all passed".to_owned() } else { format!("failed {}", failed.join(", ")) };
        let _ = writeln!(out, "  checks         {} ({verdict})", if ran.is_empty() { "(none ran)".to_owned() } else { ran.join(", ") });
        for f in &r.failed {
            let _ = writeln!(out, "    {:<20} {}", f.check.as_str(), escape_control(&f.detail));
        }
        if !r.calls.is_empty() {
            // Declared names only (others are `undeclared`): nothing the server wrote.
            let _ = writeln!(out, "  tool calls     {}", r.calls.join(", "));
        }
        if let Some(fp) = &r.fingerprint {
            let change = r.changed_from.as_ref().map(|b| format!(" (changed from {b}: a behaviour change)")).unwrap_or_default();
            let _ = writeln!(out, "  fingerprint    {fp}{change}");
        }
    }
    let _ = writeln!(out, "  verdict        {}", verdict(o, sample, slo));
}

fn verdict(o: &Outcome, sample: Option<&Sample>, slo: &Slo) -> String {
    let Err(failure) = &o.result else {
        let Some(s) = sample else { return "success".into() };
        let check = |name: &str, value: Option<Duration>, limit: Option<Duration>| match (value, limit) {
            (Some(v), Some(l)) => format!(" {name} {} {} {}", ms(v), if v <= l { "<=" } else { ">" }, ms(l)),
            (Some(v), None) => format!(" {name} {}", ms(v)),
            _ => String::new(),
        };
        return format!(
            "success, {} output tokens (from {}), goodput={}:{}{}{}",
            s.output_tokens,
            s.token_source.as_str(),
            if s.goodput { "yes" } else { "no" },
            if s.streamed { check("ttft", Some(s.ttft), slo.ttft) } else { String::new() },
            check("tpot", s.tpot, slo.tpot),
            check("e2e", Some(s.e2e), slo.e2e),
        );
    };
    format!("error {}: {}", failure.class.as_str(), escape_control(&failure.detail))
}

/// Token counts, with the details the server reported: prompt tokens from its cache,
/// reasoning tokens of the completion.
fn counts(u: &crate::protocol::Usage) -> String {
    let cached = u.cached_tokens.map_or_else(String::new, |n| format!(" (cached {n})"));
    let reasoning = u.reasoning_tokens.map_or_else(String::new, |n| format!(" (reasoning {n})"));
    format!("prompt={}{cached} completion={}{reasoning}", u.prompt_tokens, u.completion_tokens)
}
