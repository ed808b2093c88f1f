#!/usr/bin/env bash
# Probe-rate planner, acceptance table: builds the release binary and runs `llmprobe detect
# simulate` (the real detector in virtual time) for
#   1. TTFT x1.25 after a release (detection), and false alarms of the same set-up without a
#      regression: +-20% daily drift, 1% outliers at 10x, one release a day;
#   2. goodput 99.5% -> 97% after a release (detection).
# Extra arguments go to both runs (e.g. --trials 200, --settings detect.yaml). About a minute of
# CPU per run at 1,000 trials; runs use every core.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin llmprobe
bin="${CARGO_TARGET_DIR:-target}/release/llmprobe"
common=(--rate 0.5 --scenarios 3 --ttft-median-ms 200 --ttft-sigma 0.5 --drift 0.2 --outlier-share 0.01
  --outlier-factor 10 --trials 1000 --seed 1)

echo "== 1. TTFT x1.25 after a release; false alarms without one =="
"$bin" detect simulate "${common[@]}" --regression 1.25 "$@"
echo
echo "== 2. goodput 99.5% -> 97% after a release =="
"$bin" detect simulate "${common[@]}" --regression 1 --good-before 0.995 --good-after 0.97 "$@"
