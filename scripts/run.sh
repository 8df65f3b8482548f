#!/usr/bin/env bash
# The one command that installs what is missing, builds, and starts bloom-server on
# 127.0.0.1:50051 with its data in ./bloom-data. Arguments are passed to the server.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec "${BUILD_DIR:-build}/service/bloom-server" "$@"
