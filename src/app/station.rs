//! What outlives a config generation: the metrics registry, the detector and replica
//! comparisons, the release markers, the probe history, health and the HTTP server.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::options::RunOptions;
use crate::app::release::Releases;
use crate::app::server::{self, ServerState};
use crate::config::Config;
use crate::sink::detect::DetectSink;
use crate::sink::history::History;
use crate::sink::prometheus::Metrics;
use crate::sink::replicas::ReplicaSink;
use crate::sink::summary::Summary;
use crate::util::clock::unix_now;
use crate::util::health::{Health, spawn_supervised};

/// What outlives a config generation: the metrics registry (so series that a reload keeps go
/// on counting), the probe history, the health of the components, and the HTTP server.
pub(super) struct Station {
    pub(super) metrics: Arc<Metrics>,
    /// The regression detector (`detect.enabled`); it keeps its baselines across reloads.
    pub(super) detect: Option<Arc<DetectSink>>,
    /// Canary and outlier comparisons of discovered replicas.
    pub(super) replicas: Arc<ReplicaSink>,
    pub(super) releases: Arc<Releases>,
    pub(super) detect_stop: CancellationToken,
    pub(super) detect_task: Option<tokio::task::JoinHandle<()>>,
    pub(super) history: Arc<History>,
    pub(super) summary: Arc<Summary>,
    pub(super) health: Arc<Health>,
    pub(super) addr: std::net::SocketAddr,
    pub(super) server_stop: CancellationToken,
    pub(super) server_task: tokio::task::JoinHandle<std::io::Result<()>>,
    pub(super) reload: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    pub(super) lifecycle: bool,
}

fn target_names(config: &Config) -> std::collections::HashSet<String> {
    config.targets.iter().map(|t| t.name.clone()).collect()
}

pub(super) async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("binding the metrics address {addr}"))
}

impl Station {
    pub(super) fn start(config: &Config, listener: TcpListener, options: &RunOptions) -> anyhow::Result<Station> {
        let metrics = Arc::new(Metrics::new(config));
        let health = Arc::new(Health::new(metrics.clone()));
        let replicas = Arc::new(ReplicaSink::new(metrics.replicas.clone(), &config.detect.tuning));
        let detect = config.detect.enabled.then(|| {
            let (sink, warning) = DetectSink::new(&config.detect, target_names(config), metrics.detect.clone());
            if let Some(w) = warning {
                tracing::warn!("detector: {w}");
            }
            Arc::new(sink)
        });
        let releases = Arc::new(Releases::new(config.detect.state_dir.clone()));
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
    pub(super) fn serve_on(&mut self, listener: TcpListener) -> anyhow::Result<()> {
        self.server_stop.cancel();
        self.addr = listener.local_addr()?;
        let state = ServerState {
            metrics: self.metrics.clone(),
            history: self.history.clone(),
            health: self.health.clone(),
            reload: self.reload.clone(),
            lifecycle: self.lifecycle,
            releases: Some(self.releases.clone()),
            detect: self.detect.clone(),
            replicas: Some(self.replicas.clone()),
        };
        self.server_stop = CancellationToken::new();
        self.server_task = tokio::spawn(server::serve(listener, state, self.server_stop.clone()));
        tracing::info!("serving /metrics on http://{}/metrics", self.addr);
        Ok(())
    }

    /// Applies what a reloaded config changes outside a generation (the detector's settings).
    pub(super) fn reconfigure(&self, new: &Config) {
        match &self.detect {
            Some(d) => d.reconfigure(&new.detect, target_names(new)),
            None if new.detect.enabled => tracing::warn!("detect.enabled takes effect at the next start"),
            None => {}
        }
    }

    pub(super) async fn stop(self) -> anyhow::Result<()> {
        self.detect_stop.cancel();
        if let Some(t) = self.detect_task {
            let _ = t.await;
        }
        if let Some(d) = &self.detect {
            d.publish(unix_now());
            // Off the runtime: the write blocks on the disk.
            let d = d.clone();
            let _ = tokio::task::spawn_blocking(move || d.save()).await;
        }
        self.server_stop.cancel();
        self.server_task.await.context("server task")?.context("metrics server")
    }
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
