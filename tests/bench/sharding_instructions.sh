#!/usr/bin/env bash
# What sharding costs a server per key, counted in instructions rather than CPU seconds: the
# servers run under valgrind's callgrind, which counts the instructions each process executes
# (user space, every thread) whatever else the machine is doing. sharding.sh measures CPU
# seconds, which on this 2-core machine move with contention (three servers, etcd and the load
# generators share the cores, and every thread hand-off costs a context switch of this virtual
# machine); instruction counts do not. What still moves them is background work that lands in
# one run and not another (a checkpoint of the filters, a RocksDB flush): runs of 60,000 keys
# a group vary by up to a third, hence several rounds and their medians.
#
# The same deployments as sharding.sh (sharded_deployment.sh), each measured alone, one after
# another, with bloom-bench offering RATE keys/s to each group it loads (CLIENTS clients per
# group, calls of BATCH keys, adds and checks half and half, over FILTERS filters) until it
# has sent KEYS keys per group:
#   one     an unsharded server;
#   solo    one sharded group, every call routed (and served where it lands);
#   direct  two groups, clients routing each call to its filter's group: each group serves
#           what solo serves, which is what adding a group costs per key (the issue's target:
#           at most 1.1x solo);
#   hop     the same two groups and load, every call sent to group a's pod, which forwards
#           those for group b's filters (half of them) there: the cost of one forwarded hop.
# Instructions per key are summed over the deployment's pods. A first round creates the
# filters and is not counted; ROUNDS more follow.
#
#   tests/bench/sharding_instructions.sh                 # 2 rounds of 40,000 keys per group
#   ROUNDS=3 KEYS=60000 tests/bench/sharding_instructions.sh   # docs/performance.md's figures
#   DEBUG=1 ...                                  # also prints each server's count per run
#
# Needs the README's set-up (./scripts/test.sh has built everything), etcd (etcd-server) and
# valgrind. Under callgrind a server runs some 50 times slower: RATE stays low so that every
# server keeps up with what it is offered, as the servers of a deployment would.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
KEYS=${KEYS:-40000}
RATE=${RATE:-2000}
CLIENTS=${CLIENTS:-4}
BATCH=${BATCH:-100}
FILTERS=${FILTERS:-1024}
CAPACITY=${CAPACITY:-100000}
ROUNDS=${ROUNDS:-2}
BENCH=$BUILD/loadtest/bloom-bench
# shellcheck source=tests/bench/bench_env.sh
source tests/bench/bench_env.sh
if ! command -v callgrind_control >/dev/null; then
  echo "sharding_instructions.sh: needs valgrind (apt-get install valgrind)" >&2
  exit 1
fi
SERVER_WRAPPER="valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind.%p"
START_SECONDS=${START_SECONDS:-120}
# A primary that cannot renew its etcd lease in time stops acknowledging writes: under
# callgrind, give it time.
GROUP_ARGS="--leader_ttl=60s"
# shellcheck source=tests/bench/sharded_deployment.sh
source tests/bench/sharded_deployment.sh

# instructions PID...: the instructions the processes executed since the last call (callgrind
# dumps its counters and zeroes them), summed.
instructions() {
  local total=0 pid dumps file counted
  for pid in "$@"; do
    dumps=$(find "$WORK" -name "callgrind.$pid.*" | wc -l)
    callgrind_control --dump "$pid" >/dev/null 2>&1
    for _ in $(seq 600); do
      [[ $(find "$WORK" -name "callgrind.$pid.*" | wc -l) -gt $dumps ]] && break
      sleep 0.1
    done
    file=$(find "$WORK" -name "callgrind.$pid.$((dumps + 1))")
    [[ -n $file ]] || { echo "sharding_instructions.sh: pid $pid wrote no dump" >&2; exit 1; }
    counted=$(awk '/^(summary|totals):/ { print $2; exit }' "$file")
    [[ -n ${DEBUG:-} ]] && echo "pid $pid: $counted instructions ($file)" >&2
    total=$((total + counted))
  done
  echo "$total"
}

# run LABEL ADDRESS ROUTING GROUPS PID...: one run offering RATE keys/s and KEYS keys per
# group loaded (GROUPS of them); prints the servers' instructions per key.
run() {
  local label=$1 address=$2 routing=$3 groups=$4
  shift 4
  instructions "$@" >/dev/null
  BLOOM_BENCH_SHARD_ROUTING=$routing "$BENCH" --target=bloom --address="$address" \
    --clients=$((CLIENTS * groups)) --batch="$BATCH" --mix=both --filters="$FILTERS" \
    --capacity="$CAPACITY" --error_rate=0.01 --rate=$((RATE * groups)) \
    --ops=$((KEYS * groups)) --duration=1h --label="$label" >"$WORK/$label.out"
  local keys counted
  counted=$(instructions "$@")
  keys=$(sed -n 's/^[^:]*: \([0-9]*\) keys in .*/\1/p' "$WORK/$label.out")
  [[ -n $keys && $keys -gt 0 ]] || { cat "$WORK/$label.out" >&2; exit 1; }
  echo "$counted / $keys" | bc -l
}

declare -a SOLO DIRECT HOP
L=127.0.0.1
for round in $(seq 0 "$ROUNDS"); do
  one=$(run "one-$round" "$L:$ONE_PORT" 0 1 "$ONE_PID")
  solo=$(run "solo-$round" "$L:$SOLO_PORT" 1 1 "$SOLO_PID")
  direct=$(run "direct-$round" "$L:$A_PORT" 1 2 "$A_PID" "$B_PID")
  hop=$(run "hop-$round" "$L:$A_PORT" 0 2 "$A_PID" "$B_PID")
  if [[ $round == 0 ]]; then
    echo "round 0 (creating the filters, not counted)"
    continue
  fi
  SOLO+=("$(ratio "$solo" "$one")")
  DIRECT+=("$(ratio "$direct" "$solo")")
  HOP+=("$(ratio "$hop" "$direct")")
  printf 'round %d, instructions per key: one server %.0f; one sharded group %.0f (%.3fx); two groups routed directly %.0f (%.3fx one group); through one pod %.0f (%.3fx direct)\n' \
    "$round" "$one" "$solo" "${SOLO[-1]}" "$direct" "${DIRECT[-1]}" "$hop" "${HOP[-1]}"
done
printf 'median instructions per key: one sharded group %.3fx one server; two groups routed directly %.3fx one group at the same work per group; half the calls forwarded once %.3fx direct\n' \
  "$(median "${SOLO[@]}")" "$(median "${DIRECT[@]}")" "$(median "${HOP[@]}")"
