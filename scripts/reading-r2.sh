#!/usr/bin/env bash
# How well the engine's own offered-load reading tracks probe latency: an engine under bursty
# open-arrival background load (scripts/bursty_load.py), a prober sending chat probes and writing
# each to a JSON-lines file, and the engine's /metrics read every 5 s as the prober's engine source
# reads it (offered prompt tokens per second from the counter's increase between two reads; the
# detector's reading is ln(1 + that)). Each probe is joined to the reading current at its send
# time, in time order, and the probes are pooled in bins. Prints, per bin width, the R² of the bin
# mean log TTFT on the bin mean reading, the probe noise's share of the bin means' variance, and
# the R² of the load's part (the bin means less their probe noise): the figure the planner's
# `--reading-r2` stands for.
#
#   scripts/reading-r2.sh [MINUTES [ENGINE_URL MODEL]]     (default 20 minutes on the built-in mock)
#
# LOAD_RATE (requests/s, default 6), LOAD_WORDS (prompt words, 600), LOAD_TOKENS (max_tokens, 48),
# PROBE_RATE (2) size it for a slower engine. LLMPROBE_BIN: a release binary (else one is built).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-20}"
engine="${2:-}"
model="${3:-mock-llama}"
# shellcheck source=scripts/drill-env.sh
. scripts/drill-env.sh

read -r mock_port prober_port <<<"$(python3 scripts/free-ports.py 2 3)"
if [ -z "$engine" ]; then
  engine="http://127.0.0.1:$mock_port"
  "$bin" mock --listen "127.0.0.1:$mock_port" --log warn >"$work/mock.log" 2>&1 &
  pids+=($!)
  python3 scripts/wait-ports.py "$mock_port"
fi
cat >"$work/prober.yaml" <<YAML
listen: 127.0.0.1:$prober_port
probe: {rate: ${PROBE_RATE:-2}, seed: 7, max_in_flight: 128}
targets:
  - {name: engine, base_url: "$engine", api: openai-chat, model: "$model", timeouts: {connect: 2s, ttft: 60s, idle: 60s, total: 120s}}
scenarios:
  - {name: chat, input_tokens: 128, output_tokens: 16}
jsonl: {path: $work/probes.jsonl}
YAML
"$bin" probe --config "$work/prober.yaml" --log warn >"$work/prober.log" 2>&1 &
pids+=($!)
python3 scripts/wait-ports.py "$prober_port"

python3 - "$engine" "$model" "$minutes" "$work/probes.jsonl" <<'PY'
import math, os, sys, threading, time, urllib.request

sys.path.insert(0, "scripts")
import bursty_load

engine, model, minutes, probes = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
stop = threading.Event()
bursty_load.start([engine], model, stop, rate=float(os.environ.get("LOAD_RATE", 6)), words=int(os.environ.get("LOAD_WORDS", 600)),
                  max_tokens=int(os.environ.get("LOAD_TOKENS", 48)))

def prompt_tokens():
    text = urllib.request.urlopen(engine + "/metrics", timeout=5).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("vllm:prompt_tokens_total"))

print("bursty load and probes for %.0f minutes on %s" % (minutes, engine), flush=True)
reads, end = [], time.time() + minutes * 60
while time.time() < end:
    try:
        reads.append((time.time(), prompt_tokens()))
    except Exception:
        pass
    time.sleep(5)
stop.set()

# The reading current at each moment: the rate between the two reads before it.
readings = [(b[0], math.log1p(max(b[1] - a[1], 0.0) / (b[0] - a[0]))) for a, b in zip(reads, reads[1:]) if b[0] > a[0]]
rows = []
for line in open(probes):
    import json
    p = json.loads(line)
    if p.get("kind") != "probe" or p.get("ttft_ms") is None or p["sent_unix_s"] < readings[0][0] + 60:
        continue
    current = [r for r in readings if r[0] <= p["sent_unix_s"]]
    if current:
        rows.append((p["sent_unix_s"], math.log(p["ttft_ms"] / 1000.0), current[-1][1]))
rows.sort()
print("%d probes with a reading, %d engine reads" % (len(rows), len(reads)))

def mean(v):
    return sum(v) / len(v)

print("bin   | bins | R² bin means | probe noise share | R² load part | slope (log TTFT per log load)")
for width in (10, 30, 60):
    bins = {}
    for t, y, x in rows:
        bins.setdefault(int(t // width), []).append((y, x))
    bins = [b for b in bins.values() if len(b) >= 3]
    if len(bins) < 10:
        continue
    ys = [mean([p[0] for p in b]) for b in bins]
    xs = [mean([p[1] for p in b]) for b in bins]
    noise = mean([sum((p[0] - mean([q[0] for q in b])) ** 2 for p in b) / (len(b) - 1) / len(b) for b in bins])
    my, mx = mean(ys), mean(xs)
    syy = sum((y - my) ** 2 for y in ys) / (len(ys) - 1)
    sxx = sum((x - mx) ** 2 for x in xs) / (len(xs) - 1)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (len(xs) - 1)
    r2 = sxy * sxy / (sxx * syy) if sxx > 0 and syy > 0 else float("nan")
    share = min(noise / syy, 1.0) if syy > 0 else float("nan")
    load_r2 = min(r2 / (1.0 - share), 1.0) if share < 1.0 else float("nan")
    print("%3d s | %4d | %12.3f | %17.3f | %12.3f | %.3f" % (width, len(bins), r2, share, load_r2, sxy / sxx if sxx > 0 else float("nan")))
PY
