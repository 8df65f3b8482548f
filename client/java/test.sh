#!/usr/bin/env bash
# Runs the Java client's tests (JUnit 5, through Maven offline) against the real server,
# BLOOM_SERVER_BIN, in a build directory of their own (BUILD_DIR/java/test-target: the
# java_build fixture may be writing BUILD_DIR/java/target meanwhile). Run by ctest (test
# java_client).
#
# usage: BLOOM_SERVER_BIN=... client/java/test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(mkdir -p "$1/java" && cd "$1/java" && pwd)
exec mvn -o -B -Dstyle.color=never -Dmaven.repo.local="${MAVEN_REPO:-/usr/share/maven-repo}" \
  -f "$HERE/pom.xml" -Dbloom.build.directory="$BUILD/test-target" \
  -Dbloom.server="$(realpath "${BLOOM_SERVER_BIN:?}")" test
