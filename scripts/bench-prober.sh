#!/usr/bin/env bash
# Prober cost and schedule fidelity against the mock engine (release build, two processes on
# loopback). Prints:
#   1. the prober's CPU time per 1,000 streamed requests of 256 output tokens;
#   2. the highest Poisson rate it holds with schedule lag p99 <= 1 ms.
# Usage: scripts/bench-prober.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin llmprobe >&2
exec python3 benches/prober.py target/release/llmprobe "$@"
