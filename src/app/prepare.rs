//! The fallible half of starting a config: everything that can fail is done here, while a
//! running generation goes on.

use std::sync::Arc;

use anyhow::Context;

use crate::client::target::TargetRuntime;
use crate::config::Config;
use crate::sink::otlp::{OtlpSettings, OtlpSink};
use crate::sink::otlp_metrics::{OtlpMetricsSettings, OtlpMetricsSink};
use crate::source::SnapshotCache;

/// Everything about a generation that can fail, done while the running one goes on: API keys
/// and header files read, TLS material loaded, trace export started.
pub(super) struct Prepared {
    pub(super) targets: Vec<Arc<TargetRuntime>>,
    pub(super) otlp: Option<(Arc<OtlpSink>, f64)>,
    pub(super) otlp_metrics: Option<Arc<OtlpMetricsSink>>,
    /// The bearer token of `POST /api/v1/releases` (`detect.release_token_file`).
    pub(super) release_token: Option<crate::client::secret::Secret>,
}

pub(super) async fn prepare(config: &Config) -> anyhow::Result<Prepared> {
    let targets = config.targets.iter().map(|t| TargetRuntime::new(t.clone()).map(Arc::new)).collect::<anyhow::Result<Vec<_>>>()?;
    let release_token = match &config.detect.release_token_file {
        Some(file) => Some(crate::client::secret::resolve(&crate::config::SecretRef::File(file.clone())).context("detect.release_token_file")?),
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
