#!/usr/bin/env bash
# Starts the demo on free ports, waits for probes to land, scrapes /metrics, and checks that
# every metric a dashboard or alert reads is exported (or a known engine/GPU name).
# Usage: scripts/check-demo-metrics.sh [path/to/llmprobe]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/llmprobe}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
out=$(mktemp -d)
"$bin" demo --listen "127.0.0.1:$port" --summary-every 2 >"$out/demo.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do
  if curl -fsS "http://127.0.0.1:$port/metrics" -o "$out/metrics.txt" 2>/dev/null \
     && grep -q '^llmprobe_ttft_seconds_count{.*} [1-9]' "$out/metrics.txt"; then
    break
  fi
  sleep 1
done
grep -q '^llmprobe_ttft_seconds_count{.*} [1-9]' "$out/metrics.txt" || { echo "demo produced no TTFT samples"; cat "$out/demo.log"; exit 1; }
python3 scripts/check-metric-names.py "$out/metrics.txt"
