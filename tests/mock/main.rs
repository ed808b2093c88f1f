//! The built-in mock engine: wire formats, scheduling model, faults, control API, metrics.
//! One test binary for the group: the crate is linked once, not once per file.

#[path = "../common/mod.rs"]
mod common;
#[path = "../mock_wire/mod.rs"]
mod mock_wire;
#[path = "../props/mod.rs"]
mod props;

mod mock_control;
mod mock_engine;
mod mock_faults;
mod mock_faults_families;
mod mock_lifecycle;
mod mock_metrics;
mod mock_native;
mod mock_openai;
mod mock_scheduler_props;
mod mock_shape;
mod mock_vs_prober;
