//! The mock's routes over one engine loop, and serving them on a listener.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::Router;
use tokio_util::sync::CancellationToken;

use super::app::{App, Control};
use super::driver::Driver;
use super::engine::Engine;
use super::options::MockOptions;
use super::{control, listener, metrics, native, openai};
use crate::util::clock::unix_now;

/// The mock's routes; spawns the engine loop on the current tokio runtime.
pub fn router(opts: MockOptions) -> Router {
    router_with_stop(opts, CancellationToken::new())
}

fn router_with_stop(opts: MockOptions, stop: CancellationToken) -> Router {
    let driver = Driver::new(Engine::new(opts.profile.slowed(opts.slowdown), opts.seed));
    tokio::spawn(driver.clone().run(stop.clone()));
    let control = std::sync::Mutex::new(Control { engine_version: None, slowdown: opts.slowdown, faults: None, fault_rates: None });
    let app = Arc::new(App { opts, driver, control, draws: AtomicU64::new(0), created_unix: unix_now() as u64, stop });
    openai::routes(app.clone()).merge(native::routes(app.clone())).merge(metrics::routes(app.clone())).merge(control::routes(app))
}

/// Serves the mock on `listener` until `shutdown` is cancelled.
pub async fn serve(listener: tokio::net::TcpListener, opts: MockOptions, shutdown: CancellationToken) -> std::io::Result<()> {
    let app = router_with_stop(opts, shutdown.child_token()).into_make_service_with_connect_info::<listener::ConnStamps>();
    axum::serve(listener::StampedListener::new(listener), app).with_graceful_shutdown(shutdown.cancelled_owned()).await
}
