#!/usr/bin/env bash
# The one command that installs what is missing, builds, and runs every test. CI (.ci/run)
# calls exactly this. In order:
#   1. the ordinary build: unit, integration, crash, Python client, Helm chart and image checks;
#   2. the fuzzers, $BLOOM_FUZZ_SECONDS (default 30) each (scripts/fuzz.sh), and the unit and
#      integration tests again, from one clang build with AddressSanitizer + UBSan;
#   3. under ThreadSanitizer everything below the gRPC transport (unit, storage, service
#      handlers, fuzz corpora): Debian's gRPC is not built with TSAN, so TSAN cannot see its
#      synchronisation and reports every call through it.
# The crash, soak, chart and image checks do not change with a sanitizer: step 1 only.
# BLOOM_QUICK=1 stops after step 1, for a quick edit-and-test loop.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/install-helm.sh >/dev/null   # for the Helm chart checks (tests/helm_chart_test.cc)
./scripts/install-client-deps.sh       # npm: the Node.js client and buf (protos/)
# `ctest -j 2` starts the longest tests first by the seconds it measured in earlier runs of a
# build directory; one that has measured none (a clean clone, as in CI) starts from the
# seconds of a run on a 2-core machine (tests/costs/, written by scripts/test-costs.sh), so that
# the run does not end with one core idle for the length of a long test started last.
seed_costs() {
  local data="$1/Testing/Temporary/CTestCostData.txt"
  if [[ ! -f "$data" ]]; then
    mkdir -p "$(dirname "$data")"
    cp "tests/costs/$2.txt" "$data"
  fi
}
./scripts/build.sh
seed_costs "${BUILD_DIR:-build}" ordinary
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j 2 --timeout 900
if [[ "${BLOOM_QUICK:-0}" == 1 ]]; then exit 0; fi

# HostileClientTest bounds the real binary's RSS, which ASan's shadow memory would distort;
# HostileLimitsTest times other clients' calls, which a sanitizer's slowdown would distort.
# The Go, Node.js, Java, polyglot and buf tests check clients and the API contract, not the server's
# memory or threads: once, in the ordinary build.
# FailoverChaosTest runs the real binaries through 21 faults for minutes: once, like the crash
# and soak tests. InstallTest, PackageTest and DebianPackageTest check what the packages put
# where, which no sanitizer changes.
not_under_sanitizers='CrashTest|SoakTest|FailoverChaosTest|ShardingChaosTest|PrometheusTest|ImpostorTest|ImpostorEtcdTest|LeaderKeyTest|PartitionTest|HelmChartTest|ImageTest|HostileClientTest|HostileLimitsTest|go_build|go_client|go_stubs|node_client|java_build|java_client|java_stubs|PolyglotTest|ApiContractTest|InstallTest|PackageTest|DebianPackageTest'
# Under TSan, the property tests that run on one thread (the filter maths, windows, cuckoo
# tables, a scan of RocksDB) have no race to find, and are its slowest: ASan runs them.
single_threaded='WindowedFilterTest|FalsePositiveRateTest|DatabaseTest.ScansOfOneGeneration|CuckooFilterTest|CuckooTableTest|CuckooLayoutTest'
# Tests over gRPC's transport in the test process: Debian's gRPC is not built for TSan, which
# reports its event-engine threads as races (ASan runs them).
over_grpc='ShardRouterForwardingTest|ServerTest|ItemCallsTest|StreamConnectionsTest|CliTest|CliSecurityTest|SecurityTest|ObservabilityTest|RaceTest|BenchSmokeTest|python_client|python_shards|shutdown_stress|PipelineTest|CoalescingClientTest|ReplicationTest'
# Under a sanitizer the replication chaos and the windows' model run shorter (what they check
# does not change with the count, and the ordinary build ran them in full), and the chaos
# without the Go writer (built by the go_build fixture, which runs in the ordinary build only).
export BLOOM_REPLICATION_KILLS=3 BLOOM_READ_YOUR_WRITES_ROUNDS=20000 BLOOM_WINDOW_SEEDS=2
export BLOOM_REPLICATION_LANGUAGES="python node"
# Only what runs is built: ctest lists the test programs not built as <name>_NOT_BUILT, which
# the runs leave out. Test programs themselves compile at -O0 (CMakeLists.txt).
exclude="$not_under_sanitizers|_NOT_BUILT"

# 2. AddressSanitizer + UBSan, built with clang (scripts/fuzz.sh): the fuzzers for
#    $BLOOM_FUZZ_SECONDS (default 30) each, then the tests (the `sanitizer_tests` target: all
#    but the run-once programs above).
echo "== fuzzers and tests under -DBLOOM_SANITIZE=address"
BUILD_TARGETS="sanitizer_tests" ./scripts/fuzz.sh "${BLOOM_FUZZ_SECONDS:-30}"
seed_costs build-address address
ctest --test-dir build-address --output-on-failure -j 2 --timeout 900 -E "$exclude"

# 3. ThreadSanitizer: the `unit_tests` target (the tests below the gRPC transport), -O1 with
#    line tables as above.
echo "== tests under -DBLOOM_SANITIZE=thread"
BUILD_DIR=build-thread BUILD_TARGETS=unit_tests ./scripts/build.sh -DBLOOM_SANITIZE=thread \
  -DBLOOM_BUILD_BENCHMARKS=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
seed_costs build-thread thread
ctest --test-dir build-thread --output-on-failure -j 2 --timeout 900 \
  -E "$exclude|$over_grpc|$single_threaded"
