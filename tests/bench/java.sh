#!/usr/bin/env bash
# The Java client against the C++ client, same server build, same run: bloom-bench's scenario 3
# (one key per call, MightContain + Add half and half, one 1M filter) and scenario 5 (100,000
# per-user filters created on first add, a random one per call), from 200 client threads each.
# Rows: the C++ client's pipelined mode (bloom-bench --transport=client), the Java client's
# pipelined mode and its unary calls (loadtest/java/BloomLoad.java). Every row has a fresh
# server; the rows of a round run in a rotating order; the table gives each row's median over
# the rounds and its ratios to the C++ pipelined client's median: keys/s, and server CPU per key
# (from /proc).
#
#   tests/bench/java.sh                      # 3 rounds of 10 s rows, scenarios 3 and 5
#   ROUNDS=5 DURATION=20 SCENARIOS=3 tests/bench/java.sh
#
# Needs the README's set-up (./scripts/test.sh built the server, bloom-bench and, through the
# java_build test, build/java/classpath).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
SCENARIOS=${SCENARIOS:-"3 5"}
THREADS=${THREADS:-200}
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/server/bloom-server"
[[ -x $BENCH && -x $SERVER ]] || { echo "java.sh: build first (./scripts/build.sh)"; exit 2; }
[[ -s $BUILD/java/classpath ]] || client/java/build.sh "$BUILD" >/dev/null
CLASSPATH_JAVA=$(cat "$BUILD/java/classpath")

work=$(mktemp -d)
SERVER_PID=
cleanup() {
  [[ -n $SERVER_PID ]] && kill -9 "$SERVER_PID" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
results="$work/results.jsonl"

start_server() {
  local dir
  dir=$(mktemp -d "$work/server-XXXX")
  "$SERVER" --listen=127.0.0.1:0 --port_file="$dir/port" --data_dir="$dir/data" \
    --max_batch=100000 >"$dir/log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 200); do [[ -s $dir/port ]] && break; sleep 0.05; done
  ADDRESS="127.0.0.1:$(head -1 "$dir/port")"
}

stop_server() {
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}

# row SCENARIO CLIENT: one measured run on a fresh server, appended to $results.
row() {
  local scenario=$1 client=$2 bench_args java_args
  if [[ $scenario == 3 ]]; then
    bench_args=(--keys=uniform --key_space=1000000 --capacity=1000000 --preload=100000)
    java_args=(--filters=1 --key_space=1000000 --capacity=1000000 --preload=100000)
  else
    bench_args=(--keys=uniform --key_space=10000000 --capacity=1000 --filters=100000)
    java_args=(--filters=100000 --key_space=10000000 --capacity=1000 --preload=0)
  fi
  start_server
  case $client in
    cpp-pipelined)
      "$BENCH" --target=bloom --transport=client --address="$ADDRESS" --mix=both --batch=1 \
        --clients="$THREADS" --duration="${DURATION}s" --server_pid="$SERVER_PID" --json \
        --label="$scenario|$client" "${bench_args[@]}" | grep '^{' >>"$results" ;;
    java-pipelined|java-unary)
      java -cp "$CLASSPATH_JAVA" loadtest/java/BloomLoad.java --address="$ADDRESS" \
        --transport="${client#java-}" --threads="$THREADS" --duration="$DURATION" \
        --server_pid="$SERVER_PID" --label="$scenario|$client" "${java_args[@]}" |
        grep '^{' >>"$results" ;;
  esac
  stop_server
}

clients=(cpp-pipelined java-pipelined java-unary)
for ((round = 0; round < ROUNDS; round++)); do
  for scenario in $SCENARIOS; do
    for ((i = 0; i < ${#clients[@]}; i++)); do
      row "$scenario" "${clients[(i + round) % ${#clients[@]}]}"
    done
  done
  echo "java.sh: round $((round + 1)) of $ROUNDS done" >&2
done

/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    scenario, client = r["label"].split("|")
    rows.setdefault((scenario, client), []).append(r)
print("| scenario | client | keys/s (median) | vs C++ pipelined | server CPU µs/key | vs C++ pipelined | p50 µs | p99 µs |")
print("|---|---|---|---|---|---|---|---|")
for scenario in sorted({s for s, _ in rows}):
    def med(client, field):
        return statistics.median(r[field] for r in rows[(scenario, client)])
    base_keys = med("cpp-pipelined", "keys_per_second")
    base_cpu = med("cpp-pipelined", "server_cpu_seconds_per_million_keys")
    for client in ("cpp-pipelined", "java-pipelined", "java-unary"):
        if (scenario, client) not in rows:
            continue
        keys = med(client, "keys_per_second")
        cpu = med(client, "server_cpu_seconds_per_million_keys")
        p50 = statistics.median(r["latency_us"]["p50"] for r in rows[(scenario, client)])
        p99 = statistics.median(r["latency_us"]["p99"] for r in rows[(scenario, client)])
        spread = ", ".join("%.0f" % r["keys_per_second"] for r in rows[(scenario, client)])
        print(f"| {scenario} | {client} | {keys:,.0f} ({spread}) | {keys / base_keys:.2f}x | "
              f"{cpu:.3f} | {cpu / base_cpu:.2f}x | {p50:.0f} | {p99:.0f} |")
    if any(r["false_negatives"] for k, v in rows.items() for r in v):
        print("java.sh: a run saw false negatives"); sys.exit(1)
PY
