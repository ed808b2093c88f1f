//! The open-loop driver. Every target×scenario schedule draws its intended send times from its
//! own arrival process, never from a response; one dispatcher keeps the schedules in a min-heap
//! of next intended times and sends the earliest first. It runs on a thread of its own (see
//! `spawn_dispatcher`) so probes streaming on the main runtime cannot delay a send, and probes run
//! on the main runtime. When a target's in-flight cap is reached the probe is dropped and
//! counted, never delayed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use crate::deadline::wait_until;

use crate::arrival::Arrival;
use crate::exec::{self, Probe};
use crate::health::{Health, panic_message};
use crate::recorder::RecorderHandle;
use crate::target::TargetRuntime;
use crate::workload::{Calibration, Sampler};

/// Tokio timers tick in whole milliseconds; the last stretch before a deadline is waited out
/// more finely so the send happens within microseconds of its intended time.
const FINE_WINDOW: Duration = Duration::from_millis(1);
/// Probes are handed to the main runtime this long before their intended time: waking one of
/// its worker threads takes a fraction of a millisecond, which would otherwise be lag.
const HANDOVER_LEAD: Duration = Duration::from_millis(1);

/// Called with (target, in-flight count) whenever the count changes.
pub type InFlightHook = Arc<dyn Fn(&str, i64) + Send + Sync>;

/// What one schedule needs.
pub struct Stream {
    /// The target's endpoints: `base_url`, or its discovered replicas.
    pub endpoints: Arc<crate::replicas::Endpoints>,
    pub scenario: Arc<str>,
    pub arrival: Box<dyn Arrival>,
    pub sampler: Sampler,
    pub max_in_flight: usize,
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

/// A schedule's next probe, prepared before its intended time comes.
struct Next {
    seq: u64,
    intended: Instant,
    draw: crate::workload::Draw,
}

impl Stream {
    /// Draws the probe after `prev` (the intended time of the previous one).
    fn next(&mut self, seq: u64, prev: Instant) -> Next {
        let intended = crate::deadline::after(prev, self.arrival.next_gap());
        // Drawing happens before the wait, so its cost never shows up as schedule lag.
        let mut draw = self.sampler.draw();
        draw.probe_id = format!("{}-{seq}", self.id_prefix);
        Next { seq, intended, draw }
    }
}

/// A handed-over probe waiting for its send time: the dispatcher fires `gate` at `at`.
struct Gate {
    at: Instant,
    order: u64,
    gate: tokio::sync::oneshot::Sender<()>,
}

impl PartialEq for Gate {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}
impl Eq for Gate {}
impl PartialOrd for Gate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Gate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// Runs every schedule until `ctx.stop` is cancelled; probes are spawned on `probes`.
/// Call it on a thread of its own (`spawn_dispatcher`): it blocks that thread for the last
/// fraction of a millisecond before each handover and each send, so probes wait for their
/// send time parked (a oneshot the dispatcher fires), never spinning.
pub async fn run(mut streams: Vec<Stream>, ctx: RunContext, probes: tokio::runtime::Handle) {
    let start = Instant::now();
    let mut next: Vec<Next> = streams.iter_mut().map(|s| s.next(0, start)).collect();
    let mut due: BinaryHeap<Reverse<(Instant, usize)>> = next.iter().enumerate().map(|(i, n)| Reverse((n.intended, i))).collect();
    let mut gates: BinaryHeap<Reverse<Gate>> = BinaryHeap::new();
    let mut order = 0u64;
    loop {
        let handover = due.peek().map(|Reverse((at, _))| at.checked_sub(HANDOVER_LEAD).unwrap_or(*at));
        let fire = gates.peek().map(|Reverse(g)| g.at);
        let Some(wake) = [handover, fire].into_iter().flatten().min() else { return };
        tokio::select! {
            _ = sleep_until_exact(wake) => {}
            _ = ctx.stop.cancelled() => return,
        }
        let now = Instant::now();
        while gates.peek().is_some_and(|Reverse(g)| g.at <= now) {
            if let Some(Reverse(g)) = gates.pop() {
                let _ = g.gate.send(());
            }
        }
        while let Some(&Reverse((deadline, i))) = due.peek() {
            if deadline.checked_sub(HANDOVER_LEAD).unwrap_or(deadline) > now {
                break;
            }
            due.pop();
            let stream = &mut streams[i];
            let following = stream.next(next[i].seq + 1, deadline);
            due.push(Reverse((following.intended, i)));
            let Next { seq, intended, draw } = std::mem::replace(&mut next[i], following);
            // One endpoint, or every replica at the same moment (`replicas.rate: per_replica`).
            let targets = stream.endpoints.pick();
            // `repeat_n` moves the draw into the last send: only a fan-out copies the prompt.
            let draws = std::iter::repeat_n(draw, targets.len());
            for (target, draw) in targets.into_iter().zip(draws) {
                ctx.recorder.scheduled(&target.name, &stream.scenario, target.replica.as_deref());
                let probe = Probe { target, scenario: stream.scenario.clone(), seq, draw, intended };
                if let Some(gate) = dispatch(probe, stream.max_in_flight, stream.sampler.calibration().clone(), &ctx, &probes).await {
                    order += 1;
                    gates.push(Reverse(Gate { at: intended, order, gate }));
                }
            }
        }
    }
}

/// Starts `run` on a dedicated thread with its own single-threaded runtime; the returned
/// receiver completes when it has stopped.
/// If the scheduler itself panics (a bug), the panic is counted and the scheduler is marked
/// down, so `/readyz` fails instead of the prober going quiet while looking ready.
pub fn spawn_dispatcher(streams: Vec<Stream>, ctx: RunContext, health: Option<Arc<Health>>) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let probes = tokio::runtime::Handle::current();
    let (done, finished) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    std::thread::Builder::new().name("llmprobe-scheduler".into()).spawn(move || {
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(run(streams, ctx, probes))));
        if let (Err(panic), Some(h)) = (result, health) {
            h.internal_error("scheduler", &panic_message(panic.as_ref()));
            h.set_down("scheduler", "the scheduler stopped after an internal error");
        }
        let _ = done.send(());
    })?;
    Ok(finished)
}

/// Starts a probe (or drops it at the cap); returns the gate that releases its send.
async fn dispatch(
    probe: Probe,
    max_in_flight: usize,
    calibration: Arc<Calibration>,
    ctx: &RunContext,
    probes: &tokio::runtime::Handle,
) -> Option<tokio::sync::oneshot::Sender<()>> {
    let target = probe.target.clone();
    let in_flight = target.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
    if in_flight > max_in_flight {
        target.in_flight.fetch_sub(1, Ordering::AcqRel);
        ctx.recorder.record(exec::dropped(&probe)).await;
        return None;
    }
    (ctx.on_in_flight)(&target.name, in_flight as i64);
    let slot = InFlightSlot { target, hook: ctx.on_in_flight.clone() };
    let ctx = ctx.clone();
    let words = probe.draw.words;
    let (gate, send_at) = tokio::sync::oneshot::channel::<()>();
    let intended = probe.intended;
    ctx.tracker.clone().spawn_on(
        async move {
            // A gate dropped without firing (the scheduler stopped) falls back to the timer.
            let send_at = async move {
                if send_at.await.is_err() {
                    wait_until(intended).await;
                }
            };
            let outcome = exec::execute_when(probe, &ctx.abort, send_at).await;
            if let (Ok(()), Some(usage)) = (&outcome.result, outcome.usage) {
                calibration.observe(words, usage.prompt_tokens);
            }
            drop(slot);
            ctx.recorder.record(outcome).await;
        },
        probes,
    );
    Some(gate)
}

/// One taken in-flight slot of a target, given back when dropped: whatever ends the probe
/// task (its end, a panic, the runtime shutting down), the slot cannot leak.
struct InFlightSlot {
    target: Arc<TargetRuntime>,
    hook: InFlightHook,
}

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        let now = self.target.in_flight.fetch_sub(1, Ordering::AcqRel).saturating_sub(1);
        (self.hook)(&self.target.name, now as i64);
    }
}

/// Sleeps until `deadline`: a timer for the bulk, then a blocking sleep (microsecond
/// resolution) for the last millisecond. Only for a thread that runs nothing else.
async fn sleep_until_exact(deadline: Instant) {
    if let Some(early) = deadline.checked_sub(FINE_WINDOW) {
        if early > Instant::now() {
            tokio::time::sleep_until(early.into()).await;
        }
    }
    if let Some(rest) = deadline.checked_duration_since(Instant::now()) {
        std::thread::sleep(rest);
    }
}
