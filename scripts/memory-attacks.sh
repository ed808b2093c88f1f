#!/usr/bin/env bash
# Memory under attack (not a test): baseline RSS of a prober, then its peak under each attack
# (gzip bombs on both clients, an engine page of 10^6 series, 128 unauthenticated 2 MB POSTs, a
# reload to 10,000 targets, the largest accepted config reloaded to one target); pass/fail
# against baseline + 64 MiB; an engine page of 400,000 series (bound +16 MiB); hostile config files
# (nested aliases, 10^6 aliases, 100,000-deep nesting) in check-config, at start and on reload.
# Usage: scripts/memory-attacks.sh [--only NAME] [--hold S]
# LLMPROBE_BIN=path runs that binary instead of building one.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/release-bin.sh)
exec python3 benches/memory_attacks.py "$bin" "$@"
