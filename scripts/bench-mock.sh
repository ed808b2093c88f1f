#!/usr/bin/env sh
# Load check of the mock engine: N concurrent streams over loopback.
# Usage: STREAMS=2000 TOKENS=256 scripts/bench-mock.sh
set -eu
cd "$(dirname "$0")/.."
exec cargo bench --bench mock_load
