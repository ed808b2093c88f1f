//! `llmprobe demo` (the embedded mock engine plus the prober on the demo config) and
//! `llmprobe mock` (the mock engine alone).

use std::process::ExitCode;
use std::time::Duration;

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::app::{self, loader};
use crate::mock;
use crate::mock::MockArgs;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Serve the prober's /metrics here instead of the demo config's address.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Seconds between the printed one-line summaries.
    #[arg(long, default_value_t = 5)]
    pub summary_every: u64,
}

/// Serves the mock engine until a signal.
pub async fn mock(args: MockArgs) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    app::cancel_on_signals(shutdown.clone());
    let listener = tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    tracing::info!("mock engine listening on http://{}", listener.local_addr()?);
    mock::serve(listener, args.options(), shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// The embedded default: the mock engine where the demo config's target points, plus the prober.
pub async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let mut cfg = loader::demo();
    if let Some(listen) = args.listen {
        cfg.listen = listen;
    }
    let base_url = &cfg.targets[0].base_url;
    let mock_addr = mock_address(base_url).with_context(|| format!("the demo target {base_url} is not http://IP:port"))?;
    let listener = tokio::net::TcpListener::bind(mock_addr).await.with_context(|| format!("binding the mock engine to {mock_addr}"))?;
    let mock_stop = CancellationToken::new();
    let mock_task = tokio::spawn(mock::serve(listener, mock::MockOptions::default(), mock_stop.clone()));
    println!("llmprobe demo: mock engine on http://{mock_addr}, metrics on http://{}/metrics (Ctrl-C to stop)", cfg.listen);
    let options = app::RunOptions { summary_every: Some(Duration::from_secs(args.summary_every.max(1))), ..app::RunOptions::default() };
    let code = app::run_until_signal(cfg, None, options).await;
    mock_stop.cancel();
    let _ = mock_task.await;
    code
}

/// The socket address of a plain-http `base_url` of the form `http://IP:port`: where an embedded
/// mock engine listens for a target that points at it.
pub(super) fn mock_address(base_url: &str) -> Option<std::net::SocketAddr> {
    base_url.strip_prefix("http://")?.trim_end_matches('/').parse().ok()
}
