#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, AddressSanitizer + UBSan) into build-fuzz and runs
# each for SECONDS (default 60) on a copy of its seed corpus. A crash fails the run; copy the
# crash-* file it names into fuzz/regressions/<target>/ so that every build replays it as a
# test (fuzz/corpus_replay_test.cc), then fix the bug.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
if ! command -v clang++-14 >/dev/null || [[ ! -f /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ]]; then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi
CC=clang-14 CXX=clang++-14 BUILD_DIR="$BUILD_DIR" BUILD_TYPE=RelWithDebInfo \
  BUILD_TARGETS="dump_fuzzer request_fuzzer" ./scripts/build.sh -DBLOOM_SANITIZE=fuzzer \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"  # line tables are enough for its reports

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for target in dump request; do
  mkdir -p "$work/$target" "$work/artifacts-$target"
  cp fuzz/corpus/$target/* "$work/$target/"
  echo "fuzzing ${target}_fuzzer for ${SECONDS_PER_TARGET}s"
  if ! "$BUILD_DIR/fuzz/${target}_fuzzer" "$work/$target" \
      -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/artifacts-$target/" 2>"$work/$target.log"; then
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
