#!/usr/bin/env bash
# Installs the npm packages the tests need, exactly as their lockfiles pin them:
# the Node.js client's @grpc/grpc-js and @grpc/proto-loader (client/node) and buf, for
# `buf lint`, `buf breaking` and `buf curl` (protos/). A folder whose node_modules was
# installed from the same lockfile is skipped. Needs node and npm (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
for dir in client/node protos; do
  stamp="$dir/node_modules/.installed-from-lockfile"
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then continue; fi
  echo "install-client-deps: npm install in $dir"
  # npm install, not npm ci: the registry here lists no builds of buf for other platforms, so
  # npm ci finds the lockfile "out of sync"; with --no-save it installs what the lockfile pins.
  (cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
done
