#!/usr/bin/env bash
# Builds the Go client (build.sh) and runs its tests, with the race detector, against the
# real server. Run by ctest (test go_client).
#
# usage: BLOOM_SERVER_BIN=... client/go/test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
GOPATH=$("$HERE/build.sh" "$1" | tail -1)
BUILD=$(cd "$1" && pwd)
export GOPATH GO111MODULE=off GOCACHE="$BUILD/go/cache" GOFLAGS=
cd "$BUILD/go/src/github.com/bloom-server/bloom-server/client/go"
go test -race -count=1 -v ./...
