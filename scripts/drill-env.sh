# Sourced by the drill scripts (from the repository root): the release binary in `bin`, a work
# folder in `work`, and `pids`, the processes the script starts — all stopped and removed when
# the script exits.
bin="$(scripts/release-bin.sh)"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
