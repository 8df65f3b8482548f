#!/usr/bin/env bash
# Installs every Debian 12 package bloom-server needs to build, test and benchmark.
# Safe to run repeatedly: it only calls apt-get when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git lld
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  libabsl-dev librocksdb-dev libxxhash-dev libjemalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-grpcio python3-protobuf
  # The Python client's wheel (client/python/pyproject.toml) and the venv its test installs into.
  python3-build python3-wheel python3-venv
  libhiredis-dev redis-server libyaml-cpp-dev
  # The .deb checks (tests/package_test.cc).
  lintian
  prometheus-cpp-dev libssl-dev openssl prometheus
  clang-14 libclang-rt-14-dev
  # The Go client module (client/go), built offline against Debian's Go sources; the 1.5
  # protobuf shim replaces the 1.3 one that Debian's gRPC for Go would otherwise pull in.
  golang-go golang-google-grpc-dev golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc
  # Coordination (automatic failover): a real etcd for the tests, and its v3 API (below).
  etcd-server etcd-client
  # The Java client (client/java), built offline by Maven from Debian's /usr/share/maven-repo:
  # the JDK, Maven and the plugins of its lifecycle, gRPC, protobuf, netty, Guava, JUnit 5,
  # and the stub generator (check-stubs.sh).
  default-jdk-headless maven libmaven-compiler-plugin-java libmaven-resources-plugin-java
  libsurefire-java libmaven-jar-plugin-java libmaven-install-plugin-java
  libmaven-dependency-plugin-java
  libgrpc-java libprotobuf-java libnetty-java libperfmark-java libanimal-sniffer-java
  libgoogle-gson-java libguava-java junit5 protobuf-compiler-grpc-java-plugin
)
# The Node.js client and buf come from the npm registry (scripts/install-client-deps.sh);
# Node.js itself from Debian unless the machine has one already.
if ! command -v node >/dev/null; then PACKAGES+=(nodejs); fi
if ! command -v npm >/dev/null; then PACKAGES+=(npm); fi

# etcd's v3 API .proto files, from which the build generates its etcd client stubs
# (protos/CMakeLists.txt). Debian ships them in golang-etcd-server-dev, whose dependencies are
# 130 Go source packages (and systemd) that nothing here uses: its .deb is fetched from the
# archive and only its .proto files are unpacked, into ETCD_API_DIR.
ETCD_API_DIR=${ETCD_API_DIR:-/usr/local/share/bloom-server/etcd-api}
install_etcd_api() {
  [[ -f $ETCD_API_DIR/etcd/etcdserver/etcdserverpb/rpc.proto ]] && return 0
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download golang-etcd-server-dev >/dev/null 2>&1) || return 1
  dpkg-deb -x "$tmp"/golang-etcd-server-dev_*.deb "$tmp/x"
  local src=$tmp/x/usr/share/gocode/src/go.etcd.io/etcd
  $SUDO mkdir -p "$ETCD_API_DIR"
  for proto in etcdserver/etcdserverpb/rpc.proto mvcc/mvccpb/kv.proto auth/authpb/auth.proto; do
    $SUDO install -D -m 644 "$src/$proto" "$ETCD_API_DIR/etcd/$proto"
  done
  rm -rf "$tmp"
}

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)) && install_etcd_api; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

$SUDO apt-get update -qq
if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
install_etcd_api || { echo "install-deps: could not fetch golang-etcd-server-dev"; exit 1; }
