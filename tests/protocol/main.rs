//! The API families' parsers and the telemetry sources' parsers on real captures and arbitrary
//! input.
//! One test binary for the group: the crate is linked once, not once per file.

#[path = "../common/mod.rs"]
mod common;
#[path = "../props/mod.rs"]
mod props;
#[path = "../stream_fixtures/mod.rs"]
mod stream_fixtures;

mod hostile_input_props;
mod protocol_fixtures;
mod protocol_native_fixtures;
mod scrape_limits;
mod source_parse;
mod source_scrape;
mod wire_fidelity;
