#!/usr/bin/env bash
# Checks the operations package: alert rules and their unit tests, the Helm chart in both modes and its
# values schema (broken values files must be rejected), kube-prometheus-stack labels, values overrides
# in the rendered rules, the prober-down alert under nameOverride, the chart's copies of rules and
# dashboards, the dashboards' structure and PromQL, and metric names.
#   scripts/check-ops.sh [METRICS_FILE]
# METRICS_FILE is llmprobe's /metrics text (default: tests/fixtures/golden/metrics.openmetrics.txt).
# Tools: promtool, helm v4, kubernetes-validate (scripts/install-test-tools.sh installs them).
# Exits non-zero if any check fails; every check runs and reports.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$ROOT/.tools/bin:$PATH"
METRICS_FILE="${1:-tests/fixtures/golden/metrics.openmetrics.txt}"
CHART=helm/llmprobe
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

failed=()
passed=()
run() {  # run NAME CMD...: run a check, keep its output on failure
  local name="$1"; shift
  if "$@" >"$WORK/out" 2>&1; then
    passed+=("$name")
    printf 'ok    %s\n' "$name"
  else
    failed+=("$name")
    printf 'FAIL  %s\n' "$name"
    sed 's/^/      /' "$WORK/out"
  fi
}

missing=0
for tool in promtool helm kubernetes-validate python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "missing tool: $tool (run scripts/install-test-tools.sh)" >&2
    missing=1
  fi
done
[ "$missing" -eq 0 ] || exit 2
if ! helm version --short | grep -q '^v4\.'; then
  echo "helm v4 required, found $(helm version --short) (run scripts/install-test-tools.sh)" >&2
  exit 2
fi

echo "== alert rules"
rule_files=(alerts/*.yml)
run "promtool check rules ${rule_files[*]}" promtool check rules "${rule_files[@]}"
test_files=(alerts/tests/*.yml)
run "promtool test rules ${test_files[*]}" promtool test rules "${test_files[@]}"

# Every alert: severity, summary, description, runbook_url pointing at an existing RUNBOOK.md section
# of the runbook the prober serves (http://localhost:9464/runbook#<section>; the chart rebases it),
# and at least one unit test where it fires and one where it must not.
check_alert_meta() {
  python3 - "${rule_files[@]}" <<'PY'
import glob, re, sys
alerts = {}
for path in sys.argv[1:]:
    text = open(path).read()
    for block in re.split(r"\n(?=\s*- (?:alert|record):)", text):
        m = re.match(r"\s*- alert:\s*(\S+)", block)
        if m:
            alerts[m.group(1)] = block
runbook = open("alerts/RUNBOOK.md").read()
anchors = {re.sub(r"[^a-z0-9_ -]", "", h.strip().lower()).replace(" ", "-")
           for h in re.findall(r"^#+\s+(.*)$", runbook, re.M)}
fires, quiet = {}, {}
for t in sorted(glob.glob("alerts/tests/*.yml")):
    text = open(t).read()
    for m in re.finditer(r"alertname:\s*(\S+)\s*\n\s*exp_alerts:(\s*\[\])?", text):
        (quiet if m.group(2) else fires).setdefault(m.group(1), []).append(t)
problems = []
for name, block in sorted(alerts.items()):
    sev = re.search(r"\n\s*severity:\s*(\S+)", block)
    if not sev or sev.group(1) not in ("critical", "warning", "info"):
        problems.append(f"{name}: severity label missing or not critical/warning/info")
    for key in ("summary", "description", "runbook_url"):
        if not re.search(rf"\n\s*{key}:", block):
            problems.append(f"{name}: annotation {key} missing")
    rb = re.search(r"runbook_url:\s*(\S+)", block)
    if rb:
        url = rb.group(1)
        if not url.startswith("http://localhost:9464/runbook#") or url.split("#", 1)[1] not in anchors:
            problems.append(f"{name}: runbook_url {url} has no matching section in alerts/RUNBOOK.md")
    if name not in fires:
        problems.append(f"{name}: no unit test where it fires")
    if name not in quiet:
        problems.append(f"{name}: no unit test where it must not fire")
for p in problems:
    print(p)
print(f"{len(alerts)} alerts checked")
sys.exit(1 if problems else 0)
PY
}
run "every alert: severity, summary, description, runbook section, firing and quiet tests" check_alert_meta

echo "== chart copies"
check_copies() {
  local rc=0
  if ! cmp alerts/llmprobe-rules.yml "$CHART/files/llmprobe-rules.yml"; then
    echo "$CHART/files/llmprobe-rules.yml differs from alerts/llmprobe-rules.yml (cp alerts/llmprobe-rules.yml $CHART/files/)"; rc=1
  fi
  for f in grafana/*.json; do
    if ! cmp "$f" "$CHART/files/dashboards/$(basename "$f")"; then
      echo "$CHART/files/dashboards/$(basename "$f") differs from $f (cp grafana/*.json $CHART/files/dashboards/)"; rc=1
    fi
  done
  for f in "$CHART"/files/dashboards/*.json; do
    [ -e "grafana/$(basename "$f")" ] || { echo "$f has no original in grafana/"; rc=1; }
  done
  return $rc
}
run "chart files/ are identical to alerts/llmprobe-rules.yml and grafana/*.json" check_copies

echo "== helm chart"
DEPLOY_ARGS=(-f "$CHART/ci/deployment-values.yaml")
SIDECAR_ARGS=(-f "$CHART/ci/sidecar-values.yaml")
run "helm lint --strict (deployment mode, defaults)" helm lint --strict "$CHART"
run "helm lint --strict (deployment mode, all options)" helm lint --strict "$CHART" "${DEPLOY_ARGS[@]}"
run "helm lint --strict (sidecar mode, example)" helm lint --strict "$CHART" "${SIDECAR_ARGS[@]}"
run "helm lint --strict (sidecar mode, no example)" helm lint --strict "$CHART" --set mode=sidecar --set podMonitor.enabled=true

validate_mode() {  # validate_mode OUTFILE HELM_ARGS...
  local out="$1"; shift
  helm template llmprobe "$CHART" --namespace llm "$@" >"$out" || return 1
  kubernetes-validate --strict --quiet - <"$out"
}
run "helm template (deployment, defaults) | kubernetes-validate --strict" validate_mode "$WORK/deploy-default.yaml"
run "helm template (deployment, all options) | kubernetes-validate --strict" validate_mode "$WORK/deploy.yaml" "${DEPLOY_ARGS[@]}"
run "helm template (sidecar) | kubernetes-validate --strict" validate_mode "$WORK/sidecar.yaml" "${SIDECAR_ARGS[@]}"
run "helm template (discovery RBAC) | kubernetes-validate --strict" validate_mode "$WORK/discovery.yaml" --set discovery.kubernetes.enabled=true --set discovery.kubernetes.readPodVersions=true
run "helm template (sharded bench Job, 4 shards) | kubernetes-validate --strict" validate_mode "$WORK/bench.yaml" --set bench.enabled=true --set bench.shards=4
run "helm template (3 sharded probers, StatefulSet) | kubernetes-validate --strict" validate_mode "$WORK/sharded.yaml" "${DEPLOY_ARGS[@]}" --set replicaCount=3
run "helm template (sidecar, plain container, reloader off) | kubernetes-validate --strict" validate_mode "$WORK/sidecar-plain.yaml" "${SIDECAR_ARGS[@]}" --set sidecar.native=false --set configReloader.enabled=false
run "helm template (sidecar, reloader left to its default) | kubernetes-validate --strict" validate_mode "$WORK/sidecar-default.yaml" --set mode=sidecar --set sidecar.example.enabled=true

check_rendered() {
  local rc=0
  # the two modes render the expected kinds
  for kind in Deployment Service ConfigMap ServiceMonitor PrometheusRule NetworkPolicy; do
    grep -q "^kind: $kind\$" "$WORK/deploy.yaml" || { echo "deployment mode: no $kind"; rc=1; }
  done
  for kind in Deployment Service ConfigMap PodMonitor PrometheusRule; do
    grep -q "^kind: $kind\$" "$WORK/sidecar.yaml" || { echo "sidecar mode: no $kind"; rc=1; }
  done
  grep -q '^kind: ServiceMonitor$' "$WORK/sidecar.yaml" && { echo "sidecar mode renders a ServiceMonitor"; rc=1; }
  grep -q '^kind: AlertmanagerConfig$' "$WORK/deploy.yaml" || { echo "deployment mode: no AlertmanagerConfig"; rc=1; }
  # deployment mode rolls the prober on a config change; sidecar mode with the reloader must not roll
  # the inference pods, and the prober must serve POST /-/reload
  grep -q 'checksum/llmprobe-config:' "$WORK/deploy.yaml" || { echo "no config checksum annotation (deployment)"; rc=1; }
  grep -q 'checksum/llmprobe-config:' "$WORK/sidecar.yaml" && { echo "sidecar mode with the reloader still rolls pods on config changes"; rc=1; }
  grep -q 'name: llmprobe-config-reloader$' "$WORK/sidecar.yaml" || { echo "sidecar mode: no config reloader container"; rc=1; }
  grep -q -- '- --web.enable-lifecycle$' "$WORK/sidecar.yaml" || { echo "sidecar mode: reloader on but the prober lacks --web.enable-lifecycle"; rc=1; }
  grep -q -- '--web.enable-lifecycle' "$WORK/deploy.yaml" && { echo "deployment mode: --web.enable-lifecycle without the reloader"; rc=1; }
  grep -q 'helm.sh/hook: test' "$WORK/deploy.yaml" || { echo "no helm test hook"; rc=1; }
  grep -q 'api_key_file: /var/run/secrets/llmprobe/api-key' "$WORK/deploy.yaml" || { echo "api_key_file not injected"; rc=1; }
  local n_json n_cm
  n_json=$(ls grafana/*.json | wc -l)
  n_cm=$(grep -c '^    grafana_dashboard: "1"$' "$WORK/deploy.yaml")
  [ "$n_json" -eq "$n_cm" ] || { echo "dashboards: $n_json JSON files but $n_cm labelled ConfigMaps"; rc=1; }
  # the rules inside the rendered PrometheusRule are valid and complete (no alert disabled)
  helm template llmprobe "$CHART" --set prometheusRule.enabled=true --show-only templates/prometheusrule.yaml \
    | awk 'f{sub(/^  /,""); print} /^spec:$/{f=1}' >"$WORK/rendered-rules.yml"
  local want got
  want=$(promtool check rules alerts/llmprobe-rules.yml 2>&1 | sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p')
  got=$(promtool check rules "$WORK/rendered-rules.yml" 2>&1 | sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p')
  if [ -z "$got" ] || [ "$got" != "$want" ]; then
    echo "PrometheusRule spec: promtool found '${got:-error}' rules, alerts/llmprobe-rules.yml has $want"
    promtool check rules "$WORK/rendered-rules.yml"
    rc=1
  fi
  return $rc
}
run "rendered objects: kinds per mode, config checksum/reloader, test hook, api key file, dashboards, PrometheusRule rules" check_rendered

# A sidecar must never make its inference pod NotReady or roll it: no probe on any prober container,
# no config checksum on the pod (with or without the reloader), the reloader on by default, native
# sidecars (init containers with restartPolicy: Always) unless sidecar.native=false. Deployment mode:
# cluster conventions render, and replicaCount=3 is a StatefulSet of three shards with their own
# prober label.
check_cluster_safety() {
  python3 - "$WORK" <<'PY'
import sys, yaml
w = sys.argv[1]
def load(name):
    return [d for d in yaml.safe_load_all(open(f"{w}/{name}.yaml")) if d]
problems = []
for name, native, reloader in (("sidecar", True, True), ("sidecar-plain", False, False), ("sidecar-default", True, True)):
    docs = load(name)
    ex = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-example-inference")]
    if not ex:
        problems.append(f"{name}: no example inference Deployment"); continue
    pod = ex[0]["spec"]["template"]
    spec = pod["spec"]
    if "checksum/llmprobe-config" in (pod["metadata"].get("annotations") or {}):
        problems.append(f"{name}: config checksum on the inference pod (a config change would roll GPU pods)")
    ours = [c for c in spec["containers"] + spec.get("initContainers", []) if c["name"].startswith("llmprobe")]
    for c in ours:
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            if probe in c:
                problems.append(f"{name}: {c['name']} has a {probe} that can take the inference pod out of its Service")
        if native and (c not in spec.get("initContainers", []) or c.get("restartPolicy") != "Always"):
            problems.append(f"{name}: {c['name']} is not a native sidecar (initContainers, restartPolicy: Always)")
        if not native and (c not in spec["containers"] or "restartPolicy" in c):
            problems.append(f"{name}: {c['name']} should be a plain container with sidecar.native=false")
    if reloader != any(c["name"] == "llmprobe-config-reloader" for c in ours):
        problems.append(f"{name}: config reloader {'missing' if reloader else 'rendered though disabled'}")
    print(f"{name}: {len(ours)} prober containers, {'native' if native else 'plain'}, none with a probe, no checksum")
docs = load("deploy")
for d in docs:
    if d["metadata"].get("labels", {}).get("team") != "ml-platform":
        problems.append(f"deploy: {d['kind']} {d['metadata']['name']} lacks commonLabels team: ml-platform")
dep = [d for d in docs if d["kind"] == "Deployment"][0]
spec = dep["spec"]["template"]["spec"]
if dep["spec"].get("revisionHistoryLimit") != 5:
    problems.append("deploy: revisionHistoryLimit 5 not rendered")
if [c["name"] for c in spec["containers"]] != ["llmprobe", "log-shipper"]:
    problems.append(f"deploy: extraContainers not rendered: {[c['name'] for c in spec['containers']]}")
tsc = spec.get("topologySpreadConstraints") or [{}]
if tsc[0].get("labelSelector", {}).get("matchLabels", {}).get("app.kubernetes.io/instance") != "llmprobe":
    problems.append(f"deploy: topologySpreadConstraints not rendered with tpl: {tsc}")
if spec["containers"][0]["image"] != "registry.example.com/llmprobe/llmprobe:0.1.0":
    problems.append(f"deploy: global.imageRegistry not applied: {spec['containers'][0]['image']}")
pdb = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
if not pdb or pdb[0]["spec"].get("maxUnavailable") != 1:
    problems.append("deploy: no PodDisruptionBudget with maxUnavailable 1")
if any(d["kind"] == "StatefulSet" for d in docs):
    problems.append("deploy: replicaCount 1 rendered a StatefulSet")
sts = [d for d in load("sharded") if d["kind"] == "StatefulSet"]
if not sts:
    problems.append("sharded: replicaCount 3 did not render a StatefulSet")
else:
    c = sts[0]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("LLMPROBE_SHARD", {}).get("value") != "$(LLMPROBE_POD_INDEX)/3":
        problems.append(f"sharded: LLMPROBE_SHARD not from the pod index: {env.get('LLMPROBE_SHARD')}")
    if env.get("LLMPROBE_POD_INDEX", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.labels['apps.kubernetes.io/pod-index']":
        problems.append("sharded: LLMPROBE_POD_INDEX not from the pod-index label")
    if env.get("LLMPROBE_PROBER", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        problems.append("sharded: each shard lacks its own prober label (pod name)")
    if sts[0]["spec"].get("podManagementPolicy") != "Parallel" or sts[0]["spec"]["replicas"] != 3:
        problems.append("sharded: StatefulSet not 3 parallel pods")
    print("sharded: StatefulSet of 3, LLMPROBE_SHARD=$(LLMPROBE_POD_INDEX)/3, LLMPROBE_PROBER=<pod name>")
amc = [d for d in docs if d["kind"] == "AlertmanagerConfig"][0]["spec"]["inhibitRules"]
by_source = {r["sourceMatch"][0]["value"]: r for r in amc}
symptoms = {"LLMProbeGoodputBudgetBurn" + w for w in ("High", "Moderate", "Slow")} | {"LLMProbe" + a for a in (
    "ReleaseGoodputRegression", "ReleaseTTFTRegression", "ReleaseRegression", "ContinuousRegression",
    "CanaryRegression", "ReplicaOutlier", "ServerErrors", "RateLimited", "ProbesDropped")}
for page, want in (("LLMProbeTargetUnavailable", symptoms | {"LLMProbeGoodputBudgetBurnCritical"}), ("LLMProbeGoodputBudgetBurnCritical", symptoms)):
    if page not in by_source:
        problems.append(f"deploy: no inhibit rule with source {page}"); continue
    missing = want - set(by_source[page]["targetMatch"][0]["value"].split("|"))
    if missing:
        problems.append(f"deploy: alerts not inhibited under the page {page}: {sorted(missing)}")
rel = by_source.get("LLMProbeReleaseRegression")
if not rel or rel["targetMatch"][0]["value"] != "LLMProbeRelease(TTFT|Goodput)Regression":
    problems.append("deploy: the inhibit rule of the detector's release regression over the z-tests is not rendered")
down = by_source.get("LLMProbeProberDown")
if not down or down["targetMatch"][0]["value"] != "LLMProbeMetricsAbsent" or not {"namespace", "job"} <= set(down["equal"]):
    problems.append(f"deploy: LLMProbeProberDown does not inhibit LLMProbeMetricsAbsent of its namespace and job: {down}")
rules = [d for d in docs if d["kind"] == "PrometheusRule"][0]["spec"]["groups"]
want_interval = {"llmprobe-availability": "30s"}
if any(g.get("interval") != want_interval.get(g["name"], "1m") for g in rules):
    problems.append(f"deploy: rule group intervals {[(g['name'], g.get('interval')) for g in rules]}, want 1m each (the availability page's 30s)")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
}
# NOTES.txt says what is off and how to turn it on for kube-prometheus-stack, and says nothing of it
# when everything is on.
check_notes() {
  local out
  out=$(helm install --dry-run=client llmprobe "$CHART" 2>&1) || { echo "$out"; return 1; }
  for want in "NOT ON in this release: nothing scrapes the prober" "--set serviceMonitor.enabled=true" \
              "--set prometheusRule.enabled=true" "--set prometheus.release=" "retention"; do
    grep -qF -- "$want" <<<"$out" || { echo "NOTES (defaults) lack: $want"; return 1; }
  done
  out=$(helm install --dry-run=client llmprobe "$CHART" "${DEPLOY_ARGS[@]}" 2>&1) || { echo "$out"; return 1; }
  if grep -qF "NOT ON" <<<"$out"; then echo "NOTES (everything on) still say something is off"; return 1; fi
}
run "NOTES.txt: what is off with default values and the kube-prometheus-stack flags to turn it on" check_notes

run "sidecar: no probe, no checksum, native sidecar, reloader by default; PDB, spread, commonLabels, extraContainers, registry; 3 shards; inhibition of every symptom; group intervals" check_cluster_safety

# kube-prometheus-stack selects by `release: <name>`: with prometheus.release=kps (ci/ values) every
# Prometheus Operator object carries it. Values overrides reach the rendered rules; extra env, secret
# mounts and volumes reach the prober container in both modes.
check_kps_and_overrides() {
  python3 - "$WORK/deploy.yaml" "$WORK/sidecar.yaml" <<'PY'
import sys, yaml
problems = []
for path, kinds in ((sys.argv[1], ["ServiceMonitor", "PrometheusRule", "AlertmanagerConfig"]),
                    (sys.argv[2], ["PodMonitor", "PrometheusRule", "AlertmanagerConfig"])):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    for kind in kinds:
        for d in by_kind.get(kind, []) or [None]:
            if d is None:
                problems.append(f"{path}: no {kind}"); continue
            if d["metadata"].get("labels", {}).get("release") != "kps":
                problems.append(f"{path}: {kind} {d['metadata']['name']} lacks the label release: kps")
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"]
    probe = [(c, p) for p in pods for c in p["containers"] + p.get("initContainers", []) if c["name"] == "llmprobe"]
    if not probe:
        problems.append(f"{path}: no llmprobe container"); continue
    c, pod = probe[0]
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    if mounts.get("corp-ca", {}).get("mountPath") != "/etc/llmprobe-tls/ca" or vols.get("corp-ca", {}).get("secret", {}).get("secretName") != "corp-ca":
        problems.append(f"{path}: extraSecretMounts corp-ca not mounted from its Secret")
    if "deploy" in path:
        env = {e["name"]: e for e in c.get("env", [])}
        if env.get("OTEL_EXPORTER_OTLP_HEADERS", {}).get("valueFrom", {}).get("secretKeyRef", {}).get("name") != "otlp-auth":
            problems.append(f"{path}: extraEnv secretKeyRef not rendered")
        if c.get("envFrom") != [{"configMapRef": {"name": "llmprobe-otel"}}]:
            problems.append(f"{path}: envFrom not rendered")
        if "scratch" not in mounts or "scratch" not in vols:
            problems.append(f"{path}: extraVolumes/extraVolumeMounts not rendered")
        rules = [r for g in by_kind["PrometheusRule"][0]["spec"]["groups"] for r in g["rules"]]
        if any(r.get("alert") == "LLMProbeSourceDown" for r in rules):
            problems.append(f"{path}: LLMProbeSourceDown disabled in values but rendered")
        sev = [r["labels"]["severity"] for r in rules if r.get("alert") == "LLMProbeReleaseRegression"]
        if sev != ["critical"]:
            problems.append(f"{path}: LLMProbeReleaseRegression severity override (critical) not rendered: {sev}")
        outl = [r.get("for") for r in rules if r.get("alert") == "LLMProbeReplicaOutlier"]
        if outl != ["20m"]:
            problems.append(f"{path}: LLMProbeReplicaOutlier for override (20m) not rendered: {outl}")
        can = [r["labels"] for r in rules if r.get("alert") == "LLMProbeCanaryRegression"]
        if can != [{"severity": "warning", "team": "rollouts"}]:
            problems.append(f"{path}: LLMProbeCanaryRegression labels override (team: rollouts) not rendered: {can}")
        pages = [r for r in by_kind["AlertmanagerConfig"][0]["spec"]["inhibitRules"]
                 if r["sourceMatch"][0]["value"] in ("LLMProbeTargetUnavailable", "LLMProbeGoodputBudgetBurnCritical")]
        if len(pages) != 2 or any("namespace" not in r["equal"] for r in pages):
            problems.append(f"{path}: AlertmanagerConfig inhibit rules are not the two pages over namespace")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
}
run "release: kps on every Prometheus Operator object; rule overrides, extra env/secrets/volumes rendered (both modes)" check_kps_and_overrides

# nameOverride must not change the scrape job the rules select: render with it, read the job the
# ServiceMonitor/PodMonitor sets, and run LLMProbeProberDown from the RENDERED rules against `up` with
# that job.
check_name_override() {
  local rc=0 mode job
  local -a args
  for mode in deployment sidecar; do
    if [ "$mode" = deployment ]; then args=("${DEPLOY_ARGS[@]}"); else args=("${SIDECAR_ARGS[@]}"); fi
    helm template other "$CHART" --namespace llm "${args[@]}" --set nameOverride=probe-x >"$WORK/override.yaml" || return 1
    python3 - "$WORK/override.yaml" "$WORK/override-rules.yml" >"$WORK/override-job" <<'PY' || return 1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
mon = [d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")][0]
eps = mon["spec"].get("endpoints") or mon["spec"]["podMetricsEndpoints"]
jobs = [r["replacement"] for r in eps[0].get("relabelings", []) if r.get("targetLabel") == "job"]
if not jobs:
    sys.exit(f"{mon['kind']} sets no job label")
rule = [d for d in docs if d["kind"] == "PrometheusRule"][0]
yaml.safe_dump({"groups": rule["spec"]["groups"]}, open(sys.argv[2], "w"), sort_keys=False)
print(jobs[-1])
PY
    job=$(cat "$WORK/override-job")
    # the default runbook link: the prober's own /runbook, by its Service (deployment mode) or a
    # port-forward (sidecar mode, no Service of its own)
    if [ "$mode" = deployment ]; then runbook="http://other-probe-x.llm.svc:9464/runbook"; else runbook="http://localhost:9464/runbook"; fi
    sed -e "s/@JOB@/$job/g" -e "s/@MODE@/$mode/g" -e "s#@RUNBOOK@#$runbook#g" >"$WORK/override-test.yml" <<'YML'
rule_files:
  - override-rules.yml
evaluation_interval: 1m
tests:
  - name: prober down with nameOverride (@MODE@ mode, job @JOB@)
    interval: 1m
    input_series:
      - series: 'up{job="@JOB@",namespace="llm",instance="10.0.0.1:9464"}'
        values: '0x20'
      - series: 'up{job="@JOB@",namespace="llm",instance="10.0.0.2:9464"}'
        values: '1x20'
      - series: 'llmprobe_build_info{job="@JOB@",namespace="llm",instance="10.0.0.2:9464"}'
        values: '1x20'
    alert_rule_test:
      - eval_time: 10m
        alertname: LLMProbeProberDown
        exp_alerts:
          - exp_labels:
              severity: warning
              job: @JOB@
              namespace: llm
              instance: 10.0.0.1:9464
            exp_annotations:
              summary: "llmprobe scrape target 10.0.0.1:9464 is down"
              description: "Prometheus has failed to scrape 10.0.0.1:9464 (job @JOB@) for 5 minutes; no SLO data is being collected from it."
              runbook_url: @RUNBOOK@#llmprobeproberdown
YML
    echo "$mode: job \"$job\""
    promtool test rules "$WORK/override-test.yml" || rc=1
  done
  return $rc
}
run "nameOverride keeps the scrape job: LLMProbeProberDown from the rendered rules fires (both modes)" check_name_override

# runbook_url comes from prometheusRule.runbookBaseUrl; empty, from the runbook the prober serves
# itself (its Service in deployment mode). Every alert's link carries its section.
check_runbook_links() {
  local base
  for base in https://wiki.example.com/llmprobe/runbook ""; do
    helm template rb "$CHART" --namespace llm --set prometheusRule.enabled=true --set "prometheusRule.runbookBaseUrl=$base" \
      --show-only templates/prometheusrule.yaml >"$WORK/runbook-rules.yaml" || return 1
    python3 - "$WORK/runbook-rules.yaml" "${base:-http://rb-llmprobe.llm.svc:9464/runbook}" <<'PY' || return 1
import sys, yaml
rules = [r for g in yaml.safe_load(open(sys.argv[1]))["spec"]["groups"] for r in g["rules"] if "alert" in r]
want = sys.argv[2]
bad = [(r["alert"], r["annotations"].get("runbook_url")) for r in rules
       if r["annotations"].get("runbook_url") != f"{want}#{r['alert'].lower()}"]
if bad:
    sys.exit(f"runbook_url not {want}#<alert>: {bad[:3]}")
print(f"{len(rules)} alerts link {want}#<alert>")
PY
  done
}
run "runbook_url from prometheusRule.runbookBaseUrl (default: the prober's own /runbook)" check_runbook_links

# Two releases (team-a, team-b, each a target named vllm in its own namespace) with the rules the
# chart renders for each: each records only its own series and pages only for its own namespace
# (tests/fixtures/ops/two-releases/). The same rules rendered with prometheusRule.scope=cluster must
# fail that test (both rule sets page for team-b), so the test can tell.
check_two_releases() {
  local dir="$WORK/two-releases" scope r
  for scope in release cluster; do
    rm -rf "$dir"; mkdir -p "$dir"
    cp tests/fixtures/ops/two-releases/*.yml "$dir/"
    for r in team-a team-b; do
      helm template "$r" "$CHART" --namespace "$r" --set prometheusRule.enabled=true --set prometheusRule.scope=$scope \
        --show-only templates/prometheusrule.yaml \
        | python3 -c 'import sys, yaml; d = yaml.safe_load(sys.stdin); yaml.safe_dump({"groups": d["spec"]["groups"]}, open(sys.argv[1], "w"), sort_keys=False)' \
          "$dir/$r-rules.yml" || return 1
    done
    if [ $scope = release ]; then
      (cd "$dir" && promtool test rules both.yml team-a-only.yml) || return 1
    elif (cd "$dir" && promtool test rules both.yml >/dev/null 2>&1); then
      echo "scope=cluster passed the two-release test: the test cannot tell double paging"; return 1
    else
      echo "scope=cluster: two-release test fails as it must (each release's rules page for both namespaces)"
    fi
  done
}
run "two releases: each records and pages only for its own namespace (promtool, rules rendered per release)" check_two_releases

# Progressive delivery: the Argo Rollouts AnalysisTemplates and the Flagger MetricTemplate are off by
# default; rendered (ci/ deployment values), they and the Rollout and Canary examples in
# docs/operations.md are valid against the upstream CRDs' openAPIV3Schema (tests/fixtures/crds/,
# unknown fields refused); the release API's token Secrets are mounted and named in the config; a
# read-only token is required, and sidecar mode needs the prober's URL. The conditions themselves
# are evaluated against a running prober by the Rust test rollouts_analysis.
CRDS=(tests/fixtures/crds/*.yaml)
check_rollouts() {
  local rc=0 out
  python3 scripts/check-crds.py --self-test || rc=1
  grep -qE '^kind: (AnalysisTemplate|MetricTemplate)$' "$WORK/deploy-default.yaml" && { echo "defaults render a rollout template"; rc=1; }
  python3 scripts/check-crds.py --crds "${CRDS[@]}" --manifests "$WORK/deploy.yaml" --require AnalysisTemplate MetricTemplate || rc=1
  python3 scripts/check-crds.py --crds "${CRDS[@]}" --manifests docs/operations.md --require Rollout Canary || rc=1
  python3 - "$WORK/deploy.yaml" <<'PY' || rc=1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
problems = []
cfg = yaml.safe_load([d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})][0]["data"]["config.yaml"])
want = {"release_token_file": "/var/run/secrets/llmprobe-release/marker/token", "release_read_token_file": "/var/run/secrets/llmprobe-release/read/token"}
for field, path in want.items():
    if cfg.get("detect", {}).get(field) != path:
        problems.append(f"config.detect.{field} is {cfg.get('detect', {}).get(field)!r}, want {path}")
pod = [d for d in docs if d["kind"] == "Deployment"][0]["spec"]["template"]["spec"]
secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
for secret, path in (("llmprobe-release-token", "/var/run/secrets/llmprobe-release/marker"), ("llmprobe-read-token", "/var/run/secrets/llmprobe-release/read")):
    if secret not in secrets or path not in mounts:
        problems.append(f"Secret {secret} not mounted at {path}")
templates = {d["metadata"]["name"]: d for d in docs if d["kind"] == "AnalysisTemplate"}
verdict = templates.get("llmprobe-verdict")
if not verdict:
    problems.append(f"no AnalysisTemplate llmprobe-verdict: {sorted(templates)}")
else:
    m = verdict["spec"]["metrics"][0]
    web = m["provider"]["web"]
    if web["url"] != "http://llmprobe.llm.svc:9464/api/v1/verdict?target={{args.target}}&version={{args.version}}":
        problems.append(f"verdict URL {web['url']}")
    if web.get("jsonPath") != "{$.state}" or web["headers"] != [{"key": "Authorization", "value": "Bearer {{args.llmprobe-read-token}}"}]:
        problems.append(f"verdict jsonPath/headers {web.get('jsonPath')} {web['headers']}")
    token = [a for a in verdict["spec"]["args"] if a["name"] == "llmprobe-read-token"]
    if not token or token[0]["valueFrom"]["secretKeyRef"] != {"name": "llmprobe-read-token", "key": "token"}:
        problems.append(f"the read-only token arg is not the read token Secret: {token}")
    if m["inconclusiveLimit"] != m["count"] or m["consecutiveSuccessLimit"] != 1:
        problems.append("grace/watching must never reach inconclusiveLimit before count, and passed must end the analysis")
mark = templates.get("llmprobe-release-mark")
if not mark or [a for a in mark["spec"]["args"] if a["name"] == "llmprobe-marker-token"][0]["valueFrom"]["secretKeyRef"]["name"] != "llmprobe-release-token":
    problems.append("the release-mark AnalysisTemplate does not post with the marker token")
elif mark["spec"]["metrics"][0]["provider"]["web"]["jsonBody"].get("at") != "now":
    problems.append("the release-mark AnalysisTemplate does not state the release's time (at: now)")
print(f"{len(templates)} AnalysisTemplates, config and mounts checked")
for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY
  # the MetricTemplate's query is PromQL once Flagger has put in its variable
  python3 - "$WORK/deploy.yaml" "$WORK/flagger-query.yml" <<'PY' || rc=1
import sys, yaml
mt = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "MetricTemplate"][0]
query = mt["spec"]["query"].replace("{{ variables.target }}", "vllm")
assert "{{" not in query, query
yaml.safe_dump({"groups": [{"name": "flagger", "rules": [{"record": "flagger_query", "expr": query}]}]}, open(sys.argv[2], "w"))
PY
  promtool check rules "$WORK/flagger-query.yml" || rc=1
  if out=$(helm template llmprobe "$CHART" --set rollouts.argo.enabled=true 2>&1); then
    echo "rollouts.argo without a read-only token rendered"; rc=1
  else
    grep -qF "needs the read-only token" <<<"$out" || { echo "$out"; rc=1; }
  fi
  if out=$(helm template llmprobe "$CHART" --set mode=sidecar --set rollouts.argo.enabled=true --set releaseApi.readToken.existingSecret=t 2>&1); then
    echo "rollouts.argo in sidecar mode without rollouts.argo.url rendered"; rc=1
  else
    grep -qF "set rollouts.argo.url in sidecar mode" <<<"$out" || { echo "$out"; rc=1; }
  fi
  if out=$(helm template llmprobe "$CHART" --set releaseApi.readToken.existingSecret=t --set config.detect.release_read_token_file=/x 2>&1); then
    echo "a read token set twice (releaseApi and config.detect) rendered"; rc=1
  else
    grep -qF "config.detect.release_read_token_file is set by releaseApi" <<<"$out" || { echo "$out"; rc=1; }
  fi
  return $rc
}
run "rollouts: Argo AnalysisTemplates, Flagger MetricTemplate and the docs' Rollout/Canary valid against the upstream CRDs; token Secrets mounted" check_rollouts

# Each file in BAD_VALUES breaks one value and names, in a `# expect:` line, the schema error it must
# cause. Both `helm lint --strict` and `helm template` must fail, and with that error, not another one.
BAD_VALUES=tests/fixtures/ops/helm-bad-values
check_bad_values() {
  local rc=0 n=0 f expect out
  for f in "$BAD_VALUES"/*.yaml; do
    [ -e "$f" ] || continue
    n=$((n + 1))
    expect=$(sed -n 's/^# expect: //p' "$f")
    if [ -z "$expect" ]; then echo "$f: no '# expect:' line"; rc=1; continue; fi
    if out=$(helm template llmprobe "$CHART" -f "$f" 2>&1); then
      echo "$f: helm template accepted it"; rc=1
    elif ! grep -qF "values don't meet the specifications of the schema" <<<"$out" || ! grep -qF -- "$expect" <<<"$out"; then
      echo "$f: helm template failed without the schema error \"$expect\":"; sed 's/^/  /' <<<"$out"; rc=1
    fi
    if out=$(helm lint --strict "$CHART" -f "$f" 2>&1); then
      echo "$f: helm lint --strict accepted it"; rc=1
    elif ! grep -qF -- "$expect" <<<"$out"; then
      echo "$f: helm lint --strict failed without \"$expect\":"; sed 's/^/  /' <<<"$out"; rc=1
    fi
  done
  [ "$n" -ge 4 ] || { echo "only $n bad values files in $BAD_VALUES"; rc=1; }
  echo "$n bad values files checked"
  return $rc
}
run "schema rejects each broken values file in $BAD_VALUES (helm lint and helm template)" check_bad_values

# The chart's config schema ($defs, generated from the Rust config types by `llmprobe config-schema
# --chart-values`; the unit test config::schema keeps it current) must accept every example config
# and the chart's own config values, and refuse the config fixtures that have a wrong type or an
# unknown key, and `helm template --set config.probe.max_inflight=3` must fail naming the key.
check_config_schema() {
  python3 - "$CHART/values.schema.json" "$CHART/values.yaml" "$CHART/ci/deployment-values.yaml" <<'PY' || return 1
import glob, json, sys, yaml, jsonschema
values_schema, *values_files = sys.argv[1:]
d = json.load(open(values_schema))
v = jsonschema.Draft202012Validator({"$defs": d["$defs"], "$ref": "#/$defs/LLMProbeConfig"})
problems, good, bad = [], 0, 0
for f in sorted(glob.glob("config/*.yaml")):
    good += 1
    for e in list(v.iter_errors(yaml.safe_load(open(f))))[:1]:
        problems.append(f"{f}: rejected by the chart's config schema at {e.json_path}: {e.message[:200]}")
for f in values_files:
    cfg = yaml.safe_load(open(f)).get("config")
    if cfg is not None:
        good += 1
        for e in v.iter_errors(cfg):
            problems.append(f"{f}: config rejected at {e.json_path}: {e.message[:200]}")
for f in ["unknown_field_target", "unknown_field_timeouts", "source_unknown_field", "wrong_type", "bench_unknown_field"]:
    path = f"tests/fixtures/config/bad/{f}.yaml"
    bad += 1
    if not list(v.iter_errors(yaml.safe_load(open(path)))):
        problems.append(f"{path}: accepted by the chart's config schema")
for p in problems:
    print(p)
print(f"{good} configs accepted, {bad} broken configs refused")
sys.exit(1 if problems else 0)
PY
  local out
  if out=$(helm template llmprobe "$CHART" --set config.probe.max_inflight=3 2>&1); then
    echo "helm template --set config.probe.max_inflight=3 succeeded"; return 1
  fi
  grep -qF "at '/config/probe': additional properties 'max_inflight' not allowed" <<<"$out" \
    || { echo "helm template --set config.probe.max_inflight=3 failed without naming the key:"; echo "$out"; return 1; }
  echo "helm template --set config.probe.max_inflight=3: $(grep -F max_inflight <<<"$out" | sed 's/^ *- //')"
}
run "config schema from the Rust types: example configs accepted, broken ones and config.probe.max_inflight refused" check_config_schema

echo "== dashboards"
check_dashboards() {
  python3 - "$WORK/dashboard-exprs.yml" grafana/*.json <<'PY'
import json, re, sys
out, paths = sys.argv[1], sys.argv[2:]
SUBST = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600", "__range_ms": "3600000",
         "__interval_ms": "60000", "target": "vllm", "scenario": "chat-short", "namespace": "default",
         "pod": "vllm-0", "datasource": "prometheus"}
sys.path.insert(0, "scripts")
from grafana_exprs import panels, substitute
def subst(expr):
    return substitute(expr, SUBST, "x")
problems, exprs, uids = [], [], set()
for path in paths:
    try:
        d = json.load(open(path))
    except Exception as e:
        problems.append(f"{path}: not JSON: {e}"); continue
    for key in ("uid", "title", "schemaVersion"):
        if not d.get(key):
            problems.append(f"{path}: missing {key}")
    if d.get("uid") in uids:
        problems.append(f"{path}: duplicate uid {d.get('uid')}")
    uids.add(d.get("uid"))
    if len(d.get("uid", "")) > 40:
        problems.append(f"{path}: uid longer than 40 characters")
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        problems.append(f"{path}: schemaVersion {d.get('schemaVersion')} is older than the current model")
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append(f"{path}: no Prometheus datasource variable named 'datasource'")
    for name in ("target",):
        v = variables.get(name)
        if not v or v.get("type") != "query":
            problems.append(f"{path}: no query variable '{name}'")
    for name, v in variables.items():
        if v.get("type") == "query":
            q = v.get("query"); q = q.get("query") if isinstance(q, dict) else q
            if not str(q).startswith("label_values("):
                problems.append(f"{path}: variable {name} does not use label_values()")
            exprs.append((f"{path} variable {name}", q))
    ids = []
    for p in panels(d.get("panels", [])):
        ids.append(p.get("id"))
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"{path}: panel {p.get('id')} '{p.get('title')}' does not use ${{datasource}}")
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit")
        if p.get("type") in ("timeseries", "stat", "gauge") and not unit:
            problems.append(f"{path}: panel {p.get('id')} '{p.get('title')}' has no unit")
        if p.get("type") == "heatmap" and not p.get("options", {}).get("yAxis", {}).get("unit"):
            problems.append(f"{path}: heatmap {p.get('id')} has no y-axis unit")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                problems.append(f"{path}: panel {p.get('id')} target {t.get('refId')} does not use ${{datasource}}")
            if not t.get("expr"):
                problems.append(f"{path}: panel {p.get('id')} target {t.get('refId')} has no expr"); continue
            if "_seconds_bucket" in t["expr"] and not t.get("exemplar"):
                problems.append(f"{path}: panel {p.get('id')} latency query {t.get('refId')} without exemplars")
            exprs.append((f"{path} panel {p.get('id')} {t.get('refId')}", t["expr"]))
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup or None in ids:
        problems.append(f"{path}: panel ids not unique/set: {dup}")
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr"):
            exprs.append((f"{path} annotation {a.get('name')}", a["expr"]))
with open(out, "w") as f:
    f.write("groups:\n  - name: dashboard-expressions\n    rules:\n")
    for i, (where, e) in enumerate(exprs):
        m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*", e, re.S)
        if m:
            e = m.group(1)
        f.write(f"      # {where}\n      - record: dashboard_expr_{i}\n        expr: |\n")
        for line in subst(e).splitlines():
            f.write(f"          {line}\n")
for p in problems:
    print(p)
print(f"{len(paths)} dashboards, {len(exprs)} expressions extracted")
sys.exit(1 if problems else 0)
PY
}
run "dashboards: uid, title, schemaVersion, unique panel ids, datasource variable, units, exemplars" check_dashboards
if [ -s "$WORK/dashboard-exprs.yml" ]; then
  run "dashboard PromQL (Grafana variables substituted) | promtool check rules" promtool check rules "$WORK/dashboard-exprs.yml"
else
  failed+=("dashboard PromQL extraction"); echo "FAIL  dashboard PromQL extraction produced nothing"
fi

echo "== metric names"
run "metric names in dashboards and alerts exist in $METRICS_FILE or alerts/known-external-metrics.txt" \
  python3 scripts/check-metric-names.py "$METRICS_FILE"

echo
echo "${#passed[@]} checks passed, ${#failed[@]} failed"
if [ "${#failed[@]}" -gt 0 ]; then
  printf '  failed: %s\n' "${failed[@]}"
  exit 1
fi
