#!/usr/bin/env bash
# Performance harness (release build; not a timed test, not in CI): client CPU per frame, TTFT
# error against the mock's emission stamps, ITL jitter, open-arrival rate held, sidecar
# footprint, the mock's own throughput and the machine's floor. See benches/perf.py.
# Usage: scripts/bench-perf.sh [--quick] [--only SECTIONS] [--peer-vllm-bench PATH [--peer-mock PATH] [--peer-tokenizer DIR]]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin llmprobe >&2
bench_binary() {
  cargo bench --locked --bench "$1" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])'
}
exec python3 benches/perf.py target/release/llmprobe --mock-load "$(bench_binary mock_load)" --floor "$(bench_binary floor)" "$@"
