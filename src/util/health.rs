//! Liveness of the prober's own parts. Every long-running component (scheduler, recorder,
//! source and discovery loops) runs supervised: a panic is logged, counted in
//! `llmprobe_internal_errors_total{component}`, and the component is restarted where that is
//! safe; one that cannot come back is marked down, and `/readyz` answers 503 naming it.
//! A monitor that breaks must say so, never go quiet while looking ready.

use std::any::Any;
use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;

/// Components named in `llmprobe_internal_errors_total{component}` (pre-created at zero).
pub const COMPONENTS: [&str; 7] = ["probe", "recorder", "scheduler", "source", "discovery", "calibration", "detect"];

/// A restarted component waits this long first, so a component that panics at once cannot spin.
const RESTART_BACKOFF: Duration = Duration::from_secs(1);

/// Where caught internal errors are counted (`llmprobe_internal_errors_total`, kept by the
/// Prometheus sink).
pub trait ErrorCounter: Send + Sync {
    fn count_internal_error(&self, component: &str);
}

pub struct Health {
    metrics: Arc<dyn ErrorCounter>,
    started: AtomicBool,
    /// Components that are down, with why.
    down: Mutex<BTreeMap<String, String>>,
}

impl Health {
    pub fn new(metrics: Arc<dyn ErrorCounter>) -> Self {
        Health { metrics, started: AtomicBool::new(false), down: Mutex::new(BTreeMap::new()) }
    }

    /// Probing has started (schedules running).
    pub fn set_started(&self, started: bool) {
        self.started.store(started, Ordering::Release);
    }

    /// Ready: started, and no component down.
    pub fn is_ready(&self) -> bool {
        self.started.load(Ordering::Acquire) && self.lock().is_empty()
    }

    /// Why the prober is not ready, one line per reason.
    pub fn not_ready_reasons(&self) -> Vec<String> {
        let mut reasons: Vec<String> = self.lock().iter().map(|(c, why)| format!("{c} down: {why}")).collect();
        if !self.started.load(Ordering::Acquire) {
            reasons.insert(0, "probing has not started".into());
        }
        reasons
    }

    /// Logs and counts an internal error of `component` (a bug: the prober caught its own panic).
    pub fn internal_error(&self, component: &str, detail: &str) {
        tracing::error!(component, "internal error (caught, probing goes on): {detail}");
        self.metrics.count_internal_error(component);
    }

    pub fn set_down(&self, component: &str, why: &str) {
        self.lock().insert(component.to_owned(), why.to_owned());
    }

    pub fn set_up(&self, component: &str) {
        self.lock().remove(component);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.down.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Text of a caught panic.
pub fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_owned()
    }
}

/// Runs `make()`'s future on the current runtime; if it panics, counts it and starts a fresh
/// one after a short pause (marked down meanwhile). A future that returns ends supervision
/// (components return when their stop token is cancelled).
pub fn spawn_supervised<F, Fut>(component: &'static str, name: String, health: Arc<Health>, mut make: F) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match AssertUnwindSafe(make()).catch_unwind().await {
                Ok(()) => return,
                Err(panic) => {
                    let key = format!("{component} {name}");
                    health.internal_error(component, &format!("{key}: {}", panic_message(panic.as_ref())));
                    health.set_down(&key, "restarting after a panic");
                    tokio::time::sleep(RESTART_BACKOFF).await;
                    health.set_up(&key);
                }
            }
        }
    })
}
