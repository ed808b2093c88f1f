#!/usr/bin/env bash
# The shipped alert rules through a real Prometheus and a real Alertmanager (Debian
# prometheus-alertmanager, loopback only) with kube-prometheus-stack's default route and grouping
# (group_by [namespace], group_wait 30s, group_interval 5m, repeat_interval 12h), kps's default
# inhibit rules and the chart's own (rendered from its AlertmanagerConfig). A webhook receiver
# (python3 http.server) counts the notifications, and a poller reads Alertmanager's alerts every
# second to find any alert that was active (firing, not inhibited) but never notified. Five probers,
# each in its own namespace like five chart releases, each probing a mock engine:
#   quiet     healthy the whole run                          -> no notification
#   outage    every request HTTP 500 for 10 minutes from T0, -> one page (LLMProbeTargetUnavailable)
#             then 8% HTTP 500                                  within 3 minutes of T0, the symptoms
#                                                               inhibited under it, its resolution;
#                                                               then the warnings of the partial
#                                                               outage notified, none swallowed
#   partial   8% HTTP 500 from T0                            -> warnings only, no page, no flapping
#   release   at T0 its engine reports version 0.34.0 and runs 1.5x slower
#                                                            -> one LLMProbeReleaseRegression
#                                                               warning naming 0.34.0
#   dies      its prober is killed at T0                     -> LLMProbeProberDown alone
# Time runs SCALE times faster (default 20) so that the run takes two minutes: every duration of the
# rule file (range windows, offsets, for, keep_firing_for, the release z-test's armed ages) and of
# the Alertmanager route is divided by SCALE; Prometheus scrapes and evaluates every 500 ms (10 s at
# SCALE 20). Figures are printed in scaled time ("min", as in production) and in seconds of the run.
#   scripts/alertmanager-demo.sh [--bin path/to/llmprobe] [--scale N] [--baseline SECONDS]
# Needs: prometheus, promtool, prometheus-alertmanager (scripts/install-test-tools.sh), helm (for
# the chart's inhibit rules), python3, a built llmprobe.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bin=target/debug/llmprobe
scale=20
baseline_s=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --baseline) baseline_s=$2; shift 2 ;;
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
declare -A mock_pid probe_pid
cleanup() {
  for p in "${pids[@]}" "${mock_pid[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}" "${mock_pid[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
wait_ports() { scripts/wait-ports.py "$@"; }
started=$(date +%s)
NS=(quiet outage partial release dies)
declare -A mock_port probe_port
# Every port this drill listens on, picked together (scripts/free-ports.py says why).
read -r -a ports <<<"$(scripts/free-ports.py $((2 * ${#NS[@]} + 3)) 2)"
for i in "${!NS[@]}"; do mock_port[${NS[$i]}]=${ports[$((2 * i))]}; probe_port[${NS[$i]}]=${ports[$((2 * i + 1))]}; done
hook_port=${ports[-3]} am_port=${ports[-2]} prom_port=${ports[-1]}
start_mock() {  # start_mock NS [mock args...]
  local ns=$1; shift
  "$bin" mock --listen "127.0.0.1:${mock_port[$ns]}" "$@" >>"$tmp/mock-$ns.log" 2>&1 &
  mock_pid[$ns]=$!
}
for ns in "${NS[@]}"; do start_mock "$ns"; done
wait_ports "${mock_port[@]}"

for ns in "${NS[@]}"; do
  rate=5.0; extra=""
  # the outage and partial namespaces probe at 10/s: at SCALE 20 the 5m burn window is 15 s, and
  # 150 probes keep an 8% error rate clear of the 14.4x page (14.4%, 2.9 standard deviations)
  case "$ns" in outage|partial) rate=10.0 ;; esac
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
  probe_pid[$ns]=$!
  pids+=($!)
done

# --- webhook receiver ----------------------------------------------------------------------------
cat >"$tmp/hook.py" <<'PY'
import http.server, json, sys, time
out = open(sys.argv[2], "a")
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = min(int(self.headers.get("Content-Length", 0)), 1 << 20)
        body = json.loads(self.rfile.read(n).decode())
        body["receivedAt"] = time.time()  # when the notification arrived
        out.write(json.dumps(body) + "\n"); out.flush()
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
python3 - "$tmp/amc.yaml" "$hook_port" "$scale" >"$tmp/alertmanager.yml" <<'PY'
import sys, yaml
amc = yaml.safe_load(open(sys.argv[1]))
scale = float(sys.argv[3])
def dur(seconds):
    return f"{int(round(seconds / scale * 1000))}ms"
def matchers(ms):
    return [f'{m["name"]} {m.get("matchType", "=")} "{m["value"]}"' for m in ms]
chart_rules = [{"source_matchers": matchers(r["sourceMatch"]), "target_matchers": matchers(r["targetMatch"]),
                "equal": r["equal"]} for r in amc["spec"]["inhibitRules"]]
cfg = {
    "global": {"resolve_timeout": "5m"},
    # kube-prometheus-stack's default route (values.yaml alertmanager.config), the receiver a
    # webhook, its timings divided by SCALE
    "route": {"group_by": ["namespace"], "group_wait": dur(30), "group_interval": dur(300), "repeat_interval": dur(12 * 3600),
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

# --- Prometheus: the shipped rules, every duration divided by SCALE, groups evaluated every second
python3 - "$scale" alerts/llmprobe-rules.yml >"$tmp/rules.yml" <<'PY'
import re, sys
scale = float(sys.argv[1])
UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
def scaled(text):
    seconds = sum(float(n) * UNIT[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w)", text)) / scale
    return f"{int(round(seconds * 1000))}ms"
DUR = r"(?:\d+(?:ms|s|m|h|d|w))+"
text = open(sys.argv[2]).read()
text = re.sub(r"^    interval: \w+$", "    interval: 500ms", text, flags=re.M)
text = re.sub(rf"\[({DUR})\]", lambda m: f"[{scaled(m.group(1))}]", text)
text = re.sub(rf"\boffset ({DUR})", lambda m: f"offset {scaled(m.group(1))}", text)
text = re.sub(rf"^(\s+(?:for|keep_firing_for): )({DUR})$", lambda m: m.group(1) + scaled(m.group(2)), text, flags=re.M)
# the release z-tests' armed ages (seconds)
text = text.replace(">= 900 <= 3600", f">= {900 / scale:g} <= {3600 / scale:g}")
sys.stdout.write(text)
PY
checked=$(promtool check rules "$tmp/rules.yml" 2>&1) || { echo "$checked" >&2; exit 1; }
grep -q "SUCCESS: [1-9][0-9]* rules found" <<<"$checked" || { echo "the scaled rule file has no rules: $checked" >&2; exit 1; }
{
  echo "global: {scrape_interval: 500ms, scrape_timeout: 500ms, evaluation_interval: 500ms}"
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
  --web.listen-address="127.0.0.1:$prom_port" --rules.alert.resend-delay=1s --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
wait_ports "$am_port" "$prom_port" "$hook_port"
# Alertmanager's view every second: which alerts are active (not inhibited) and since when
cat >"$tmp/poll.py" <<'PY'
import json, sys, time, urllib.request
out = open(sys.argv[2], "a")
while True:
    try:
        alerts = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v2/alerts", timeout=2))
        out.write(json.dumps({"t": time.time(), "alerts": [{"labels": a["labels"], "startsAt": a["startsAt"], "state": a["status"]["state"]} for a in alerts]}) + "\n")
        out.flush()
    except Exception:
        pass
    time.sleep(1)
PY
python3 "$tmp/poll.py" "$am_port" "$tmp/am-alerts.jsonl" &
pids+=($!)
# 15 minutes of healthy history first, so the 1h burn window needs minutes of total failure (with
# an hour of history: 8.6), as a prober that has run for a while would see; then 10 minutes of
# total outage and 10 of partial
baseline_s=${baseline_s:-$(python3 -c "print(900 / $scale)")}
outage_s=$(python3 -c "print(600 / $scale)")
partial_s=$(python3 -c "print(600 / $scale)")
echo "prometheus 127.0.0.1:$prom_port -> alertmanager 127.0.0.1:$am_port -> webhook 127.0.0.1:$hook_port"
echo "namespaces ${NS[*]}; time ${scale}x faster; baseline ${baseline_s}s, a total outage of ${outage_s}s (10 min), then ${partial_s}s of a partial one"
sleep "$baseline_s"
t0=$(date +%s.%N)
# outage: every request fails with HTTP 500 (so the error-class warning fires under the page too)
kill "${mock_pid[outage]}"; wait "${mock_pid[outage]}" 2>/dev/null || true
start_mock outage --fault http_500=1.0
# partial: the engine is replaced by one that fails 8% of requests
kill "${mock_pid[partial]}"; wait "${mock_pid[partial]}" 2>/dev/null || true
start_mock partial --fault http_500=0.08
# release: a new version, 1.5x slower
python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"), timeout=5).read()' \
  "http://127.0.0.1:${mock_port[release]}/mock/control" '{"engine_version":"0.34.0","slowdown":1.5}'
# dies: the prober process goes away (its scrape target stays)
kill "${probe_pid[dies]}"; wait "${probe_pid[dies]}" 2>/dev/null || true
sleep "$outage_s"
t1=$(date +%s.%N)
# outage: the engine comes back, failing 8% of requests
kill "${mock_pid[outage]}"; wait "${mock_pid[outage]}" 2>/dev/null || true
start_mock outage --fault http_500=0.08
sleep "$partial_s"
for p in "${pids[@]}"; do
  [ "$p" = "${probe_pid[dies]}" ] && continue
  kill -0 "$p" 2>/dev/null || { echo "a process died early; logs:" >&2; tail -n 20 "$tmp"/*.log >&2; exit 1; }
done

rc=0
python3 - "$tmp/notifications.jsonl" "$tmp/am-alerts.jsonl" "$t0" "$t1" "$scale" <<'PY' || rc=$?
import collections, json, sys
from datetime import datetime
notes_path, polls_path, t0, t1, scale = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
GROUP_WAIT, GROUP_INTERVAL = 30 / scale, 300 / scale
def ts(s):
    s = s.replace("Z", "+00:00")
    if "." in s:  # Alertmanager prints nanoseconds; Python reads microseconds
        head, rest = s.split(".", 1)
        frac, tz = rest[:rest.index("+")], rest[rest.index("+"):]
        s = f"{head}.{frac[:6]}{tz}"
    return datetime.fromisoformat(s).timestamp()
def key(a):
    return tuple(sorted(a["labels"].items()))
def name(a):
    return a["labels"]["alertname"]
def scaled_min(seconds):
    return f"{seconds * scale / 60:+.1f} min"
notes = [json.loads(l) for l in open(notes_path) if l.strip()]
polls = [json.loads(l) for l in open(polls_path) if l.strip()]
by_ns = collections.defaultdict(list)
for n in notes:
    by_ns[n["groupLabels"].get("namespace", "?")].append(n)
problems = []
PAGES = {"LLMProbeTargetUnavailable", "LLMProbeGoodputBudgetBurnCritical"}
def firing(n, names=None):
    return [a for a in n["alerts"] if a["status"] == "firing" and (names is None or name(a) in names)]
def resolved(n, names=None):
    return [a for a in n["alerts"] if a["status"] == "resolved" and (names is None or name(a) in names)]

# Alerts Alertmanager held active (not inhibited or silenced) for longer than group_wait +
# group_interval (+2 s of slack) must have been in a firing notification: none swallowed.
active_since = {}
active_long = {}
for poll in polls:
    now = poll["t"]
    seen = set()
    for a in poll["alerts"]:
        k = (key(a), a["startsAt"])
        if a["state"] == "active":
            seen.add(k)
            active_since.setdefault(k, now)
            if now - active_since[k] > GROUP_WAIT + GROUP_INTERVAL + 2:
                active_long[k] = a
    for k in list(active_since):
        if k not in seen:
            del active_since[k]
# an alert is one firing episode: its labels and its startsAt (Prometheus' activeAt)
notified = {(key(a), round(ts(a["startsAt"]), 2)) for n in notes for a in firing(n)}
swallowed = sorted({dict(k[0])["alertname"] + " " + dict(k[0]).get("namespace", "") for k in active_long if (k[0], round(ts(k[1]), 2)) not in notified})
if swallowed:
    problems.append(f"active in Alertmanager for over group_wait + group_interval but never notified: {swallowed}")

print(f"{len(notes)} notifications received (times relative to the outage's start T0, in scaled minutes):")
for ns in ("quiet", "outage", "partial", "release", "dies"):
    ns_notes = by_ns.get(ns, [])
    pages = {(key(a), a["startsAt"]): a for n in ns_notes for a in firing(n, PAGES)}
    names = collections.Counter(name(a) + ("" if a["status"] == "firing" else " (resolved)") for n in ns_notes for a in n["alerts"])
    print(f"  {ns:8} {len(ns_notes)} notification(s), {len(pages)} page(s); alerts: {dict(names) or '-'}")
    for a in sorted({(key(a), a["startsAt"]): a for n in ns_notes for a in firing(n)}.values(), key=lambda a: a["startsAt"]):
        print(f"           {name(a)} {a['labels'].get('scenario', a['labels'].get('signal', ''))}"
              f" active {scaled_min(ts(a['startsAt']) - t0)}: {a['annotations'].get('summary', '').strip()}")
    if ns == "quiet" and ns_notes:
        problems.append(f"quiet: {len(ns_notes)} notifications, want none")
    if ns == "outage":
        page_notes = [n for n in ns_notes if firing(n, PAGES)]
        if len(pages) != 1 or any(name(a) != "LLMProbeTargetUnavailable" for a in pages.values()):
            problems.append(f"outage: pages {[name(a) for a in pages.values()]}, want LLMProbeTargetUnavailable once")
        else:
            page = list(pages.values())[0]
            sent = min(n["receivedAt"] for n in page_notes)
            print(f"           page active {scaled_min(ts(page['startsAt']) - t0)}, notified {scaled_min(sent - t0)} ({sent - t0:.1f} s into the outage)")
            if sent - t0 > 180 / scale:
                problems.append(f"outage: the page came {scaled_min(sent - t0)} after the outage began, want within 3 min")
            ends = [ts(a["endsAt"]) for n in ns_notes for a in resolved(n, {"LLMProbeTargetUnavailable"})]
            got = [n["receivedAt"] for n in ns_notes if resolved(n, {"LLMProbeTargetUnavailable"})]
            if not ends:
                problems.append("outage: the page's resolution was not notified")
            else:
                print(f"           page resolved {scaled_min(ends[0] - t1)} after the recovery, its resolution notified {scaled_min(got[0] - t1)} after it")
        symptoms = sorted({name(a) for n in ns_notes for a in firing(n) if ts(a["startsAt"]) < t1 and name(a) not in PAGES
                           and any(name(b) == "LLMProbeTargetUnavailable" for b in firing(n))})
        if symptoms:
            problems.append(f"outage: symptom alerts notified beside the page (not inhibited): {symptoms}")
        after = sorted({name(a) for n in ns_notes for a in firing(n) if name(a) not in PAGES and not firing(n, PAGES)})
        print(f"           warnings notified after the page resolved: {after or '-'}")
        if "LLMProbeServerErrors" not in after:
            problems.append("outage: the partial outage's LLMProbeServerErrors was not notified after the page resolved")
    if ns == "partial":
        flaps = [a for n in ns_notes for a in resolved(n)]
        if pages or flaps:
            problems.append(f"partial: {len(pages)} pages and {len(flaps)} resolutions, want warnings only and no flapping")
        if not ns_notes:
            problems.append("partial: no warning notified")
    if ns == "release":
        rel_notes = [n for n in ns_notes if firing(n, {"LLMProbeReleaseRegression"})]
        rel = [a for n in rel_notes for a in firing(n, {"LLMProbeReleaseRegression"})]
        if len(rel_notes) != 1:
            problems.append(f"release: {len(rel_notes)} notifications with LLMProbeReleaseRegression, want 1")
        elif not all("0.34.0" in a["annotations"].get("summary", "") for a in rel):
            problems.append(f"release: the warning does not name version 0.34.0: {[a['annotations'].get('summary') for a in rel]}")
        if any(a["labels"].get("severity") != "warning" for a in rel):
            problems.append("release: LLMProbeReleaseRegression is not a warning")
        if pages:
            problems.append("release: a 1.5x slowdown within the SLO paged")
    if ns == "dies":
        fired = sorted({name(a) for n in ns_notes for a in firing(n)})
        if fired != ["LLMProbeProberDown"]:
            problems.append(f"dies: firing alerts {fired}, want LLMProbeProberDown alone")
print(f"{len(active_long)} alert(s) active in Alertmanager past group_wait + group_interval; {len(swallowed)} of them never notified")
if problems:
    print(f"{len(problems)} problem(s):")
    for p in problems:
        print(f"  {p}")
    sys.exit(1)
print("ok: quiet sent nothing; the total outage paged once within 3 min, its symptoms inhibited, and resolved;"
      " the partial outages warned without paging and no warning was swallowed; the release warned once with its"
      " version; a dead prober sent LLMProbeProberDown alone")
PY
if [ "$rc" -ne 0 ]; then
  echo "last log lines:"; tail -n 5 "$tmp/prometheus.log" "$tmp/alertmanager.log"
fi
echo "elapsed $(( $(date +%s) - started ))s"
exit $rc
