#!/usr/bin/env bash
# Installs every Debian 12 package bloom-server needs to build, test and benchmark.
# Safe to run repeatedly: it only calls apt-get when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libabsl-dev librocksdb-dev libxxhash-dev libjemalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-grpcio python3-protobuf
  libhiredis-dev redis-server libyaml-cpp-dev
  prometheus-cpp-dev libssl-dev openssl prometheus
  clang-14 libclang-rt-14-dev
  # The Go client (client/go), built in GOPATH mode against Debian's Go sources; the 1.5
  # protobuf shim replaces the 1.3 one that Debian's gRPC for Go would otherwise pull in.
  golang-go golang-google-grpc-dev golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc
)
# The Node.js client and buf come from the npm registry (scripts/install-client-deps.sh);
# Node.js itself from Debian unless the machine has one already.
if ! command -v node >/dev/null; then PACKAGES+=(nodejs); fi
if ! command -v npm >/dev/null; then PACKAGES+=(npm); fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
