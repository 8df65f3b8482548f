#!/usr/bin/env bash
# Fails when the committed Java stubs (src/main/java/io/bloomserver/bloom/v1) no longer match
# protos/bloom/v1/bloom.proto: generates them again into a temp dir and compares. Run by ctest
# (test java_stubs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$HERE/generate-stubs.sh" "$out"
if ! diff -r -q "$out/io/bloomserver/bloom" "$HERE/src/main/java/io/bloomserver/bloom"; then
  echo "client/java's generated stubs are stale: run client/java/generate-stubs.sh and commit them"
  diff -r -u "$HERE/src/main/java/io/bloomserver/bloom" "$out/io/bloomserver/bloom" | head -40
  exit 1
fi
echo "client/java stubs match protos/bloom/v1/bloom.proto"
