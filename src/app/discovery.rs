//! Keeps a target's model, engine and version current: a release shows up as a new identity.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::release::Releases;
use crate::client::TargetRuntime;
use crate::sink::{Event, Sinks};

/// A failed discovery is retried this soon (or at `probe.discovery_interval`, if shorter).
const DISCOVERY_RETRY: Duration = Duration::from_secs(10);

/// Discovers a target's model and engine, and re-reads them so a release shows up.
pub(super) async fn keep_discovering(target: Arc<TargetRuntime>, every: Duration, sinks: Sinks, releases: Arc<Releases>, stop: CancellationToken) {
    let mut last: Option<crate::client::ServerIdentity> = None;
    loop {
        let wait = match target.discover().await {
            Ok(found) => {
                if last.as_ref() != Some(&found) {
                    tracing::info!(target_name = %target.name, model = %found.model, engine = %found.engine, version = %found.engine_version, "target discovered");
                    sinks.event(&Event::Identity { target: &target.name, model: &found.model, engine: &found.engine, engine_version: &found.engine_version });
                    target.use_discovered_model(&found.model);
                    releases.discovered(&target.name, &found);
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
