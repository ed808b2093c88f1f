//! The load drivers: closed loop (C workers, each sends its next request when the previous one
//! ends) and open arrival (intended times from `arrival`, an in-flight cap whose drops are
//! counted). Both send through `exec::execute`, draw from `workload::Sampler`, and stop on a
//! request count, a duration, or the per-point timeout (running requests become `cancelled`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::arrival::{Arrival, Constant, Poisson};
use crate::config::{BenchArrival, Scenario};
use crate::exec::{self, Probe};
use crate::outcome::Outcome;
use crate::scheduler::wait_until;
use crate::target::TargetRuntime;
use crate::workload::{Calibration, Draw, Sampler};

/// The scenario mix: each request picks a scenario in proportion to its configured rate
/// (weight share), then draws its lengths and prompt from that scenario's sampler.
pub struct Mix {
    entries: Vec<(Arc<str>, Sampler)>,
    cumulative: Vec<f64>,
    rng: StdRng,
}

impl Mix {
    pub fn new(scenarios: &[Scenario], seed: u64, calibration: &Arc<Calibration>) -> Self {
        let mut total = 0.0;
        let cumulative = scenarios
            .iter()
            .map(|s| {
                total += s.rate;
                total
            })
            .collect();
        let entries = scenarios
            .iter()
            .enumerate()
            .map(|(i, s)| (Arc::from(s.name.as_str()), Sampler::new(s.clone(), seed.wrapping_add(i as u64 + 1).rotate_left(17), calibration.clone())))
            .collect();
        Mix { entries, cumulative, rng: StdRng::seed_from_u64(seed) }
    }

    pub fn draw(&mut self) -> (Arc<str>, Draw) {
        let total = *self.cumulative.last().expect("at least one scenario");
        let x = self.rng.random::<f64>() * total;
        let i = self.cumulative.iter().position(|&c| x < c).unwrap_or(self.entries.len() - 1);
        let (name, sampler) = &mut self.entries[i];
        (name.clone(), sampler.draw())
    }
}

/// How load is applied at one point.
#[derive(Debug, Clone, Copy)]
pub enum Load {
    Closed {
        workers: usize,
    },
    /// `first_gap`: the first intended send's delay after the start when it is not the process's
    /// first gap (a sharded constant ticker is phase-shifted so the shards' union is one ticker).
    Open {
        rate: f64,
        max_in_flight: usize,
        arrival: BenchArrival,
        first_gap: Option<Duration>,
    },
}

/// When a repeat (or warm-up) ends.
#[derive(Debug, Clone, Copy)]
pub struct Stop {
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    /// Hard limit: running requests are cancelled when it passes.
    pub timeout: Duration,
}

/// Why a drive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    Requests,
    Duration,
    Timeout,
}

/// Every request a drive scheduled (sent or dropped), and why it stopped.
pub struct Driven {
    pub outcomes: Vec<Outcome>,
    pub stopped_by: StoppedBy,
}

struct Shared {
    target: Arc<TargetRuntime>,
    mix: Mutex<Mix>,
    issued: AtomicU64,
    stop: Stop,
    deadline: Option<Instant>,
    abort: CancellationToken,
}

impl Shared {
    /// Claims the next request number, or `None` when a stop condition says no more.
    fn claim(&self, at: Instant) -> Option<u64> {
        if self.abort.is_cancelled() || self.deadline.is_some_and(|d| at >= d) {
            return None;
        }
        let seq = self.issued.fetch_add(1, Ordering::AcqRel);
        match self.stop.requests {
            Some(n) if seq >= n => None,
            _ => Some(seq),
        }
    }
}

/// Runs one repeat (or warm-up) against `target` and returns every scheduled request.
pub async fn drive(target: Arc<TargetRuntime>, mix: Mix, load: Load, stop: Stop) -> Driven {
    let start = Instant::now();
    let abort = CancellationToken::new();
    let timer = {
        let abort = abort.clone();
        tokio::spawn(async move {
            tokio::time::sleep(stop.timeout).await;
            abort.cancel();
        })
    };
    let shared =
        Arc::new(Shared { target, mix: Mutex::new(mix), issued: AtomicU64::new(0), stop, deadline: stop.duration.map(|d| start + d), abort: abort.clone() });
    let outcomes = match load {
        Load::Closed { workers } => closed(shared.clone(), workers).await,
        Load::Open { rate, max_in_flight, arrival, first_gap } => {
            let gaps: Box<dyn Arrival> = match arrival {
                BenchArrival::Poisson => Box::new(Poisson::new(rate, seed_of(&shared))),
                BenchArrival::Constant => Box::new(Constant::new(rate)),
            };
            open(shared.clone(), gaps, first_gap, max_in_flight, start).await
        }
    };
    timer.abort();
    let stopped_by = if abort.is_cancelled() {
        StoppedBy::Timeout
    } else if stop.requests.is_some_and(|n| outcomes.len() as u64 >= n) {
        StoppedBy::Requests
    } else {
        StoppedBy::Duration
    };
    Driven { outcomes, stopped_by }
}

/// The arrival seed comes from the mix's RNG so one seed drives the whole repeat.
fn seed_of(shared: &Shared) -> u64 {
    shared.mix.lock().expect("mix lock").rng.random()
}

async fn closed(shared: Arc<Shared>, workers: usize) -> Vec<Outcome> {
    let mut set = JoinSet::new();
    for _ in 0..workers {
        let shared = shared.clone();
        set.spawn(async move {
            let mut out = Vec::new();
            loop {
                let now = Instant::now();
                let Some(seq) = shared.claim(now) else { break };
                let (scenario, draw) = shared.mix.lock().expect("mix lock").draw();
                // Closed loop: the request is due the moment its worker is free.
                let probe = Probe { target: shared.target.clone(), scenario, seq, draw, intended: now };
                out.push(exec::execute(probe, &shared.abort).await);
            }
            out
        });
    }
    let mut all = Vec::new();
    while let Some(done) = set.join_next().await {
        all.extend(done.expect("closed-loop worker panicked"));
    }
    all
}

async fn open(shared: Arc<Shared>, mut gaps: Box<dyn Arrival>, mut first_gap: Option<Duration>, max_in_flight: usize, start: Instant) -> Vec<Outcome> {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut set = JoinSet::new();
    let mut out = Vec::new();
    let mut intended = start;
    loop {
        intended += first_gap.take().unwrap_or_else(|| gaps.next_gap());
        let Some(seq) = shared.claim(intended) else { break };
        // Draw before sleeping so its cost never shows up as schedule lag.
        let (scenario, draw) = shared.mix.lock().expect("mix lock").draw();
        tokio::select! {
            _ = wait_until(intended) => {}
            _ = shared.abort.cancelled() => break,
        }
        let probe = Probe { target: shared.target.clone(), scenario, seq, draw, intended };
        if in_flight.fetch_add(1, Ordering::AcqRel) >= max_in_flight {
            in_flight.fetch_sub(1, Ordering::AcqRel);
            out.push(exec::dropped(&probe));
            continue;
        }
        let (shared, in_flight) = (shared.clone(), in_flight.clone());
        set.spawn(async move {
            let outcome = exec::execute(probe, &shared.abort).await;
            in_flight.fetch_sub(1, Ordering::AcqRel);
            outcome
        });
    }
    while let Some(done) = set.join_next().await {
        out.push(done.expect("request task panicked"));
    }
    out
}
