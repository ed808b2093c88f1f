//! The fallible half of starting a config: everything that can fail is done here, while a
//! running generation goes on.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use anyhow::Context;

use crate::client::TargetRuntime;
use crate::config::Config;
use crate::sink::Exporters;
use crate::source::SnapshotCache;

/// Everything about a generation that can fail, done while the running one goes on: API keys
/// and header files read, TLS material loaded, exporters started.
pub(super) struct Prepared {
    pub(super) targets: Vec<Arc<TargetRuntime>>,
    /// The exporters the config turns on.
    pub(super) exporters: Exporters,
    /// Engine and GPU readings, filled by the generation's sources and read by the exporters and
    /// the detector.
    pub(super) snapshots: Arc<SnapshotCache>,
    /// The release API's bearer tokens (`detect.release_token_file`, `detect.release_read_token_file`).
    pub(super) release_tokens: crate::app::release::ApiTokens,
}

pub(super) async fn prepare(config: &Config) -> anyhow::Result<Prepared> {
    prepare_after(config, &HashMap::new()).await
}

/// As `prepare`, for the generation after one whose targets had these in-flight counters: a
/// target of the same name shares its counter, so probes the previous generation still runs
/// count against the cap and in the gauge.
pub(super) async fn prepare_after(config: &Config, in_flight: &HashMap<String, Arc<AtomicUsize>>) -> anyhow::Result<Prepared> {
    // Key and header files are read here, on a blocking thread: a file that blocks (a named pipe,
    // a hung network mount) must not hold a runtime thread, nor a signal that cancels a reload.
    let (cfg, counters) = (config.clone(), in_flight.clone());
    let (targets, release_tokens) = tokio::task::spawn_blocking(move || read_secrets(&cfg, &counters)).await.context("reading key files")??;
    let snapshots = Arc::new(SnapshotCache::default());
    let (cfg, cache) = (config.clone(), snapshots.clone());
    let exporters = tokio::task::spawn_blocking(move || Exporters::start(&cfg, &cache)).await.context("starting exporters")??;
    Ok(Prepared { targets, exporters, snapshots, release_tokens })
}

type Secrets = (Vec<Arc<TargetRuntime>>, crate::app::release::ApiTokens);

/// The targets' runtimes (their key and header files read) and the release API's tokens.
fn read_secrets(config: &Config, in_flight: &HashMap<String, Arc<AtomicUsize>>) -> anyhow::Result<Secrets> {
    let targets = config
        .targets
        .iter()
        .map(|t| {
            let mut runtime = TargetRuntime::new(t.clone())?;
            if let Some(counter) = in_flight.get(&t.name) {
                runtime.in_flight = counter.clone();
            }
            Ok(Arc::new(runtime))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let token = |file: &Option<std::path::PathBuf>, field: &'static str| match file {
        Some(file) => crate::client::secret::resolve(&crate::config::SecretRef::File(file.clone())).map(Some).context(field),
        None => Ok(None),
    };
    let tokens = crate::app::release::ApiTokens {
        marker: token(&config.detect.release_token_file, "detect.release_token_file")?,
        read: token(&config.detect.release_read_token_file, "detect.release_read_token_file")?,
    };
    // Two files with one token would make the read-only token a marker token.
    if let (Some(marker), Some(read)) = (&tokens.marker, &tokens.read) {
        anyhow::ensure!(
            marker != read,
            "detect.release_read_token_file: holds the same token as detect.release_token_file; the read-only token must differ from the marker token"
        );
    }
    Ok((targets, tokens))
}
