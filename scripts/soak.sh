#!/usr/bin/env bash
# Soak benchmark (not a test): the release prober against a mock that faults 10% of requests
# across every fault kind, for 30 minutes at 50 req/s by default. Prints RSS at start/end and its
# slope after the first 10 minutes, CPU per request, scheduled vs recorded, internal errors and
# panics.
# Usage: scripts/soak.sh [--duration 2h | --minutes M] [--rate R] [--sample S] [--out DIR]
# LLMPROBE_BIN=path runs that binary instead of building one (a long run should use a copy, so
# that a rebuild during the run does not replace the binary being measured).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/release-bin.sh)
exec python3 benches/soak.py "$bin" "$@"
