#!/usr/bin/env bash
# Fails when the committed Go stubs (bloomv1/) no longer match protos/bloom/v1/bloom.proto:
# generates them again, as bloomv1/generate.go's go:generate line does, into a temp dir and
# compares. Run by ctest (test go_stubs).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p "$out/bloomv1"
# The go:generate line's arguments, with its output folder (..) moved to $out.
read -ra args < <(sed -n 's#^//go:generate protoc ##p' "$HERE/bloomv1/generate.go" |
  sed "s#_out=\.\.#_out=$out#g")
(cd "$HERE/bloomv1" && protoc "${args[@]}")
status=0
for file in bloom.pb.go bloom_grpc.pb.go; do
  if ! diff -q "$out/bloomv1/$file" "$HERE/bloomv1/$file" >/dev/null; then
    echo "client/go/bloomv1/$file is stale: run \`go generate ./...\` in client/go and commit it"
    diff -u "$HERE/bloomv1/$file" "$out/bloomv1/$file" | head -40
    status=1
  fi
done
exit $status
