#!/usr/bin/env sh
# Prints the mock engine's latency/throughput curves (virtual time, takes a second).
set -eu
cd "$(dirname "$0")/.."
exec cargo test --test mock mock_engine::print_curve_table -- --ignored --nocapture
