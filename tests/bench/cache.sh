#!/usr/bin/env bash
# Memory as a cache: throughput of one-key operations on many per-user filters when
# --memory_limit holds only a share of them, against the same run with every filter resident.
# For each filter choice (uniform, and Zipf with s = 1.1) and each budget (none, and the
# share), it starts bloom-server on loopback with a temp dir, creates every filter (one add
# each, unmeasured), then measures half adds, half checks of random keys, one key per
# operation, 50 clients over raw Pipeline streams. Prints keys/s, server CPU per key, RSS and
# the ratio to the all-resident run.
#
#   tests/bench/cache.sh                                 # 100,000 filters, 10% resident
#   FILTERS=1000000 SHARE=10 DURATION=20s tests/bench/cache.sh
#
# Needs the README's set-up (./scripts/test.sh or ./scripts/run.sh has built everything).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
FILTERS=${FILTERS:-100000}
SHARE=${SHARE:-10}              # percent of the filters the budget holds
DURATION=${DURATION:-10s}
TRANSPORT=${TRANSPORT:-pipeline}
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/server/bloom-server"
CHARGE_PER_FILTER=1888          # capacity 1000 at 1%: 1,472 bytes of bits + 416 (storage::ResidentCharge)
work=$(mktemp -d)
pid=""
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

run() {  # run CHOICE LIMIT -> prints "keys/s cpu_us_per_key rss_mb"
  local choice=$1 limit=$2 dir
  dir=$(mktemp -d "$work/run-XXXX")
  "$SERVER" --listen=127.0.0.1:0 --port_file="$dir/port" --data_dir="$dir/data" \
    --memory_limit="$limit" >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do [[ -s $dir/port ]] && break; sleep 0.05; done
  local common=(--target=bloom --transport="$TRANSPORT" --address="127.0.0.1:$(head -1 "$dir/port")"
    --server_pid="$pid" --capacity=1000 --filters="$FILTERS" --filter_choice="$choice"
    --mix=both --keys=uniform --key_space=10000000 --batch=1 --clients=50)
  "$BENCH" "${common[@]}" --create_filters --ops=1 --json >/dev/null
  "$BENCH" "${common[@]}" --duration="$DURATION" --json | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{"):
        r = json.loads(line)
        print(r["keys_per_second"], r["server_cpu_seconds_per_million_keys"], r["server_rss_bytes"] / 1e6)'
  kill -TERM "$pid"
  wait "$pid" || true
  pid=""
  rm -rf "$dir"
}

budget=$((FILTERS * CHARGE_PER_FILTER * SHARE / 100))
printf '%-8s %-22s %12s %8s %12s %8s\n' choice budget keys/s ratio "CPU us/key" "RSS MB"
for choice in uniform zipf; do
  read -r base_kps base_cpu base_rss < <(run "$choice" 0)
  printf '%-8s %-22s %12.0f %8s %12.2f %8.1f\n' "$choice" "all resident" "$base_kps" 1.00x \
    "$base_cpu" "$base_rss"
  read -r kps cpu rss < <(run "$choice" "$budget")
  printf '%-8s %-22s %12.0f %7.2fx %12.2f %8.1f\n' "$choice" "${SHARE}% ($budget B)" "$kps" \
    "$(/usr/bin/python3 -c "print($kps / $base_kps)")" "$cpu" "$rss"
done
