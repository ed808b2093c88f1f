#!/usr/bin/env bash
# Every panel and annotation query of every dashboard the chart ships (helm/llmprobe/files/dashboards)
# against a real Prometheus holding two namespaces that each probe a target named `vllm`: team-a's
# engine is healthy, team-b's answers every request with HTTP 500. Both probers are scraped as job
# "llmprobe", each with its own `namespace` label (as two chart releases in two namespaces would
# be), and so are both mock engines' vLLM page (job "vllm") and dcgm-exporter page (job "dcgm"),
# each with its namespace and an inference pod name. For each namespace selected on the dashboards
# (target vllm, every other variable "All") every query must return only that namespace's series
# (prober, engine and GPU panels alike: no sum merges two namespaces), and
# the goodput, error-ratio and burn-rate panels must read that namespace's own value (team-a good,
# team-b failing). Prints the figures per namespace.
#   scripts/dashboards-two-namespaces.sh [--bin path/to/llmprobe] [--wait SECONDS]
# Needs: prometheus and promtool (scripts/install-test-tools.sh), python3, a built llmprobe.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bin=target/debug/llmprobe
wait_s=35
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
export PATH="$ROOT/.tools/bin:$PATH"
command -v prometheus >/dev/null || { echo "prometheus not found (scripts/install-test-tools.sh)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin not found: run cargo build first" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# Every port this drill listens on, picked together (scripts/free-ports.py says why).
declare -A mock_port probe_port
read -r mock_port[team-a] probe_port[team-a] mock_port[team-b] probe_port[team-b] prom_port <<<"$(scripts/free-ports.py 5 1)"
started=$(date +%s)

# one mock engine and one prober per namespace; both targets are named vllm
for ns in team-a team-b; do
  fault=()
  [ "$ns" = team-b ] && fault=(--fault http_500=1.0)
  "$bin" mock --listen "127.0.0.1:${mock_port[$ns]}" "${fault[@]}" >"$tmp/mock-$ns.log" 2>&1 &
  pids+=($!)
  cat >"$tmp/$ns.yaml" <<YAML
listen: 127.0.0.1:${probe_port[$ns]}
probe: {rate: 8.0, seed: 3, max_in_flight: 100, shutdown_grace: 1s}
targets:
  - name: vllm
    base_url: http://127.0.0.1:${mock_port[$ns]}
    api: openai-chat
    model: mock-llama
    timeouts: {connect: 1s, ttft: 5s, idle: 5s, total: 10s}
scenarios:
  - name: chat
    input_tokens: 32
    output_tokens: 8
slo: {ttft: 5s, tpot: 500ms, e2e: 10s, objective: 0.99}
YAML
done
scripts/wait-ports.py "${mock_port[team-a]}" "${mock_port[team-b]}"
for ns in team-a team-b; do
  "$bin" probe --config "$tmp/$ns.yaml" >"$tmp/probe-$ns.log" 2>&1 &
  pids+=($!)
done

# the shipped rules, groups evaluated every second for this short run
sed -E 's/^    interval: [0-9]+[a-z]+$/    interval: 1s/' alerts/llmprobe-rules.yml >"$tmp/rules.yml"
cat >"$tmp/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [$tmp/rules.yml]
scrape_configs:
  - job_name: llmprobe
    static_configs:
      - targets: ['127.0.0.1:${probe_port[team-a]}']
        labels: {namespace: team-a}
      - targets: ['127.0.0.1:${probe_port[team-b]}']
        labels: {namespace: team-b}
  # the engines' own pages, as a PodMonitor would scrape them (the pod's namespace and name)
  - job_name: vllm
    static_configs:
      - targets: ['127.0.0.1:${mock_port[team-a]}']
        labels: {namespace: team-a, pod: vllm-team-a-0}
      - targets: ['127.0.0.1:${mock_port[team-b]}']
        labels: {namespace: team-b, pod: vllm-team-b-0}
  - job_name: dcgm
    metrics_path: /dcgm/metrics
    static_configs:
      - targets: ['127.0.0.1:${mock_port[team-a]}']
        labels: {namespace: team-a, pod: vllm-team-a-0}
      - targets: ['127.0.0.1:${mock_port[team-b]}']
        labels: {namespace: team-b, pod: vllm-team-b-0}
YAML
promtool check config "$tmp/prometheus.yml" >/dev/null
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
echo "two namespaces (team-a healthy, team-b HTTP 500 on every request), target vllm in each; prometheus 127.0.0.1:$prom_port; waiting ${wait_s}s"
sleep "$wait_s"
for p in "${pids[@]}"; do
  kill -0 "$p" 2>/dev/null || { echo "a process died early; logs:" >&2; tail -n 20 "$tmp"/*.log >&2; exit 1; }
done

rc=0
python3 - "$prom_port" <<'PY' || rc=$?
import glob, json, re, sys, time, urllib.parse, urllib.request
sys.path.insert(0, "scripts")
from grafana_exprs import panels, substitute
API = f"http://127.0.0.1:{sys.argv[1]}/api/v1"
AT = time.time()
def query(expr):
    url = f"{API}/query?" + urllib.parse.urlencode({"query": expr, "time": f"{AT:.3f}"})
    body = json.load(urllib.request.urlopen(url, timeout=10))
    if body.get("status") != "success":
        raise RuntimeError(f"{expr}: {body}")
    return body["data"]["result"]
FIXED = {"__rate_interval": "20s", "__interval": "5s", "__range": "30s", "__range_s": "30", "target": "vllm"}
problems, checked, read, with_data = [], 0, {}, 0
# queries whose value must differ between the namespaces: those of the goodput SLI (ratio, error
# ratio, burn rate)
WATCH = re.compile(r"llmprobe_goodput_requests_total|llmprobe:goodput_(burn_rate|error_ratio)")
paths = sorted(glob.glob("helm/llmprobe/files/dashboards/*.json"))
if not paths:
    problems.append("the chart ships no dashboards")
for path in paths:
    d = json.load(open(path))
    exprs = [(f"panel '{p.get('title')}' {t.get('refId')}", t.get("expr", ""), p.get("title", ""))
             for p in panels(d.get("panels", [])) for t in p.get("targets", [])]
    exprs += [(f"annotation '{a.get('name')}'", a.get("expr", ""), "") for a in d.get("annotations", {}).get("list", [])]
    for where, expr, title in exprs:
        if not expr.strip():
            continue
        seen = {}
        for ns in ("team-a", "team-b"):
            res = query(substitute(expr, dict(FIXED, namespace=ns), ".*"))
            seen[ns] = res
            other = [s["metric"] for s in res if s["metric"].get("namespace") != ns]
            if other:
                problems.append(f"{path} {where} with namespace={ns} returns other namespaces' series: {other[:2]}")
        checked += 1
        with_data += bool(seen["team-a"] and seen["team-b"])
        if WATCH.search(expr) and seen["team-a"] and seen["team-b"]:
            va = [float(s["value"][1]) for s in seen["team-a"]]
            vb = [float(s["value"][1]) for s in seen["team-b"]]
            read[f"{path.split('/')[-1]} {where}"] = (va, vb)
print(f"{checked} panel and annotation queries of {len(paths)} dashboards run per namespace ({with_data} with series in both; "
      f"the rest read engines, markers or replicas this run does not have); none returned another namespace's series" if not problems else "")
# the two SLIs themselves, as the SLO overview's goodput panels and the burn-rate rule compute them
for ns in ("team-a", "team-b"):
    good = query(f'sum by (namespace) (rate(llmprobe_goodput_requests_total{{namespace="{ns}",target="vllm"}}[20s])) / sum by (namespace) (rate(llmprobe_requests_total{{namespace="{ns}",target="vllm",outcome!="dropped",error!="cancelled"}}[20s]))')
    burn = query(f'llmprobe:goodput_burn_rate:rate5m{{namespace="{ns}",target="vllm"}}')
    g = float(good[0]["value"][1]) if good else None
    b = float(burn[0]["value"][1]) if burn else None
    print(f"  {ns}: goodput ratio {g if g is None else round(g, 3)}, burn rate 5m {b if b is None else round(b, 1)}")
    if ns == "team-a" and not (g is not None and g > 0.95):
        problems.append(f"team-a (healthy) reads goodput {g}")
    if ns == "team-b" and not (g is not None and g < 0.05 and b is not None and b > 90):
        problems.append(f"team-b (every request fails) reads goodput {g}, burn {b}")
for name, (va, vb) in sorted(read.items()):
    print(f"  {name}: team-a {[round(v, 3) for v in va]}, team-b {[round(v, 3) for v in vb]}")
    if va == vb:
        problems.append(f"{name}: both namespaces read the same {va}")
if problems:
    print(f"{len(problems)} problem(s):")
    for p in problems:
        print(f"  {p}")
    sys.exit(1)
print("ok: each namespace reads its own value on every dashboard query")
PY
echo "elapsed $(( $(date +%s) - started ))s"
exit $rc
