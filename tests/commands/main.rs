//! The commands a user runs: bench, workload, detect, config checks, the CLI.
//! One test binary for the group: the crate is linked once, not once per file.

#[path = "../common/mod.rs"]
mod common;

mod bench_compare;
mod bench_outputs;
mod bench_shards;
mod bench_sweep;
mod bench_tools;
mod cli;
mod config_errors;
mod config_examples;
mod detect_cli;
mod detect_persist;
mod gate;
mod workload_dataset;
mod workload_lengths;
mod workload_mock;
