#!/usr/bin/env bash
# Runs the Java client's tests (JUnit 5, through Maven's surefire plugin, offline) against the
# real server, BLOOM_SERVER_BIN, on the classes java_build compiled into BUILD_DIR/java/target
# (client/java/build.sh; ctest runs it first: fixture java_build), instead of compiling the
# client a second time into a directory of its own. Surefire only adds its reports there, so the
# cross-language tests may run the Polyglot program from the same classes meanwhile. Run by
# ctest (test java_client).
#
# usage: BLOOM_SERVER_BIN=... client/java/test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$1/java" && pwd)
if [[ ! -d "$BUILD/target/test-classes" ]]; then
  echo "no test classes in $BUILD/target: run client/java/build.sh $1 first" >&2
  exit 1
fi
exec mvn -o -B -Dstyle.color=never -Dmaven.repo.local="${MAVEN_REPO:-/usr/share/maven-repo}" \
  -f "$HERE/pom.xml" -Dbloom.build.directory="$BUILD/target" \
  -Dbloom.server="$(realpath "${BLOOM_SERVER_BIN:?}")" \
  org.apache.maven.plugins:maven-surefire-plugin:test
