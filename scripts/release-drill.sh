#!/usr/bin/env bash
# Release drill: the mock engine under bursty open-arrival background load (the offered rate
# swings by a factor of about 1.6 with a one-minute time constant), two probers side by side on
# it - one scraping the engine's /metrics (its offered-load readings reach the detector), one
# without - and releases through /mock/control, each seen by both probers' discovery as a
# version change: first a release without a slowdown, then one 1.3x slower, PAIRS times. The
# detector's settings are scaled down (10 s bins, 5-minute baseline, 30 s grace) so a drill
# takes about 6 + 8 x PAIRS minutes. Prints, per prober, the detection time of each slow
# release and the alarms raised by the releases without a slowdown.
#
#   scripts/release-drill.sh [PAIRS]        (default 1: about 14 minutes)
#
# LLMPROBE_BIN: a release binary (else one is built). Ports 18310-18312 on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

pairs="${1:-1}"
# shellcheck source=scripts/drill-env.sh
. scripts/drill-env.sh

mock=127.0.0.1:18310
"$bin" mock --listen "$mock" --log warn >"$work/mock.log" 2>&1 &
pids+=($!)

# One prober config; $2 is its sources section (empty: no readings).
prober_config() {
  cat <<EOF
listen: $1
probe: {rate: 2.0, seed: 7, max_in_flight: 128, discovery_interval: 5s, shutdown_grace: 2s}
targets:
  - name: mock
    base_url: http://$mock
    api: openai-chat
    model: mock-llama
    timeouts: {connect: 1s, ttft: 10s, idle: 10s, total: 60s}
scenarios:
  - {name: chat, weight: 3, input_tokens: 128, output_tokens: 32}
  - {name: rag, weight: 1, input_tokens: 1024, output_tokens: 16}
slo: {ttft: 2s, tpot: 100ms, e2e: 20s, objective: 0.99}
detect:
  tuning:
    bin_s: 10
    latency_baseline_s: 300
    goodput_baseline_s: 600
    armed_window_s: 600
    release_grace_s: 30
    history_s: 3600
    continuous_reference_s: 1200
    continuous_window_s: 300
    continuous_look_s: 60
    min_goodput_baseline: 100
$2
EOF
}
prober_config 127.0.0.1:18311 "sources: [{kind: engine, target: mock, interval: 5s}]" >"$work/with.yaml"
prober_config 127.0.0.1:18312 "" >"$work/without.yaml"
python3 scripts/wait-ports.py 18310
"$bin" probe --config "$work/with.yaml" --log warn >"$work/with.log" 2>&1 &
pids+=($!)
"$bin" probe --config "$work/without.yaml" --log warn >"$work/without.log" 2>&1 &
pids+=($!)
python3 scripts/wait-ports.py 18311 18312

python3 - "$mock" "$pairs" <<'PY'
import json, sys, threading, time, urllib.request

sys.path.insert(0, "scripts")
import bursty_load

mock, pairs = sys.argv[1], int(sys.argv[2])
probers = {"with readings": "http://127.0.0.1:18311/metrics", "without": "http://127.0.0.1:18312/metrics"}
stop = threading.Event()

def control(version, slowdown):
    body = json.dumps({"engine_version": version, "slowdown": slowdown}).encode()
    urllib.request.urlopen(urllib.request.Request("http://%s/mock/control" % mock, body, {"content-type": "application/json"}), timeout=5).read()

def regressed(url):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    hits = []
    for line in text.splitlines():
        if line.startswith("llmprobe_detect_state{") and 'scenario="*"' in line and 'state="regressed"' in line and line.rstrip().endswith(" 1"):
            hits.append(line.split('signal="')[1].split('"')[0])
    return hits

def watch(seconds, t0):
    first = {}
    end = time.time() + seconds
    while time.time() < end:
        for name, url in probers.items():
            try:
                if name not in first and regressed(url):
                    first[name] = time.time() - t0
            except Exception:
                pass
        time.sleep(2)
    return first

# Around 6 requests/s of 600-word prompts, the log rate swinging with sd 0.5 over about a minute.
bursty_load.start(["http://" + mock], "mock-llama", stop)
print("warming up the baselines under bursty load (6 min)", flush=True)
time.sleep(360)
results = {name: {"null": 0, "slow": []} for name in probers}
for i in range(pairs):
    t0 = time.time()
    control("drill-%d-a" % i, 1.0)
    seen = watch(240, t0)
    for name in probers:
        results[name]["null"] += name in seen
    print("release %d-a (no slowdown): alarms %s" % (i, {n: round(s) for n, s in seen.items()} or "none"), flush=True)
    t0 = time.time()
    control("drill-%d-b" % i, 1.3)
    seen = watch(240, t0)
    for name in probers:
        results[name]["slow"].append(seen.get(name))
    print("release %d-b (1.3x slower): detected after %s s" % (i, {n: round(s) for n, s in seen.items()} or "none"), flush=True)
    control("drill-%d-c" % i, 1.0)
stop.set()
print()
print("prober          | slow releases detected (seconds after the release) | alarms on releases without a slowdown")
for name, r in results.items():
    times = ", ".join("%.0f" % t if t is not None else "missed" for t in r["slow"])
    print("%-15s | %-50s | %d of %d" % (name, times, r["null"], pairs))
PY
