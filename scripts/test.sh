#!/usr/bin/env bash
# Runs every check of the project. On a fresh Debian machine it first installs what the
# checks need (promtool and prometheus, alertmanager, helm, kubernetes-validate); the Rust toolchain must be present.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v cargo >/dev/null || { echo "cargo not found: install the Rust toolchain (https://rustup.rs)" >&2; exit 1; }
scripts/install-test-tools.sh
export PATH="$PWD/.tools/bin:$PATH"

# Debug info is not needed to run tests and doubles link time on small machines.
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0

echo "== cargo fmt --check and clippy (warnings are errors)"
cargo fmt --check
cargo clippy --locked --all-targets -- -D warnings

echo "== module structure: no import cycles between modules or between the files of a folder; mod.rs files only declare and re-export"
python3 scripts/check-module-cycles.py --self-test
python3 scripts/check-module-cycles.py
python3 scripts/check-mod-rs.py --self-test
python3 scripts/check-mod-rs.py

# No separate `cargo build`: the tests build target/debug/llmprobe (the integration tests run
# it), and a build without the dev-dependencies' features would compile the tokio stack, the
# library and the binary a second time.
echo "== cargo test (builds target/debug/llmprobe, which the demo checks below run)"
# The integration tests mostly wait on sockets and timers (the prober suite used about half a
# core of the two): 4 at a time instead of one per core (the prober suite 160 s -> 96 s on 2
# cores). At 8 (64 s) two release tests, which time the mock's latency on real timers, ran out
# of patience with both cores busy elsewhere; at 4 they passed so.
RUST_TEST_THREADS=4 cargo test --locked --all-targets

echo "== operations package (alerts, dashboards, chart)"
scripts/check-ops.sh

echo "== dashboards and alerts read only exported metric names (scraping the running demo)"
scripts/check-demo-metrics.sh target/debug/llmprobe

# The three live demos wait on scrapes and evaluations, not on the CPU, and each binds only
# ports it picks free (the embedded mock's 18000 only by the first): they run side by side, each
# into its own log, printed in order.
demos=(
  "a real Prometheus evaluates the recording rules against two live probers (about 90 s)|scripts/prometheus-demo.sh --bin target/debug/llmprobe"
  "every dashboard query against two namespaces with a target named vllm, one failing (about 45 s)|scripts/dashboards-two-namespaces.sh --bin target/debug/llmprobe"
  "a real Alertmanager (kps default route, the chart's inhibit rules) counts the notifications of a total then partial outage, a partial outage, a release, a dead prober and a quiet namespace, time 20x faster (about 110 s)|scripts/alertmanager-demo.sh --bin target/debug/llmprobe"
)
logs="$(mktemp -d)"
pids=()
for i in "${!demos[@]}"; do
  ${demos[$i]#*|} >"$logs/$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!demos[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "== ${demos[$i]%%|*}"
  cat "$logs/$i.log"
  if [ "$rc" -ne 0 ]; then
    echo "FAILED (exit $rc): ${demos[$i]#*|}" >&2
    failed=1
  fi
done
rm -rf "$logs"
[ "$failed" -eq 0 ] || exit 1

echo "all checks passed"
