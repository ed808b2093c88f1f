//! The prober with one config (no reload), started and awaited by tests and embedders.

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::generation::launch;
use super::options::RunOptions;
use super::prepare::prepare;
use super::station::{Station, bind};
use crate::config::Config;
use crate::health::Health;
use crate::recorder::Accounting;
use crate::sink::prometheus::Metrics;

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
    let generation = launch(config, prepared, &station, &options, shutdown.clone(), Default::default())?;
    let (metrics_addr, metrics, health, accounting) = (station.addr, station.metrics.clone(), station.health.clone(), generation.accounting.clone());
    let handle = tokio::spawn(async move {
        shutdown.cancelled().await;
        station.health.set_started(false);
        generation.finish().await?;
        station.stop().await
    });
    Ok(Running { metrics_addr, metrics, accounting, health, handle })
}
