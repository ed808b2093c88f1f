//! Where recorded probes and target events go. One recorder task hands every finished probe to
//! each sink; discovery, release markers and replica discovery hand their events to the same
//! sinks ([`Sinks::event`]), so every exporter hears of both through one interface. Sinks keep
//! their own state behind interior mutability so they can be shared with the server.
//!
//! Files: `event.rs` (what happens to a target besides its probes), `sinks.rs` (the `Sink`
//! interface and a run's list of sinks), `exporter.rs` (an exporter's lifecycle: start from the
//! config, record, event, flush, shutdown by a deadline), `exporters.rs` (the list of exporter
//! kinds, started and stopped together), one file or folder per exporter (`otlp/`, `jsonl.rs`),
//! `rotating.rs` (a size-bounded file of lines); the sinks the app owns across reloads
//! (`prometheus/`, `history.rs`, `summary.rs`, `detect.rs`, `replicas.rs`), `probe_log.rs`
//! (`--probe-log`) and `collect.rs` (a finite run's outcomes).

pub mod collect;
pub mod detect;
mod event;
pub mod exporter;
pub mod exporters;
pub mod history;
pub mod jsonl;
pub mod otlp;
pub mod probe_log;
pub mod prometheus;
pub mod replica_ages;
pub mod replicas;
mod sinks;
pub mod summary;

mod expo;
mod rotating;

pub use collect::Collect;
pub use event::Event;
pub use exporter::{Exporter, Started};
pub use exporters::Exporters;
pub use history::History;
pub use prometheus::Metrics;
pub use sinks::{Sink, Sinks};
pub use summary::Summary;
