//! The open-loop driver: one task per target×scenario. The n-th intended send time comes from
//! the arrival process alone, never from a response. When the target's in-flight cap is
//! reached the probe is dropped and counted, never delayed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::arrival::Arrival;
use crate::exec::{self, Probe};
use crate::recorder::RecorderHandle;
use crate::target::TargetRuntime;
use crate::workload::{Calibration, Sampler};

/// Tokio timers tick in whole milliseconds; the last stretch before a deadline is spent
/// yielding so the send happens within microseconds of its intended time.
const SPIN_WINDOW: Duration = Duration::from_millis(1);

/// Called with (target, in-flight count) whenever the count changes.
pub type InFlightHook = Arc<dyn Fn(&str, i64) + Send + Sync>;

/// What one schedule needs.
pub struct Stream {
    pub target: Arc<TargetRuntime>,
    pub scenario: Arc<str>,
    pub arrival: Box<dyn Arrival>,
    pub sampler: Sampler,
    pub max_in_flight: usize,
    /// The target's prompt-length calibration; learns from each probe's usage.
    pub calibration: Arc<Calibration>,
    /// `{run}-{target}-{scenario}`: probe ids are this plus `-{seq}`.
    pub id_prefix: String,
}

/// Shared by all schedules of a run.
#[derive(Clone)]
pub struct RunContext {
    pub recorder: RecorderHandle,
    /// Cancelled: stop scheduling new probes.
    pub stop: CancellationToken,
    /// Cancelled: end running probes now (`cancelled`).
    pub abort: CancellationToken,
    pub tracker: TaskTracker,
    pub on_in_flight: InFlightHook,
}

/// Runs one schedule until `ctx.stop` is cancelled.
pub async fn run(mut stream: Stream, ctx: RunContext) {
    let mut intended = Instant::now();
    for seq in 0.. {
        intended += stream.arrival.next_gap();
        // Draw the next probe before sleeping so its cost never shows up as schedule lag.
        let mut draw = stream.sampler.draw();
        draw.probe_id = format!("{}-{seq}", stream.id_prefix);
        tokio::select! {
            _ = sleep_until_precise(intended) => {}
            _ = ctx.stop.cancelled() => return,
        }
        ctx.recorder.scheduled();
        let probe = Probe { target: stream.target.clone(), scenario: stream.scenario.clone(), seq, draw, intended };
        dispatch(probe, stream.max_in_flight, stream.calibration.clone(), &ctx).await;
    }
}

async fn dispatch(probe: Probe, max_in_flight: usize, calibration: Arc<Calibration>, ctx: &RunContext) {
    let target = probe.target.clone();
    let in_flight = target.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
    if in_flight > max_in_flight {
        target.in_flight.fetch_sub(1, Ordering::AcqRel);
        ctx.recorder.record(exec::dropped(&probe)).await;
        return;
    }
    (ctx.on_in_flight)(&target.name, in_flight as i64);
    let ctx = ctx.clone();
    let words = probe.draw.words;
    ctx.tracker.clone().spawn(async move {
        let outcome = exec::execute(probe, &ctx.abort).await;
        if let (Ok(()), Some(usage)) = (&outcome.result, outcome.usage) {
            calibration.observe(words, usage.prompt_tokens);
        }
        let now = target.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        (ctx.on_in_flight)(&target.name, now as i64);
        ctx.recorder.record(outcome).await;
    });
}

/// Sleeps until `deadline`: a timer for the bulk, then yields for the last millisecond.
pub async fn sleep_until_precise(deadline: Instant) {
    if let Some(early) = deadline.checked_sub(SPIN_WINDOW) {
        if early > Instant::now() {
            tokio::time::sleep_until(early.into()).await;
        }
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}
