#!/usr/bin/env bash
# Probe-rate planner, acceptance table: runs `llmprobe detect simulate` (the real detector in
# virtual time) at 0.5 probes/s over 3 scenarios with the default detector settings, one run per
# condition, and prints one table:
#   condition | false alarms / 30 days (95% upper bound) | power
# Every row has a +-20% daily cycle and 1% outliers at 10x. False alarms: null days (one release a
# day, no regression) under independent probes; shared load (sd 0.1 at 2, 5, 15 min; sd 0.2 at
# 5 min, also with an offered-load reading of R² 0.9; sd 0.1 that swings x0.5..1.5 over the day,
# most in the busiest hour, at 5 and 15 min); bimodal TTFT; a 40 s outage, a 2-min error
# burst or a 15-min 2x latency incident a day; a rollout warm-up; a second marker of the same
# version 12 minutes after each release; 10 scenarios at 0.1 probes/s; goodput that counts TTFT
# SLO misses (independent probes, and load sd 0.1 at 5 and 15 min); scenarios that feel the load
# unlike (x0.67..1.33 and x0.5..1.5 under load sd 0.2). Power: TTFT x1.25
# (independent; under load sd 0.1 / 5 min without a reading and with readings of R² 0.9, 0.95,
# 0.98, 1; under load sd 0.2 with R² 0.98; after a 15-minute incident earlier that day (2x, 1.5x,
# 1.3x); with the marker 20 minutes late; with a repeated marker), one scenario of three x1.4, the cache-miss mode
# x1.5, the slowest 3% of requests x3, goodput 99.5% -> 97% (also at 1 probe/s), one scenario of
# 10 x1.5 under shared load. Operations: a release inside a morning ramp (x1.5 over 2 h; also with
# an offered-load reading, and under load sd 0.1 with and without it), a cold prefix cache after each release (with and without the engine's hit rate),
# TTFT x1.25 in both, and a creep of x1.1 an hour without a marker. A rolling update with replica
# discovery (4 replicas over 20 minutes, the canary comparison beside the detector): false alarms
# with a warm-up per replica and with replicas that differ, TTFT x1.25 at 0.5 and at 2 probes/s
# under load sd 0.1 (and the same without a second version, for comparison). With three days of
# history (the daily shape in use; half as many null days): false alarms of independent probes,
# a cycle whose amplitude varies by sd 30% a day, load sd 0.1 at 15 min and 0.2 at 5 min, an
# incident a day, a rollout warm-up and a ramp (also with an offered-load reading of R² 0.95),
# load sd 0.1 at 5 min with a reading of R² 0.98; TTFT x1.25 (also with the varying cycle, after
# an incident, under load sd 0.1 with the reading and inside the ramp with it), one scenario of
# three x1.4 and the creep.
# TRIALS: null days per condition (default 1000); DETECT_TRIALS: detection trials (default 300).
# LLMPROBE_BIN: a release binary to use (else one is built). ROWS: an extended regex; only the
# rows whose label matches run (e.g. ROWS='^\(b\)|ramp'). PLAN_OUT: a folder that keeps each
# row's JSON and the row list (else a temporary one, removed at the end). Extra arguments go to
# every run. The table is printed at the end, and of the rows finished so far when a run fails or
# is interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."

bin="$(scripts/release-bin.sh)"
days="${TRIALS:-1000}"
trials="${DETECT_TRIALS:-300}"
if [ -n "${PLAN_OUT:-}" ]; then
  out="$PLAN_OUT"
  mkdir -p "$out"
  cleanup=:
else
  out="$(mktemp -d)"
  cleanup='rm -rf "$out"'
fi
common=(--seed 1 --json)
# 0.5 probes/s over 3 scenarios unless the row names its own rate.
shape() { case " $* " in *" --rate "*|*" --scenarios "*) ;; *) echo "--rate 0.5 --scenarios 3" ;; esac; }
rows="$out/rows.tsv"
n=0
# Whether the row labelled $1 runs (ROWS unset: all).
wanted() { [ -z "${ROWS:-}" ] || grep -Eq -- "$ROWS" <<<"$1"; }

# null LABEL FLAGS...: false alarms of the condition, no regression.
null() {
  local label="$1"
  shift
  n=$((n + 1))
  wanted "$label" || return 0
  local d="${row_days:-$days}"
  echo "[$n] $label: $d null days" >&2
  # shellcheck disable=SC2046
  "$bin" detect simulate "${common[@]}" $(shape "$@") --trials 0 --days "$d" --regression 1 "$@" "${extra[@]}" >"$out/$n.json"
  printf 'null\t%s\t%s\t-\n' "$label" "$out/$n.json" >>"$rows"
}

# power LABEL MINUTES FLAGS...: share of trials detected within MINUTES (comma-separated).
power() {
  local label="$1" minutes="$2"
  shift 2
  n=$((n + 1))
  wanted "$label" || return 0
  echo "[$n] $label: $trials detection trials" >&2
  # shellcheck disable=SC2046
  "$bin" detect simulate "${common[@]}" $(shape "$@") --trials "$trials" --days 0 "$@" "${extra[@]}" >"$out/$n.json"
  printf 'power\t%s\t%s\t%s\n' "$label" "$out/$n.json" "$minutes" >>"$rows"
}

extra=("$@")
: >"$rows"
# The table of the rows finished, in order (at the end, and of a run that failed or was stopped).
render() {
  [ -s "$rows" ] || return 0
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
        if fa["rollout"] or r["params"]["cold_cache"] or r["params"]["ramp"]:
            power = "release alarm in %d of %d releases" % (fa["windows_alarmed"], fa["days"])
        if r["params"]["second_marker_s"] is not None:
            power = "alarms cleared by a marker: %d" % r["cleared_by_marker"]
        if r["params"]["side_by_side"]:
            power = "release alarm in %d, canary in %d of %d rollouts" % (fa["windows_alarmed"], fa["canary_rollouts_alarmed"], fa["days"])
    else:
        within = r["detection"]["detected_within"]
        power = ", ".join("%.3f within %s min" % (within[m], m) for m in minutes.split(","))
        if r["params"]["second_marker_s"] is not None:
            power += "; alarms cleared by a marker: %d" % r["cleared_by_marker"]
        if r["params"]["side_by_side"]:
            canary = r["detection"]["detected_within_by_source"]["canary"]
            power += " (canary first: %s)" % ", ".join("%.3f" % canary[m] for m in minutes.split(","))
    table.append((label, alarms, power))

head = ("condition", "false alarms / 30 days (95% upper)", "power")
w = [max(len(row[i]) for row in table + [head]) for i in range(3)]
for row in [head, tuple("-" * x for x in w)] + table:
    print(" | ".join(c.ljust(w[i]) for i, c in enumerate(row)).rstrip())
EOF
}
# The script's status is the runs' or, after them, the table's.
trap 'rc=$?; render || rc=1; eval "$cleanup"; exit "$rc"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
null "(a) independent probes"
for tau in 2 5 15; do
  null "(b) load sd 0.1, tau $tau min" --load-sd 0.1 --load-tau-min "$tau"
done
null "(c) load sd 0.2, tau 5 min" --load-sd 0.2 --load-tau-min 5
for tau in 5 15; do
  null "(q) load sd 0.1 x0.5..1.5 over the day, tau $tau min" --load-sd 0.1 --load-tau-min "$tau" --load-sd-day-swing 0.5
done
null "(c) load sd 0.2, tau 5 min, reading R² 0.9" --load-sd 0.2 --load-tau-min 5 --reading-r2 0.9
null "(d) bimodal TTFT (70% hits, misses x3)" --cache-hit-share 0.7 --miss-factor 3
null "(e) one 40 s outage a day" --outage-s 40
null "(f) one 2-min 25% error burst a day" --burst-s 120 --burst-error-share 0.25
null "(g) rollout warm-up, no regression" --rollout
null "(h) one 15-min 2x latency incident a day" --incident-s 900 --incident-factor 2
null "(h) the same, no release" --incident-s 900 --incident-factor 2 --no-marker
null "(i) a second marker 12 min after each" --second-marker-s 720
null "(j) 10 scenarios at 0.1 probes/s" --rate 0.1 --scenarios 10
# Scenarios that feel the shared load and the daily cycle unlike (factors evenly 1-S..1+S).
null "(o) scenarios feel load x0.67..1.33, sd 0.2" --load-sd 0.2 --load-tau-min 5 --scenario-load-spread 0.33
null "(o) scenarios feel load x0.5..1.5, sd 0.2" --load-sd 0.2 --load-tau-min 5 --scenario-load-spread 0.5
# Goodput that counts SLO misses, which rise and fall with load (TTFT above 600 ms: about 2% of
# probes, more under load).
null "(m) goodput counts TTFT SLO misses (600 ms)" --slo-ttft-ms 600
null "(m) the same, load sd 0.1, tau 5 min" --slo-ttft-ms 600 --load-sd 0.1 --load-tau-min 5
null "(m) the same, load sd 0.1, tau 15 min" --slo-ttft-ms 600 --load-sd 0.1 --load-tau-min 15
power "TTFT x1.25, independent" 15,60 --regression 1.25
power "TTFT x1.25, independent, no daily cycle" 15 --regression 1.25 --drift 0
power "TTFT x1.25, load sd 0.1 tau 5 min" 15,60 --regression 1.25 --load-sd 0.1 --load-tau-min 5
for r2 in 0.9 0.95 0.98 1; do
  power "TTFT x1.25, load sd 0.1, reading R² $r2" 15,60 --regression 1.25 --load-sd 0.1 --load-tau-min 5 --reading-r2 "$r2"
done
power "TTFT x1.25, load sd 0.1, R² 0.98, mediator 0.5" 15,60 --regression 1.25 --load-sd 0.1 --load-tau-min 5 --reading-r2 0.98 --reading-mediator 0.5
power "TTFT x1.25, load sd 0.2, reading R² 0.98" 15,60 --regression 1.25 --load-sd 0.2 --load-tau-min 5 --reading-r2 0.98
power "TTFT x1.25, 15-min incident earlier" 15,60 --regression 1.25 --incident-s 900 --incident-factor 2
power "TTFT x1.25, 15-min 1.5x incident earlier" 15,60 --regression 1.25 --incident-s 900 --incident-factor 1.5
power "TTFT x1.25, 15-min 1.3x incident earlier" 15,60 --regression 1.25 --incident-s 900 --incident-factor 1.3
power "TTFT x1.25, marker 20 min late" 15,60 --regression 1.25 --marker-delay-s 1200
power "TTFT x1.25, second marker at 12 min" 15,60 --regression 1.25 --second-marker-s 720
power "one scenario of 3 x1.4" 15 --regression 1.4 --regression-scenarios 1
power "one scenario of 3 x1.4, no daily cycle" 15 --regression 1.4 --regression-scenarios 1 --drift 0
power "one scenario of 10 x1.5, load sd 0.1" 60 --regression 1.5 --regression-scenarios 1 --scenarios 10 --load-sd 0.1 --load-tau-min 5
power "bimodal, miss mode x1.5" 60 --regression 1.5 --cache-hit-share 0.7 --miss-factor 3 --regression-target miss
power "slowest 3% x3, median unchanged" 60 --regression 3 --regression-target slowest --slowest-share 0.03
power "goodput 99.5% -> 97%" 15,60 --regression 1 --good-before 0.995 --good-after 0.97
power "goodput 99.5% -> 97%, 1 probe/s" 15,60 --regression 1 --good-before 0.995 --good-after 0.97 --rate 1 --scenarios 3
power "goodput 99.5% -> 97%, TTFT SLO misses too" 15,60 --regression 1 --good-before 0.995 --good-after 0.97 --slo-ttft-ms 600
# What operations do every day: a morning traffic ramp around the release (x1.5 over 2 hours),
# a cold prefix cache after the rollout's restarts (hit share recovering over 10-20 minutes),
# with and without the engine's readings; a slow creep (a leak) that only the continuous test
# can see.
null "(k) release during a ramp x1.5 over 2 h" --ramp-factor 1.5 --ramp-min 120
null "(k) the same, offered-load reading R² 0.95" --ramp-factor 1.5 --ramp-min 120 --reading-r2 0.95
null "(k) the same, load sd 0.1, no reading" --ramp-factor 1.5 --ramp-min 120 --load-sd 0.1 --load-tau-min 5
null "(k) the same, load sd 0.1, reading R² 0.95" --ramp-factor 1.5 --ramp-min 120 --load-sd 0.1 --load-tau-min 5 --reading-r2 0.95
null "(l) cold cache after each release, no reading" --cache-hit-share 0.7 --miss-factor 3 --cold-cache-min 10..20
null "(l) cold cache after each release, hit-rate reading" --cache-hit-share 0.7 --miss-factor 3 --cold-cache-min 10..20 --cache-reading
power "TTFT x1.25 during a ramp x1.5 over 2 h" 15,60 --regression 1.25 --ramp-factor 1.5 --ramp-min 120
power "TTFT x1.25 during a ramp x1.5 over 2 h, reading R² 0.95" 15,60 --regression 1.25 --ramp-factor 1.5 --ramp-min 120 --reading-r2 0.95
power "TTFT x1.25, cold cache, hit-rate reading" 15,60 --regression 1.25 --cache-hit-share 0.7 --miss-factor 3 --cold-cache-min 10..20 --cache-reading
power "creep x1.1 an hour, no marker" 180,360 --regression 1 --creep-per-h 1.1 --no-marker --horizon-min 360
# A rolling update with replica discovery: 4 replicas replaced one every 5 minutes, old and new
# serving side by side, the canary comparison running beside the detector; each new replica's
# warm-up (the rollout warm-up, from its own start) marked by discovery.
null "(n) rolling update, warm-up per replica" --side-by-side 4 --rollout
null "(n) the same, 2 probes/s, load sd 0.1" --side-by-side 4 --rollout --rate 2 --scenarios 3 --load-sd 0.1 --load-tau-min 5
null "(n) replicas that differ (sd 0.1), 2 probes/s" --side-by-side 4 --rate 2 --scenarios 3 --replica-sd 0.1
power "TTFT x1.25, rolling update" 15,60 --regression 1.25 --side-by-side 4
power "TTFT x1.25, rolling update, 2 probes/s, load sd 0.1" 15,60 --regression 1.25 --side-by-side 4 --rate 2 --scenarios 3 --load-sd 0.1 --load-tau-min 5
power "TTFT x1.25, 2 probes/s, load sd 0.1, one version" 15,60 --regression 1.25 --rate 2 --scenarios 3 --load-sd 0.1 --load-tau-min 5
# Three days of history before each trial (the daily shape from earlier days in use; half the
# null days: each costs 4 simulated days): the rows the daily cycle limited, the conditions
# that could fool a shape (a cycle whose amplitude varies from day to day, incidents, ramps,
# load), and a creep.
row_days=$(((days + 1) / 2))
h3=(--warmup-h 78)
null "(p) independent probes, 3 days of history" "${h3[@]}"
null "(p) the cycle's amplitude varies by sd 30% a day" "${h3[@]}" --drift-day-sd 0.3
null "(p) load sd 0.1, tau 15 min, 3 days" "${h3[@]}" --load-sd 0.1 --load-tau-min 15
null "(p) load sd 0.2, tau 5 min, 3 days" "${h3[@]}" --load-sd 0.2 --load-tau-min 5
null "(p) one 15-min 2x incident a day, 3 days" "${h3[@]}" --incident-s 900 --incident-factor 2
null "(p) rollout warm-up, 3 days" "${h3[@]}" --rollout
null "(p) release during a ramp x1.5 over 2 h, 3 days" "${h3[@]}" --ramp-factor 1.5 --ramp-min 120
null "(p) the same ramp, reading R² 0.95, 3 days" "${h3[@]}" --ramp-factor 1.5 --ramp-min 120 --reading-r2 0.95
null "(p) load sd 0.1, tau 5 min, reading R² 0.98, 3 days" "${h3[@]}" --load-sd 0.1 --load-tau-min 5 --reading-r2 0.98
unset row_days
power "TTFT x1.25, independent, 3 days" 15,60 --regression 1.25 "${h3[@]}"
power "TTFT x1.25, the cycle varies by sd 30% a day" 15,60 --regression 1.25 "${h3[@]}" --drift-day-sd 0.3
power "TTFT x1.25, 15-min incident earlier, 3 days" 15,60 --regression 1.25 --incident-s 900 --incident-factor 2 "${h3[@]}"
power "TTFT x1.25, load sd 0.1, reading R² 0.98, 3 days" 15,60 --regression 1.25 --load-sd 0.1 --load-tau-min 5 --reading-r2 0.98 "${h3[@]}"
power "TTFT x1.25 during a ramp x1.5 over 2 h, R² 0.95, 3 days" 15,60 --regression 1.25 --ramp-factor 1.5 --ramp-min 120 --reading-r2 0.95 "${h3[@]}"
power "one scenario of 3 x1.4, 3 days" 15 --regression 1.4 --regression-scenarios 1 "${h3[@]}"
power "creep x1.1 an hour, no marker, 3 days" 180,360 --regression 1 --creep-per-h 1.1 --no-marker --horizon-min 360 "${h3[@]}"

