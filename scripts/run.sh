#!/usr/bin/env bash
# The one command that installs what is missing, builds, and starts bloom-server on
# 127.0.0.1:50051 with its data in ./bloom-data. Arguments are passed to the server.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Only the two programs: the tests and benchmarks are test.sh's to build.
BUILD_TARGETS="bloom-server bloom-cli" ./scripts/build.sh
exec "${BUILD_DIR:-build}/server/bloom-server" "$@"
