#!/usr/bin/env bash
# The one command that installs what is missing, builds, and runs every test.
# CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/install-helm.sh >/dev/null   # for the Helm chart checks (tests/helm_chart_test.cc)
./scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j 2 --timeout 900
