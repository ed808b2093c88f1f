//! OTLP export, traces and metrics. Files, bottom up: `settings.rs` (the `tracing:` section and
//! the `OTEL_*` variables, resolved once for both signals), `transport.rs` (collector transport
//! and resource), `targets.rs` (what spans and metrics say about a target), `traces.rs`,
//! `metrics.rs`, `exporter.rs` (the exporter that starts both).

mod exporter;
mod metrics;
mod settings;
mod targets;
mod traces;
mod transport;

pub use exporter::start;
pub use settings::{MetricSettings, OtlpSettings, TraceSettings, Transport};
