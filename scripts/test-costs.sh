#!/usr/bin/env bash
# Writes tests/costs/*.txt from the seconds each test took in the build directories of a run of
# ./scripts/test.sh (ctest keeps them in <build>/Testing/Temporary/CTestCostData.txt): every test
# of a second or more. Run it after a clean clone's run on a CI-sized machine (2 cores) when
# tests were added, removed or changed length a lot, and commit the files.
#
# Why: `ctest -j 2` starts the tests in descending cost, and a clean clone (CI) has measured
# none; without them the long tests start in the order they are declared, and a run can end
# with one core idle for the length of the last of them. scripts/test.sh copies these files
# into a build directory that has no measured costs of its own.
#
#   ./scripts/test-costs.sh            # from build, build-address, build-thread here
#   ./scripts/test-costs.sh /tmp/x     # from a clean clone's run
set -euo pipefail
cd "$(dirname "$0")/.."
from=${1:-.}
for pair in build:ordinary build-address:address build-thread:thread; do
  data="$from/${pair%%:*}/Testing/Temporary/CTestCostData.txt"
  [[ -f "$data" ]] || { echo "no $data: run ./scripts/test.sh there first" >&2; exit 1; }
  awk 'NF == 3 && $3 >= 1 { printf "%s 1 %.1f\n", $1, $3 }' "$data" | sort -k3,3 -rn \
    > "tests/costs/${pair##*:}.txt"
done
wc -l tests/costs/*.txt
