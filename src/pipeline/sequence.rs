//! The later probes of a sequence (a conversation's turns, a cache pair's warm probe), sent on
//! the task of its first one once that ended: each `gap` after the previous answer, to the same
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
use crate::probe::step::Step;
use crate::protocol::{Collected, Exchange};
use crate::replicas::Endpoints;
use crate::workload::{Calibration, Follow};

/// Why the rest of a sequence was not sent (the `reason` label).
pub const CUT_ERROR: &str = "error";
pub const CUT_STOPPED: &str = "stopped";

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
    let mut last = Last { ok: outcome.is_success(), end: outcome.timeline.end, prompt, answer };
    ctx.recorder.record(outcome).await;
    let mut history: Vec<Exchange> = Vec::new();
    let total = follow.steps.len();
    for (i, mut draw) in follow.steps.into_iter().enumerate() {
        let unsent = (total - i) as u64;
        if !last.ok || ctx.stop.is_cancelled() {
            return cut(&ctx, &target, &scenario, unsent);
        }
        let intended = crate::probe::deadline::after(last.end, follow.gap);
        tokio::select! {
            () = crate::probe::deadline::wait_until(intended) => {}
            () = ctx.stop.cancelled() => return cut(&ctx, &target, &scenario, unsent),
        }
        if let Some(Step::Turn(_)) = draw.step {
            history.push(Exchange { prompt: std::mem::take(&mut last.prompt), answer: last.answer.take().map(|a| a.text).unwrap_or_default() });
            draw.history = history.clone();
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
        // A turn's prompt carries the earlier turns: its usage says nothing of its own words
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
        last = Last { ok: outcome.is_success(), end: outcome.timeline.end, prompt, answer };
        ctx.recorder.record(outcome).await;
    }
}

/// The previous probe of a sequence, as the next one needs it.
struct Last {
    ok: bool,
    end: Instant,
    prompt: String,
    answer: Option<Collected>,
}

/// The sequence ends here: its `unsent` probes are counted as cut, stopped when the run is
/// stopping, else because a probe failed.
fn cut(ctx: &RunContext, target: &TargetRuntime, scenario: &str, unsent: u64) {
    let reason = if ctx.stop.is_cancelled() || ctx.abort.is_cancelled() { CUT_STOPPED } else { CUT_ERROR };
    ctx.recorder.cut(&target.name, scenario, reason, unsent);
}
