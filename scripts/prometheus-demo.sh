#!/usr/bin/env bash
# Runs a real Prometheus on loopback against two live probers and checks that the recording rules in
# alerts/llmprobe-rules.yml evaluate to sensible numbers:
#   healthy: `llmprobe demo` (built-in mock engine, no faults, target "mock", 4 probes/s)
#   faulty:  `llmprobe mock --fault http_500=0.2` probed by `llmprobe probe` at 10 probes/s
#            (target "mock-faulty"), so the error ratio and the burn rates must move.
#   release: a third mock probed at 5 probes/s (target "mock-release", replicas discovered by DNS on
#            127.0.0.1, so its series carry a `replica` label and the replica row has data), with the
#            release-regression detector on a small baseline; a third of the way into the wait the
#            script simulates a release (POST /mock/control: engine version 0.33.0, every engine
#            step 2.5x slower). The prober's discovery (every 1 s) marks the release, its detector
#            turns `regressed`, and Prometheus must return the target from LLMProbeReleaseRegression's
#            expression; the Prometheus-history z-tests must evaluate without error (they arm only
#            15m after a marker, so they stay empty here).
# One Prometheus (scrape and rule evaluation every 1 s, storage in a temp dir) scrapes both probers,
# the two mock engines (vLLM /metrics and the fake dcgm-exporter page) and two static pages from
# tests/fixtures/ops/scrape/ served on loopback (a dcgm-exporter page with Kubernetes pod labels,
# scraped the way dcgm-exporter's default ServiceMonitor does so they arrive as exported_pod, and a
# real llama-server /metrics page), and runs every dashboard panel query. The GPU utilization panel
# must find the inference pod's GPU through exported_pod.
# After the wait it prints, per target and scenario, the recording rules, the TTFT p95 from
# llmprobe_ttft_seconds_bucket, the error ratio computed from the prober's own counters, and the
# alerts' states. Exits non-zero when a recording rule has no data, a rule evaluates with an error, or
# a value is nonsense (ratio outside [0,1], burn rate not ratio/budget, rule far from the prober's
# own counters, faulty target not showing its injected 20% of HTTP 500s).
#
#   scripts/prometheus-demo.sh [--wait SECONDS] [--bin path/to/llmprobe] [--keep]
# --wait: how long both probers run under Prometheus before the queries (default 75).
# --keep: keep the temp dir (configs, logs, TSDB) and print its path.
# Needs: prometheus (Debian package `prometheus`), python3, a built llmprobe (cargo build), and the
# loopback port 18000 free (the demo's mock engine binds it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

wait_s=90
bin=target/debug/llmprobe
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --wait) wait_s=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$wait_s" -ge 20 ] 2>/dev/null || { echo "--wait must be a number of seconds >= 20" >&2; exit 2; }
command -v prometheus >/dev/null || { echo "prometheus not found (apt-get install prometheus)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin not found: run cargo build first" >&2; exit 2; }
if python3 -c 'import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(("127.0.0.1",18000))!=0)'; then
  echo "127.0.0.1:18000 is in use; the demo's mock engine needs it" >&2; exit 2
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ "$keep" -eq 1 ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# Nine distinct free ports, picked together (scripts/free-ports.py says why).
read -r demo_port mock_port probe_port prom_port static_port rel_mock_port rel_probe_port seq_mock_port seq_probe_port <<<"$(scripts/free-ports.py 9 0)"

# --- static scrape pages (dcgm-exporter in Kubernetes, llama-server) -------------------------------
python3 -m http.server --bind 127.0.0.1 --directory "$ROOT/tests/fixtures/ops/scrape" "$static_port" >"$tmp/static.log" 2>&1 &
pids+=($!)

# --- healthy: the demo --------------------------------------------------------------------------
"$bin" demo --listen "127.0.0.1:$demo_port" --summary-every 3600 >"$tmp/demo.log" 2>&1 &
pids+=($!)

# --- faulty: mock engine with 20% HTTP 500, probed at 10/s ----------------------------------------
"$bin" mock --listen "127.0.0.1:$mock_port" --fault http_500=0.2 >"$tmp/mock.log" 2>&1 &
pids+=($!)
cat >"$tmp/faulty.yaml" <<EOF
listen: 127.0.0.1:$probe_port
probe:
  rate: 10.0
  seed: 7
  max_in_flight: 160     # 10/s x 15 s total timeout, with room
  shutdown_grace: 2s
targets:
  - name: mock-faulty
    base_url: http://127.0.0.1:$mock_port
    api: openai-chat
    model: mock-llama
    timeouts: {connect: 1s, ttft: 5s, idle: 5s, total: 15s}
scenarios:
  - name: chat-short
    weight: 3
    input_tokens: 128
    output_tokens: {min: 32, max: 64}
  - name: rag-long
    weight: 1
    input_tokens: {min: 1024, max: 2048}
    output_tokens: 64
slo:
  ttft: 500ms
  tpot: 50ms
  e2e: 10s
  objective: 0.99
EOF
"$bin" check-config "$tmp/faulty.yaml" >/dev/null

# --- release: mock engine that will get a new version and a slowdown, probed at 5/s ---------------
"$bin" mock --listen "127.0.0.1:$rel_mock_port" >"$tmp/release-mock.log" 2>&1 &
pids+=($!)
# generous SLO thresholds: the slowdown shows in the latency signals, not as SLO misses
cat >"$tmp/release.yaml" <<EOF
listen: 127.0.0.1:$rel_probe_port
probe: {rate: 5.0, seed: 11, max_in_flight: 100, discovery_interval: 1s, shutdown_grace: 2s}
targets:
  - name: mock-release
    base_url: http://127.0.0.1:$rel_mock_port
    api: openai-chat
    model: mock-llama
    discover: {kind: dns, name: 127.0.0.1, port: $rel_mock_port, interval: 1s}
    timeouts: {connect: 1s, ttft: 5s, idle: 5s, total: 15s}
scenarios:
  - name: chat-short
    input_tokens: 64
    output_tokens: 16
slo: {ttft: 5s, tpot: 500ms, e2e: 15s, objective: 0.99}
# the detector scaled down (the defaults want an hour of baseline and a 5-minute grace window):
# 5 s bins, a one-minute baseline of at least 30 probes (ready in ~6 s at 5/s), a 5 s grace
# window, so the first look comes 25 s after the marker
detect:
  tuning: {bin_s: 5, history_s: 4800, latency_baseline_s: 60, goodput_baseline_s: 600, min_latency_baseline: 30, release_grace_s: 5, continuous_window_s: 60, continuous_reference_s: 600, continuous_look_s: 10}
EOF
"$bin" check-config "$tmp/release.yaml" >/dev/null

# --- sessions: conversations, a prefix-cache pair and an agent loop against a mock that reports
# cached tokens (as vLLM with --enable-prompt-tokens-details), 5% HTTP 500 so some are cut -------
"$bin" mock --listen "127.0.0.1:$seq_mock_port" --enable-prompt-tokens-details --fault http_500=0.05 >"$tmp/seq-mock.log" 2>&1 &
pids+=($!)
cat >"$tmp/sessions.yaml" <<EOF
listen: 127.0.0.1:$seq_probe_port
probe: {rate: 4.0, seed: 13, max_in_flight: 100, shutdown_grace: 2s}
targets:
  - name: mock-sessions
    base_url: http://127.0.0.1:$seq_mock_port
    api: openai-chat
    model: mock-llama
    timeouts: {connect: 1s, ttft: 5s, idle: 5s, total: 15s}
scenarios:
  - name: chat-3-turns
    turns:
      - {input_tokens: 128, output_tokens: 16}
      - {input_tokens: 32, output_tokens: 16}
      - {input_tokens: 32, output_tokens: 16}
    think_time: 200ms
  - name: prefix-cache-pair
    input_tokens: 256
    output_tokens: 8
    cache_pair: {prefix_tokens: 192}
  - name: agent-two-tools
    input_tokens: 32
    output_tokens: 32
    agent:
      expect_calls: [get_weather, get_time]
      tools:
        - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}, required: [city]}, result: {temperature: 18}}
        - {name: get_time, parameters: {type: object, properties: {city: {type: string}}, required: [city]}, result: "14:05"}
slo: {ttft: 5s, e2e: 15s, objective: 0.99}
EOF
"$bin" check-config "$tmp/sessions.yaml" >/dev/null
# wait for the mock before probing, so the first probes are not connect errors
scripts/wait-ports.py "$mock_port" "$rel_mock_port" "$seq_mock_port"
"$bin" probe --config "$tmp/faulty.yaml" >"$tmp/probe.log" 2>&1 &
pids+=($!)
"$bin" probe --config "$tmp/release.yaml" >"$tmp/release-probe.log" 2>&1 &
pids+=($!)
"$bin" probe --config "$tmp/sessions.yaml" >"$tmp/sessions-probe.log" 2>&1 &
pids+=($!)

# --- Prometheus ---------------------------------------------------------------------------------
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $tmp/llmprobe-rules.yml
scrape_configs:
  - job_name: llmprobe
    static_configs:
      - targets: ['127.0.0.1:$demo_port', '127.0.0.1:$probe_port', '127.0.0.1:$rel_probe_port', '127.0.0.1:$seq_probe_port']
  # the mock engines export vLLM's metric names: the engine dashboard's vLLM panels read them
  - job_name: vllm
    static_configs:
      - targets: ['127.0.0.1:18000', '127.0.0.1:$mock_port']
  # and a dcgm-exporter page for the GPU panels
  - job_name: dcgm
    metrics_path: /dcgm/metrics
    static_configs:
      - targets: ['127.0.0.1:18000', '127.0.0.1:$mock_port']
  # dcgm-exporter as its default ServiceMonitor (honorLabels: false) scrapes it: the target carries the
  # exporter pod's own namespace/pod, so the page's inference pod labels become exported_namespace and
  # exported_pod
  - job_name: dcgm-k8s
    honor_labels: false
    metrics_path: /dcgm-exporter-k8s.txt
    static_configs:
      - targets: ['127.0.0.1:$static_port']
        labels: {namespace: gpu-operator, pod: nvidia-dcgm-exporter-x7k2p, container: nvidia-dcgm-exporter}
  # a real llama-server page for the llama.cpp panels
  - job_name: llamacpp
    metrics_path: /llama-server-metrics.txt
    static_configs:
      - targets: ['127.0.0.1:$static_port']
EOF
# The shipped rules, each group evaluated every second instead of every minute for this short run
# (the only change; alerts/llmprobe-rules.yml itself sets `interval: 1m`).
sed -E 's/^    interval: [0-9]+[a-z]+$/    interval: 1s/' "$ROOT/alerts/llmprobe-rules.yml" >"$tmp/llmprobe-rules.yml"
promtool check config "$tmp/prometheus.yml" >/dev/null
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)

echo "demo prober 127.0.0.1:$demo_port, faulty prober 127.0.0.1:$probe_port (mock :$mock_port, http_500=0.2),"
echo "release prober 127.0.0.1:$rel_probe_port (mock :$rel_mock_port; release simulated after $((wait_s / 3))s),"
echo "prometheus 127.0.0.1:$prom_port (scrape and evaluation every 1s); waiting ${wait_s}s"
started=$(date +%s)
python3 - "$prom_port" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/-/ready", timeout=1).status == 200:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit("prometheus did not become ready")
PY
ready_at=$(date +%s.%N)
# counters at the start of the window, to check the rules against the probers' own numbers
fetch() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
fetch "http://127.0.0.1:$demo_port/metrics" >"$tmp/start-demo.txt"
fetch "http://127.0.0.1:$probe_port/metrics" >"$tmp/start-faulty.txt"
fetch "http://127.0.0.1:$rel_probe_port/metrics" >"$tmp/start-release.txt"
fetch "http://127.0.0.1:$seq_probe_port/metrics" >"$tmp/start-sessions.txt"
# the release a third of the way in: the detector has its baseline, and the rest of the wait is
# ample for it to turn `regressed` (~25-40 s) and for Prometheus to scrape and evaluate that
sleep $((wait_s / 3))
release_at=$(date +%s.%N)
python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"), timeout=5).read()' \
  "http://127.0.0.1:$rel_mock_port/mock/control" '{"engine_version":"0.33.0","slowdown":2.5}'
sleep $((wait_s - wait_s / 3))
for p in "${pids[@]}"; do
  kill -0 "$p" 2>/dev/null || { echo "a process died early; logs:" >&2; tail -n 20 "$tmp"/*.log >&2; exit 1; }
done

rc=0
python3 - "$prom_port" "$tmp" "127.0.0.1:$demo_port" "127.0.0.1:$probe_port" "$ready_at" "$release_at" "127.0.0.1:$rel_probe_port" "127.0.0.1:$seq_probe_port" <<'PY' || rc=$?
import json, math, re, sys, time, urllib.parse, urllib.request
prom, tmp, demo_addr, faulty_addr, ready_at, release_at, release_addr, sessions_addr = sys.argv[1:9]
from datetime import datetime
API = f"http://127.0.0.1:{prom}/api/v1"
problems = []

def get(path, **params):
    url = f"{API}/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
    body = json.load(urllib.request.urlopen(url, timeout=10))
    if body.get("status") != "success":
        sys.exit(f"{url}: {body}")
    return body["data"]

def query(expr):
    """{(target, scenario): value} of an instant vector."""
    out = {}
    for s in get("query", query=expr, time=f"{AT:.3f}")["result"]:
        out[(s["metric"].get("target", ""), s["metric"].get("scenario", ""))] = float(s["value"][1])
    return out

SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)\{([^}]*)\} (\S+)', re.M)
def counters(text):
    """(target, scenario) -> {good, valid, http_5xx} from a prober's own /metrics text."""
    c = {}
    for name, labels, value in SAMPLE.findall(text):
        l = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        k = c.setdefault((l.get("target"), l.get("scenario")), {"good": 0.0, "valid": 0.0, "failed": 0.0,
                                                                "http_5xx": 0.0, "miss ttft": 0.0,
                                                                "miss tpot": 0.0, "miss e2e": 0.0})
        if name == "llmprobe_goodput_requests_total":
            k["good"] += float(value)
        elif name == "llmprobe_slo_violations_total":
            k["miss " + l["slo"]] += float(value)
        elif name == "llmprobe_requests_total" and l["outcome"] != "dropped" and l["error"] != "cancelled":
            k["valid"] += float(value)
            if l["outcome"] == "error":
                k["failed"] += float(value)
                k["class " + l["error"]] = k.get("class " + l["error"], 0.0) + float(value)
            k["http_5xx"] += float(value) if l["error"] == "http_5xx" else 0.0
    return c

# The probers' own counters over the window: first Prometheus scrape .. AT. The rules are then read
# at AT, once the evaluations up to AT are done.
own = {}
AT = time.time()
for which, addr in (("demo", demo_addr), ("faulty", faulty_addr), ("release", release_addr), ("sessions", sessions_addr)):
    start = counters(open(f"{tmp}/start-{which}.txt").read())
    end = counters(urllib.request.urlopen(f"http://{addr}/metrics", timeout=5).read().decode())
    for key, e in end.items():
        own[key] = {k: v - start.get(key, {}).get(k, 0.0) for k, v in e.items()}
time.sleep(2.5)

# every rule evaluated, and without an error
rules = [r for g in get("rules")["groups"] for r in g["rules"]]
for r in rules:
    if r.get("health") != "ok" or r.get("lastError"):
        problems.append(f"rule {r['name']}: health {r.get('health')} {r.get('lastError', '')}")

COLS = [
    ("objective", "llmprobe:slo_objective:ratio"),
    ("budget", "llmprobe:slo_error_budget:ratio"),
    ("err 5m", "llmprobe:goodput_error_ratio:rate5m"),
    ("err 1h", "llmprobe:goodput_error_ratio:rate1h"),
    ("burn 5m", "llmprobe:goodput_burn_rate:rate5m"),
    ("burn 30m", "llmprobe:goodput_burn_rate:rate30m"),
    ("burn 1h", "llmprobe:goodput_burn_rate:rate1h"),
    ("burn 6h", "llmprobe:goodput_burn_rate:rate6h"),
    ("ttft p95 s", "histogram_quantile(0.95, sum by (target, scenario, le) (rate(llmprobe_ttft_seconds_bucket[5m])))"),
]
data = {name: query(expr) for name, expr in COLS}
series = sorted(query("llmprobe_slo_objective_ratio"))
if not series:
    problems.append("no llmprobe_slo_objective_ratio series: Prometheus scraped nothing")

header = ["target", "scenario"] + [c for c, _ in COLS] + ["probes", "own err", "failed", "by class", "SLO misses"]
rows = []
for key in series:
    row = [key[0], key[1]]
    for name, expr in COLS:
        v = data[name].get(key)
        row.append("NO DATA" if v is None else f"{v:.4g}")
        if v is None:
            problems.append(f"{key}: {expr} has no data")
    o = own.get(key)
    if o and o["valid"] > 0:
        misses = " ".join(f"{k[5:]}:{o[k]:.0f}" for k in ("miss ttft", "miss tpot", "miss e2e") if o[k]) or "-"
        classes = " ".join(f"{k[6:]}:{v:.0f}" for k, v in sorted(o.items()) if k.startswith("class ") and v) or "-"
        row += [f"{o['valid']:.0f}", f"{1 - o['good'] / o['valid']:.4f}", f"{o['failed']:.0f}", classes, misses]
    else:
        row += ["0", "-", "-", "-", "-"]
        problems.append(f"{key}: the prober counted no probes in the window")
    rows.append(row)
widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
for r in [header] + rows:
    print("  ".join(str(x).rjust(w) if i > 1 else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths))))

def val(name, key):
    return data[name].get(key)

for key in series:
    obj, bud, err, burn = (val(n, key) for n in ("objective", "budget", "err 5m", "burn 5m"))
    if None in (obj, bud, err, burn):
        continue
    where = f"{key[0]}/{key[1]}"
    if not 0 < obj < 1:
        problems.append(f"{where}: objective {obj} outside (0,1)")
    if abs(bud - (1 - obj)) > 1e-9:
        problems.append(f"{where}: budget {bud} != 1 - objective {obj}")
    for name in ("err 5m", "err 1h"):
        v = val(name, key)
        if v is not None and not 0 <= v <= 1:
            problems.append(f"{where}: {name} {v} outside [0,1]")
    if not math.isclose(burn, err / bud, rel_tol=1e-6, abs_tol=1e-9):
        problems.append(f"{where}: burn rate 5m {burn} != error ratio / budget {err / bud}")
    p95 = val("ttft p95 s", key)
    if p95 is not None and not (0 < p95 <= 5):  # 5 s is the ttft timeout of both configs
        problems.append(f"{where}: TTFT p95 {p95} s is not within (0, 5]")
    o = own.get(key)
    # rate() extrapolates each series on its own and the windows' edges differ by a scrape: allow
    # 0.03 plus two probes' worth
    if o and o["valid"] >= 20 and abs(err - (1 - o["good"] / o["valid"])) > 0.03 + 2 / o["valid"]:
        problems.append(f"{where}: error ratio 5m {err:.4f} is far from the prober's own {1 - o['good'] / o['valid']:.4f}")

# The faulty target must show its injected 20% of HTTP 500s. The healthy one fails no probe except by
# timeout: on a loaded machine the mock's paced tokens can run past the demo's 15 s total timeout for
# a long generation. Latency SLO misses are the engine's speed, not failures.
faulty = [k for k in series if k[0] == "mock-faulty"]
healthy = [k for k in series if k[0] == "mock"]
if not faulty or not healthy:
    problems.append(f"expected series for targets mock and mock-faulty, got {series}")
tot = {k: sum(own[x][k] for x in faulty if x in own) for k in ("valid", "http_5xx")}
if tot["valid"] and not 0.12 <= tot["http_5xx"] / tot["valid"] <= 0.28:
    problems.append(f"mock-faulty: HTTP 5xx share {tot['http_5xx'] / tot['valid']:.3f}, injected 0.2")
for k in faulty:
    e = val("err 5m", k)
    if e is not None and e < 0.10:
        problems.append(f"{k}: error ratio 5m {e:.4f} does not show the 20% fault")
    b = val("burn 5m", k)
    if b is not None and b < 10:
        problems.append(f"{k}: burn rate 5m {b:.2f} does not show the 20% fault (20x expected)")
for k in healthy:
    bad = {c[6:]: v for c, v in own.get(k, {}).items() if c.startswith("class ") and v and not c.startswith("class timeout_")}
    if bad:
        problems.append(f"{k}: probes to the fault-free demo mock failed: {bad}")

print()
print("alert rules (state at the end of the run):")
for r in rules:
    if r.get("type") != "alerting":
        continue
    active = r.get("alerts", [])
    def since(a):  # seconds from Prometheus start to the alert becoming active
        t = datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", a["activeAt"]).replace("Z", "+00:00"))
        return f"{t.timestamp() - float(ready_at):.0f}s"
    who = ", ".join(sorted(f"{a['labels'].get('target', a['labels'].get('instance', '?'))}/{a['labels'].get('scenario', '-')}"
                           f" {a['state']} from {since(a)}" for a in active))
    print(f"  {r['name']:<36} {r['state']:<9} {who}")
print("  (every window holds only this run's data, so 1h/6h/1d/3d rates equal the 5m one and the")
print("   burn-rate alerts, which have no `for:`, fire as soon as both of their windows exceed the rate)")

# The simulated release on mock-release: the prober's marker, its detector's verdict through
# LLMProbeReleaseRegression's own expression (as Prometheus loaded it), and the z-test rules.
print()
print(f"release simulation (mock-release: engine_version 0.33.0, slowdown 2.5 at +{float(release_at) - float(ready_at):.0f}s):")
info = [s["metric"] for s in get("query", query='llmprobe_release_info{target="mock-release"}', time=f"{AT:.3f}")["result"]]
if [(m.get("version"), m.get("source")) for m in info] != [("0.33.0", "discovery")]:
    problems.append(f"mock-release: no release marker for 0.33.0 from discovery: {info}")
else:
    stamp = query('llmprobe_release_timestamp_seconds{target="mock-release"}').get(("mock-release", ""))
    print(f"  marker: llmprobe_release_info version=0.33.0 source=discovery, "
          f"{(stamp or 0) - float(release_at):.1f}s after the POST")
alert = [r for r in rules if r["name"] == "LLMProbeReleaseRegression"]
if not alert:
    problems.append("no LLMProbeReleaseRegression rule loaded")
else:
    res = get("query", query=alert[0]["query"], time=f"{AT:.3f}")["result"]
    found = {s["metric"].get("signal"): float(s["value"][1]) for s in res if s["metric"].get("target") == "mock-release"}
    others = sorted({s["metric"].get("target") for s in res} - {"mock-release"})
    print("  LLMProbeReleaseRegression expression: "
          + (", ".join(f"mock-release {sig} {v:.2f}{'x' if sig != 'goodput' else ''}" for sig, v in sorted(found.items())) or "empty"))
    if "ttft" not in found:
        problems.append(f"LLMProbeReleaseRegression's expression does not return mock-release/ttft after a 2.5x slowdown: {res}")
    elif not found["ttft"] > 1.5:
        problems.append(f"mock-release ttft effect {found['ttft']:.2f}, expected > 1.5 after a 2.5x slowdown")
    if others:
        problems.append(f"LLMProbeReleaseRegression's expression returns targets without a release: {others}")
    active = [a for a in alert[0].get("alerts", []) if a["labels"].get("target") == "mock-release"]
    if not active:
        problems.append("LLMProbeReleaseRegression is not active for mock-release")
    else:
        first = min(datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", a["activeAt"]).replace("Z", "+00:00")).timestamp() for a in active)
        print(f"  alert {active[0]['state']} for {', '.join(sorted(a['labels']['signal'] for a in active))}, "
              f"active {first - float(release_at):.0f}s after the POST")
ztest = [r for r in rules if r["name"].startswith("llmprobe:release_") or r["name"] in ("LLMProbeReleaseGoodputRegression", "LLMProbeReleaseTTFTRegression")]
bad = [r["name"] for r in ztest if r.get("health") != "ok" or r.get("lastError")]
armed = get("query", query="llmprobe:release_armed:age_seconds", time=f"{AT:.3f}")["result"]
print(f"  z-test rules: {len(ztest) - len(bad)} of {len(ztest)} evaluated without error"
      f" ({'armed' if armed else 'not armed: they arm 15m after a marker'})")
if len(ztest) < 10 or bad:
    problems.append(f"z-test rules: {len(ztest)} found, with errors: {bad}")

# Every dashboard panel query and annotation (Grafana variables set to "All") must return data. Left
# out: the Rollouts annotation (this run's replicas never serve two versions at once) and annotations
# that compare with an `offset` older than the run.
import glob
sys.path.insert(0, "scripts")
from grafana_exprs import panels, substitute
GRAFANA_FIXED = {"__rate_interval": "1m", "__interval": "15s", "__range": "1m", "__range_s": "60"}
def grafana_subst(expr):
    return substitute(expr, GRAFANA_FIXED, ".*")
# Engines this run has no page for (SGLang, TGI), and server-reported phases, which only the llama.cpp,
# Ollama and TGI APIs report (both probers here speak openai-chat): such a query may be empty.
# The canary series exist only during a rollout (replicas on more than one version); the release
# target here has one replica.
# The behaviour checks' series exist only for scenarios with `checks:` (none here).
NOT_HERE = re.compile(r"^(sglang:|tgi_|llmprobe_canary_)|^llmprobe_server_time_seconds_bucket$|^llmprobe_(check_failures|behaviour_changes)_total$")
checked, not_here = 0, 0
gpu_panel = None
for path in sorted(glob.glob("grafana/*.json")):
    d = json.load(open(path))
    for p in panels(d.get("panels", [])):
        if p.get("title") == "GPU utilization":
            gpu_panel = p
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            if not expr:
                continue
            names = set(re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\{", expr))
            if names and all(NOT_HERE.search(n) for n in names):
                not_here += 1
                continue
            checked += 1
            if not get("query", query=grafana_subst(expr), time=f"{AT:.3f}")["result"]:
                problems.append(f"{path}: panel '{p.get('title')}' {t.get('refId')} returns no data: {expr}")
    for a in d.get("annotations", {}).get("list", []):
        if not a.get("expr"):
            continue
        if a.get("name") in ("Rollouts", "Behaviour changes") or re.search(r"\boffset\b", a["expr"]):
            not_here += 1
            continue
        checked += 1
        if not get("query", query=grafana_subst(a["expr"]), time=f"{AT:.3f}")["result"]:
            problems.append(f"{path}: annotation '{a.get('name')}' returns no data: {a['expr']}")
print(f"dashboards: {checked} panel and annotation queries run against this Prometheus ({not_here} left out: "
      "SGLang/TGI pages, server-reported phases, the canary and rollout queries, which need replicas on two "
      "versions, and annotations with an offset older than the run)")

# The GPU panel with the inference pod selected, against dcgm-exporter scraped with honor_labels: false.
raw = get("query", query='DCGM_FI_DEV_GPU_UTIL{exported_pod="llm-vllm-0"}', time=f"{AT:.3f}")["result"]
if not raw or raw[0]["metric"].get("pod") == "llm-vllm-0":
    problems.append(f"the dcgm-k8s scrape did not move the page's pod label to exported_pod: {raw}")
if gpu_panel is None:
    problems.append("no 'GPU utilization' panel in the dashboards")
else:
    expr = substitute(gpu_panel["targets"][0]["expr"], dict(GRAFANA_FIXED, namespace="llm", pod="llm-vllm-0"), ".*")
    res = get("query", query=expr, time=f"{AT:.3f}")["result"]
    got = [(s["metric"].get("pod"), float(s["value"][1])) for s in res]
    if got != [("llm-vllm-0", 87.0)]:
        problems.append(f"GPU utilization panel for pod llm-vllm-0 (exported_pod on the page): got {got}, want [('llm-vllm-0', 87.0)]")
    else:
        print("GPU utilization panel, pod llm-vllm-0: 87% read through exported_pod "
              f"(raw series pod={raw[0]['metric'].get('pod')}, exported_pod={raw[0]['metric'].get('exported_pod')})")

print()
if problems:
    print(f"{len(problems)} problem(s):")
    for p in problems:
        print(f"  {p}")
    sys.exit(1)
print(f"ok: {len(rules)} rules evaluated without error; {len(series)} target/scenario series, every value sensible")
PY
echo "elapsed $(( $(date +%s) - started ))s after Prometheus became ready"
exit $rc
