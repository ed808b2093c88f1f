#!/usr/bin/env bash
# Soak benchmark (not a test): the release prober against a mock that faults 10% of requests
# across every fault kind, for 30 minutes at 50 req/s by default. Prints RSS at start/end and its
# slope, CPU per request, scheduled vs recorded, and internal errors.
# Usage: scripts/soak.sh [--minutes M] [--rate R] [--sample S]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin llmprobe >&2
exec python3 benches/soak.py target/release/llmprobe "$@"
