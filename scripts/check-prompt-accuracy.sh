#!/usr/bin/env bash
# Prints prompt-token accuracy figures against a live OpenAI-compatible server: for 128, 512 and
# 2000-token prompts, the server's usage.prompt_tokens per probe (after /tokenize calibration,
# then with usage learning only), and whether output length equalled max_tokens (ignore_eos).
# Usage: scripts/check-prompt-accuracy.sh [BASE_URL] [LENGTHS] [OUTPUT]
#   e.g. scripts/check-prompt-accuracy.sh http://127.0.0.1:8000 128,512,2000 16
# Exit status is non-zero when any length misses ±2% (or ±2 tokens) after warm-up.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_URL=${1:-http://127.0.0.1:8000}
LENGTHS=${2:-128,512,2000}
OUTPUT=${3:-16}
cargo build --quiet --bin llmprobe
status=0
for api in openai-completions openai-chat; do
  for mode in "" "--no-tokenize"; do
    echo "== $BASE_URL $api ${mode:-(with /tokenize)}"
    ./target/debug/llmprobe --log warn workload accuracy --base-url "$BASE_URL" --api "$api" \
      --lengths "$LENGTHS" --output "$OUTPUT" $mode || status=1
  done
done
exit $status
