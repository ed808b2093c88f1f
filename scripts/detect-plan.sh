#!/usr/bin/env bash
# Probe-rate planner, acceptance table: builds the release binary and runs `llmprobe detect
# simulate` (the real detector in virtual time) at 0.5 probes/s over 3 scenarios with the default
# detector settings, one run per condition, and prints one table:
#   condition | false alarms / 30 days (95% upper bound) | power
# False alarms: null days (one release a day, no regression) under
#   (a) independent probes (lognormal TTFT, +-20% daily drift, 1% outliers at 10x: the default),
#   (b) a shared load offset, sd 0.1, time constant 2, 5 and 15 min,
#   (c) the same at sd 0.2, 5 min,
#   (d) bimodal TTFT (70% prefix-cache hits, misses 3x),
#   (e) one 40 s total outage a day,
#   (f) one 2-min error burst a day (25% of probes fail),
#   (g) a rollout warm-up after each release, no regression (and the share of releases alarmed).
# Power: TTFT x1.25 (independent, also without the daily cycle; and under load sd 0.1 / 5 min),
# one scenario of three x1.4 (also without the daily cycle), the slow (cache-miss) mode x1.5,
# goodput 99.5% -> 97%.
# TRIALS: null days per condition (default 1000); DETECT_TRIALS: detection trials (default 300).
# Extra arguments go to every run (e.g. --settings detect.yaml). Every run uses all cores; a few
# minutes in all at the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --bin llmprobe
bin="${CARGO_TARGET_DIR:-target}/release/llmprobe"
days="${TRIALS:-1000}"
trials="${DETECT_TRIALS:-300}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
common=(--rate 0.5 --scenarios 3 --seed 1 --json)
rows="$out/rows.tsv"
n=0

# null LABEL FLAGS...: false alarms of the condition, no regression.
null() {
  local label="$1"
  shift
  n=$((n + 1))
  echo "[$n] $label: $days null days" >&2
  "$bin" detect simulate "${common[@]}" --trials 0 --days "$days" --regression 1 "$@" "${extra[@]}" >"$out/$n.json"
  printf 'null\t%s\t%s\t-\n' "$label" "$out/$n.json" >>"$rows"
}

# power LABEL MINUTES FLAGS...: share of trials detected within MINUTES (comma-separated).
power() {
  local label="$1" minutes="$2"
  shift 2
  n=$((n + 1))
  echo "[$n] $label: $trials detection trials" >&2
  "$bin" detect simulate "${common[@]}" --trials "$trials" --days 0 "$@" "${extra[@]}" >"$out/$n.json"
  printf 'power\t%s\t%s\t%s\n' "$label" "$out/$n.json" "$minutes" >>"$rows"
}

extra=("$@")
: >"$rows"
null "(a) independent probes"
for tau in 2 5 15; do
  null "(b) load sd 0.1, tau $tau min" --load-sd 0.1 --load-tau-min "$tau"
done
null "(c) load sd 0.2, tau 5 min" --load-sd 0.2 --load-tau-min 5
null "(d) bimodal TTFT (70% hits, misses x3)" --cache-hit-share 0.7 --miss-factor 3
null "(e) one 40 s outage a day" --outage-s 40
null "(f) one 2-min 25% error burst a day" --burst-s 120 --burst-error-share 0.25
null "(g) rollout warm-up, no regression" --rollout
power "TTFT x1.25, independent" 15,60 --regression 1.25
power "TTFT x1.25, independent, no daily cycle" 15 --regression 1.25 --drift 0
power "TTFT x1.25, load sd 0.1 tau 5 min" 15,60 --regression 1.25 --load-sd 0.1 --load-tau-min 5
power "one scenario of 3 x1.4" 15 --regression 1.4 --regression-scenarios 1
power "one scenario of 3 x1.4, no daily cycle" 15 --regression 1.4 --regression-scenarios 1 --drift 0
power "bimodal, miss mode x1.5" 60 --regression 1.5 --cache-hit-share 0.7 --miss-factor 3 --regression-target miss
power "goodput 99.5% -> 97%" 15,60 --regression 1 --good-before 0.995 --good-after 0.97

python3 - "$rows" <<'EOF'
import json, sys

table = []
for line in open(sys.argv[1]):
    kind, label, path, minutes = line.rstrip("\n").split("\t")
    r = json.load(open(path))
    alarms, power = "", ""
    if kind == "null":
        fa = r["false_alarms"]
        t = fa["total"]
        alarms = "%.3f (<= %.3f) [release %d, continuous %d]" % (
            t["per_30_days"], t["upper95_per_30_days"], fa["release"]["count"], fa["continuous"]["count"])
        if fa["rollout"]:
            power = "release alarm in %d of %d releases" % (fa["windows_alarmed"], fa["days"])
    else:
        within = r["detection"]["detected_within"]
        power = ", ".join("%.3f within %s min" % (within[m], m) for m in minutes.split(","))
    table.append((label, alarms, power))

head = ("condition", "false alarms / 30 days (95% upper)", "power")
w = [max(len(row[i]) for row in table + [head]) for i in range(3)]
for row in [head, tuple("-" * x for x in w)] + table:
    print(" | ".join(c.ljust(w[i]) for i, c in enumerate(row)).rstrip())
EOF
