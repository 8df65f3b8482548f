#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 60) on a copy of its seed
# corpus. A crash fails the run; copy the crash-* file it names into
# fuzz/regressions/<target>/ so that every build replays it as a test
# (fuzz/corpus_replay_test.cc), then fix the bug.
# The fuzzers live in the AddressSanitizer build made with clang ($BUILD_DIR, default
# build-address; see BLOOM_SANITIZE in CMakeLists.txt), which scripts/test.sh then also runs
# the tests from: what the tests need is built once.
# The two fuzzers run at once, one per core: libFuzzer runs on one thread.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
BUILD_DIR=${BUILD_DIR:-build-address}
if ! command -v clang++-14 >/dev/null || [[ ! -f /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ]]; then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi
# -O1 with line tables (-g1), as the sanitizers' authors advise: reports still name file and
# line. scripts/test.sh builds the same directory with the same flags.
CC=clang-14 CXX=clang++-14 BUILD_DIR="$BUILD_DIR" BUILD_TARGETS="${BUILD_TARGETS:-dump_fuzzer request_fuzzer}" \
  ./scripts/build.sh -DBLOOM_SANITIZE=address -DBLOOM_BUILD_BENCHMARKS=OFF \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
targets=(dump request)
pids=()
for target in "${targets[@]}"; do
  mkdir -p "$work/$target" "$work/artifacts-$target"
  cp fuzz/corpus/$target/* "$work/$target/"
  echo "fuzzing ${target}_fuzzer for ${SECONDS_PER_TARGET}s"
  "$BUILD_DIR/fuzz/${target}_fuzzer" "$work/$target" \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts-$target/" 2>"$work/$target.log" &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  if ! wait "${pids[$i]}"; then
    tail -40 "$work/$target.log"
    mkdir -p fuzz/found
    cp "$work/artifacts-$target/"* fuzz/found/ 2>/dev/null || true
    echo "${target}_fuzzer found a crash: inputs copied to fuzz/found/ (add them to fuzz/regressions/$target/)"
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/$target.log" | sed "s/^/${target}_fuzzer /"
  fi
done
exit $status
