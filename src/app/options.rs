//! What a prober run takes beyond its config file.

use std::sync::Arc;
use std::time::Duration;

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
    /// `--probe-log`: every finished probe as a JSON line (for the planner's replay).
    pub probe_log: Option<Arc<crate::sink::probe_log::ProbeLog>>,
}

/// `--shard` and `--prober`, applied to the config at start and at every reload.
#[derive(Debug, Clone, Default)]
pub struct ProbeOverrides {
    pub shard: Option<crate::config::Shard>,
    pub prober: Option<String>,
}

/// A shared resolver for replica discovery.
#[derive(Clone)]
pub struct ResolverHandle(pub Arc<dyn crate::replicas::discover::Resolver>);

impl std::fmt::Debug for ResolverHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResolverHandle")
    }
}
