#!/usr/bin/env bash
# Starts the demo on a free port, waits until probes have landed, scrapes /metrics, and checks
# that every metric a dashboard or alert reads is exported (or is a known engine/GPU name).
# Usage: scripts/check-demo-metrics.sh [path/to/llmprobe]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/llmprobe}
out=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" demo --listen "127.0.0.1:$port" --summary-every 2 >"$out/demo.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
python3 - "$port" "$out/metrics.txt" <<'PY'
import re, sys, time, urllib.request
port, dest = sys.argv[1], sys.argv[2]
for _ in range(90):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
        if re.search(r'^llmprobe_ttft_seconds_count\{.*\} [1-9]', text, re.M):
            open(dest, "w").write(text)
            sys.exit(0)
    except OSError:
        pass
    time.sleep(1)
sys.exit("the demo produced no TTFT samples within 90 s")
PY
# The release series exist only once a target has had a release marker (a discovered version change
# or POST /api/v1/releases); the demo has none. tests/fixtures/golden/metrics.openmetrics.txt, which
# scripts/check-ops.sh checks against, has them. Likewise the replica series: only targets with
# `discover:` have replicas (the demo's has not), the canary series only exist during a rollout
# (replicas on more than one version) and the outlier flags once replicas are compared. The
# conversation, prefix-cache and agent-loop families exist only for scenarios with `turns:`,
# `cache_pair:` or `agent:` (config/sessions.yaml), which the demo's single requests are not.
python3 scripts/check-metric-names.py "$out/metrics.txt" --after-event \
  llmprobe_release_info llmprobe_release_timestamp_seconds llmprobe_target_info_change_timestamp_seconds \
  llmprobe_replica_info llmprobe_replicas llmprobe_canary_state llmprobe_canary_effect llmprobe_canary_evidence \
  llmprobe_replica_outlier \
  llmprobe_conversation_ttft_seconds_bucket llmprobe_conversation_turns_total llmprobe_conversation_input_tokens_total \
  llmprobe_conversation_cached_tokens_total llmprobe_conversation_replica_moves_total llmprobe_sequence_probes_cut_total \
  llmprobe_prefix_cache_ttft_seconds_sum llmprobe_prefix_cache_ttft_seconds_count \
  llmprobe_prefix_cache_input_tokens_total llmprobe_prefix_cache_cached_tokens_total \
  llmprobe_agent_step_ttft_seconds_bucket llmprobe_agent_tool_calls_total llmprobe_agent_loops_total \
  llmprobe_agent_loop_duration_seconds_bucket
