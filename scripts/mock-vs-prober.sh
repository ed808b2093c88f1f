#!/usr/bin/env sh
# Prints how the mock's own TTFT histogram agrees with the prober's at several rates.
# Usage: SWEEP_SECS=10 scripts/mock-vs-prober.sh   (add --release via CARGO_FLAGS=--release)
set -eu
cd "$(dirname "$0")/.."
exec cargo test ${CARGO_FLAGS:-} --test mock mock_vs_prober::print_agreement_table -- --ignored --nocapture
