#!/usr/bin/env bash
# Millions of per-user filters on one server: creates FILTERS filters of capacity
# 1000 at 1% (one add each, by create_if_missing from 50 client threads sharing the C++ client's
# pipelined mode, TRANSPORT=client, or over a raw Pipeline stream each, TRANSPORT=pipeline)
# on a server with --memory_limit=LIMIT and --lazy_start, then reports:
#   - creations per second, the server's CPU per creation, and its peak and final RSS;
#   - a mixed run (half adds, half checks, one key per operation, a uniformly random filter):
#     keys/s and RSS;
#   - RocksDB's size on disk after a clean shutdown, against the filters' bits;
#   - start-up time (launch to listening) after the clean shutdown and after a kill -9 in the
#     middle of a mixed run, and whether a sample of filters still holds its first item.
#
#   tests/bench/many_filters.sh                             # 10,000,000 filters, 1Gi
#   FILTERS=1000000 LIMIT=256Mi tests/bench/many_filters.sh
#   DATA_DIR=/big/disk/dir tests/bench/many_filters.sh      # needs ~1.1x FILTERS*1472 bytes
#
# Needs the README's set-up (./scripts/test.sh or ./scripts/run.sh has built everything).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
FILTERS=${FILTERS:-10000000}
LIMIT=${LIMIT:-1Gi}
DURATION=${DURATION:-20s}
TRANSPORT=${TRANSPORT:-client}  # or pipeline: a raw stream per client, one operation in flight
CLIENTS=${CLIENTS:-50}        # load generator threads
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/server/bloom-server"
CLI="$BUILD/client/bloom-cli"
BITS_PER_FILTER=1472  # capacity 1000 at 1%
work=$(mktemp -d "${DATA_DIR:-${TMPDIR:-/tmp}}/many-filters-XXXX")
pid=""
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { /usr/bin/python3 -c "print(f'{$(now) - $1:.2f}')"; }
rss_mb() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }
peak_mb() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }
# The server's user + system CPU so far, in seconds (fields 14 and 15 of /proc/PID/stat).
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$pid/stat"; }

start_server() {  # sets pid, and startup to the seconds from launch to listening
  rm -f "$work/port"
  local t0
  t0=$(now)
  "$SERVER" --listen=127.0.0.1:0 --port_file="$work/port" --data_dir="$work/data" \
    --memory_limit="$LIMIT" --lazy_start >>"$work/log" 2>&1 &
  pid=$!
  while [[ ! -s $work/port ]]; do
    kill -0 "$pid" 2>/dev/null || { echo "server exited:"; tail -5 "$work/log"; exit 1; }
    sleep 0.01
  done
  startup=$(elapsed "$t0")
}
address() { echo "127.0.0.1:$(head -1 "$work/port")"; }
bench() {
  "$BENCH" --target=bloom --transport="$TRANSPORT" --address="$(address)" --server_pid="$pid" \
    --capacity=1000 --filters="$FILTERS" --filter_choice=uniform --keys=uniform \
    --key_space=1000000000 --batch=1 --clients="$CLIENTS" "$@"
}
mixed_run() {  # prints "keys/s"
  bench --mix=both --duration="$1" --json | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        print(round(json.loads(line)["keys_per_second"]))'
}
check_sample() {  # every 100,003rd filter from 1 (and the last) still holds "created" (bench-0
  # is deleted and reserved again by every bloom-bench run)
  local missing=0 f
  for ((f = 1; f < FILTERS; f += 100003)); do
    [[ $("$CLI" --server="$(address)" check "bench-$f" created) == *maybe* ]] || missing=$((missing + 1))
  done
  [[ $("$CLI" --server="$(address)" check "bench-$((FILTERS - 1))" created) == *maybe* ]] ||
    missing=$((missing + 1))
  echo "$missing"
}

echo "filters: $FILTERS of capacity 1000 at 1%, --memory_limit=$LIMIT --lazy_start, data in $work"
start_server
t0=$(now)
cpu0=$(cpu_seconds)
bench --create_filters --mix=query --ops=1 --json >/dev/null
seconds=$(elapsed "$t0")
cpu_us=$(/usr/bin/python3 -c "print(round(($(cpu_seconds) - $cpu0) / $FILTERS * 1e6, 1))")
echo "created: $FILTERS in $seconds s = $(/usr/bin/python3 -c "print(round($FILTERS / $seconds))") filters/s, server CPU $cpu_us us per filter; server RSS $(rss_mb) MB, peak $(peak_mb) MB"
echo "mixed run ($DURATION, uniform over all filters): $(mixed_run "$DURATION") keys/s; RSS $(rss_mb) MB, peak $(peak_mb) MB"

t0=$(now)
kill -TERM "$pid"
wait "$pid" || true
pid=""
disk=$(du -sb "$work/data" | cut -f1)
bits=$((FILTERS * BITS_PER_FILTER))
echo "clean shutdown: $(elapsed "$t0") s; on disk $((disk / 1000000)) MB for $((bits / 1000000)) MB of bits = $(/usr/bin/python3 -c "print(f'{$disk / $bits:.2f}')")x"

start_server
echo "start after clean shutdown: $startup s; sample of filters missing their item: $(check_sample)"
mixed_run 30s >/dev/null &
load=$!
sleep 10
kill -9 "$pid"
wait "$load" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
start_server
echo "start after kill -9 during a mixed run: $startup s; sample missing: $(check_sample)"
echo "mixed run after the crash ($DURATION): $(mixed_run "$DURATION") keys/s; RSS $(rss_mb) MB, peak $(peak_mb) MB"
kill -TERM "$pid"
wait "$pid" || true
pid=""
