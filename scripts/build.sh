#!/usr/bin/env bash
# Configures and builds bloom-server into ./build (or $BUILD_DIR).
# Extra arguments are passed to cmake's configure step, e.g. -DBLOOM_SANITIZE=thread.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@" >/dev/null
# One compile command per source, not per unity batch, for clang-tidy -p "$BUILD_DIR".
python3 scripts/compile-commands.py "$BUILD_DIR"
# BUILD_TARGETS="bloom-server bloom-cli" builds only those (the container image does).
cmake --build "$BUILD_DIR" -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
