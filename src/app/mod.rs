//! Wiring: builds the parts of a run from a validated config, starts them, and shuts them down
//! gracefully (stop scheduling, let in-flight probes finish within the grace period, cancel the
//! rest as `cancelled`).
//!
//! Files, bottom up: `options.rs` (what a run takes beyond the file), `plan.rs` (the pure
//! schedule plan), `prepare.rs` (everything that can fail, done first), `discovery.rs` (model and
//! engine identity), `station.rs` (what outlives a config: metrics, detector, server),
//! `generation.rs` (one config's probing), `run.rs` (one config, no reload), `reload.rs` (until a
//! signal, with reloads).

mod discovery;
mod generation;
pub mod loader;
mod options;
mod plan;
mod prepare;
pub mod release;
mod reload;
mod run;
pub mod server;
mod station;

pub use options::{ProbeOverrides, ResolverHandle, RunOptions};
pub use reload::{cancel_on_signals, run_until_signal};
pub use run::{RunReport, Running, start};
