#!/usr/bin/env bash
# Builds the Go client module (build.sh) and runs its tests, with the race detector, against
# the real server. Run by ctest (test go_client).
#
# usage: BLOOM_SERVER_BIN=... client/go/test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODULE=$("$HERE/build.sh" "$1" --module-only | tail -1)
BUILD=$(cd "$1" && pwd)
export GOPATH="$BUILD/go/path" GOCACHE="$BUILD/go/cache" GO111MODULE=on GOFLAGS=-mod=vendor
export GOPROXY=off GOTOOLCHAIN=local
cd "$MODULE"
go test -race -count=1 -v ./...
