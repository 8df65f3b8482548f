#!/usr/bin/env bash
# Side-by-side benchmark: bloom-server against Redis on this machine, identical workloads, one
# run. Starts each server on loopback with a temp dir, runs bloom-bench, stops it by PID, and
# prints a table with ratios against the Redis bitmap baseline (a client-side Bloom filter over
# SETBIT/GETBIT, as Redisson and common tutorials do). RedisBloom's BF.* mode runs only when
# the Redis server has the module (Debian's does not); otherwise it is reported as skipped.
#
#   tests/bench/compare.sh                 # scenarios 1, 2, 3, 5 (10 s each)
#   SCENARIOS="1 2 3 4 5" tests/bench/compare.sh   # 4: a 100M-item filter (minutes to load)
#   DURATION=3s QUICK=1 tests/bench/compare.sh     # smaller sizes
#
# Needs the README's set-up (./scripts/test.sh or ./scripts/run.sh has built everything).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
DURATION=${DURATION:-10s}
SCENARIOS=${SCENARIOS:-"1 2 3 5"}
QUICK=${QUICK:-0}
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/service/bloom-server"
for tool in "$BENCH" "$SERVER" redis-server; do
  command -v "$tool" >/dev/null || [[ -x "$tool" ]] || { echo "compare.sh: $tool missing: run ./scripts/test.sh first"; exit 2; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]:-}"; do [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results.jsonl"
: >"$results"

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start_server KIND -> sets SERVER_PID and ADDRESS
start_server() {
  local kind=$1 dir
  dir=$(mktemp -d "$work/$kind-XXXX")
  case $kind in
    bloom|bloom-sync|bloom-syncmodel|bloom-noarena)
      local flags=()
      [[ $kind == bloom-sync ]] && flags+=(--sync)
      [[ $kind == bloom-syncmodel ]] && flags+=(--server_model=sync)
      [[ $kind == bloom-noarena ]] && flags+=(--protobuf_arenas=false)
      "$SERVER" --listen=127.0.0.1:0 --port_file="$dir/port" --data_dir="$dir/data" \
        --max_batch=100000 "${flags[@]}" >"$dir/log" 2>&1 &
      SERVER_PID=$!
      for _ in $(seq 200); do [[ -s $dir/port ]] && break; sleep 0.05; done
      ADDRESS="127.0.0.1:$(head -1 "$dir/port")"
      ;;
    redis-aof|redis-mem)
      local port appendonly=no
      port=$(free_port)
      [[ $kind == redis-aof ]] && appendonly=yes
      redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --appendonly "$appendonly" --appendfsync everysec --daemonize no >"$dir/log" 2>&1 &
      SERVER_PID=$!
      for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
      ADDRESS="127.0.0.1:$port"
      ;;
  esac
  pids+=("$SERVER_PID")
}

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
}

# run SCENARIO SERVER_KIND BENCH_TARGET ARGS...
run() {
  local scenario=$1 server=$2 target=$3
  shift 3
  start_server "$server"
  if ! "$BENCH" --target="$target" --address="$ADDRESS" --server_pid="$SERVER_PID" --json \
      --label="$scenario|$server|$target" --duration="$DURATION" "$@" >"$work/out" 2>"$work/err"; then
    echo "compare.sh: $scenario on $server/$target failed:"; cat "$work/err" "$work/out"; stop_server; exit 1
  fi
  if grep -q '^{' "$work/out"; then grep '^{' "$work/out" >>"$results"; else
    echo "{\"label\":\"$scenario|$server|$target\",\"skipped\":\"$(tr -d '"\n' <"$work/out")\"}" >>"$results"; fi
  stop_server
}

every_target() {  # every_target SCENARIO ARGS...: the same workload against each system
  local scenario=$1
  shift
  run "$scenario" bloom bloom "$@"
  run "$scenario" bloom-sync bloom "$@"
  run "$scenario" redis-mem redis-bitmap "$@"
  run "$scenario" redis-aof redis-bitmap "$@"
  run "$scenario" redis-mem redis-bf "$@"
}

small=1; [[ $QUICK == 1 ]] && small=10
for s in $SCENARIOS; do
  case $s in
    1) args=(--mix=query --capacity=$((1000000 / small)) --preload=$((1000000 / small))
             --batch=1000 --clients=8)
       every_target "1 batched MightContain, 1M filter, batch 1000, 8 clients" "${args[@]}"
       # What protobuf arenas buy (they are on by default with the callback model).
       run "1 batched MightContain, 1M filter, batch 1000, 8 clients" bloom-noarena bloom "${args[@]}" ;;
    2) every_target "2 batched Add of unique keys, batch 1000, 8 clients" --mix=add --keys=unique \
         --capacity=$((10000000 / small)) --ops=$((10000000 / small)) --batch=1000 --clients=8 ;;
    3) args=(--mix=both --keys=uniform --key_space=1000000 --capacity=1000000
             --preload=$((100000 / small)) --batch=1 --clients=50)
       every_target "3 single-key MightContain+Add, 50 clients" "${args[@]}"
       # The unbatched case is where the gRPC server model matters (the default is callback).
       run "3 single-key MightContain+Add, 50 clients" bloom-syncmodel bloom "${args[@]}"
       run "3 single-key MightContain+Add, 50 clients" bloom-noarena bloom "${args[@]}" ;;
    4) every_target "4 100M-item filter, uniform queries" --mix=query --keys=uniform \
         --key_space=100000000 --capacity=$((100000000 / small)) --preload=$((100000000 / small)) \
         --batch=1000 --clients=8 ;;
    5) every_target "5 100,000 filters of capacity 1000, random filter per op" --mix=both \
         --keys=uniform --key_space=10000000 --capacity=1000 --filters=$((100000 / small)) \
         --batch=1 --clients=8 ;;
  esac
done

/usr/bin/python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
baseline = {}
for r in rows:
    scenario, server, target = r["label"].split("|")
    if target == "redis-bitmap" and "keys_per_second" in r:
        baseline.setdefault(scenario, {})[server] = r["keys_per_second"]
print(f"{'scenario':58} {'system':24} {'keys/s':>12} {'vs bitmap':>9} {'p50 us':>9} {'p99 us':>9} {'CPU s/Mkey':>10} {'RSS MB':>8}")
for r in rows:
    scenario, server, target = r["label"].split("|")
    system = f"{server}/{target}" if target != "bloom" else server
    if "skipped" in r:
        print(f"{scenario:58} {system:24} skipped: {r['skipped'][:60]}")
        continue
    base = baseline.get(scenario, {}).get("redis-mem")
    ratio = f"{r['keys_per_second'] / base:.1f}x" if base else "-"
    print(f"{scenario:58} {system:24} {r['keys_per_second']:12.0f} {ratio:>9} "
          f"{r['latency_us']['p50']:9.0f} {r['latency_us']['p99']:9.0f} "
          f"{r['server_cpu_seconds_per_million_keys']:10.3f} {r['server_rss_bytes']/1e6:8.1f}")
PY
