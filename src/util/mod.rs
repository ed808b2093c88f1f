//! Small pieces with no knowledge of probes: timestamps, order statistics, log-safe text.

pub mod clock;
pub mod health;
pub mod logsafe;
pub mod memory;
pub mod rfc3339;
pub mod stats;
pub mod version;
