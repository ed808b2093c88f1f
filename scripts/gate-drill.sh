#!/usr/bin/env bash
# Gate drill: `llmprobe gate` RUNS times against two mock engines side by side, first with the
# candidate as fast as the baseline, then RUNS times with it 1.25x slower (`/mock/control`),
# while both engines carry the same bursty background load: open arrivals whose rate swings by
# a factor of about 1.6 (log rate an Ornstein-Uhlenbeck process, sd 0.5, tau 30 s, around 4/s),
# each arrival sent to both engines. Every gate run is `--until-verdict` over at most DURATION
# (default 120s) with 12 looks, 5 s blocks, 8 pairs/s and the default effects (pass below 1.25x
# and a 2-point goodput drop, regress above 1.05x). Prints each run's verdict and time to verdict,
# then per condition the verdicts, the median and longest time to verdict and the false verdicts
# (equal: regressed; slower: passed). About RUNS x 2 x 1 minute.
#
#   scripts/gate-drill.sh [RUNS] [DURATION]      (default 5 runs each, 120s)
#
# LLMPROBE_BIN: the binary to drill (else a release binary is built). Ports 18320-18321 on
# 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${1:-5}"
duration="${2:-120s}"
# shellcheck source=scripts/drill-env.sh
. scripts/drill-env.sh

base=127.0.0.1:18320
cand=127.0.0.1:18321
"$bin" mock --listen "$base" --log warn >"$work/base.log" 2>&1 &
pids+=($!)
"$bin" mock --listen "$cand" --log warn >"$work/cand.log" 2>&1 &
pids+=($!)
python3 scripts/wait-ports.py 18320 18321

cat >"$work/gate.yaml" <<YAML
probe: {rate: 8, max_in_flight: 512}
targets:
  - name: mock
    base_url: http://$base
    api: openai-chat
    model: mock-llama
    timeouts: {connect: 1s, ttft: 10s, idle: 10s, total: 60s}
scenarios:
  - {name: chat, weight: 3, input_tokens: 128, output_tokens: {min: 16, max: 48}}
  - {name: rag, weight: 1, input_tokens: 1024, output_tokens: 16}
slo: {ttft: 2s, tpot: 100ms, e2e: 20s, objective: 0.99}
YAML

python3 - "$bin" "$work" "$base" "$cand" "$runs" "$duration" <<'PY'
import json, os, statistics, subprocess, sys, threading, time, urllib.request

sys.path.insert(0, "scripts")
import bursty_load

bin, work, base, cand, runs, duration = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
stop = threading.Event()
def slowdown(factor):
    body = json.dumps({"slowdown": factor}).encode()
    urllib.request.urlopen(urllib.request.Request("http://%s/mock/control" % cand, body, {"content-type": "application/json"}), timeout=5).read()

def gate(tag):
    out = os.path.join(work, tag)
    p = subprocess.run([bin, "gate", "--baseline", "http://" + base, "--candidate", "http://" + cand, "--config", os.path.join(work, "gate.yaml"),
                        "--output", out, "--duration", duration, "--until-verdict", "--looks", "12", "--block", "5s", "--json", "--log", "warn"],
                       capture_output=True, text=True)
    r = json.loads(p.stdout)
    return p.returncode, r

# The same arrivals to both engines (the load they share): about 4 requests/s of 600-word
# prompts, the log rate swinging with sd 0.5 over about 30 s.
bursty_load.start(["http://" + base, "http://" + cand], "mock-llama", stop, rate=4.0, tau_s=30.0)
print("machine: %d cores, load average %s" % (os.cpu_count(), " ".join("%.1f" % l for l in os.getloadavg())), flush=True)
time.sleep(10)
results = {}
for name, factor, false in (("equal", 1.0, "regressed"), ("1.25x slower", 1.25, "passed")):
    slowdown(factor)
    rows = []
    for i in range(runs):
        code, r = gate("%s-%d" % (name.split()[0], i))
        decided = {s["signal"]: s["decision"] for s in r["signals"]}
        print("%-13s run %d: %-12s exit %d after %5.1f s (%d pairs, look %d of %d) %s" % (
            name, i, r["verdict"], code, r["elapsed_s"], r["pairs"], r["looks_taken"], r["settings"]["looks"], decided), flush=True)
        rows.append(r)
    results[name] = (rows, false)
stop.set()
print()
print("load average at the end: %s" % " ".join("%.1f" % l for l in os.getloadavg()))
print("condition     | runs | passed | regressed | inconclusive | time to verdict median / max (s) | false verdicts")
for name, (rows, false) in results.items():
    count = lambda v: sum(1 for r in rows if r["verdict"] == v)
    decided = [r["elapsed_s"] for r in rows if r["verdict"] in ("passed", "regressed")]
    times = "%.0f / %.0f" % (statistics.median(decided), max(decided)) if decided else "-"
    print("%-13s | %4d | %6d | %9d | %12d | %-33s | %d (%s)" % (name, len(rows), count("passed"), count("regressed"), count("inconclusive"), times, count(false), false))
PY
