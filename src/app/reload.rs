//! The prober until a signal, with reloads: a new config is prepared while the running one goes
//! on, and only then replaces it.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::generation::{Generation, Positions, launch, unchanged};
use super::options::{ProbeOverrides, RunOptions};
use super::prepare::{Prepared, prepare, prepare_after};
use super::station::{Station, bind};
use crate::config::Config;
use crate::sink::prometheus::Metrics;

/// Runs the prober until SIGINT/SIGTERM. With a config file, SIGHUP or `POST /-/reload` re-reads
/// it. Everything that can fail is done first while the running config goes on: the file is
/// validated, keys, header files and TLS material are read, trace export starts, a changed
/// `listen` address is bound. Any failure keeps the running config, logs every problem and sets
/// `llmprobe_config_last_reload_successful` to 0. Only then does the running generation stop
/// scheduling and the new one start at once: the schedules of targets and scenarios whose
/// config did not change go on where they stood (no gap, no restart), and the old generation's
/// in-flight probes finish (and are recorded) in the background, so a hung probe pauses nobody
/// and `/readyz` stays ready. Series the new config keeps go on counting. Requests that arrive
/// while one is handled are coalesced into it. A signal wins at any point, also while a reload
/// is being prepared: the process ends within `shutdown_grace` (plus the time to save state).
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
    // The first preparation reads key files too (a named pipe or a hung mount blocks): a signal
    // wins over it as over a reload's, and a failed start stops the station it started.
    let started = tokio::select! {
        prepared = prepare(&config) => prepared.and_then(|p| launch(config.clone(), p, &station, &options, stop.child_token(), Positions::new())),
        _ = stop.cancelled() => {
            tracing::info!("stopped before probing started");
            station.stop().await?;
            return Ok(std::process::ExitCode::SUCCESS);
        }
    };
    let mut generation = match started {
        Ok(generation) => generation,
        Err(e) => {
            if let Err(stop) = station.stop().await {
                tracing::warn!("stopping after a failed start: {stop:#}");
            }
            return Err(e);
        }
    };
    let mut current = Arc::new(config);
    // The running config, for generations that finish in the background after a reload.
    let latest = Arc::new(Mutex::new(current.clone()));
    // Replaced generations finishing their in-flight probes, each with its abort token.
    let mut retiring: Vec<(tokio::task::JoinHandle<()>, CancellationToken)> = Vec::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(()) = reload_rx.recv() => {
                while reload_rx.try_recv().is_ok() {}
                let Some(path) = file else { continue };
                // Reading and validating a large file takes a while: a signal must not wait for it.
                let outcome = tokio::select! {
                    parts = prepare_reload(path, &current, &options.overrides, &generation.in_flight) => parts,
                    _ = stop.cancelled() => break,
                };
                let (new, prepared, listener) = match outcome {
                    Ok(parts) => parts,
                    Err(problems) => {
                        for line in problems.lines() {
                            tracing::error!("reload rejected, keeping the running config: {line}");
                        }
                        station.metrics.set_config_reload_ok(false);
                        // What reading the refused file took goes back to the system.
                        crate::util::memory::give_back();
                        continue;
                    }
                };
                for w in &new.warnings {
                    tracing::warn!("config: {w}");
                }
                let new = Arc::new(new);
                generation.stop.cancel();
                // The dispatcher stops within milliseconds; running probes are not waited for.
                let positions = unchanged(&current, &new, generation.positions().await);
                station.metrics.reconfigure(&current, &new);
                station.reconfigure(&new);
                if let Some(listener) = listener {
                    station.serve_on(listener)?;
                }
                let next = launch(Config::clone(&new), prepared, &station, &options, stop.child_token(), positions)?;
                let old = std::mem::replace(&mut generation, next);
                *latest.lock().unwrap_or_else(|e| e.into_inner()) = new.clone();
                retiring.retain(|(r, _)| !r.is_finished());
                let abort = old.abort.clone();
                retiring.push((tokio::spawn(retire(old, std::mem::replace(&mut current, new), latest.clone(), station.metrics.clone())), abort));
                station.metrics.set_config_reload_ok(true);
                tracing::info!("config reloaded: probing goes on with it");
            }
        }
    }
    station.health.set_started(false);
    generation.stop.cancel();
    let accounting = generation.accounting.clone();
    // Everything in flight gets the running config's grace, no more: a generation a reload
    // replaced may still be waiting out a longer grace of its own; it is cut at this one's end.
    let grace = current.probe.shutdown_grace;
    let aborts: Vec<CancellationToken> = retiring.iter().map(|(_, abort)| abort.clone()).collect();
    let cut = tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        aborts.iter().for_each(CancellationToken::cancel);
    });
    generation.finish().await?;
    for (r, _) in retiring {
        let _ = r.await;
    }
    cut.abort();
    tracing::info!(scheduled = accounting.scheduled(), recorded = accounting.recorded(), "stopped");
    station.stop().await?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Lets a replaced generation's in-flight probes finish (within its `shutdown_grace`) and be
/// recorded, then drops its state. Its late probes may have re-created series of targets or
/// scenarios the running config no longer has: those go again.
async fn retire(old: Generation, config: Arc<Config>, latest: Arc<Mutex<Arc<Config>>>, metrics: Arc<Metrics>) {
    let accounting = old.accounting.clone();
    if let Err(e) = old.finish().await {
        tracing::error!("the previous config's probing ended with an error: {e:#}");
    }
    tracing::info!(scheduled = accounting.scheduled(), recorded = accounting.recorded(), "previous config's probes finished");
    let running = latest.lock().unwrap_or_else(|e| e.into_inner()).clone();
    metrics.reconfigure(&config, &running);
    drop(config);
    crate::util::memory::give_back();
}

/// The fallible half of a reload: the new config, its prepared parts, and a listener when the
/// `listen` address changed. The error is every problem, one per line.
async fn prepare_reload(
    path: &std::path::Path,
    current: &Config,
    overrides: &ProbeOverrides,
    in_flight: &HashMap<String, Arc<AtomicUsize>>,
) -> Result<(Config, Prepared, Option<TcpListener>), String> {
    // On a blocking thread, so the signal that cancels a reload is seen while it parses.
    let file = path.to_owned();
    let loaded = tokio::task::spawn_blocking(move || crate::app::loader::load(&file)).await.map_err(|e| format!("reading the config: {e}"))?;
    let mut new = loaded.map_err(|errors| errors.to_string())?;
    new.override_probe(overrides.shard, overrides.prober.as_deref());
    if new.probe.prober != current.probe.prober {
        return Err("probe.prober changed: the prober label is set at start; restart to change it".into());
    }
    let prepared = prepare_after(&new, in_flight).await.map_err(|e| format!("{e:#}"))?;
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
