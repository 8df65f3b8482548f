#!/usr/bin/env bash
# Generates the Java message classes and gRPC stubs for protos/bloom/v1/bloom.proto into
# OUT_DIR (default: this module's src/main/java, where they are committed), with protoc and
# Debian's protoc-gen-grpc-java (/usr/bin/grpc_java_plugin). check-stubs.sh runs it into a
# temp dir and compares.
#
# usage: client/java/generate-stubs.sh [OUT_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE/src/main/java}
PLUGIN=${GRPC_JAVA_PLUGIN:-/usr/bin/grpc_java_plugin}
mkdir -p "$OUT"
rm -rf "$OUT/io/bloomserver/bloom"
protoc -I "$ROOT/protos" --java_out="$OUT" --plugin=protoc-gen-grpc-java="$PLUGIN" \
  --grpc-java_out="$OUT" bloom/v1/bloom.proto
# protoc-gen-grpc-java 1.41 marks the stub @javax.annotation.Generated, which Java 9+ lacks and
# which needs a jar (javax.annotation-api) that Debian does not ship at a Maven Central
# version: drop the annotation, which nothing reads (the stub keeps @GrpcGenerated).
sed -i '/^@javax\.annotation\.Generated(/,/)$/d' "$OUT/io/bloomserver/bloom/v1/BloomFilterServiceGrpc.java"
