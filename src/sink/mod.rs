//! Where recorded probes and target events go. One recorder task hands every finished probe to
//! each sink; discovery, release markers and replica discovery hand their events to the same
//! sinks ([`Sinks::event`]), so every exporter hears of both through one interface. Sinks keep
//! their own state behind interior mutability so they can be shared with the server.

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
