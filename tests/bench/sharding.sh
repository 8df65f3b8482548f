#!/usr/bin/env bash
# What sharding costs, in one run on this machine: the same load (bloom-bench, many filters,
# batched adds and checks) against
#   one     an unsharded server (the embedded default), at the whole load and at half of it
#           (what each group's server gets below);
#   solo    one sharded group (one pod, its own etcd prefix and map), routed directly: every
#           call is routed, and stays;
#   direct  two groups of one pod each on a real etcd, the slots split evenly, with clients
#           routing each call to its filter's group (BLOOM_BENCH_SHARD_ROUTING=1);
#   hop     the same two groups, with clients sending every call to group a's pod, which
#           forwards the calls for group b's filters there (half of them).
# Prints each run's keys/s and the servers' CPU per key summed over the pods (and its ratio to
# `one`'s within the round); the verdict is the median over ROUNDS rounds, the runs of a round
# interleaved (this machine's speed drifts between runs). A first round fills the filters and is
# not counted.
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
# Every run is offered the same load (bloom-bench --rate), below what two servers and the
# clients sustain together on this machine: at saturation, CPU per key measures contention
# between the processes for the two cores rather than each server's work. RATE=0: as fast as
# the clients go.
RATE=${RATE:-600000}
# Many filters (per-user filters, say), so that both groups get about half of them.
CAPACITY=${CAPACITY:-100000}
SERVER=$BUILD/server/bloom-server
BENCH=$BUILD/loadtest/bloom-bench
CLI=$BUILD/client/bloom-cli
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_serving() {  # address
  for _ in $(seq 200); do
    if "$CLI" --server="$1" health >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  echo "sharding.sh: $1 did not start" >&2
  exit 1
}

ETCD_PORT=$(free_port)
PEER_PORT=$(free_port)
etcd --data-dir="$WORK/etcd" --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$PEER_PORT" \
  --initial-cluster="default=http://127.0.0.1:$PEER_PORT" --log-level=error >/dev/null 2>&1 &
PIDS+=($!)

ONE_PORT=$(free_port)
"$SERVER" --listen="127.0.0.1:$ONE_PORT" --data_dir="$WORK/one" >"$WORK/one.log" 2>&1 &
ONE_PID=$!
PIDS+=("$ONE_PID")
A_PORT=$(free_port)
B_PORT=$(free_port)
start_group() {  # name port
  "$SERVER" --listen="127.0.0.1:$2" --advertise_address="127.0.0.1:$2" --data_dir="$WORK/$1" \
    --etcd_endpoints="127.0.0.1:$ETCD_PORT" --cluster="bench/$1" --shard_map=bench/shardmap \
    --allow_unauthenticated_replication >"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
}
start_group a "$A_PORT"
A_PID=${PIDS[-1]}
SOLO_PORT=$(free_port)
"$SERVER" --listen="127.0.0.1:$SOLO_PORT" --advertise_address="127.0.0.1:$SOLO_PORT" \
  --data_dir="$WORK/solo" --etcd_endpoints="127.0.0.1:$ETCD_PORT" --cluster=solo/a \
  --shard_map=solo/shardmap --allow_unauthenticated_replication >"$WORK/solo.log" 2>&1 &
SOLO_PID=$!
PIDS+=("$SOLO_PID")
start_group b "$B_PORT"
B_PID=${PIDS[-1]}
wait_serving "127.0.0.1:$ONE_PORT"
wait_serving "127.0.0.1:$A_PORT"
wait_serving "127.0.0.1:$B_PORT"
wait_serving "127.0.0.1:$SOLO_PORT"
"$CLI" --server="127.0.0.1:$A_PORT" cluster init bench/a bench/b >/dev/null
"$CLI" --server="127.0.0.1:$SOLO_PORT" cluster init solo/a >/dev/null
# Both pods hold the map and know both primaries.
for _ in $(seq 200); do
  if "$CLI" --server="127.0.0.1:$B_PORT" cluster shards | grep -q "bench/a: .*primary 127" &&
     "$CLI" --server="127.0.0.1:$A_PORT" cluster shards | grep -q "bench/b: .*primary 127"; then
    break
  fi
  sleep 0.05
done

# run LABEL RATE ADDRESS ROUTING PIDS...: one measured run; prints "keys/s cpu-per-million".
run() {
  local label=$1 rate=$2 address=$3 routing=$4 pid=$5 more=${6:-}
  BLOOM_BENCH_SHARD_ROUTING=$routing "$BENCH" --target=bloom --address="$address" \
    --transport="$TRANSPORT" --clients="$CLIENTS" --batch="$BATCH" --mix=both --filters="$FILTERS" \
    --capacity="$CAPACITY" --error_rate=0.01 --duration="$DURATION" --rate="$rate" \
    --server_pid="$pid" \
    --more_server_pids="$more" --label="$label" >"$WORK/$label.out"
  local keys cpu
  keys=$(sed -n 's/.*= \([0-9]*\) keys\/s.*/\1/p' "$WORK/$label.out")
  cpu=$(sed -n 's/.*server: \([0-9.]*\) CPU s per million keys.*/\1/p' "$WORK/$label.out")
  echo "$keys $cpu"
}

declare -a SOLO SPLIT DIRECT HOP
for round in $(seq 0 "$ROUNDS"); do
  read -r one_keys one_cpu < <(run "one-$round" "$RATE" "127.0.0.1:$ONE_PORT" 0 "$ONE_PID")
  read -r half_keys half_cpu < <(run "half-$round" "$((RATE / 2))" "127.0.0.1:$ONE_PORT" 0 "$ONE_PID")
  read -r solo_keys solo_cpu < <(run "solo-$round" "$RATE" "127.0.0.1:$SOLO_PORT" 1 "$SOLO_PID")
  read -r direct_keys direct_cpu < <(run "direct-$round" "$RATE" "127.0.0.1:$A_PORT" 1 "$A_PID" "$B_PID")
  read -r hop_keys hop_cpu < <(run "hop-$round" "$RATE" "127.0.0.1:$A_PORT" 0 "$A_PID" "$B_PID")
  solo_ratio=$(echo "$solo_cpu / $one_cpu" | bc -l)
  split_ratio=$(echo "$direct_cpu / $one_cpu" | bc -l)
  direct_ratio=$(echo "$direct_cpu / $half_cpu" | bc -l)
  hop_ratio=$(echo "$hop_cpu / $direct_cpu" | bc -l)
  if [[ $round == 0 ]]; then
    echo "round 0 (filling the filters, not counted)"
    continue
  fi
  SOLO+=("$solo_ratio")
  SPLIT+=("$split_ratio")
  DIRECT+=("$direct_ratio")
  HOP+=("$hop_ratio")
  printf 'round %d: one %s keys/s %.3f CPU s/M, at half the load %.3f | one sharded group %.3f (%.2fx) | two groups, direct %s keys/s %.3f (%.2fx one, %.2fx one at half the load) | through one pod %s keys/s %.3f (%.2fx direct)\n' \
    "$round" "$one_keys" "$one_cpu" "$half_cpu" "$solo_cpu" "$solo_ratio" "$direct_keys" "$direct_cpu" "$split_ratio" \
    "$direct_ratio" "$hop_keys" "$hop_cpu" "$hop_ratio"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'median server CPU per key: one sharded group %.2fx one server (routing every call); two groups routed directly %.2fx one server at the same load per server, %.2fx one server at the whole load; half the calls forwarded once: %.2fx direct\n' \
  "$(median "${SOLO[@]}")" "$(median "${DIRECT[@]}")" "$(median "${SPLIT[@]}")" "$(median "${HOP[@]}")"
