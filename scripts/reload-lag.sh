#!/usr/bin/env bash
# Reload lag (not a test): send lag p50/p99/max of a steady target's probes during reloads while
# the other target hangs, against the same reloads with it answering; /readyz share and
# scheduled = recorded per generation.
# Usage: scripts/reload-lag.sh [--rate R] [--reloads N] [--every S] [--window S] [--grace S]
# LLMPROBE_BIN=path runs that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/release-bin.sh)
exec python3 benches/reload_lag.py "$bin" "$@"
