//! The prober with one config (no reload), started and awaited by tests and embedders.

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::generation::launch;
use super::options::RunOptions;
use super::prepare::prepare;
use super::station::{Station, bind};
use crate::config::Config;
use crate::pipeline::recorder::Accounting;
use crate::sink::prometheus::Metrics;
use crate::util::health::Health;

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
    // A start that fails after the station is up stops it again: no metrics server or detector
    // left running behind an error.
    let generation = match prepare(&config).await.and_then(|prepared| launch(config, prepared, &station, &options, shutdown.clone(), Default::default())) {
        Ok(generation) => generation,
        Err(e) => {
            if let Err(stop) = station.stop().await {
                tracing::warn!("stopping after a failed start: {stop:#}");
            }
            return Err(e);
        }
    };
    let (metrics_addr, metrics, health, accounting) = (station.addr, station.metrics.clone(), station.health.clone(), generation.accounting.clone());
    let handle = tokio::spawn(async move {
        shutdown.cancelled().await;
        station.health.set_started(false);
        generation.finish().await?;
        station.stop().await
    });
    Ok(Running { metrics_addr, metrics, accounting, health, handle })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_start_leaves_no_server_running() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let yaml = format!(
            "listen: 127.0.0.1:{port}\ndetect: {{release_token_file: /nonexistent/llmprobe-token}}\n\
             targets:\n  - {{name: t, base_url: \"http://127.0.0.1:9\", api: openai-chat}}\nscenarios:\n  - {{name: s, input_tokens: 8, output_tokens: 4}}\n"
        );
        let config = crate::app::loader::parse(&yaml, "start.yaml").unwrap_or_else(|e| panic!("{e}"));
        let err = start(config, RunOptions::default(), CancellationToken::new()).await.err().expect("prepare must fail");
        assert!(format!("{err:#}").contains("release_token_file"), "{err:#}");
        // The metrics server's port is free again.
        std::net::TcpListener::bind(("127.0.0.1", port)).expect("the metrics server was left running");
    }
}
