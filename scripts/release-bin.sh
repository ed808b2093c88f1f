#!/usr/bin/env bash
# Prints the path of a release llmprobe binary for the measuring scripts: $LLMPROBE_BIN when set,
# else one built here (cargo build --release; its output goes to stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${LLMPROBE_BIN:-}" ]; then
    echo "$LLMPROBE_BIN"
    exit 0
fi
cargo build --release --locked --bin llmprobe >&2
echo "$PWD/${CARGO_TARGET_DIR:-target}/release/llmprobe"
