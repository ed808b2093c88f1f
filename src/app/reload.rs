//! The prober until a signal, with reloads: a new config is prepared while the running one goes
//! on, and only then replaces it.

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::generation::launch;
use super::options::{ProbeOverrides, RunOptions};
use super::prepare::{Prepared, prepare};
use super::station::{Station, bind};
use crate::config::Config;

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
    let mut new = crate::app::loader::load(path).map_err(|errors| errors.to_string())?;
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
