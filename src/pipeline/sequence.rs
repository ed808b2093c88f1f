//! The later probes of a sequence (a conversation's turns, a cache pair's warm probe, an agent
//! loop's steps), sent on the task of its first one once that ended: each `gap` after the previous answer, to the same
//! target runtime (so the same replica and its kept-alive connections), every probe counted
//! scheduled and recorded like any other. What a sequence does not send is counted too: a
//! failed probe or a stopped run cuts it short, and its unsent probes are reported
//! (`RecorderHandle::cut`), so planned = sent + cut.

use std::sync::Arc;
use std::time::Instant;

use crate::client::TargetRuntime;
use crate::pipeline::context::{InFlightSlot, RunContext};
use crate::pipeline::exec::{self, Probe, SendAt};
use crate::probe::outcome::Outcome;
use crate::probe::step::{LOOP_ANSWERED, LOOP_FAILED, LOOP_STEP_LIMIT, LOOP_STOPPED, Step};
use crate::protocol::{Call, Collected, Message};
use crate::replicas::Endpoints;
use crate::workload::{Calibration, Follow};

/// Why the rest of a sequence was not sent (the `reason` label).
const CUT_ERROR: &str = "error";
const CUT_STOPPED: &str = "stopped";

/// A sequence's first probe, ended: what its followers need of it.
pub struct First {
    pub outcome: Outcome,
    /// Its answer, where it was kept (a conversation's turn that has a next one).
    pub answer: Option<Collected>,
    /// Its prompt, for a conversation's history.
    pub prompt: String,
    pub target: Arc<TargetRuntime>,
}

/// Records the first probe, then sends the ones that follow it, one after another.
pub async fn follow(first: First, follow: Follow, endpoints: Arc<Endpoints>, calibration: Arc<Calibration>, ctx: RunContext) {
    let First { outcome, answer, prompt, mut target } = first;
    let scenario = outcome.scenario.clone();
    let seq = outcome.seq;
    let sequence: Arc<str> = outcome.step.as_ref().map_or_else(|| Arc::from(outcome.probe_id.as_str()), |s| s.sequence.clone());
    let trace = outcome.trace;
    let began = outcome.timeline.sent;
    let mut last = Last { ok: outcome.is_success(), end: outcome.timeline.end, prompt, answer, steps: 1 };
    ctx.recorder.record(outcome).await;
    let mut history: Vec<Message> = Vec::new();
    let total = follow.steps.len();
    let agent = follow.steps.first().and_then(|d| d.agent.clone());
    for (i, mut draw) in follow.steps.into_iter().enumerate() {
        // An agent loop goes on only while the model calls tools; what it did not send after a
        // failure is the one step that was due (the rest depends on answers never given).
        let unsent = if agent.is_some() { u64::from(last.called() || last.answer.is_none()) } else { (total - i) as u64 };
        if let (Some(_), true) = (&agent, last.ok && !last.called()) {
            return loop_ended(&ctx, &target, &scenario, LOOP_ANSWERED, &last, began);
        }
        if !last.ok || ctx.stop.is_cancelled() {
            loop_ended_early(&ctx, &target, &scenario, agent.is_some(), &last, began);
            return cut(&ctx, &target, &scenario, unsent);
        }
        let intended = crate::probe::deadline::after(last.end, follow.gap);
        tokio::select! {
            () = crate::probe::deadline::wait_until(intended) => {}
            () = ctx.stop.cancelled() => {
                loop_ended_early(&ctx, &target, &scenario, agent.is_some(), &last, began);
                return cut(&ctx, &target, &scenario, unsent);
            }
        }
        match (draw.step, &agent) {
            (Some(Step::Turn(_)), _) => {
                history.push(Message::User(std::mem::take(&mut last.prompt)));
                history.push(Message::Assistant { text: last.answer.take().map(|a| a.text).unwrap_or_default(), calls: Vec::new() });
                draw.history = history.clone();
            }
            (Some(Step::Agent(k)), Some(agent)) => {
                if history.is_empty() {
                    history.push(Message::User(std::mem::take(&mut last.prompt)));
                }
                let answer = last.answer.take().unwrap_or_default();
                continue_loop(&mut history, agent, k - 1, answer);
                draw.history = history.clone();
            }
            _ => {}
        }
        // The replica left the probed set (discovery): the rest goes to one that is probed.
        if target.replica.is_some() && !endpoints.probes(&target) {
            if let Some(next) = endpoints.pick().into_iter().next() {
                ctx.recorder.moved(&target.name, &scenario);
                target = next;
            }
        }
        draw.probe_id = format!("{sequence}.{}", i + 2);
        draw.sequence = Some(sequence.clone());
        draw.trace = trace;
        let prompt = if draw.keep_answer { draw.prompt.clone() } else { String::new() };
        // A later prompt carries the earlier turns: its usage says nothing of its own words
        // (0 words: not observed).
        let words = if draw.history.is_empty() { draw.words } else { 0 };
        ctx.recorder.scheduled(&target.name, &scenario, target.replica.as_deref());
        // Counted in flight, never dropped: the cap applies where a sequence starts.
        let slot = InFlightSlot::take(&target, usize::MAX, &ctx.on_in_flight);
        let probe = Probe { target: target.clone(), scenario: scenario.clone(), seq, draw, intended, trace_ratio: ctx.trace_ratio };
        let (outcome, answer) = exec::execute_keeping(probe, &ctx.abort, SendAt::Timer).await;
        drop(slot);
        if let (Ok(()), Some(usage)) = (&outcome.result, outcome.usage) {
            calibration.observe(words, usage.prompt_tokens);
        }
        last = Last { ok: outcome.is_success(), end: outcome.timeline.end, prompt, answer, steps: last.steps + 1 };
        ctx.recorder.record(outcome).await;
    }
    // Every step was sent: the loop ended with its last one.
    if agent.is_some() {
        let result = if !last.ok && last.called() {
            LOOP_STEP_LIMIT
        } else if last.ok {
            LOOP_ANSWERED
        } else {
            LOOP_FAILED
        };
        loop_ended(&ctx, &target, &scenario, result, &last, began);
    }
}

/// Adds an agent step's answer to the loop's history: its text and calls, then each call's
/// canned result. A call the server gave no id gets one of its own (9 letters and digits, the
/// form the strictest chat templates accept).
fn continue_loop(history: &mut Vec<Message>, agent: &crate::config::Agent, step: u32, answer: Collected) {
    let calls: Vec<Call> = answer
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let id = if c.id.is_empty() { format!("call{:05}", step as usize * crate::protocol::MAX_CALLS + i) } else { c.id };
            Call { id, name: c.name, arguments: c.arguments }
        })
        .collect();
    let results: Vec<Message> = calls
        .iter()
        .map(|c| Message::ToolResult { call_id: c.id.clone(), content: agent.tool(&c.name).map_or_else(String::new, |t| t.result.clone()) })
        .collect();
    history.push(Message::Assistant { text: answer.text, calls });
    history.extend(results);
}

/// An agent loop that ended before its steps ran out: stopped with the run, else failed.
fn loop_ended_early(ctx: &RunContext, target: &TargetRuntime, scenario: &str, agent: bool, last: &Last, began: Instant) {
    if agent {
        let stopping = ctx.stop.is_cancelled() || ctx.abort.is_cancelled();
        loop_ended(ctx, target, scenario, if stopping && last.ok { LOOP_STOPPED } else { LOOP_FAILED }, last, began);
    }
}

fn loop_ended(ctx: &RunContext, target: &TargetRuntime, scenario: &str, result: &'static str, last: &Last, began: Instant) {
    let seconds = last.end.saturating_duration_since(began).as_secs_f64();
    ctx.recorder.agent_loop(&target.name, scenario, result, last.steps, seconds);
}

/// The previous probe of a sequence, as the next one needs it.
struct Last {
    ok: bool,
    end: Instant,
    prompt: String,
    answer: Option<Collected>,
    /// Probes of the sequence sent so far.
    steps: u32,
}

impl Last {
    /// Its answer called a tool (an agent loop goes on).
    fn called(&self) -> bool {
        self.answer.as_ref().is_some_and(|a| !a.tool_calls.is_empty())
    }
}

/// The sequence ends here: its `unsent` probes are counted as cut, stopped when the run is
/// stopping, else because a probe failed.
fn cut(ctx: &RunContext, target: &TargetRuntime, scenario: &str, unsent: u64) {
    if unsent == 0 {
        return;
    }
    let reason = if ctx.stop.is_cancelled() || ctx.abort.is_cancelled() { CUT_STOPPED } else { CUT_ERROR };
    ctx.recorder.cut(&target.name, scenario, reason, unsent);
}
