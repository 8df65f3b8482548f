#!/usr/bin/env bash
# What replication costs, in one run on this machine: batched adds (1000 keys per call,
# bloom-bench) to a standalone server, then to a primary with one follower at
# --min_replica_acks 0 and 1. Prints each run's keys/s, the primary's server CPU per key (and
# its ratio to the standalone's), the follower's CPU per key applied (and its ratio to the
# primary's), and the follower's lag sampled every 100 ms. Then times a follower's bootstrap
# (copying a snapshot and loading it, until health says SERVING) of a ~1 GB data dir.
#
# The server measured (standalone, or the primary) runs alone on CPU 0 and everything else (the
# clients, the follower) on the other CPUs (taskset; PIN=0 turns that off), so that its CPU per
# key is its own work, not time lost to a follower scheduled beside it. On a 2-core machine the
# follower and the clients then share one core: the CPU ratios are the verdict, keys/s is
# context.
#
# The three runs (standalone, acks=0, acks=1) repeat ROUNDS times, interleaved, and each ratio
# is taken within its round; the verdict is the median over rounds. One run is not enough here:
# a filter's checkpoint (120 MB of pages written, shipped and flushed) lands inside one run and
# outside the next, and the standalone alone varies by a quarter between runs on this machine.
#
#   tests/bench/replication.sh                      # 3 rounds of 20 s runs, 1 GB bootstrap
#   DURATION=60s tests/bench/replication.sh         # the lag over 60 s runs
#   ROUNDS=1 BOOTSTRAP_GB=0 tests/bench/replication.sh   # one round, no bootstrap
#
# Needs the README's set-up (./scripts/test.sh has built everything).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
DURATION=${DURATION:-20s}
CLIENTS=${CLIENTS:-4}
ROUNDS=${ROUNDS:-3}
# Every run is offered the same load (bloom-bench --rate), one the replicated runs sustain on
# this machine: a server's CPU per key depends on the load, so the ratios compare like with
# like. RATE=0: as fast as the clients go (each run at its own load).
RATE=${RATE:-1000000}
BOOTSTRAP_GB=${BOOTSTRAP_GB:-1}
PIN=${PIN:-1}
SERVER_CPUS=0
OTHER_CPUS="1-$(( $(nproc) - 1 ))"
# pinned CPUS: sets PINNED to the command prefix that runs a program on those CPUs (taskset,
# which execs it: $! stays the program's PID), or to nothing (PIN=0, or a single CPU).
pinned() {
  PINNED=()
  if [[ $PIN == 1 && $(nproc) -ge 2 ]]; then PINNED=(taskset -c "$1"); fi
}
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/server/bloom-server"
CLI="$BUILD/client/bloom-cli"
for tool in "$BENCH" "$SERVER" "$CLI"; do
  [[ -x "$tool" ]] || { echo "replication.sh: $tool missing: run ./scripts/test.sh first"; exit 2; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]:-}"; do [[ -n "$pid" ]] && kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start NAME CPUS ARGS... -> sets PID, PORT, METRICS (its metrics port); waits for its port file.
start() {
  local name=$1 cpus=$2
  shift 2
  mkdir -p "$work/$name"
  rm -f "$work/$name/port"
  pinned "$cpus"
  "${PINNED[@]}" "$SERVER" --listen=127.0.0.1:"${LISTEN_PORT:-0}" --port_file="$work/$name/port" \
    --allow_unauthenticated_replication \
    --data_dir="$work/$name/data" --metrics_listen=127.0.0.1:0 --max_batch=100000 "$@" \
    >>"$work/$name/log" 2>&1 &
  PID=$!
  pids+=("$PID")
  for _ in $(seq 1200); do [[ -s $work/$name/port ]] && break; sleep 0.05; done
  [[ -s $work/$name/port ]] || { echo "replication.sh: $name did not start:"; tail "$work/$name/log"; exit 1; }
  PORT=$(head -1 "$work/$name/port")
  METRICS=$(awk '$1 == "metrics" {print $2}' "$work/$name/port")
}

stop() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

bench() {  # LABEL ADDRESS SERVER_PID [REPLICA_PID REPLICA_METRICS]
  local extra=()
  [[ $# -ge 5 ]] && extra=(--replica_pid="$4" --replica_metrics_port="$5")
  pinned "$OTHER_CPUS"
  "${PINNED[@]}" "$BENCH" --address="$2" --label="$1" --mix=add --batch=1000 --clients="$CLIENTS" \
    --capacity=100000000 --duration="$DURATION" --rate="$RATE" --server_pid="$3" --json \
    "${extra[@]}" \
    | tee -a "$work/results.jsonl" >/dev/null
}

echo "replication.sh: batched adds, $CLIENTS clients x 1000 keys per call, $DURATION per run," \
  "offered $RATE keys/s (0: unlimited), $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
  start "standalone-$round" "$SERVER_CPUS"
  bench "standalone" "127.0.0.1:$PORT" "$PID"
  stop "$PID"
  # Each run writes gigabytes (the log a primary keeps for its followers): keep only its log.
  rm -rf "$work/standalone-$round/data"

  for acks in 0 1; do
    start "primary-$acks-$round" "$SERVER_CPUS" --min_replica_acks="$acks"
    primary_pid=$PID primary_port=$PORT
    start "follower-$acks-$round" "$OTHER_CPUS" --replicate_from="127.0.0.1:$primary_port"
    follower_pid=$PID follower_metrics=$METRICS
    # Healthy once caught up.
    for _ in $(seq 600); do "$CLI" --server="127.0.0.1:$PORT" health >/dev/null 2>&1 && break; sleep 0.05; done
    bench "primary+follower acks=$acks" "127.0.0.1:$primary_port" "$primary_pid" \
      "$follower_pid" "$follower_metrics"
    stop "$follower_pid"
    stop "$primary_pid"
    rm -rf "$work/primary-$acks-$round/data" "$work/follower-$acks-$round/data"
  done
done

/usr/bin/python3 - "$work/results.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{'round':<6}{'run':<28}{'keys/s':>12}{'primary us/key':>16}{'vs standalone':>15}"
      f"{'follower us/key':>17}{'vs primary':>12}{'lag p50 ms':>12}{'lag p99 ms':>12}{'max ms':>9}")
ratios = {}  # label -> [(primary vs standalone, follower vs primary, lag p99 ms)]
base = None
for i, r in enumerate(rows):
    cpu = r["server_cpu_seconds_per_million_keys"]
    if r["label"] == "standalone":
        base = cpu
    line = f"{i // 3 + 1:<6}{r['label']:<28}{r['keys_per_second']:>12.0f}{cpu:>16.3f}{cpu / base:>14.2f}x"
    if r["label"] != "standalone":
        rep = r["replica_cpu_seconds_per_million_keys"]
        lag = r["replica_lag_seconds"]
        line += (f"{rep:>17.3f}{rep / cpu:>11.2f}x{lag['p50'] * 1e3:>12.1f}"
                 f"{lag['p99'] * 1e3:>12.1f}{lag['max'] * 1e3:>9.1f}")
        if not r["replica_caught_up"]:
            line += "  (follower not caught up)"
        ratios.setdefault(r["label"], []).append((cpu / base, rep / cpu, lag["p99"] * 1e3))
    print(line)
print(f"median over {len(rows) // 3} round(s):")
for label, values in ratios.items():
    primary, follower, p99 = (statistics.median(v[k] for v in values) for k in range(3))
    print(f"  {label:<28} primary {primary:.2f}x standalone, follower {follower:.2f}x primary,"
          f" lag p99 {p99:.1f} ms (worst round {max(v[2] for v in values):.1f} ms)")
EOF

if [[ $BOOTSTRAP_GB != 0 ]]; then
  # One filter of about BOOTSTRAP_GB GB of bits, filled enough that every page is stored dense.
  capacity=$((BOOTSTRAP_GB * 850000000))
  keys=$((BOOTSTRAP_GB * 100000000))
  start big "$SERVER_CPUS"
  big_port=$PORT
  "$CLI" --server="127.0.0.1:$big_port" reserve bench-0 --capacity="$capacity" --error-rate=0.01 >/dev/null
  "$BENCH" --address="127.0.0.1:$big_port" --mix=add --batch=10000 --clients="$CLIENTS" \
    --capacity="$capacity" --ops="$keys" >/dev/null
  stop "$PID"  # the final checkpoint writes every page
  LISTEN_PORT=$big_port start big "$SERVER_CPUS"
  size=$(du -sb "$work/big/data" | cut -f1)
  begin=$(date +%s.%N)
  start bootstrap "$OTHER_CPUS" --replicate_from="127.0.0.1:$big_port"
  for _ in $(seq 1200); do "$CLI" --server="127.0.0.1:$PORT" health >/dev/null 2>&1 && break; sleep 0.05; done
  end=$(date +%s.%N)
  echo "bootstrap: a follower copied and loaded $(( size / 1000000 )) MB and reported SERVING in $(awk -v a="$begin" -v b="$end" 'BEGIN {printf "%.1f", b - a}') s"
  grep -h "copied a snapshot" "$work/bootstrap/log" | sed 's/^/  /'
fi
