#!/usr/bin/env bash
# Builds the Go client module (build.sh) and runs its tests, with the race detector, against
# the real server. Run by ctest (test go_client), after its fixture go_build, whose `go vet
# ./...` already vetted these sources, test files included: `go test` does not vet them again
# (its vet compiles every package a second time without the race detector).
#
# usage: BLOOM_SERVER_BIN=... client/go/test.sh BUILD_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
MODULE=$("$HERE/build.sh" "$1" --module-only | tail -1)
BUILD=$(cd "$1" && pwd)
export GOPATH="$BUILD/go/path" GOCACHE="$BUILD/go/cache" GO111MODULE=on GOFLAGS=-mod=vendor
export GOPROXY=off GOTOOLCHAIN=local
cd "$MODULE"
go test -race -vet=off -count=1 -v ./...
