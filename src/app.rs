//! Wiring: builds the parts of a run from a validated config, starts them, and shuts them down
//! gracefully (stop scheduling, let in-flight probes finish within the grace period, cancel the
//! rest as `cancelled`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::arrival::{self, stream_seed};
use crate::config::Config;
use crate::health::{Health, spawn_supervised};
use crate::recorder::{self, Accounting};
use crate::release::Releases;
use crate::replicas::Endpoints;
use crate::scheduler::{self, Pacing, RunContext, StopRule, Stream};
use crate::server::{self, ServerState};
use crate::sink::Sink;
use crate::sink::detect::{DetectSink, unix_now};
use crate::sink::history::History;
use crate::sink::otlp::{OtlpSettings, OtlpSink};
use crate::sink::otlp_metrics::{OtlpMetricsSettings, OtlpMetricsSink};
use crate::sink::prometheus::Metrics;
use crate::sink::replicas::ReplicaSink;
use crate::sink::summary::Summary;
use crate::source::SnapshotCache;
use crate::target::TargetRuntime;
use crate::workload::{Calibration, Mix, Sampler, fingerprint};

/// A failed discovery is retried this soon (or at `probe.discovery_interval`, if shorter).
const DISCOVERY_RETRY: Duration = Duration::from_secs(10);

/// Options of a prober run beyond the config file.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Print a one-line summary to stdout at this interval (the demo does).
    pub summary_every: Option<Duration>,
    /// Where `POST /-/reload` sends reload requests (the run was started from a config file).
    pub reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    /// `--web.enable-lifecycle`: serve `POST /-/reload` (off by default, as in Prometheus).
    pub lifecycle: bool,
    /// Command-line settings that win over the file's, on every (re)load.
    pub overrides: ProbeOverrides,
    /// How `discover: {kind: dns}` names are resolved (default: the system resolver; tests map
    /// names to loopback addresses).
    pub resolver: Option<ResolverHandle>,
}

/// `--shard` and `--prober`, applied to the config at start and at every reload.
#[derive(Debug, Clone, Default)]
pub struct ProbeOverrides {
    pub shard: Option<crate::config::Shard>,
    pub prober: Option<String>,
}

/// A shared resolver for replica discovery.
#[derive(Clone)]
pub struct ResolverHandle(pub Arc<dyn crate::discover::Resolver>);

impl std::fmt::Debug for ResolverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResolverHandle")
    }
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
    pub health: Arc<Health>,
    handle: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    /// Waits until the run has shut down (after `shutdown` was cancelled).
    pub async fn wait(self) -> anyhow::Result<RunReport> {
        self.handle.await.context("prober task panicked")??;
        Ok(RunReport { accounting: self.accounting, metrics: self.metrics })
    }
}

/// Starts the prober with one config (no reload); it runs until `shutdown` is cancelled.
pub async fn start(config: Config, options: RunOptions, shutdown: CancellationToken) -> anyhow::Result<Running> {
    let listener = bind(config.listen).await?;
    let station = Station::start(&config, listener, &options)?;
    let prepared = prepare(&config).await?;
    let generation = launch(config, prepared, &station, &options, shutdown.clone())?;
    let (metrics_addr, metrics, health, accounting) = (station.addr, station.metrics.clone(), station.health.clone(), generation.accounting.clone());
    let handle = tokio::spawn(async move {
        shutdown.cancelled().await;
        generation.finish().await?;
        station.stop().await
    });
    Ok(Running { metrics_addr, metrics, accounting, health, handle })
}

/// What outlives a config generation: the metrics registry (so series that a reload keeps go
/// on counting), the probe history, the health of the components, and the HTTP server.
struct Station {
    metrics: Arc<Metrics>,
    /// The regression detector (`detect.enabled`); it keeps its baselines across reloads.
    detect: Option<Arc<DetectSink>>,
    /// Canary and outlier comparisons of discovered replicas.
    replicas: Arc<ReplicaSink>,
    releases: Arc<Releases>,
    detect_stop: CancellationToken,
    detect_task: Option<tokio::task::JoinHandle<()>>,
    history: Arc<History>,
    summary: Arc<Summary>,
    health: Arc<Health>,
    addr: std::net::SocketAddr,
    server_stop: CancellationToken,
    server_task: tokio::task::JoinHandle<std::io::Result<()>>,
    reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    lifecycle: bool,
}

fn target_names(config: &Config) -> std::collections::HashSet<String> {
    config.targets.iter().map(|t| t.name.clone()).collect()
}

async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("binding the metrics address {addr}"))
}

impl Station {
    fn start(config: &Config, listener: TcpListener, options: &RunOptions) -> anyhow::Result<Station> {
        let metrics = Arc::new(Metrics::new(config));
        let health = Arc::new(Health::new(metrics.clone()));
        let detect = config.detect.enabled.then(|| {
            let (sink, warning) = DetectSink::new(&config.detect, target_names(config), metrics.detect.clone());
            if let Some(w) = warning {
                tracing::warn!("detector: {w}");
            }
            Arc::new(sink)
        });
        let releases = Arc::new(Releases::new(metrics.clone(), detect.clone(), config.detect.state_dir.clone()));
        let t = &config.detect.tuning;
        // The canary spends the release test's budget for one latency signal, per signal.
        let replicas = Arc::new(ReplicaSink::new(metrics.replicas.clone(), t.latency_tolerance, t.clip_sigmas, t.armed_alpha / 6.0));
        let detect_stop = CancellationToken::new();
        let (d, r, stop) = (detect.clone(), replicas.clone(), detect_stop.clone());
        let detect_task = Some(spawn_supervised("detect", "detector".into(), health.clone(), move || publish_detector(d.clone(), r.clone(), stop.clone())));
        let mut station = Station {
            metrics,
            detect,
            replicas,
            releases,
            detect_stop,
            detect_task,
            history: Arc::new(History::default()),
            summary: Arc::new(Summary::default()),
            health,
            addr: listener.local_addr()?,
            server_stop: CancellationToken::new(),
            server_task: tokio::spawn(async { Ok(()) }),
            reload: options.reload.clone(),
            lifecycle: options.lifecycle,
        };
        station.serve_on(listener)?;
        Ok(station)
    }

    /// Serves the HTTP surface on `listener` (the previous server, if any, stops).
    fn serve_on(&mut self, listener: TcpListener) -> anyhow::Result<()> {
        self.server_stop.cancel();
        self.addr = listener.local_addr()?;
        let state = ServerState {
            metrics: self.metrics.clone(),
            history: self.history.clone(),
            health: self.health.clone(),
            reload: self.reload.clone(),
            lifecycle: self.lifecycle,
            releases: Some(self.releases.clone()),
        };
        self.server_stop = CancellationToken::new();
        self.server_task = tokio::spawn(server::serve(listener, state, self.server_stop.clone()));
        tracing::info!("serving /metrics on http://{}/metrics", self.addr);
        Ok(())
    }

    /// Applies what a reloaded config changes outside a generation (the detector's settings).
    fn reconfigure(&self, new: &Config) {
        match &self.detect {
            Some(d) => d.reconfigure(&new.detect, target_names(new)),
            None if new.detect.enabled => tracing::warn!("detect.enabled takes effect at the next start"),
            None => {}
        }
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.detect_stop.cancel();
        if let Some(t) = self.detect_task {
            let _ = t.await;
        }
        if let Some(d) = &self.detect {
            d.publish(unix_now());
            d.save();
        }
        self.server_stop.cancel();
        self.server_task.await.context("server task")?.context("metrics server")
    }
}

/// Everything about a generation that can fail, done while the running one goes on: API keys
/// and header files read, TLS material loaded, trace export started.
struct Prepared {
    targets: Vec<Arc<TargetRuntime>>,
    otlp: Option<(Arc<OtlpSink>, f64)>,
    otlp_metrics: Option<Arc<OtlpMetricsSink>>,
    /// The bearer token of `POST /api/v1/releases` (`detect.release_token_file`).
    release_token: Option<crate::secret::Secret>,
}

async fn prepare(config: &Config) -> anyhow::Result<Prepared> {
    let targets = config.targets.iter().map(|t| TargetRuntime::new(t.clone()).map(Arc::new)).collect::<anyhow::Result<Vec<_>>>()?;
    let release_token = match &config.detect.release_token_file {
        Some(file) => Some(crate::secret::resolve(&crate::config::SecretRef::File(file.clone())).context("detect.release_token_file")?),
        None => None,
    };
    let otlp = match OtlpSettings::resolve(&config.tracing, |k| std::env::var(k).ok()) {
        None => None,
        Some(settings) => {
            for note in &settings.notes {
                tracing::warn!("tracing: {note}");
            }
            let cfg = config.clone();
            let s = settings.clone();
            // The snapshot cache is filled by this generation's sources (see `launch`).
            let sink =
                tokio::task::spawn_blocking(move || OtlpSink::start(&cfg, &s, Arc::new(SnapshotCache::default()))).await.context("starting trace export")??;
            tracing::info!(protocol = ?settings.protocol, ratio = settings.sample_ratio, "exporting OTLP traces");
            Some((Arc::new(sink), settings.sample_ratio))
        }
    };
    let otlp_metrics = match OtlpMetricsSettings::resolve(&config.tracing, |k| std::env::var(k).ok()) {
        None => None,
        Some(settings) => {
            for note in &settings.notes {
                tracing::warn!("metrics export: {note}");
            }
            let (cfg, s) = (config.clone(), settings.clone());
            let sink = tokio::task::spawn_blocking(move || OtlpMetricsSink::start(&cfg, &s)).await.context("starting metric export")??;
            tracing::info!(protocol = ?settings.protocol, interval = ?settings.interval, "exporting OTLP metrics");
            Some(Arc::new(sink))
        }
    };
    Ok(Prepared { targets, otlp, otlp_metrics, release_token })
}

/// One config's probing: schedules, recorder, discovery, calibration and telemetry.
struct Generation {
    accounting: Arc<Accounting>,
    handle: tokio::task::JoinHandle<anyhow::Result<()>>,
    stop: CancellationToken,
}

impl Generation {
    /// Waits for the generation to end (its stop token is cancelled by the caller or a parent).
    async fn finish(self) -> anyhow::Result<()> {
        self.handle.await.context("prober task panicked")?
    }
}

/// Starts probing with `config` on the station; it runs until `shutdown` is cancelled.
fn launch(config: Config, prepared: Prepared, station: &Station, options: &RunOptions, shutdown: CancellationToken) -> anyhow::Result<Generation> {
    let Prepared { targets, otlp, otlp_metrics, release_token } = prepared;
    let metrics = station.metrics.clone();
    let health = station.health.clone();
    // Tracing follows the config of the generation that runs: a reload can switch it off.
    match &otlp {
        Some((_, ratio)) => crate::trace::enable(*ratio),
        None => crate::trace::disable(),
    }
    let otlp = otlp.map(|(sink, _)| sink);
    let cache = otlp.as_ref().map(|o| o.snapshots()).unwrap_or_default();
    let scrapers = start_sources(&config, cache, metrics.clone(), health.clone(), shutdown.clone())?;
    let mut sinks: Vec<Arc<dyn Sink>> = vec![metrics.clone(), station.history.clone(), station.summary.clone()];
    if let Some(o) = &otlp {
        sinks.push(o.clone());
    }
    if let Some(m) = &otlp_metrics {
        sinks.push(m.clone());
    }
    if let Some(d) = &station.detect {
        sinks.push(d.clone());
    }
    sinks.push(station.replicas.clone());
    let names = config.targets.iter().map(|t| t.name.clone()).collect();
    station.releases.set_generation(otlp.clone(), names, release_token, config.detect.state_dir.clone());
    let (recorder, recorder_task) = recorder::spawn(sinks, config.slo_table(), Some(health.clone()));
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
    let mut loops = Vec::new();
    let mut streams = Vec::new();
    let shared_config = Arc::new(config.clone());
    for target in &targets {
        let endpoints = Arc::new(Endpoints::new(target.clone()));
        if let Some(spec) = target.config.replicas.clone() {
            let (e, c, m, r, stop) = (endpoints.clone(), shared_config.clone(), metrics.clone(), station.replicas.clone(), shutdown.clone());
            let resolver = options.resolver.clone().map_or_else(|| Arc::new(crate::discover::SystemResolver) as Arc<dyn crate::discover::Resolver>, |h| h.0);
            loops.push(spawn_supervised("discovery", format!("{} replicas", target.name), health.clone(), move || {
                crate::replicas::follow(e.clone(), spec.clone(), c.clone(), m.clone(), r.clone(), resolver.clone(), stop.clone())
            }));
        }
        let (t, m, o, stop) = (target.clone(), metrics.clone(), otlp.clone(), shutdown.clone());
        let (om, r) = (otlp_metrics.clone(), station.releases.clone());
        let every = config.probe.discovery_interval;
        loops.push(spawn_supervised("discovery", target.name.to_string(), health.clone(), move || {
            keep_discovering(t.clone(), every, m.clone(), r.clone(), (o.clone(), om.clone()), stop.clone())
        }));
        // One calibration per target, shared by its scenarios, fitted off the probes' clock.
        let calibration = Arc::new(Calibration::new(target.config.api));
        let (t, c, stop) = (target.clone(), calibration.clone(), shutdown.clone());
        loops.push(spawn_supervised("calibration", target.name.to_string(), health.clone(), move || crate::tokenize::run(t.clone(), c.clone(), stop.clone())));
        for scenario in &config.scenarios {
            // Shards draw independent streams (the same seed would send the same probes).
            let shard = config.probe.shard;
            let key = if shard.count > 1 { format!("{}/{}#{}", target.name, scenario.name, shard.index) } else { format!("{}/{}", target.name, scenario.name) };
            let seed = stream_seed(run_seed, &key);
            streams.push(Stream {
                endpoints: endpoints.clone(),
                draws: Mix::single(&scenario.name, Sampler::new(scenario.clone(), seed.rotate_left(17), calibration.clone())),
                pacing: Pacing::Open { arrival: arrival::build(&scenario.arrival, scenario.rate, seed), cap: config.probe.max_in_flight },
                id_prefix: format!("{run_id}-{}-{}", target.name, scenario.name),
            });
        }
    }
    let scheduler = scheduler::start(streams, StopRule::default(), ctx.clone(), Some(health.clone())).context("starting the scheduler thread")?;
    health.set_up("scheduler");
    health.set_started(true);
    if let Some(every) = options.summary_every {
        tokio::spawn(print_summaries(station.summary.clone(), every, shutdown.clone()));
    }

    let grace = config.probe.shutdown_grace;
    let stop = shutdown.clone();
    let handle = tokio::spawn(async move {
        shutdown.cancelled().await;
        tracing::info!("stopping probing: waiting up to {grace:?} for in-flight probes");
        health.set_started(false);
        // A scheduler panic was reported to health when it happened.
        let _ = scheduler.stopped().await;
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
        if let Some(otlp) = otlp {
            // The exporter blocks while flushing; this task holds the last reference.
            let _ = tokio::task::spawn_blocking(move || otlp.shutdown()).await;
        }
        if let Some(m) = otlp_metrics {
            // Exports the last interval's data; this task holds the last reference.
            let _ = tokio::task::spawn_blocking(move || m.shutdown()).await;
        }
        Ok(())
    });
    Ok(Generation { accounting, handle, stop })
}

/// A short run id for readable probe ids: 8 hex digits, new on every start.
pub fn new_run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// Discovers a target's model and engine, and re-reads them so a release shows up.
async fn keep_discovering(
    target: Arc<TargetRuntime>,
    every: Duration,
    metrics: Arc<Metrics>,
    releases: Arc<Releases>,
    (otlp, otlp_metrics): (Option<Arc<OtlpSink>>, Option<Arc<OtlpMetricsSink>>),
    stop: CancellationToken,
) {
    let mut last: Option<crate::target::Discovery> = None;
    loop {
        let wait = match target.discover().await {
            Ok(found) => {
                if last.as_ref() != Some(&found) {
                    tracing::info!(target_name = %target.name, model = %found.model, engine = %found.engine, version = %found.engine_version, "target discovered");
                    metrics.set_target_info(&target.name, &found.model, &found.engine, &found.engine_version);
                    target.use_discovered_model(&found.model);
                    releases.discovered(&target.name, &found);
                    if let Some(o) = &otlp {
                        o.set_engine(&target.name, &found.engine);
                    }
                    if let Some(m) = &otlp_metrics {
                        m.set_engine(&target.name, &found.engine);
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
/// it. Everything that can fail is done first while the running config goes on: the file is
/// validated, keys, header files and TLS material are read, trace export starts, a changed
/// `listen` address is bound. Any failure keeps the running config, logs every problem and sets
/// `llmprobe_config_last_reload_successful` to 0. Only then does the running generation stop
/// (in-flight probes finish and are recorded) and the new one start; series the new config
/// keeps go on counting. Requests that arrive while one is handled are coalesced into it.
pub async fn run_until_signal(config: Config, file: Option<&std::path::Path>, mut options: RunOptions) -> anyhow::Result<std::process::ExitCode> {
    let stop = CancellationToken::new();
    cancel_on_signals(stop.clone());
    let (reload_tx, mut reload_rx) = tokio::sync::mpsc::unbounded_channel();
    if file.is_some() {
        forward_sighup(reload_tx.clone());
        options.reload = Some(reload_tx);
    }
    for w in &config.warnings {
        tracing::warn!("config: {w}");
    }
    let mut station = Station::start(&config, bind(config.listen).await?, &options)?;
    let prepared = prepare(&config).await?;
    let mut generation = launch(config.clone(), prepared, &station, &options, stop.child_token())?;
    let mut current = config;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(()) = reload_rx.recv() => {
                while reload_rx.try_recv().is_ok() {}
                let Some(path) = file else { continue };
                let (new, prepared, listener) = match prepare_reload(path, &current, &options.overrides).await {
                    Ok(parts) => parts,
                    Err(problems) => {
                        for line in problems.lines() {
                            tracing::error!("reload rejected, keeping the running config: {line}");
                        }
                        station.metrics.set_config_reload_ok(false);
                        continue;
                    }
                };
                for w in &new.warnings {
                    tracing::warn!("config: {w}");
                }
                generation.stop.cancel();
                let accounting = generation.accounting.clone();
                generation.finish().await?;
                tracing::info!(scheduled = accounting.scheduled(), recorded = accounting.recorded(), "previous config stopped");
                station.metrics.reconfigure(&current, &new);
                station.reconfigure(&new);
                if let Some(listener) = listener {
                    station.serve_on(listener)?;
                }
                generation = launch(new.clone(), prepared, &station, &options, stop.child_token())?;
                station.metrics.set_config_reload_ok(true);
                tracing::info!("config reloaded: probing goes on with it");
                current = new;
            }
        }
    }
    generation.stop.cancel();
    let accounting = generation.accounting.clone();
    generation.finish().await?;
    tracing::info!(scheduled = accounting.scheduled(), recorded = accounting.recorded(), "stopped");
    station.stop().await?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The fallible half of a reload: the new config, its prepared parts, and a listener when the
/// `listen` address changed. The error is every problem, one per line.
async fn prepare_reload(path: &std::path::Path, current: &Config, overrides: &ProbeOverrides) -> Result<(Config, Prepared, Option<TcpListener>), String> {
    let mut new = crate::loader::load(path).map_err(|errors| errors.to_string())?;
    new.override_probe(overrides.shard, overrides.prober.as_deref());
    if new.probe.prober != current.probe.prober {
        return Err("probe.prober changed: the prober label is set at start; restart to change it".into());
    }
    let prepared = prepare(&new).await.map_err(|e| format!("{e:#}"))?;
    let listener = if new.listen != current.listen { Some(bind(new.listen).await.map_err(|e| format!("{e:#}"))?) } else { None };
    Ok((new, prepared, listener))
}

/// Turns SIGHUP into a reload request.
fn forward_sighup(reload: tokio::sync::mpsc::UnboundedSender<()>) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            return;
        };
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

// ---- Engine and GPU sources ---------------------------------------------------------------------

/// One supervised scrape loop per `sources:` entry, filling `cache` (which the trace sink reads).
fn start_sources(
    config: &Config,
    cache: Arc<SnapshotCache>,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    stop: CancellationToken,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let client = crate::target::plain_client().context("building the sources' HTTP client")?;
    let mut scrapers = Vec::new();
    for spec in &config.sources {
        let mut spec = spec.clone();
        if spec.url.is_none() {
            // An engine source tied to a target reads the target's own /metrics.
            spec.url = config.targets.iter().find(|t| Some(&t.name) == spec.target.as_ref()).map(|t| format!("{}/metrics", t.base_url));
        }
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

/// How often the detector's state is exported, and (every `SAVE_EVERY` of these) saved.
const PUBLISH_EVERY: Duration = Duration::from_secs(5);
const SAVE_EVERY: u32 = 12;

/// Exports the detector's state and the replica comparisons every few seconds, and saves the
/// detector's baselines every minute.
async fn publish_detector(detect: Option<Arc<DetectSink>>, replicas: Arc<ReplicaSink>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    let mut n = 0u32;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        replicas.publish(unix_now());
        let Some(detect) = &detect else { continue };
        detect.publish(unix_now());
        n += 1;
        if n % SAVE_EVERY == 0 {
            let d = detect.clone();
            let _ = tokio::task::spawn_blocking(move || d.save()).await;
        }
    }
}
