#!/usr/bin/env bash
# Builds the Java client (pom.xml) offline against Debian's Maven repository, into
# BUILD_DIR/java/target (the source tree is not written): the jar, the test classes (the
# Polyglot program the cross-language tests run), and BUILD_DIR/java/classpath, the class path
# that runs them (`java -cp "$(cat BUILD_DIR/java/classpath)" io.bloomserver.client.Polyglot`).
# Run by ctest (test java_build, the fixture of the tests that run Java programs).
#
# usage: client/java/build.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(mkdir -p "$1/java" && cd "$1/java" && pwd)
MVN=(mvn -o -q -B -Dstyle.color=never -Dmaven.repo.local="${MAVEN_REPO:-/usr/share/maven-repo}"
  -f "$HERE/pom.xml" -Dbloom.build.directory="$BUILD/target")
"${MVN[@]}" package -DskipTests
"${MVN[@]}" dependency:build-classpath -Dmdep.outputFile="$BUILD/dependencies" \
  -Dmdep.includeScope=runtime >/dev/null
echo "$BUILD/target/test-classes:$BUILD/target/classes:$(cat "$BUILD/dependencies")" \
  >"$BUILD/classpath"
echo "$BUILD/classpath"
