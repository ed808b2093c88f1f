//! The one request scheduler. Every driver (the continuous prober, `probe --once`, bench sweeps,
//! `workload accuracy`) hands it streams and a stop rule and gets every outcome through a
//! recorder (`recorder.rs`, which measures it); drivers differ only in pacing, stop rule and the
//! recorder's sinks.
//!
//! - Open pacing: each stream draws its intended send times from its own arrival process, never
//!   from a response. One dispatcher keeps the open streams in a min-heap of next intended times
//!   and sends the earliest first. It runs on a thread of its own (see `start`) so probes
//!   streaming on the main runtime cannot delay a send; probes run on the main runtime, parked
//!   at a gate the dispatcher opens at the send time, writing the request itself where the
//!   probe has a connection for it (`handover`). When a target's in-flight cap is reached the
//!   probe is dropped and counted at its send time, never delayed (`Admission`, the only cap).
//! - Closed pacing: `workers` loops on the main runtime, each sending its next request the moment
//!   its previous one ended (a request is due as soon as it is drawn).
//! - Stop rule: a request count over the run, a duration (no new request after it; running ones
//!   finish), a hard timeout (running requests end as `cancelled`); or none of them: the run
//!   lasts until `RunContext::stop` is cancelled (the prober).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::client::TargetRuntime;
use crate::config::SloTable;
pub use crate::pipeline::context::{InFlightHook, RunContext};
use crate::pipeline::context::{InFlightSlot, SlotCell};
use crate::pipeline::exec::{self, Probe, SendAt};
use crate::pipeline::recorder::{self, RecorderHandle};
use crate::pipeline::sequence;
use crate::probe::arrival::Arrival;
use crate::probe::handover;
use crate::replicas::Endpoints;
use crate::sink::Sink;
use crate::util::health::{Health, panic_message};
use crate::workload::{Calibration, Draw, Mix};

/// Tokio timers tick in whole milliseconds and wake up to a tick or two late; the last stretch
/// before a deadline is waited out more finely so the send happens within microseconds of its
/// intended time. It must be longer than the timer's lateness, or a late timer makes a late send.
const FINE_WINDOW: Duration = Duration::from_millis(3);
/// Probes are handed to the main runtime this long before their intended time, so that each
/// has its request built and its connection open when the time comes even while the runtime's
/// threads are busy with streamed frames for a few milliseconds (then the dispatcher writes it).
const HANDOVER_LEAD: Duration = Duration::from_millis(20);

/// How a stream's requests are timed.
pub enum Pacing {
    /// Intended send times from `arrival`; a request due while its target has `cap` requests in
    /// flight is dropped and counted.
    Open { arrival: Box<dyn Arrival>, cap: usize },
    /// `workers` loops, each sending its next request when its previous one ends.
    Closed { workers: usize },
}

/// One schedule: where it sends, what, and when.
pub struct Stream {
    /// The target's endpoints: `base_url`, or its discovered replicas.
    pub endpoints: Arc<Endpoints>,
    pub draws: Mix,
    pub pacing: Pacing,
    /// Probe ids are this plus `-{seq}` (the prober's: `{run}-{target}-{scenario}`).
    pub id_prefix: String,
}

/// When a run stops; the default (nothing set) runs until `RunContext::stop` is cancelled.
#[derive(Debug, Clone, Copy, Default)]
pub struct StopRule {
    /// Requests (sent or dropped) over the whole run.
    pub requests: Option<u64>,
    /// No request is due after this long.
    pub duration: Option<Duration>,
    /// Hard limit: requests still running are cancelled when it passes.
    pub timeout: Option<Duration>,
}

/// Why a finite run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppedBy {
    Requests,
    Duration,
    Timeout,
}

/// The stop rule's request count and deadline, shared by every stream of a run.
struct Budget {
    requests: Option<u64>,
    deadline: Option<Instant>,
    taken: AtomicU64,
}

impl Budget {
    fn new(rule: &StopRule, start: Instant) -> Self {
        Budget { requests: rule.requests, deadline: rule.duration.map(|d| start + d), taken: AtomicU64::new(0) }
    }

    /// Takes one request due at `at`; `false` once the stop rule allows no more.
    fn take(&self, at: Instant) -> bool {
        if self.deadline.is_some_and(|d| at >= d) {
            return false;
        }
        match self.requests {
            None => true,
            Some(n) => self.taken.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| (t < n).then_some(t + 1)).is_ok(),
        }
    }

    fn spent(&self) -> bool {
        self.requests.is_some_and(|n| self.taken.load(Ordering::Acquire) >= n)
    }
}

/// What the dispatcher hands back when it stops: one entry per stream given to `start`.
type Stopped = Result<Vec<Option<Resume>>, String>;

/// A started run; see [`RunningSchedules::stopped`].
pub struct RunningSchedules {
    dispatcher: Option<tokio::sync::oneshot::Receiver<Stopped>>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    budget: Arc<Budget>,
}

impl RunningSchedules {
    /// Waits until no stream will send again (the stop rule, or `stop`); probes handed to the
    /// tracker may still be running. `Err` when the dispatcher stopped after an internal error.
    pub async fn stopped(self) -> Result<(), String> {
        self.stopped_resumable().await.0
    }

    /// As `stopped`, and where each open stream stood (indexed like the streams given to
    /// `start`; `None` for a closed-loop stream, one the stop rule ended, or after a panic), so a
    /// later run can go on with the same schedule (`start_resuming`).
    pub async fn stopped_resumable(self) -> (Result<(), String>, Vec<Option<Resume>>) {
        for w in self.workers {
            let _ = w.await;
        }
        match self.dispatcher {
            Some(d) => match d.await.unwrap_or(Ok(Vec::new())) {
                Ok(positions) => (Ok(()), positions),
                Err(e) => (Err(e), Vec::new()),
            },
            None => (Ok(()), Vec::new()),
        }
    }
}

/// Where an open stream stood when its dispatcher stopped: its arrival process, the intended
/// time and sequence number of its next probe (not yet sent), and its probe id prefix. A run
/// started with it sends that probe at that time, so the schedule goes on with no gap and no
/// restart.
pub struct Resume {
    arrival: Box<dyn Arrival>,
    seq: u64,
    intended: Instant,
    id_prefix: String,
}

/// Starts every stream: the open ones on the dispatcher thread, a task per closed-loop worker.
/// If the dispatcher itself panics (a bug), the panic is counted and the scheduler is marked
/// down in `health`, so `/readyz` fails instead of the prober going quiet while looking ready.
pub fn start(streams: Vec<Stream>, rule: StopRule, ctx: RunContext, health: Option<Arc<Health>>) -> std::io::Result<RunningSchedules> {
    start_resuming(streams.into_iter().map(|s| (s, None)).collect(), rule, ctx, health)
}

/// As `start`; an open stream given a `Resume` goes on from there (its arrival process, next
/// send time and probe ids) instead of starting a schedule of its own.
pub fn start_resuming(
    streams: Vec<(Stream, Option<Resume>)>,
    rule: StopRule,
    ctx: RunContext,
    health: Option<Arc<Health>>,
) -> std::io::Result<RunningSchedules> {
    let begin = Instant::now();
    let budget = Arc::new(Budget::new(&rule, begin));
    let mut open = Vec::new();
    let mut workers = Vec::new();
    let count = streams.len();
    for (index, (s, resume)) in streams.into_iter().enumerate() {
        match s.pacing {
            Pacing::Open { arrival, cap } => {
                let (arrival, id_prefix, from) = match resume {
                    Some(r) => (r.arrival, r.id_prefix, Some((r.seq, r.intended))),
                    None => (arrival, s.id_prefix, None),
                };
                open.push(OpenStream { endpoints: s.endpoints, draws: s.draws, arrival, cap, id_prefix, index, from });
            }
            Pacing::Closed { workers: n } => {
                let stream = Arc::new(ClosedStream { endpoints: s.endpoints, draws: Mutex::new(s.draws), seq: AtomicU64::new(0), id_prefix: s.id_prefix });
                for _ in 0..n {
                    workers.push(ctx.tracker.spawn(closed_worker(stream.clone(), budget.clone(), ctx.clone())));
                }
            }
        }
    }
    let dispatcher = if open.is_empty() { None } else { Some(spawn_dispatcher(open, count, begin, budget.clone(), ctx, health)?) };
    Ok(RunningSchedules { dispatcher, workers, budget })
}

/// Runs `streams` to `rule` with a recorder of its own handing every outcome to `sinks`, and
/// returns once every request has been recorded (the finite drivers: bench, `--once`, accuracy).
pub async fn drive(streams: Vec<Stream>, rule: StopRule, sinks: Vec<Arc<dyn Sink>>, slo: SloTable) -> anyhow::Result<StoppedBy> {
    drive_until(streams, rule, sinks, slo, CancellationToken::new()).await
}

/// As `drive`, and the caller may end the run early by cancelling `stop`: no new request is
/// due after it, running ones finish and are recorded (`gate --until-verdict`). An early stop
/// reads as `StoppedBy::Duration`.
pub async fn drive_until(streams: Vec<Stream>, rule: StopRule, sinks: Vec<Arc<dyn Sink>>, slo: SloTable, stop: CancellationToken) -> anyhow::Result<StoppedBy> {
    let (recorder, recorded) = recorder::spawn_unlogged(sinks, slo);
    let ctx =
        RunContext { recorder, stop, abort: CancellationToken::new(), tracker: TaskTracker::new(), on_in_flight: Arc::new(|_: &str, _| {}), trace_ratio: None };
    let timer = rule.timeout.map(|t| {
        let (stop, abort) = (ctx.stop.clone(), ctx.abort.clone());
        tokio::spawn(async move {
            tokio::time::sleep(t).await;
            stop.cancel();
            abort.cancel();
        })
    });
    let running = start(streams, rule, ctx.clone(), None)?;
    let budget = running.budget.clone();
    let dispatched = running.stopped().await;
    ctx.tracker.close();
    ctx.tracker.wait().await;
    if let Some(t) = timer {
        t.abort();
    }
    let timed_out = ctx.abort.is_cancelled();
    drop(ctx);
    recorded.await?;
    dispatched.map_err(|e| anyhow::anyhow!("the scheduler stopped after an internal error: {e}"))?;
    Ok(if timed_out {
        StoppedBy::Timeout
    } else if budget.spent() {
        StoppedBy::Requests
    } else {
        StoppedBy::Duration
    })
}

/// An open-loop stream on the dispatcher.
struct OpenStream {
    endpoints: Arc<Endpoints>,
    draws: Mix,
    arrival: Box<dyn Arrival>,
    cap: usize,
    id_prefix: String,
    /// Its index among the streams given to `start`.
    index: usize,
    /// Resumed: the sequence number and intended time of its first probe.
    from: Option<(u64, Instant)>,
}

/// A schedule's next probe, prepared before its intended time comes.
struct Next {
    seq: u64,
    intended: Instant,
    scenario: Arc<str>,
    draw: Draw,
}

impl OpenStream {
    /// Draws the probe after `prev` (the intended time of the previous one); `None` once the
    /// stop rule allows no more.
    fn next(&mut self, seq: u64, prev: Instant, budget: &Budget) -> Option<Next> {
        let intended = crate::probe::deadline::after(prev, self.arrival.next_gap());
        self.draw_at(seq, intended, budget)
    }

    /// The first probe: where a resumed stream stood, else one gap after `begin`.
    fn first(&mut self, begin: Instant, budget: &Budget) -> Option<Next> {
        match self.from.take() {
            Some((seq, intended)) => self.draw_at(seq, intended, budget),
            None => self.next(0, begin, budget),
        }
    }

    fn draw_at(&mut self, seq: u64, intended: Instant, budget: &Budget) -> Option<Next> {
        if !budget.take(intended) {
            return None;
        }
        // Drawing happens before the wait, so its cost never shows up as schedule lag.
        let (scenario, mut draw) = self.draws.draw();
        draw.probe_id = format!("{}-{seq}", self.id_prefix);
        Some(Next { seq, intended, scenario, draw })
    }
}

/// A handed-over probe waiting for its send time: the dispatcher opens its gate at `at`.
struct Gate {
    at: Instant,
    order: u64,
    /// `None` once opened.
    opener: Option<handover::Opener>,
    admission: Admission,
}

/// What the dispatcher does for a probe at its send time, before opening its gate: count it
/// scheduled and take its in-flight slot, so both count from the send time, not the hand-over.
struct Admission {
    target: Arc<TargetRuntime>,
    scenario: Arc<str>,
    cap: usize,
    /// Filled with the probe's slot; the probe empties it when it ends.
    slot: SlotCell,
    recorder: RecorderHandle,
    on_in_flight: InFlightHook,
}

impl Admission {
    /// Counts the probe scheduled and takes its slot; `false`: the cap is reached (the probe
    /// is refused, and counted as dropped when it records that).
    fn admit(&self) -> bool {
        self.recorder.scheduled(&self.target.name, &self.scenario, self.target.replica.as_deref());
        let Some(slot) = InFlightSlot::take(&self.target, self.cap, &self.on_in_flight) else { return false };
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(slot);
        true
    }
}

impl Gate {
    /// At the send time: the probe is admitted and its gate opened, or it is refused.
    fn open(mut self) {
        if let Some(opener) = self.opener.take() {
            if self.admission.admit() { opener.open() } else { opener.refuse() }
        }
    }
}

impl Drop for Gate {
    /// A gate never opened (the dispatcher stopped, or panicked) is admitted now and abandoned:
    /// the probe keeps its send time itself, and is counted like every other.
    fn drop(&mut self) {
        if let Some(opener) = self.opener.take() {
            if !self.admission.admit() {
                opener.refuse();
            }
        }
    }
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

/// Runs the open streams until each is done (the stop rule) or `ctx.stop` is cancelled; probes
/// are spawned on `probes`. Call it on a thread of its own (`spawn_dispatcher`): it blocks that
/// thread for the last few milliseconds (`FINE_WINDOW`) before each handover and each send, so
/// probes wait for their send time parked (a gate the dispatcher opens), never spinning.
async fn dispatch(
    mut streams: Vec<OpenStream>,
    count: usize,
    begin: Instant,
    budget: Arc<Budget>,
    ctx: RunContext,
    probes: tokio::runtime::Handle,
) -> Vec<Option<Resume>> {
    let mut next: Vec<Option<Next>> = streams.iter_mut().map(|s| s.first(begin, &budget)).collect();
    let mut due: BinaryHeap<Reverse<(Instant, usize)>> = next.iter().enumerate().filter_map(|(i, n)| Some(Reverse((n.as_ref()?.intended, i)))).collect();
    let mut gates: BinaryHeap<Reverse<Gate>> = BinaryHeap::new();
    let mut order = 0u64;
    loop {
        let handover = due.peek().map(|Reverse((at, _))| at.checked_sub(HANDOVER_LEAD).unwrap_or(*at));
        let fire = gates.peek().map(|Reverse(g)| g.at);
        let Some(wake) = [handover, fire].into_iter().flatten().min() else { return Vec::new() };
        tokio::select! {
            _ = sleep_until_exact(wake) => {}
            _ = ctx.stop.cancelled() => return positions(streams, next, count),
        }
        let now = Instant::now();
        while gates.peek().is_some_and(|Reverse(g)| g.at <= now) {
            if let Some(Reverse(g)) = gates.pop() {
                g.open();
            }
        }
        while let Some(&Reverse((deadline, i))) = due.peek() {
            if deadline.checked_sub(HANDOVER_LEAD).unwrap_or(deadline) > now {
                break;
            }
            due.pop();
            let stream = &mut streams[i];
            let Some(Next { seq, intended, scenario, draw }) = next[i].take() else { continue };
            next[i] = stream.next(seq + 1, deadline, &budget);
            if let Some(following) = &next[i] {
                due.push(Reverse((following.intended, i)));
            }
            // One endpoint, or every replica at the same moment (`replicas.rate: per_replica`).
            let targets = stream.endpoints.pick();
            // `repeat_n` moves the draw into the last send: only a fan-out copies the prompt.
            let draws = std::iter::repeat_n(draw, targets.len());
            for (target, draw) in targets.into_iter().zip(draws) {
                let slot = SlotCell::default();
                let admission = Admission {
                    target: target.clone(),
                    scenario: scenario.clone(),
                    cap: stream.cap,
                    slot: slot.clone(),
                    recorder: ctx.recorder.clone(),
                    on_in_flight: ctx.on_in_flight.clone(),
                };
                let probe = Probe { target, scenario: scenario.clone(), seq, draw, intended, trace_ratio: ctx.trace_ratio };
                let (opener, gate) = handover::gate();
                let parts = StreamParts { calibration: stream.draws.calibration().clone(), endpoints: stream.endpoints.clone() };
                ctx.tracker.spawn_on(run_probe(probe, SendAt::Gate(gate), slot, parts, ctx.clone()), &probes);
                order += 1;
                gates.push(Reverse(Gate { at: intended, order, opener: Some(opener), admission }));
            }
        }
    }
}

/// Where each stream stood at a stop: the probe it had drawn but not handed over is the first
/// of a resumed run (handed-over ones run in this one).
fn positions(streams: Vec<OpenStream>, next: Vec<Option<Next>>, count: usize) -> Vec<Option<Resume>> {
    let mut out: Vec<Option<Resume>> = std::iter::repeat_with(|| None).take(count).collect();
    for (stream, next) in streams.into_iter().zip(next) {
        if let (Some(n), Some(slot)) = (next, out.get_mut(stream.index)) {
            *slot = Some(Resume { arrival: stream.arrival, seq: n.seq, intended: n.intended, id_prefix: stream.id_prefix });
        }
    }
    out
}

/// Starts `dispatch` on a dedicated thread with its own single-threaded runtime; the returned
/// receiver completes when it has stopped (`Err`: it panicked).
fn spawn_dispatcher(
    streams: Vec<OpenStream>,
    count: usize,
    begin: Instant,
    budget: Arc<Budget>,
    ctx: RunContext,
    health: Option<Arc<Health>>,
) -> std::io::Result<tokio::sync::oneshot::Receiver<Stopped>> {
    let probes = tokio::runtime::Handle::current();
    let (done, finished) = tokio::sync::oneshot::channel();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    std::thread::Builder::new().name("llmprobe-scheduler".into()).spawn(move || {
        let wakeups = crate::probe::deadline::prefer_prompt_wakeups();
        log_wakeups_once(wakeups);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(dispatch(streams, count, begin, budget, ctx, probes))));
        let result = result.map_err(|panic| panic_message(panic.as_ref()));
        if let (Err(message), Some(h)) = (&result, health) {
            h.internal_error("scheduler", message);
            h.set_down("scheduler", "the scheduler stopped after an internal error");
        }
        let _ = done.send(result);
    })?;
    Ok(finished)
}

/// Says once per process how the dispatcher wakes (a bench starts one per point): the schedule
/// lag it can hold under load depends on it.
fn log_wakeups_once(wakeups: crate::probe::deadline::Wakeups) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| tracing::info!(wakeups = wakeups.as_str(), "scheduler thread started"));
}

/// A closed-loop stream, shared by its workers.
struct ClosedStream {
    endpoints: Arc<Endpoints>,
    draws: Mutex<Mix>,
    seq: AtomicU64,
    id_prefix: String,
}

/// One closed-loop worker: the next request is due the moment the previous one ended.
async fn closed_worker(stream: Arc<ClosedStream>, budget: Arc<Budget>, ctx: RunContext) {
    loop {
        if ctx.stop.is_cancelled() || !budget.take(Instant::now()) {
            return;
        }
        let seq = stream.seq.fetch_add(1, Ordering::AcqRel);
        let (scenario, mut draw, parts) = {
            let mut draws = stream.draws.lock().unwrap_or_else(|e| e.into_inner());
            let (scenario, draw) = draws.draw();
            (scenario, draw, StreamParts { calibration: draws.calibration().clone(), endpoints: stream.endpoints.clone() })
        };
        draw.probe_id = format!("{}-{seq}", stream.id_prefix);
        // Due once drawn: as in open pacing, drawing never shows up as schedule lag.
        let intended = Instant::now();
        let targets = stream.endpoints.pick();
        let draws = std::iter::repeat_n(draw, targets.len());
        let sends = targets.into_iter().zip(draws).map(|(target, draw)| {
            ctx.recorder.scheduled(&target.name, &scenario, target.replica.as_deref());
            // Workers bound what is in flight: the slot only counts, it never drops.
            let slot = InFlightSlot::take(&target, usize::MAX, &ctx.on_in_flight).expect("an unbounded cap");
            let probe = Probe { target, scenario: scenario.clone(), seq, draw, intended, trace_ratio: ctx.trace_ratio };
            run_probe(probe, SendAt::Now, Arc::new(Mutex::new(Some(slot))), parts.clone(), ctx.clone())
        });
        futures_util::future::join_all(sends).await;
    }
}

/// What a probe's task needs of its stream besides the probe: the prompt calibration its usage
/// refines, and the endpoints a sequence's later probes go to.
#[derive(Clone)]
struct StreamParts {
    calibration: Arc<Calibration>,
    endpoints: Arc<Endpoints>,
}

/// Sends one probe as `send_at` says, feeds its usage to the prompt calibration, gives its slot
/// back and records it; the first probe of a sequence goes on with the ones that follow it.
async fn run_probe(mut probe: Probe, send_at: SendAt, slot: SlotCell, parts: StreamParts, ctx: RunContext) {
    let words = probe.draw.words;
    let follow = probe.draw.follow.take();
    // Only a sequence keeps what its next probe needs.
    let first = follow.as_ref().map(|_| (probe.target.clone(), if probe.draw.keep_answer { probe.draw.prompt.clone() } else { String::new() }));
    let (outcome, answer) = exec::execute_keeping(probe, &ctx.abort, send_at).await;
    if let (Ok(()), Some(usage)) = (&outcome.result, outcome.usage) {
        parts.calibration.observe(words, usage.prompt_tokens);
    }
    drop(slot.lock().unwrap_or_else(|e| e.into_inner()).take());
    match (follow, first) {
        (Some(follow), Some((target, prompt))) => {
            let first = sequence::First { outcome, answer, prompt, target };
            sequence::follow(first, *follow, parts.endpoints, parts.calibration, ctx).await;
        }
        _ => ctx.recorder.record(outcome).await,
    }
}

/// Sleeps until `deadline`: a timer for the bulk, then a blocking sleep (microsecond
/// resolution) for the last `FINE_WINDOW` (3 ms). Only for a thread that runs nothing else.
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
