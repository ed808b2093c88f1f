#!/usr/bin/env bash
# The shipped alert rules through a real Prometheus and a real Alertmanager (Debian
# prometheus-alertmanager, loopback only) with kube-prometheus-stack's default route and grouping
# (group_by [namespace], group_wait 30s, group_interval 5m, repeat_interval 12h), kps's default
# inhibit rules and the chart's own (rendered from its AlertmanagerConfig). A webhook receiver
# (python3 http.server) counts the notifications. Four probers, each in its own namespace like four
# chart releases, each probing a mock engine:
#   quiet     healthy the whole run                           -> no notification
#   outage    its engine is stopped at T0                     -> the availability page exactly once,
#                                                                the symptoms inhibited under it
#   partial   its engine fails 10% of requests (HTTP 500) from T0 -> at most one page, no flapping
#   release   at T0 its engine reports version 0.34.0 and runs 1.5x slower
#                                                             -> one LLMProbeReleaseRegression
#                                                                warning naming 0.34.0
# The rules are alerts/llmprobe-rules.yml with each group evaluated every second instead of every
# minute (the only change); windows, guards and keep_firing_for are the shipped ones.
#   scripts/alertmanager-demo.sh [--bin path/to/llmprobe] [--baseline SECONDS] [--observe SECONDS]
# Needs: prometheus, promtool, prometheus-alertmanager (scripts/install-test-tools.sh), helm (for
# the chart's inhibit rules), python3, a built llmprobe.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bin=target/debug/llmprobe
baseline_s=40
observe_s=100
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --baseline) baseline_s=$2; shift 2 ;;
    --observe) observe_s=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
export PATH="$ROOT/.tools/bin:$PATH"
AM=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -n "$AM" ] || { echo "alertmanager not found (scripts/install-test-tools.sh)" >&2; exit 2; }
command -v prometheus >/dev/null || { echo "prometheus not found (scripts/install-test-tools.sh)" >&2; exit 2; }
command -v helm >/dev/null || { echo "helm not found (scripts/install-test-tools.sh)" >&2; exit 2; }
[ -x "$bin" ] || { echo "$bin not found: run cargo build first" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
declare -A mock_pid
cleanup() {
  for p in "${pids[@]}" "${mock_pid[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}" "${mock_pid[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ports() { scripts/wait-ports.py "$@"; }
started=$(date +%s)
NS=(quiet outage partial release)
declare -A mock_port probe_port
for ns in "${NS[@]}"; do mock_port[$ns]=$(free_port); probe_port[$ns]=$(free_port); done
start_mock() {  # start_mock NS [mock args...]
  local ns=$1; shift
  "$bin" mock --listen "127.0.0.1:${mock_port[$ns]}" "$@" >>"$tmp/mock-$ns.log" 2>&1 &
  mock_pid[$ns]=$!
}
for ns in "${NS[@]}"; do start_mock "$ns"; done
wait_ports "${mock_port[@]}"

for ns in "${NS[@]}"; do
  rate=5.0; extra=""
  if [ "$ns" = release ]; then
    rate=10.0
    # the detector scaled down as in scripts/prometheus-demo.sh (5 s bins, one-minute baseline)
    extra='detect:
  tuning: {bin_s: 5, history_s: 4800, latency_baseline_s: 60, goodput_baseline_s: 600, min_latency_baseline: 30, release_grace_s: 5, continuous_window_s: 60, continuous_reference_s: 600, continuous_look_s: 10}'
  fi
  cat >"$tmp/$ns.yaml" <<YAML
listen: 127.0.0.1:${probe_port[$ns]}
probe: {rate: $rate, seed: 5, max_in_flight: 100, discovery_interval: 1s, shutdown_grace: 1s}
targets:
  - name: vllm
    base_url: http://127.0.0.1:${mock_port[$ns]}
    api: openai-chat
    model: mock-llama
    timeouts: {connect: 500ms, ttft: 5s, idle: 5s, total: 10s}
scenarios:
  - name: chat
    input_tokens: 32
    output_tokens: 8
# generous thresholds: the release's slowdown shows in the detector, not as SLO misses
slo: {ttft: 5s, tpot: 500ms, e2e: 10s, objective: 0.99}
$extra
YAML
  "$bin" probe --config "$tmp/$ns.yaml" >"$tmp/probe-$ns.log" 2>&1 &
  pids+=($!)
done

# --- webhook receiver ----------------------------------------------------------------------------
hook_port=$(free_port)
cat >"$tmp/hook.py" <<'PY'
import http.server, sys
out = open(sys.argv[2], "a")
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = min(int(self.headers.get("Content-Length", 0)), 1 << 20)
        out.write(self.rfile.read(n).decode() + "\n"); out.flush()
        self.send_response(200); self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
PY
python3 "$tmp/hook.py" "$hook_port" "$tmp/notifications.jsonl" &
pids+=($!)

# --- Alertmanager: kps's default route and inhibit rules, plus the chart's ----------------------
helm template llmprobe helm/llmprobe --set alertmanagerConfig.enabled=true \
  --show-only templates/alertmanagerconfig.yaml >"$tmp/amc.yaml"
am_port=$(free_port)
python3 - "$tmp/amc.yaml" "$hook_port" >"$tmp/alertmanager.yml" <<'PY'
import sys, yaml
amc = yaml.safe_load(open(sys.argv[1]))
def matchers(ms):
    return [f'{m["name"]} {m.get("matchType", "=")} "{m["value"]}"' for m in ms]
chart_rules = [{"source_matchers": matchers(r["sourceMatch"]), "target_matchers": matchers(r["targetMatch"]),
                "equal": r["equal"]} for r in amc["spec"]["inhibitRules"]]
cfg = {
    "global": {"resolve_timeout": "5m"},
    # kube-prometheus-stack's default route (values.yaml alertmanager.config), the receiver a webhook
    "route": {"group_by": ["namespace"], "group_wait": "30s", "group_interval": "5m", "repeat_interval": "12h",
              "receiver": "hook", "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}]},
    "receivers": [{"name": "null"}, {"name": "hook", "webhook_configs": [{"url": f"http://127.0.0.1:{sys.argv[2]}/", "send_resolved": True}]}],
    "inhibit_rules": [
        # kube-prometheus-stack's defaults
        {"source_matchers": ['severity = "critical"'], "target_matchers": ['severity =~ "warning|info"'], "equal": ["namespace", "alertname"]},
        {"source_matchers": ['severity = "warning"'], "target_matchers": ['severity = "info"'], "equal": ["namespace", "alertname"]},
        {"source_matchers": ['alertname = "InfoInhibitor"'], "target_matchers": ['severity = "info"'], "equal": ["namespace"]},
        {"target_matchers": ['alertname = "InfoInhibitor"']},
    ] + chart_rules,
}
yaml.safe_dump(cfg, sys.stdout, sort_keys=False)
PY
"$AM" --config.file="$tmp/alertmanager.yml" --storage.path="$tmp/am" --web.listen-address="127.0.0.1:$am_port" \
  --cluster.listen-address= --log.level=warn >"$tmp/alertmanager.log" 2>&1 &
pids+=($!)

# --- Prometheus: the shipped rules, groups evaluated every second --------------------------------
prom_port=$(free_port)
sed 's/^    interval: 1m$/    interval: 1s/' alerts/llmprobe-rules.yml >"$tmp/rules.yml"
{
  echo "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}"
  echo "rule_files: [$tmp/rules.yml]"
  echo "alerting: {alertmanagers: [{static_configs: [{targets: ['127.0.0.1:$am_port']}]}]}"
  echo "scrape_configs:"
  echo "  - job_name: llmprobe"
  echo "    static_configs:"
  for ns in "${NS[@]}"; do
    echo "      - {targets: ['127.0.0.1:${probe_port[$ns]}'], labels: {namespace: $ns}}"
  done
} >"$tmp/prometheus.yml"
promtool check config "$tmp/prometheus.yml" >/dev/null
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --rules.alert.resend-delay=5s --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
wait_ports "$am_port" "$prom_port" "$hook_port"
echo "prometheus 127.0.0.1:$prom_port -> alertmanager 127.0.0.1:$am_port -> webhook 127.0.0.1:$hook_port"
echo "namespaces ${NS[*]}, each a prober probing a mock named vllm; baseline ${baseline_s}s, then the events, then ${observe_s}s"
sleep "$baseline_s"
t0=$(date +%s.%N)
# outage: the engine goes away
kill "${mock_pid[outage]}"; wait "${mock_pid[outage]}" 2>/dev/null || true
# partial: the engine is replaced by one that fails 10% of requests
kill "${mock_pid[partial]}"; wait "${mock_pid[partial]}" 2>/dev/null || true
start_mock partial --fault http_500=0.1
# release: a new version, 1.5x slower
python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"), timeout=5).read()' \
  "http://127.0.0.1:${mock_port[release]}/mock/control" '{"engine_version":"0.34.0","slowdown":1.5}'
sleep "$observe_s"
for p in "${pids[@]}"; do
  kill -0 "$p" 2>/dev/null || { echo "a process died early; logs:" >&2; tail -n 20 "$tmp"/*.log >&2; exit 1; }
done

rc=0
python3 - "$tmp/notifications.jsonl" "$t0" "$prom_port" <<'PY' || rc=$?
import collections, json, sys, urllib.request
from datetime import datetime
path, t0, prom = sys.argv[1], float(sys.argv[2]), sys.argv[3]
notes = [json.loads(l) for l in open(path) if l.strip()]
def ts(s):
    return datetime.fromisoformat(s[:26].rstrip("Z") + "+00:00" if "." in s else s.replace("Z", "+00:00")).timestamp()
by_ns = collections.defaultdict(list)
for n in notes:
    by_ns[n["groupLabels"].get("namespace", "?")].append(n)
problems = []
PAGE = "LLMProbeGoodputBudgetBurnCritical"
def firing(n, name=None):
    return [a for a in n["alerts"] if a["status"] == "firing" and (name is None or a["labels"]["alertname"] == name)]
print(f"{len(notes)} notifications received:")
for ns in ("quiet", "outage", "partial", "release"):
    ns_notes = by_ns.get(ns, [])
    pages = [n for n in ns_notes if firing(n, PAGE)]
    resolved_pages = [n for n in ns_notes if any(a["status"] == "resolved" and a["labels"]["alertname"] == PAGE for a in n["alerts"])]
    names = collections.Counter(a["labels"]["alertname"] + ("" if a["status"] == "firing" else " (resolved)") for n in ns_notes for a in n["alerts"])
    print(f"  {ns:8} {len(ns_notes)} notification(s), {len(pages)} page(s), {len(resolved_pages)} page resolution(s); alerts: {dict(names) or '-'}")
    for n in ns_notes:
        for a in firing(n):
            print(f"           {a['labels']['alertname']} {a['labels'].get('scenario', a['labels'].get('signal', ''))}"
                  f" active {ts(a['startsAt']) - t0:+.0f}s: {a['annotations'].get('summary', '').strip()}")
    if ns == "quiet" and ns_notes:
        problems.append(f"quiet: {len(ns_notes)} notifications, want none")
    if ns == "outage":
        if len(pages) != 1:
            problems.append(f"outage: {len(pages)} pages, want exactly 1")
        extra = sorted({a["labels"]["alertname"] for n in ns_notes for a in firing(n)} - {PAGE})
        if extra:
            problems.append(f"outage: symptom alerts notified beside the page (not inhibited): {extra}")
    if ns == "partial":
        if len(pages) > 1 or resolved_pages:
            problems.append(f"partial: {len(pages)} pages and {len(resolved_pages)} resolutions, want at most one page and no flapping")
    if ns == "release":
        rel = [a for n in ns_notes for a in firing(n, "LLMProbeReleaseRegression")]
        rel_notes = [n for n in ns_notes if firing(n, "LLMProbeReleaseRegression")]
        if len(rel_notes) != 1:
            problems.append(f"release: {len(rel_notes)} notifications with LLMProbeReleaseRegression, want 1")
        elif not all("0.34.0" in a["annotations"].get("summary", "") for a in rel):
            problems.append(f"release: the warning does not name version 0.34.0: {[a['annotations'].get('summary') for a in rel]}")
        if any(a["labels"].get("severity") != "warning" for a in rel):
            problems.append("release: LLMProbeReleaseRegression is not a warning")
        if pages:
            problems.append("release: a 1.5x slowdown within the SLO paged")
if problems:
    print(f"{len(problems)} problem(s):")
    for p in problems:
        print(f"  {p}")
    sys.exit(1)
print("ok: quiet sent nothing; the outage paged once with its symptoms inhibited; the partial outage did not flap; the release warned once with its version")
PY
echo "elapsed $(( $(date +%s) - started ))s"
exit $rc
