#!/usr/bin/env bash
# Side-by-side benchmark: bloom-server against Redis on this machine, identical workloads, one
# run. Starts each server on loopback with a temp dir, runs bloom-bench, stops it by PID, and
# prints a table with server CPU per key (from /proc) beside keys/s, and ratios against
# RedisBloom (BF.*) where it runs, else against the Redis bitmap baseline (a client-side Bloom
# filter over SETBIT/GETBIT, as Redisson and common tutorials do).
#
# RedisBloom is not a Debian package: build its module yourself and pass its path in
# REDIS_MODULE (docs/performance.md says how); without it the BF.* rows say skipped.
#
# bloom-server is driven three ways (bloom-bench --transport): unary calls, a raw Pipeline
# stream per client with one operation in flight, and the C++ client's pipelined mode shared by
# all clients (coalescing). The "echo" rows are the floor: a bare gRPC service answering the
# same messages without any filter work (bloom-bench --serve_echo), through each transport: for
# the pipelined client it is the most keys/s this machine gives with the client beside the
# server, whatever the server does. "bloom-async" rows are bloom-server with
# --item_call_threads=$ITEM_CALL_THREADS (default 2): unary Add and MightContain on gRPC's async
# API (service/item_calls.h).
#
#   tests/bench/compare.sh                 # scenarios 1 2 3 5 6 7 8 9 10 11 (10 s each)
#   SCENARIOS="1 2 3 4 5 6" tests/bench/compare.sh   # 4: a 100M-item filter (minutes to load)
#   DURATION=3s QUICK=1 tests/bench/compare.sh     # smaller sizes
#   REDIS_MODULE=/tmp/redisbloom/redisbloom.so tests/bench/compare.sh
#
# Needs the README's set-up (./scripts/test.sh or ./scripts/run.sh has built everything).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
DURATION=${DURATION:-10s}
SCENARIOS=${SCENARIOS:-"1 2 3 5 6 7 8 9 10 11"}
REDIS_MODULE=${REDIS_MODULE:-}
QUICK=${QUICK:-0}
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/server/bloom-server"
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
    bloom|bloom-sync|bloom-async)
      local flags=()
      [[ $kind == bloom-sync ]] && flags+=(--sync)
      [[ $kind == bloom-async ]] && flags+=(--item_call_threads="${ITEM_CALL_THREADS:-2}")
      "$SERVER" --listen=127.0.0.1:0 --port_file="$dir/port" --data_dir="$dir/data" \
        --max_batch=100000 "${flags[@]}" >"$dir/log" 2>&1 &
      SERVER_PID=$!
      for _ in $(seq 200); do [[ -s $dir/port ]] && break; sleep 0.05; done
      ADDRESS="127.0.0.1:$(head -1 "$dir/port")"
      ;;
    echo)
      "$BENCH" --serve_echo=127.0.0.1:0 --port_file="$dir/port" >"$dir/log" 2>&1 &
      SERVER_PID=$!
      for _ in $(seq 200); do [[ -s $dir/port ]] && break; sleep 0.05; done
      ADDRESS="127.0.0.1:$(head -1 "$dir/port")"
      ;;
    redis-aof|redis-mem|redis-always)
      local port appendonly=no fsync=everysec module=()
      port=$(free_port)
      [[ $kind != redis-mem ]] && appendonly=yes
      [[ $kind == redis-always ]] && fsync=always
      [[ -n $REDIS_MODULE ]] && module=(--loadmodule "$REDIS_MODULE")
      redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" \
        --appendonly "$appendonly" --appendfsync "$fsync" --daemonize no "${module[@]}" \
        >"$dir/log" 2>&1 &
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

# run SCENARIO SERVER_KIND BENCH_TARGET[/TRANSPORT] ARGS...
run() {
  local scenario=$1 server=$2 target=$3 transport=unary
  shift 3
  if [[ $target == */* ]]; then transport=${target#*/}; target=${target%%/*}; fi
  start_server "$server"
  if ! "$BENCH" --target="$target" --transport="$transport" --address="$ADDRESS" \
      --server_pid="$SERVER_PID" --json --label="$scenario|$server|$target/$transport" \
      --duration="$DURATION" "$@" >"$work/out" 2>"$work/err"; then
    echo "compare.sh: $scenario on $server/$target/$transport failed:"; cat "$work/err" "$work/out"
    stop_server; exit 1
  fi
  if grep -q '^{' "$work/out"; then grep '^{' "$work/out" >>"$results"; else
    echo "{\"label\":\"$scenario|$server|$target/$transport\",\"skipped\":\"$(tr -d '"\n' <"$work/out")\"}" >>"$results"; fi
  stop_server
}

every_target() {  # every_target SCENARIO ARGS...: the same workload against each system
  local scenario=$1
  shift
  run "$scenario" bloom bloom "$@"
  run "$scenario" bloom-async bloom "$@"
  run "$scenario" bloom-sync bloom "$@"
  run "$scenario" redis-mem redis-bitmap "$@"
  run "$scenario" redis-aof redis-bitmap "$@"
  run "$scenario" redis-mem redis-bf "$@"
  run "$scenario" redis-aof redis-bf "$@"
}

unbatched() {  # unbatched SCENARIO ARGS...: small calls, where the transport decides
  local scenario=$1
  shift
  run "$scenario" bloom bloom/unary "$@"
  run "$scenario" bloom bloom/pipeline "$@"
  run "$scenario" bloom bloom/client "$@"
  run "$scenario" echo bloom/unary "$@"
  run "$scenario" echo bloom/pipeline "$@"
  run "$scenario" echo bloom/client "$@"
  run "$scenario" redis-mem redis-bitmap "$@"
  run "$scenario" redis-mem redis-bf "$@"
  run "$scenario" redis-aof redis-bf "$@"
}

cuckoo_adds() {  # cuckoo_adds SCENARIO CAPACITY: batched adds of unique keys to 90%
  local capacity=$(($2 / small)) label
  label="$1 cuckoo: batched Add of unique keys to 90% of $(($2 / 1000000))M, batch 1000, 8 clients"
  local args=(--mix=add --keys=unique --capacity=$capacity --ops=$((capacity * 9 / 10))
              --batch=1000 --clients=8 --error_rate=0.016)
  run "$label" redis-mem redis-cf "${args[@]}"
  run "$label" bloom bloom-cuckoo "${args[@]}"
  run "$label" bloom bloom-cuckoo/client "${args[@]}"
  run "$label" bloom-async bloom-cuckoo "${args[@]}"
  run "$label" redis-aof redis-cf "${args[@]}"
}

cuckoo_queries() {  # cuckoo_queries SCENARIO CAPACITY: batched checks of a filter at 90%
  local capacity=$(($2 / small)) label
  label="$1 cuckoo: batched MightContain, $(($2 / 1000000))M filter at 90%, batch 1000, 8 clients"
  local args=(--mix=query --capacity=$capacity --preload=$((capacity * 9 / 10))
              --batch=1000 --clients=8 --error_rate=0.016)
  run "$label" redis-mem redis-cf "${args[@]}"
  run "$label" bloom bloom-cuckoo "${args[@]}"
  run "$label" bloom bloom-cuckoo/client "${args[@]}"
  run "$label" bloom-async bloom-cuckoo "${args[@]}"
}

small=1; [[ $QUICK == 1 ]] && small=10
for s in $SCENARIOS; do
  case $s in
    1) args=(--mix=query --capacity=$((1000000 / small)) --preload=$((1000000 / small))
             --batch=1000 --clients=8)
       every_target "1 batched MightContain, 1M filter, batch 1000, 8 clients" "${args[@]}"
       run "1 batched MightContain, 1M filter, batch 1000, 8 clients" bloom bloom/pipeline "${args[@]}" ;;
    2) args=(--mix=add --keys=unique --capacity=$((10000000 / small)) --ops=$((10000000 / small))
             --batch=1000 --clients=8)
       every_target "2 batched Add of unique keys, batch 1000, 8 clients" "${args[@]}"
       run "2 batched Add of unique keys, batch 1000, 8 clients" redis-always redis-bf "${args[@]}" ;;
    3) args=(--mix=both --keys=uniform --key_space=1000000 --capacity=1000000
             --preload=$((100000 / small)) --batch=1 --clients=50)
       unbatched "3 single-key MightContain+Add, 50 clients" "${args[@]}"
       run "3 single-key MightContain+Add, 50 clients" bloom-async bloom/unary "${args[@]}"
       run "3 single-key MightContain+Add, 50 clients" bloom-async bloom/client "${args[@]}"
       run "3 single-key MightContain+Add, 50 clients" bloom-sync bloom/client "${args[@]}"
       run "3 single-key MightContain+Add, 50 clients" redis-always redis-bf "${args[@]}" ;;
    4) every_target "4 100M-item filter, uniform queries" --mix=query --keys=uniform \
         --key_space=100000000 --capacity=$((100000000 / small)) --preload=$((100000000 / small)) \
         --batch=1000 --clients=8 ;;
    5) unbatched "5 100,000 filters of capacity 1000, random filter per op, 50 clients" \
         --mix=both --keys=uniform --key_space=10000000 --capacity=1000 \
         --filters=$((100000 / small)) --batch=1 --clients=50 ;;
    6) unbatched "6 MightContain, 10 keys per call, 50 clients" --mix=query --keys=uniform \
         --key_space=1000000 --capacity=1000000 --preload=$((1000000 / small)) --batch=10 \
         --clients=50 ;;
    # Cuckoo filters (CF.*), at the rate RedisBloom's filter delivers (8-bit fingerprints in
    # buckets of 2: about 1.6%): bloom-server's CUCKOO filter is reserved at that rate. 7 and 8
    # fill a 1M filter (which stays in the CPU's caches), 9 and 10 a 10M one.
    7) cuckoo_adds 7 1000000 ;;
    8) cuckoo_queries 8 1000000 ;;
    9) cuckoo_adds 9 10000000 ;;
    10) cuckoo_queries 10 10000000 ;;
    # Counts one key per call, where the transport decides (CF.COUNT takes one item).
    11) label="11 cuckoo: Count, one key per call, 1M filter at 90%, 50 clients"
        args=(--mix=query --count --keys=uniform --key_space=1000000 --capacity=$((1000000 / small))
              --preload=$((900000 / small)) --batch=1 --clients=50 --error_rate=0.016)
        run "$label" redis-mem redis-cf "${args[@]}"
        run "$label" bloom bloom-cuckoo/unary "${args[@]}"
        run "$label" bloom bloom-cuckoo/client "${args[@]}" ;;
  esac
done

/usr/bin/python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
# Baselines per scenario: RedisBloom in memory, else the Redis bitmap in memory.
baseline = {}
for r in rows:
    scenario, server, target = r["label"].split("|")
    if server == "redis-mem" and "keys_per_second" in r:
        kind = "bf" if target.startswith(("redis-bf", "redis-cf")) else "bitmap"
        baseline.setdefault(scenario, {})[kind] = r
print(f"{'scenario':62} {'system':24} {'keys/s':>10} {'vs base':>8} {'p50 us':>8} "
      f"{'p99 us':>8} {'CPU us/key':>10} {'CPU vs base':>11} {'RSS MB':>7}")
for r in rows:
    scenario, server, target = r["label"].split("|")
    system = f"{server}/{target.removesuffix('/unary')}"
    if "skipped" in r:
        print(f"{scenario:62} {system:24} skipped: {r['skipped'][:60]}")
        continue
    base = baseline.get(scenario, {})
    base = base.get("bf") or base.get("bitmap")
    cpu = r["server_cpu_seconds_per_million_keys"]
    ratio = f"{r['keys_per_second'] / base['keys_per_second']:.2f}x" if base else "-"
    base_cpu = base["server_cpu_seconds_per_million_keys"] if base else 0
    cpu_ratio = f"{cpu / base_cpu:.2f}x" if base_cpu else "-"
    print(f"{scenario:62} {system:24} {r['keys_per_second']:10.0f} {ratio:>8} "
          f"{r['latency_us']['p50']:8.0f} {r['latency_us']['p99']:8.0f} {cpu:10.3f} "
          f"{cpu_ratio:>11} {r['server_rss_bytes']/1e6:7.1f}")
print("base: RedisBloom (redis-mem/redis-bf, or redis-cf for cuckoo filters) where it ran, else the Redis bitmap (redis-mem); "
      "CPU us/key = server CPU seconds per million keys")
PY
