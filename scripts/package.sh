#!/usr/bin/env bash
# Builds bloom-server_<version>_amd64.deb into ./dist (or $DIST_DIR): the two programs, stripped,
# with the systemd unit and /etc/default/bloom-server (packaging/CMakeLists.txt).
#   sudo apt install ./dist/bloom-server_*_amd64.deb
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
BUILD_TARGETS="bloom-server bloom-cli" ./scripts/build.sh
cpack --config "${BUILD_DIR:-build}/CPackConfig.cmake" -B "${DIST_DIR:-dist}" >/dev/null
rm -rf "${DIST_DIR:-dist}/_CPack_Packages"
ls "${DIST_DIR:-dist}"/bloom-server_*_amd64.deb
