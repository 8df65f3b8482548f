#!/usr/bin/env bash
# The one command that installs what is missing, builds, and runs every test. CI (.ci/run)
# calls exactly this. In order:
#   1. the ordinary build: unit, integration, crash, Python client, Helm chart and image checks;
#   2. the fuzzers, $BLOOM_FUZZ_SECONDS (default 30) each (scripts/fuzz.sh);
#   3. the unit and integration tests again under AddressSanitizer + UBSan; then under
#      ThreadSanitizer everything below the gRPC transport (unit, storage, service handlers,
#      fuzz corpora): Debian's gRPC is not built with TSAN, so TSAN cannot see its
#      synchronisation and reports every call through it. The crash, soak, chart and image
#      checks do not change with a sanitizer.
# BLOOM_QUICK=1 stops after step 1, for a quick edit-and-test loop.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/install-helm.sh >/dev/null   # for the Helm chart checks (tests/helm_chart_test.cc)
./scripts/install-client-deps.sh       # npm: the Node.js client and buf (protos/)
./scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j 2 --timeout 900
if [[ "${BLOOM_QUICK:-0}" == 1 ]]; then exit 0; fi

./scripts/fuzz.sh "${BLOOM_FUZZ_SECONDS:-30}"

# HostileClientTest bounds the real binary's RSS, which ASan's shadow memory would distort;
# HostileLimitsTest times other clients' calls, which a sanitizer's slowdown would distort.
# The Go, Node.js, polyglot and buf tests check clients and the API contract, not the server's
# memory or threads: once, in the ordinary build.
# FailoverChaosTest runs the real binaries through 21 faults for minutes: once, like the crash
# and soak tests. InstallTest checks what `cmake --install` puts where, which no sanitizer
# changes.
not_under_sanitizers='CrashTest|SoakTest|FailoverChaosTest|HelmChartTest|ImageTest|HostileClientTest|HostileLimitsTest|go_build|go_client|node_client|PolyglotTest|ApiContractTest|InstallTest'
# Under TSan, the property tests that run on one thread (the filter maths, windows, cuckoo
# tables, a scan of RocksDB) have no race to find, and are its slowest: ASan runs them.
single_threaded='WindowedFilterTest|FalsePositiveRateTest|DatabaseTest.ScansOfOneGeneration|CuckooFilterTest|CuckooTableTest|CuckooLayoutTest'
over_grpc='ServerTest|CliTest|CliSecurityTest|SecurityTest|ObservabilityTest|RaceTest|BenchSmokeTest|python_client|shutdown_stress|PipelineTest|CoalescingClientTest|ReplicationTest'
# Under a sanitizer the replication chaos runs shorter (what it checks does not change with
# the count, and the ordinary build ran it in full), and without the Go writer (built by the
# go_build fixture, which runs in the ordinary build only).
export BLOOM_REPLICATION_KILLS=3 BLOOM_READ_YOUR_WRITES_ROUNDS=20000
export BLOOM_REPLICATION_LANGUAGES="python node"
# Sanitizer builds are -O1 (as the sanitizers' authors advise) with line tables only (-g1):
# their reports still name file and line, and they compile in about half the time of -O2 with
# full debug info; the test programs themselves are -O0 (CMakeLists.txt). Only what runs is built:
# under ASan the `sanitizer_tests` target (all but the run-once programs above), under TSan the
# `unit_tests` target (the tests below the gRPC transport). ctest lists the test programs not
# built as <name>_NOT_BUILT, which the runs leave out.
sanitizer_flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
for sanitizer in address thread; do
  echo "== tests under -DBLOOM_SANITIZE=$sanitizer"
  targets="sanitizer_tests"
  if [[ $sanitizer == thread ]]; then targets="unit_tests"; fi
  BUILD_DIR="build-$sanitizer" BUILD_TARGETS="$targets" ./scripts/build.sh \
    -DBLOOM_SANITIZE="$sanitizer" -DBLOOM_BUILD_BENCHMARKS=OFF "${sanitizer_flags[@]}"
  exclude="$not_under_sanitizers|_NOT_BUILT"
  if [[ $sanitizer == thread ]]; then exclude="$exclude|$over_grpc|$single_threaded"; fi
  ctest --test-dir "build-$sanitizer" --output-on-failure -j 2 --timeout 900 -E "$exclude"
done
