//! Wiring: builds the parts of a run from a validated config, starts them, and shuts them down
//! gracefully (stop scheduling, let in-flight probes finish within the grace period, cancel the
//! rest as `cancelled`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::arrival::{self, stream_seed};
use crate::config::Config;
use crate::recorder::{self, Accounting};
use crate::scheduler::{self, RunContext, Stream};
use crate::server::{self, ServerState};
use crate::sink::Sink;
use crate::sink::history::History;
use crate::sink::otlp::{OtlpSettings, OtlpSink};
use crate::sink::prometheus::Metrics;
use crate::sink::summary::Summary;
use crate::source::SnapshotCache;
use crate::target::TargetRuntime;
use crate::workload::{Calibration, Sampler, calibrate, fingerprint};

/// A failed discovery is retried this soon (or at `probe.discovery_interval`, if shorter).
const DISCOVERY_RETRY: Duration = Duration::from_secs(10);

/// Options of a prober run beyond the config file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Print a one-line summary to stdout at this interval (the demo does).
    pub summary_every: Option<Duration>,
    /// Where `POST /-/reload` sends reload requests (the run was started from a config file).
    pub reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
}

/// What a finished run leaves behind (tests read it).
pub struct RunReport {
    pub accounting: Arc<Accounting>,
    pub metrics: Arc<Metrics>,
}

/// A running prober: its metrics endpoint address and a way to wait for it.
pub struct Running {
    pub metrics_addr: std::net::SocketAddr,
    pub metrics: Arc<Metrics>,
    pub accounting: Arc<Accounting>,
    handle: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Waits until the run has shut down (after `shutdown` was cancelled).
    pub async fn wait(self) -> anyhow::Result<RunReport> {
        self.handle.await.context("prober task panicked")??;
        Ok(RunReport { accounting: self.accounting, metrics: self.metrics })
    }
}

/// Starts the prober; it runs until `shutdown` is cancelled.
pub async fn start(config: Config, options: RunOptions, shutdown: CancellationToken) -> anyhow::Result<Running> {
    let targets = config.targets.iter().map(|t| TargetRuntime::new(t.clone()).map(Arc::new)).collect::<anyhow::Result<Vec<_>>>()?;
    let listener = TcpListener::bind(config.listen).await.with_context(|| format!("binding the metrics address {}", config.listen))?;
    let metrics_addr = listener.local_addr()?;
    let metrics = Arc::new(Metrics::new(&config));
    let history = Arc::new(History::default());
    let summary = Arc::new(Summary::default());
    let ready = Arc::new(AtomicBool::new(false));

    let server_state = ServerState { metrics: metrics.clone(), history: history.clone(), ready: ready.clone(), reload: options.reload.clone() };
    let server_stop = CancellationToken::new();
    let server_task = tokio::spawn(server::serve(listener, server_state, server_stop.clone()));
    tracing::info!("serving /metrics on http://{metrics_addr}/metrics");

    let telemetry = start_telemetry(&config, metrics.clone(), shutdown.clone()).await?;
    let mut sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), history, summary.clone()];
    if let Some(otlp) = &telemetry.otlp {
        sinks.push(otlp.clone());
    }
    let (recorder, recorder_task) = recorder::spawn(sinks, config.slo.clone());
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
    };
    let run_seed = config.probe.seed.unwrap_or_else(rand::random);
    let run_id = new_run_id();
    let workload = fingerprint(&config);
    tracing::info!(run_id = %run_id, workload_sha256 = %workload.total, "workload");
    let mut schedules = Vec::new();
    let mut streams = Vec::new();
    for target in &targets {
        schedules.push(tokio::spawn(keep_discovering(
            target.clone(),
            config.probe.discovery_interval,
            metrics.clone(),
            telemetry.otlp.clone(),
            shutdown.clone(),
        )));
        // One calibration per target, shared by its scenarios, fitted off the probes' clock.
        let calibration = Arc::new(Calibration::new(target.config.api));
        schedules.push(tokio::spawn(calibrate::run(target.clone(), calibration.clone(), shutdown.clone())));
        for scenario in &config.scenarios {
            let seed = stream_seed(run_seed, &format!("{}/{}", target.name, scenario.name));
            let stream = Stream {
                target: target.clone(),
                scenario: Arc::from(scenario.name.as_str()),
                arrival: arrival::build(&scenario.arrival, scenario.rate, seed),
                sampler: Sampler::new(scenario.clone(), seed.rotate_left(17), calibration.clone()),
                max_in_flight: config.probe.max_in_flight,
                id_prefix: format!("{run_id}-{}-{}", target.name, scenario.name),
            };
            streams.push(stream);
        }
    }
    let dispatcher = scheduler::spawn_dispatcher(streams, ctx.clone()).context("starting the scheduler thread")?;
    ready.store(true, Ordering::Release);
    if let Some(every) = options.summary_every {
        tokio::spawn(print_summaries(summary, every, shutdown.clone()));
    }

    let grace = config.probe.shutdown_grace;
    let handle = tokio::spawn(async move {
        shutdown.cancelled().await;
        tracing::info!("shutting down: waiting up to {grace:?} for in-flight probes");
        let _ = dispatcher.await;
        for s in schedules {
            let _ = s.await;
        }
        ctx.tracker.close();
        if tokio::time::timeout(grace, ctx.tracker.wait()).await.is_err() {
            tracing::warn!("grace period over: cancelling {} in-flight probes", ctx.tracker.len());
            ctx.abort.cancel();
            ctx.tracker.wait().await;
        }
        drop(ctx);
        recorder_task.await.context("recorder task")?;
        telemetry.finish().await;
        server_stop.cancel();
        server_task.await.context("server task")?.context("metrics server")?;
        Ok(())
    });
    Ok(Running { metrics_addr, metrics, accounting, handle })
}

/// A short run id for readable probe ids: 8 hex digits, new on every start.
pub fn new_run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Discovers a target's model and engine, and re-reads them so a release shows up.
async fn keep_discovering(target: Arc<TargetRuntime>, every: Duration, metrics: Arc<Metrics>, otlp: Option<Arc<OtlpSink>>, stop: CancellationToken) {
    let mut last: Option<crate::target::Discovery> = None;
    loop {
        let wait = match target.discover().await {
            Ok(found) => {
                if last.as_ref() != Some(&found) {
                    tracing::info!(target_name = %target.name, model = %found.model, engine = %found.engine, version = %found.engine_version, "target discovered");
                    metrics.set_target_info(&target.name, &found.model, &found.engine, &found.engine_version);
                    target.use_discovered_model(&found.model);
                    if let Some(before) = &last {
                        mark_release(&target.name, before, &found, &metrics, otlp.as_deref());
                    }
                    if let Some(o) = &otlp {
                        o.set_engine(&target.name, &found.engine);
                    }
                    last = Some(found);
                }
                every
            }
            Err(failure) => {
                tracing::warn!(target_name = %target.name, error = failure.class.as_str(), "discovery failed: {}", failure.detail);
                DISCOVERY_RETRY.min(every)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
    }
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

/// Runs the prober until SIGINT/SIGTERM. With a config file, SIGHUP or `POST /-/reload` re-reads
/// it: an invalid file is rejected with every problem logged and
/// `llmprobe_config_last_reload_successful` set to 0 while the running config goes on; a valid
/// one restarts probing gracefully (in-flight probes finish and are recorded first; counters
/// restart from zero, which Prometheus treats as a reset).
pub async fn run_until_signal(mut config: Config, file: Option<&std::path::Path>, mut options: RunOptions) -> anyhow::Result<std::process::ExitCode> {
    let stop = CancellationToken::new();
    cancel_on_signals(stop.clone());
    let (reload_tx, mut reload_rx) = tokio::sync::mpsc::unbounded_channel();
    if file.is_some() {
        forward_sighup(reload_tx.clone());
        options.reload = Some(reload_tx);
    }
    loop {
        for w in &config.warnings {
            tracing::warn!("config: {w}");
        }
        let generation = stop.child_token();
        let running = start(config.clone(), options.clone(), generation.clone()).await?;
        let next = loop {
            tokio::select! {
                _ = stop.cancelled() => break None,
                Some(()) = reload_rx.recv() => {
                    let Some(path) = file else { continue };
                    match crate::config::load(path) {
                        Ok(new) => break Some(new),
                        Err(errors) => {
                            for line in errors.to_string().lines() {
                                tracing::error!("reload rejected, keeping the running config: {line}");
                            }
                            running.metrics.set_config_reload_ok(false);
                        }
                    }
                }
            }
        };
        generation.cancel();
        let report = running.wait().await?;
        tracing::info!(scheduled = report.accounting.scheduled(), recorded = report.accounting.recorded(), "stopped");
        match next {
            None => return Ok(std::process::ExitCode::SUCCESS),
            Some(new) => {
                tracing::info!("config reloaded: probing restarts with it");
                config = new;
            }
        }
    }
}

/// Turns SIGHUP into a reload request.
fn forward_sighup(reload: tokio::sync::mpsc::UnboundedSender<()>) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            if reload.send(()).is_err() {
                return;
            }
        }
    });
}

/// Cancels `token` on SIGINT or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
            tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("signal received");
        token.cancel();
    });
}

// ---- Telemetry: trace export and engine/GPU sources -------------------------------------------

/// The telemetry parts of a run: the trace sink (when tracing is on), the snapshot cache the
/// sources fill, and the scrape loops.
struct Telemetry {
    otlp: Option<Arc<OtlpSink>>,
    scrapers: Vec<tokio::task::JoinHandle<()>>,
}

impl Telemetry {
    /// Waits for the scrape loops (stopped by the shutdown token) and flushes the trace exporter.
    async fn finish(self) {
        for s in self.scrapers {
            let _ = s.await;
        }
        if let Some(otlp) = self.otlp {
            // The exporter blocks while flushing; this task holds the last reference.
            let _ = tokio::task::spawn_blocking(move || otlp.shutdown()).await;
        }
    }
}

/// Starts trace export (config `tracing:` over `OTEL_*`) and one scrape loop per `sources:` entry.
async fn start_telemetry(config: &Config, metrics: Arc<Metrics>, stop: CancellationToken) -> anyhow::Result<Telemetry> {
    let cache = Arc::new(SnapshotCache::default());
    let otlp = match OtlpSettings::resolve(&config.tracing, |k| std::env::var(k).ok()) {
        None => None,
        Some(settings) => {
            for note in &settings.notes {
                tracing::warn!("tracing: {note}");
            }
            let (cfg, c) = (config.clone(), cache.clone());
            let s = settings.clone();
            let sink = tokio::task::spawn_blocking(move || OtlpSink::start(&cfg, &s, c)).await.context("starting trace export")??;
            crate::trace::enable(settings.sample_ratio);
            tracing::info!(protocol = ?settings.protocol, ratio = settings.sample_ratio, "exporting OTLP traces");
            Some(Arc::new(sink))
        }
    };
    let client = reqwest::Client::builder().user_agent(concat!("llmprobe/", env!("CARGO_PKG_VERSION"))).build().context("building the sources' HTTP client")?;
    let mut scrapers = Vec::new();
    for spec in &config.sources {
        let mut spec = spec.clone();
        if spec.url.is_none() {
            // An engine source tied to a target reads the target's own /metrics.
            spec.url = config.targets.iter().find(|t| Some(&t.name) == spec.target.as_ref()).map(|t| format!("{}/metrics", t.base_url));
        }
        cache.register(&spec.name, spec.target.as_deref(), spec.interval);
        let source = crate::source::build(&spec, client.clone());
        scrapers.push(tokio::spawn(crate::source::scrape::run(source, spec, cache.clone(), metrics.clone(), stop.clone())));
    }
    Ok(Telemetry { otlp, scrapers })
}

/// A target's model or engine version changed: log it, keep the timestamp, and mark the trace.
fn mark_release(target: &str, before: &crate::target::Discovery, after: &crate::target::Discovery, metrics: &Metrics, otlp: Option<&OtlpSink>) {
    tracing::info!(
        target_name = %target,
        previous_model = %before.model, model = %after.model,
        previous_version = %before.engine_version, version = %after.engine_version,
        "release: the target's model or engine version changed"
    );
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    metrics.set_target_info_change(target, now);
    if let Some(o) = otlp {
        o.release(target, [&before.model, &before.engine_version], [&after.model, &after.engine_version]);
    }
}
