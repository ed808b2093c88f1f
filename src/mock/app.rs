//! The state every HTTP front-end shares: options, the engine driver, fault draws and what a
//! simulated release changes at run time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::driver::Driver;
use super::faults::{self, Fault, FaultParams};
use super::options::MockOptions;
use super::tokenizer;

/// Shared state of the HTTP front-ends.
pub(crate) struct App {
    pub opts: MockOptions,
    pub driver: Arc<Driver>,
    /// What a simulated release changes at run time (`POST /mock/control`).
    pub control: std::sync::Mutex<Control>,
    pub(super) draws: AtomicU64,
    pub created_unix: u64,
    /// Cancelled at shutdown.
    pub(super) stop: CancellationToken,
}

impl App {
    /// The fault for this request, if any.
    pub fn fault(&self, h: &HeaderMap) -> Option<Fault> {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let draw = tokenizer::unit(self.opts.seed ^ n.wrapping_mul(0x9e37_79b9));
        let control = self.control.lock().unwrap_or_else(|e| e.into_inner());
        faults::choose(h, control.fault_rates.as_deref().unwrap_or(&self.opts.fault_rates), draw)
    }

    pub fn params(&self, h: &HeaderMap) -> FaultParams {
        let mut p = FaultParams::from_headers(&self.opts.fault_params, h);
        p.stop = self.stop.clone();
        p
    }

    pub fn timestamps(&self, h: &HeaderMap) -> bool {
        self.opts.timestamps || h.get("x-mock-timestamps").is_some_and(|v| v.as_bytes() == b"1")
    }

    /// Seed of a request's generated text.
    pub fn text_seed(&self, id: u64) -> u64 {
        tokenizer::mix(self.opts.seed ^ id)
    }
}

/// The run-time state a simulated release changes.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Control {
    /// Reported by `/version` and `/api/version` instead of the built-in one when set.
    pub engine_version: Option<String>,
    /// Multiplies every step's duration from the next step on.
    pub slowdown: f64,
    /// Fault rates a release brought (`KIND=RATE,...`), in place of the options' when set.
    pub faults: Option<String>,
    #[serde(skip)]
    pub fault_rates: Option<Vec<(Fault, f64)>>,
}

impl App {
    /// The engine version `/version` reports: the control's, else `default`.
    pub fn engine_version(&self, default: &str) -> String {
        self.control.lock().unwrap_or_else(|e| e.into_inner()).engine_version.clone().unwrap_or_else(|| default.to_owned())
    }
}
