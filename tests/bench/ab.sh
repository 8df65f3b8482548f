#!/usr/bin/env bash
# A/B of two bloom-server binaries on this machine: bloom-bench scenarios 1 (batched
# MightContain, 1M filter) and 5 (100,000 small filters, one key per call, unary and through the
# pipelined client), the two servers alternating round by round so that the machine's drift
# falls on both alike. Prints each round's keys/s and server CPU per key, and the medians' ratio
# B/A. For a change that should not move performance (a refactoring), every ratio should be
# about 1.
#
#   tests/bench/ab.sh OLD_BINARY NEW_BINARY            # 5 rounds of 10 s runs
#   ROUNDS=3 DURATION=5s tests/bench/ab.sh A B
#
# Needs the README's set-up (bloom-bench built in build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# == 2 ]] || { echo "usage: tests/bench/ab.sh SERVER_A SERVER_B"; exit 2; }
A=$1 B=$2
BENCH=${BUILD_DIR:-build}/loadtest/bloom-bench
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
for tool in "$A" "$B" "$BENCH"; do [[ -x "$tool" ]] || { echo "ab.sh: $tool missing"; exit 2; }; done

work=$(mktemp -d)
server_pid=""
cleanup() { [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
results="$work/results.jsonl"

# one BINARY SIDE LABEL ARGS...: a fresh server, one bloom-bench run, the server stopped.
one() {
  local binary=$1 side=$2 label=$3 dir
  shift 3
  dir=$(mktemp -d "$work/server-XXXX")
  "$binary" --listen=127.0.0.1:0 --port_file="$dir/port" --data_dir="$dir/data" \
    --log_level=warning >"$dir/log" 2>&1 &
  server_pid=$!
  for _ in $(seq 200); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
  [[ -s "$dir/port" ]] || { echo "ab.sh: $binary did not start"; cat "$dir/log"; exit 1; }
  "$BENCH" --target=bloom --address="127.0.0.1:$(cat "$dir/port")" --server_pid="$server_pid" \
    --json --label="$label|$side" --duration="$DURATION" "$@" | grep '^{' >>"$results"
  kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
}

for round in $(seq "$ROUNDS"); do
  for side in A B; do
    binary=$A; [[ $side == B ]] && binary=$B
    one "$binary" "$side" "1 batched MightContain, 1M filter" --transport=unary --mix=query \
      --capacity=1000000 --preload=1000000 --batch=1000 --clients=8
    for transport in unary client; do
      one "$binary" "$side" "5 100,000 filters, one key per call, $transport" \
        --transport="$transport" --mix=both --keys=uniform --key_space=10000000 --capacity=1000 \
        --filters=100000 --batch=1 --clients=50
    done
  done
  echo "ab.sh: round $round of $ROUNDS done" >&2
done

/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
by = {}
for row in rows:
    scenario, side = row["label"].rsplit("|", 1)
    by.setdefault(scenario, {}).setdefault(side, []).append(row)
def med(rs, key):
    values = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(values) if values else float("nan")
print(f"{'scenario':44} {'A keys/s':>12} {'B keys/s':>12} {'B/A':>6} {'A cpu s/Mkey':>13} {'B cpu s/Mkey':>13} {'B/A':>6}")
for scenario, sides in by.items():
    a, b = sides.get("A", []), sides.get("B", [])
    ka, kb = med(a, "keys_per_second"), med(b, "keys_per_second")
    ca, cb = med(a, "server_cpu_seconds_per_million_keys"), med(b, "server_cpu_seconds_per_million_keys")
    print(f"{scenario:44} {ka:12.0f} {kb:12.0f} {kb / ka:6.2f} {ca:13.4f} {cb:13.4f} {cb / ca:6.2f}")
print(f"(medians of {len(a)} alternating rounds each)")
PY
