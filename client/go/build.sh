#!/usr/bin/env bash
# Builds the Go client module (go.mod here) offline, against Debian's Go sources: copies the
# module to BUILD_DIR/go/module, gives the copy a vendor/ tree whose modules are Debian's
# /usr/share/gocode/src folders (with the vendor/modules.txt the go command checks), then vets
# and builds every package with -mod=vendor into BUILD_DIR/go/bin. Nothing is downloaded and the
# source tree is not written. Prints the module copy's directory on its last line.
# With --module-only it stops before vet and build (test.sh: `go test` builds what it needs,
# and programs in BUILD_DIR/go/bin that other tests run are left alone).
#
# usage: client/go/build.sh BUILD_DIR [--module-only]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(mkdir -p "$1" && cd "$1" && pwd)
MODULE_ONLY=false
if [[ ${2:-} == --module-only ]]; then MODULE_ONLY=true; fi
MODULE="$BUILD/go/module"
if $MODULE_ONLY; then MODULE+=-test; fi  # its own copy: the go_build test may be using the other
GOCODE=/usr/share/gocode/src
mkdir -p "$BUILD/go/cache" "$BUILD/go/path" "$BUILD/go/bin"
rm -rf "$MODULE"
cp -r "$HERE" "$MODULE"
rm -rf "$MODULE/vendor" && mkdir "$MODULE/vendor"

# The modules the client's packages and tests import (directly or not), as Debian packages
# them, at the versions go.mod requires.
vendored=(google.golang.org/grpc google.golang.org/protobuf github.com/golang/protobuf
  golang.org/x/net golang.org/x/sys golang.org/x/text google.golang.org/genproto)
{
  for module in "${vendored[@]}"; do
    mkdir -p "$MODULE/vendor/$(dirname "$module")"
    ln -s "$GOCODE/$module" "$MODULE/vendor/$module"
    version=$(awk -v m="$module" '$1 == m && $2 ~ /^v/ { print $2 }' "$MODULE/go.mod")
    go_version=$(awk '$1 == "go" { print $2; exit }' "$GOCODE/$module/go.mod")
    # The go command checks each header against go.mod, and finds packages by these paths.
    echo "# $module ${version:?$module is not in go.mod}"
    echo "## explicit; go $go_version"
    (cd "$GOCODE/$module" && find . -name '*.go' ! -path '*/testdata/*' -printf '%h\n' |
      sort -u | sed "s#^\.#$module#")
  done
} >"$MODULE/vendor/modules.txt"

export GOPATH="$BUILD/go/path" GOCACHE="$BUILD/go/cache" GO111MODULE=on GOFLAGS=-mod=vendor
export GOPROXY=off GOTOOLCHAIN=local
cd "$MODULE"
if $MODULE_ONLY; then
  echo "$MODULE"
  exit 0
fi
go vet ./...
go build -o "$BUILD/go/bin/" ./...
echo "$MODULE"
