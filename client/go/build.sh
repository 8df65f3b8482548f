#!/usr/bin/env bash
# Builds the Go client in GOPATH mode against Debian's Go packages (/usr/share/gocode), so
# nothing is downloaded: generates bloom.v1's Go code with protoc-gen-go and
# protoc-gen-go-grpc into BUILD_DIR/go, links this folder in beside it, then vets and builds
# every package. Prints the GOPATH to use (for `go test`) on its last line.
#
# usage: client/go/build.sh BUILD_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(mkdir -p "$1" && cd "$1" && pwd)
GOROOT_SRC="$BUILD/go/src/github.com/bloom-server/bloom-server"
mkdir -p "$GOROOT_SRC/gen/go" "$GOROOT_SRC/client" "$BUILD/go/cache"
protoc -I "$ROOT/protos" --go_out="$BUILD/go/src" --go-grpc_out="$BUILD/go/src" \
  "$ROOT/protos/bloom/v1/bloom.proto"
ln -sfn "$ROOT/client/go" "$GOROOT_SRC/client/go"
export GOPATH="$BUILD/go:/usr/share/gocode" GO111MODULE=off GOCACHE="$BUILD/go/cache" GOFLAGS=
cd "$GOROOT_SRC/client/go"
go vet ./...
go build -o "$BUILD/go/bin/" ./...
echo "$GOPATH"
