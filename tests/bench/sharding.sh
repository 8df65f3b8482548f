#!/usr/bin/env bash
# What sharding costs, in one run on this machine: the same load (bloom-bench, many filters,
# batched adds and checks) against
#   one     an unsharded server (the embedded default);
#   solo    one sharded group (one pod, its own etcd prefix and map), routed directly: every
#           call is routed, and stays;
#   direct  two groups of one pod each on a real etcd, the slots split evenly, with clients
#           routing each call to its filter's group (BLOOM_BENCH_SHARD_ROUTING=1);
#   hop     the same two groups, with clients sending every call to group a's pod, which
#           forwards the calls for group b's filters there (half of them).
# Prints the servers' CPU per key summed over the pods, and ratios taken within a round; the
# verdicts are medians over ROUNDS rounds. A first round fills the filters and is not counted.
#
# The deployments under comparison are loaded at the same time, each by its own bloom-bench:
# the same server's CPU per key at the same load drifts by up to 1.7x between runs a minute
# apart on this machine, which no ratio of runs taken one after another survives. Each round:
#   1. the same work: one, solo and direct each offered RATE keys/s by CLIENTS clients;
#   2. the same work per group: solo offered RATE by CLIENTS clients and direct 2 x RATE by
#      2 x CLIENTS, so that each of its groups serves what solo serves. A server's CPU per key
#      falls as its load rises (fewer threads woken per call), so 1. charges two groups for
#      each serving half; 2. is what adding a group costs per key, which is what scaling out
#      by groups pays;
#   3. hop, then direct, each alone at RATE (the forwarded hop's cost).
#
#   tests/bench/sharding.sh                          # 3 rounds of 10 s runs
#   ROUNDS=5 DURATION=20s tests/bench/sharding.sh
#   TRANSPORT=client tests/bench/sharding.sh         # the pipelined client: Pipeline streams,
#                                                    # whose operations the pod forwards in `hop`
#
# Needs the README's set-up (./scripts/test.sh has built everything) and etcd (etcd-server).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-8}
BATCH=${BATCH:-100}
TRANSPORT=${TRANSPORT:-unary}  # bloom-bench --transport: unary calls, or client (pipelined)
FILTERS=${FILTERS:-1024}
# The load offered (bloom-bench --rate). Steps 1 and 2 each put three times this on the machine
# at once, which must stay below what the servers and clients sustain together here: at
# saturation, CPU per key measures contention for the two cores rather than each server's work.
RATE=${RATE:-100000}
# Many filters (per-user filters, say), so that both groups get about half of them.
CAPACITY=${CAPACITY:-100000}
BENCH=$BUILD/loadtest/bloom-bench
# shellcheck source=tests/bench/bench_env.sh
source tests/bench/bench_env.sh
# shellcheck source=tests/bench/sharded_deployment.sh
source tests/bench/sharded_deployment.sh

# run LABEL RATE ADDRESS ROUTING PID [MORE_PIDS]: one measured run (RUN_CLIENTS clients, or
# CLIENTS); prints "keys/s cpu-per-million".
run() {
  local label=$1 rate=$2 address=$3 routing=$4 pid=$5 more=${6:-}
  local clients=${RUN_CLIENTS:-$CLIENTS}
  BLOOM_BENCH_SHARD_ROUTING=$routing "$BENCH" --target=bloom --address="$address" \
    --transport="$TRANSPORT" --clients="$clients" --batch="$BATCH" --mix=both --filters="$FILTERS" \
    --capacity="$CAPACITY" --error_rate=0.01 --duration="$DURATION" --rate="$rate" \
    --server_pid="$pid" \
    --more_server_pids="$more" --label="$label" >"$WORK/$label.out"
  local keys cpu
  keys=$(sed -n 's/.*= \([0-9]*\) keys\/s.*/\1/p' "$WORK/$label.out")
  cpu=$(sed -n 's/.*server: \([0-9.]*\) CPU s per million keys.*/\1/p' "$WORK/$label.out")
  echo "$keys $cpu"
}

# together LABEL:RATE:CLIENTS:HOST:PORT:ROUTING:PID[:MORE_PIDS]...: the runs at once; prints
# each one's "keys/s cpu-per-million", a line each, in order.
together() {
  local spec label rate clients address port routing pid more pids=()
  for spec in "$@"; do
    IFS=: read -r label rate clients address port routing pid more <<<"$spec"
    RUN_CLIENTS=$clients run "$label" "$rate" "$address:$port" "$routing" "$pid" "$more" \
      >"$WORK/$label.res" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for spec in "$@"; do cat "$WORK/${spec%%:*}.res"; done
}

declare -a SOLO SAME_WORK SAME_PER_GROUP HOP
L=127.0.0.1
for round in $(seq 0 "$ROUNDS"); do
  { read -r _ one_cpu; read -r _ solo_cpu; read -r _ direct_cpu; } < <(together \
    "one-$round:$RATE:$CLIENTS:$L:$ONE_PORT:0:$ONE_PID" \
    "solo-$round:$RATE:$CLIENTS:$L:$SOLO_PORT:1:$SOLO_PID" \
    "direct-$round:$RATE:$CLIENTS:$L:$A_PORT:1:$A_PID:$B_PID")
  { read -r _ solo2_cpu; read -r direct2_keys direct2_cpu; } < <(together \
    "solo2-$round:$RATE:$CLIENTS:$L:$SOLO_PORT:1:$SOLO_PID" \
    "direct2-$round:$((RATE * 2)):$((CLIENTS * 2)):$L:$A_PORT:1:$A_PID:$B_PID")
  read -r hop_keys hop_cpu < <(run "hop-$round" "$RATE" "$L:$A_PORT" 0 "$A_PID" "$B_PID")
  read -r _ alone_cpu < <(run "alone-$round" "$RATE" "$L:$A_PORT" 1 "$A_PID" "$B_PID")
  if [[ $round == 0 ]]; then
    echo "round 0 (filling the filters, not counted)"
    continue
  fi
  SOLO+=("$(ratio "$solo_cpu" "$one_cpu")")
  SAME_WORK+=("$(ratio "$direct_cpu" "$solo_cpu")")
  SAME_PER_GROUP+=("$(ratio "$direct2_cpu" "$solo2_cpu")")
  HOP+=("$(ratio "$hop_cpu" "$alone_cpu")")
  printf 'round %d, CPU s per million keys: 1. one %.3f, one sharded group %.3f (%.2fx), two groups %.3f (%.2fx one group) | 2. one group %.3f, two groups at twice the load %.3f (%.2fx; %s keys/s) | 3. through one pod %.3f (%s keys/s), routed directly %.3f (%.2fx)\n' \
    "$round" "$one_cpu" "$solo_cpu" "${SOLO[-1]}" "$direct_cpu" "${SAME_WORK[-1]}" "$solo2_cpu" \
    "$direct2_cpu" "${SAME_PER_GROUP[-1]}" "$direct2_keys" "$hop_cpu" "$hop_keys" "$alone_cpu" "${HOP[-1]}"
done
printf 'median server CPU per key: one sharded group %.2fx one server (routing every call); two groups routed directly %.2fx one group at the same work per group, %.2fx one group at the same work in all; half the calls forwarded once %.2fx direct\n' \
  "$(median "${SOLO[@]}")" "$(median "${SAME_PER_GROUP[@]}")" "$(median "${SAME_WORK[@]}")" "$(median "${HOP[@]}")"
