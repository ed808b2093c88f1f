//! One config's probing: schedules, recorder, discovery, calibration and telemetry, started on
//! the station and stopped gracefully.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::discovery::keep_discovering;
use super::options::RunOptions;
use super::prepare::Prepared;
use super::station::Station;
use crate::config::Config;
use crate::pipeline::recorder::{self, Accounting};
use crate::pipeline::scheduler::{self, Pacing, Resume, RunContext, StopRule, Stream};
use crate::probe::arrival;
use crate::replicas::Endpoints;
use crate::sink::exporters::SHUTDOWN_DEADLINE;
use crate::sink::summary::Summary;
use crate::sink::{Sink, Sinks};
use crate::source::SnapshotCache;
use crate::util::health::{Health, spawn_supervised};
use crate::workload::{Calibration, Mix, Sampler, fingerprint};

/// Where each (target, scenario) schedule stood when its generation stopped.
pub(super) type Positions = HashMap<(String, String), Resume>;

/// One config's probing: schedules, recorder, discovery, calibration and telemetry.
pub(super) struct Generation {
    pub(super) accounting: Arc<Accounting>,
    pub(super) handle: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub(super) stop: CancellationToken,
    /// Cancels its in-flight probes at once (as when its grace is over): a shutdown that comes
    /// while a replaced generation still waits out its own grace ends it within the running
    /// one's.
    pub(super) abort: CancellationToken,
    /// Each target's in-flight counter, shared with the next generation's runtime of the same
    /// target: probes still running here count against its cap and in its gauge.
    pub(super) in_flight: HashMap<String, Arc<AtomicUsize>>,
    positions: Option<tokio::sync::oneshot::Receiver<Positions>>,
}

impl Generation {
    /// Waits for the generation to end (its stop token is cancelled by the caller or a parent).
    pub(super) async fn finish(self) -> anyhow::Result<()> {
        self.handle.await.context("prober task panicked")?
    }

    /// After `stop` is cancelled: where each schedule stood once the dispatcher has stopped
    /// (milliseconds; probes still running are not waited for). Empty after an internal error.
    pub(super) async fn positions(&mut self) -> Positions {
        match self.positions.take() {
            Some(rx) => rx.await.unwrap_or_default(),
            None => Positions::new(),
        }
    }
}

/// The positions of the schedules whose target and scenario did not change from `old` to `new`:
/// those go on where they stood; any other schedule starts afresh.
pub(super) fn unchanged(old: &Config, new: &Config, mut positions: Positions) -> Positions {
    // The parsed config has no equality of its own; its full debug form covers every field.
    let same_target = |name: &str| {
        let find = |c: &Config| c.targets.iter().find(|t| t.name == name).map(|t| format!("{t:?}"));
        find(old).is_some_and(|a| Some(a) == find(new))
    };
    let same_scenario = |name: &str| {
        let find = |c: &Config| c.scenarios.iter().find(|s| s.name == name).map(|s| format!("{s:?}"));
        find(old).is_some_and(|a| Some(a) == find(new))
    };
    let same_run = old.probe.shard == new.probe.shard;
    let mut targets = HashMap::new();
    let mut scenarios = HashMap::new();
    positions.retain(|(t, s), _| {
        same_run && *targets.entry(t.clone()).or_insert_with(|| same_target(t)) && *scenarios.entry(s.clone()).or_insert_with(|| same_scenario(s))
    });
    positions
}

/// Starts probing with `config` on the station; it runs until `shutdown` is cancelled.
pub(super) fn launch(
    config: Config,
    prepared: Prepared,
    station: &Station,
    options: &RunOptions,
    shutdown: CancellationToken,
    mut resume: Positions,
) -> anyhow::Result<Generation> {
    let Prepared { targets, exporters, snapshots, release_tokens } = prepared;
    let in_flight = targets.iter().map(|t| (t.name.to_string(), t.in_flight.clone())).collect();
    let metrics = station.metrics.clone();
    let health = station.health.clone();
    // Tracing follows the config of the generation that runs: a reload can switch it off.
    let trace_ratio = exporters.trace_ratio();
    if let Some(d) = &station.detect {
        d.set_readings(snapshots.clone());
    }
    let scrapers = start_sources(&config, snapshots, metrics.clone(), health.clone(), shutdown.clone())?;
    let mut sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), station.history.clone(), station.summary.clone()];
    sinks.extend(exporters.sinks());
    if let Some(d) = &station.detect {
        sinks.push(d.clone());
    }
    sinks.push(station.replicas.clone());
    if let Some(log) = &options.probe_log {
        sinks.push(log.clone());
    }
    let names = config.targets.iter().map(|t| t.name.clone()).collect();
    // One list for probes and events: every exporter hears of both through the Sink interface.
    // The release markers send their events to it, so they are not in it themselves (no cycle
    // of owners); they get the probes on the recorder's list, where behaviour changes
    // (`checks.fingerprint`) become release markers.
    station.releases.set_generation(Sinks::new(sinks.clone()), names, release_tokens, config.detect.state_dir.clone());
    sinks.push(station.releases.clone());
    let sinks = Sinks::new(sinks);
    let (recorder, recorder_task) = recorder::spawn(sinks.clone(), config.slo_table(), Some(health.clone()));
    let accounting = recorder.accounting.clone();
    let ctx = RunContext {
        recorder,
        stop: shutdown.clone(),
        abort: CancellationToken::new(),
        tracker: TaskTracker::new(),
        on_in_flight: {
            let m = metrics.clone();
            Arc::new(move |t: &str, n| m.set_in_flight(t, n))
        },
        trace_ratio,
    };
    let run_seed = config.probe.seed.unwrap_or_else(rand::random);
    let run_id = crate::probe::trace::new_run_id();
    let workload = fingerprint(&config);
    tracing::info!(run_id = %run_id, workload_sha256 = %workload.total, "workload");
    let mut loops = Vec::new();
    let mut streams = Vec::new();
    let mut per_target = Vec::new();
    let shared_config = Arc::new(config.clone());
    for target in &targets {
        let endpoints = Arc::new(Endpoints::new(target.clone()));
        if let Some(spec) = target.config.replicas.clone() {
            let (e, c, s, stop) = (endpoints.clone(), shared_config.clone(), sinks.clone(), shutdown.clone());
            let resolver = options
                .resolver
                .clone()
                .map_or_else(|| Arc::new(crate::replicas::discover::SystemResolver) as Arc<dyn crate::replicas::discover::Resolver>, |h| h.0);
            loops.push(spawn_supervised("discovery", format!("{} replicas", target.name), health.clone(), move || {
                crate::replicas::follow(e.clone(), spec.clone(), c.clone(), s.clone(), resolver.clone(), stop.clone())
            }));
        }
        let (t, s, r, stop) = (target.clone(), sinks.clone(), station.releases.clone(), shutdown.clone());
        let every = config.probe.discovery_interval;
        loops.push(spawn_supervised("discovery", target.name.to_string(), health.clone(), move || {
            keep_discovering(t.clone(), every, s.clone(), r.clone(), stop.clone())
        }));
        // One calibration per target, shared by its scenarios, fitted off the probes' clock.
        let calibration = Arc::new(Calibration::new(target.config.api));
        let (t, c, stop) = (target.clone(), calibration.clone(), shutdown.clone());
        loops.push(spawn_supervised("calibration", target.name.to_string(), health.clone(), move || {
            crate::client::tokenize::run(t.clone(), c.clone(), stop.clone())
        }));
        per_target.push((endpoints, calibration));
    }
    let mut keys = Vec::new();
    let mut resumed = 0usize;
    for plan in super::plan::schedules(&config, run_seed, &run_id) {
        let (endpoints, calibration) = &per_target[plan.target];
        let scenario = &config.scenarios[plan.scenario];
        let key = (config.targets[plan.target].name.clone(), scenario.name.clone());
        let from = resume.remove(&key);
        resumed += usize::from(from.is_some());
        keys.push(key);
        streams.push((
            Stream {
                endpoints: endpoints.clone(),
                draws: Mix::single(&scenario.name, Sampler::new(scenario.clone(), plan.seed.rotate_left(17), calibration.clone())),
                pacing: Pacing::Open { arrival: arrival::build(&scenario.arrival, scenario.rate, plan.seed), cap: config.probe.max_in_flight },
                id_prefix: plan.id_prefix,
            },
            from,
        ));
    }
    if resumed > 0 {
        tracing::info!(resumed, started = keys.len() - resumed, "schedules of unchanged targets go on where they stood");
    }
    let scheduler = scheduler::start_resuming(streams, StopRule::default(), ctx.clone(), Some(health.clone())).context("starting the scheduler thread")?;
    health.set_up("scheduler");
    health.set_started(true);
    if let Some(every) = options.summary_every {
        tokio::spawn(print_summaries(station.summary.clone(), every, shutdown.clone()));
    }

    let grace = config.probe.shutdown_grace;
    let stop = shutdown.clone();
    let abort = ctx.abort.clone();
    let (positions_tx, positions_rx) = tokio::sync::oneshot::channel();
    let handle = tokio::spawn(async move {
        shutdown.cancelled().await;
        tracing::info!("stopping probing: waiting up to {grace:?} for in-flight probes");
        // A scheduler panic was reported to health when it happened. Readiness is the caller's:
        // after a reload the next generation is already probing.
        let (_, stood) = scheduler.stopped_resumable().await;
        let positions: Positions = keys.into_iter().zip(stood).filter_map(|(k, p)| Some((k, p?))).collect();
        let _ = positions_tx.send(positions);
        for l in loops {
            let _ = l.await;
        }
        ctx.tracker.close();
        if tokio::time::timeout(grace, ctx.tracker.wait()).await.is_err() {
            tracing::warn!("grace period over: cancelling {} in-flight probes", ctx.tracker.len());
            ctx.abort.cancel();
            ctx.tracker.wait().await;
        }
        drop(ctx);
        recorder_task.await.context("recorder task")?;
        for s in scrapers {
            let _ = s.await;
        }
        // Every probe is recorded by now: the exporters export what is left.
        exporters.stop(SHUTDOWN_DEADLINE).await;
        Ok(())
    });
    Ok(Generation { accounting, handle, stop, abort, in_flight, positions: Some(positions_rx) })
}

async fn print_summaries(summary: Arc<Summary>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => println!("{}", summary.line()),
            _ = stop.cancelled() => return,
        }
    }
}

/// One supervised scrape loop per `sources:` entry, filling `cache` (which exporters and the
/// detector read).
fn start_sources(
    config: &Config,
    cache: Arc<SnapshotCache>,
    metrics: Arc<dyn crate::source::scrape::ScrapeReport>,
    health: Arc<Health>,
    stop: CancellationToken,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let client = crate::client::plain_client().context("building the sources' HTTP client")?;
    let mut scrapers = Vec::new();
    for spec in &config.sources {
        let spec = spec.clone();
        cache.register(&spec.name, spec.target.as_deref(), spec.interval);
        let (client, cache, metrics, stop) = (client.clone(), cache.clone(), metrics.clone(), stop.clone());
        let name = spec.name.clone();
        scrapers.push(spawn_supervised("source", name, health.clone(), move || {
            let source = crate::source::build(&spec, client.clone());
            crate::source::scrape::run(source, spec.clone(), cache.clone(), metrics.clone(), stop.clone())
        }));
    }
    Ok(scrapers)
}
