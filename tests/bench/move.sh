#!/usr/bin/env bash
# A slot move under load, in one run on this machine: two groups of one pod each on a real etcd;
# SIZE_MB of filters (FILTERS of them, reserved large and added to a little) in slots 0-1023 of
# group a; bloom-bench's load (checks over 1024 filters spread over every slot, through group a's
# pod, at RATE keys/s) runs once without a move and once while `bloom-cli cluster move
# --slots=0-1023 --to=bench/b` moves them. Prints the move's duration, bytes copied and bytes/s,
# how long writes to the moving slots paused (the mover's own figure), and the load's latency
# percentiles in both runs: reads never pause, and none may fail. With WRITE_BATCHES=1 (the
# default), a writer adds batches of 1,000 new items to the moving filters throughout the move
# (Python, routing by the map, retrying what the pause refuses): its slowest batch is the
# pause as a writer sees it, and the mover's rounds catch the copies up from the owner's
# journal instead of copying them again. KIND=cuckoo makes CUCKOO filters, whose copies the
# rounds catch up from the journal too (the table values their adds wrote; a mover from before
# that, CLI=..., copies each one changed since the last round whole again); WRITTEN is how many
# of the filters the writer adds to (default: all), so that the rest stay unchanged as most
# per-user filters are at any moment. KIND=windowed makes BLOOM filters with a window (an
# hour in 4 slices), whose copies the rounds catch up from the journal in the slices their
# items went to (a mover from before that copies each one changed whole again). ITEMS is how
# many items each filter is given at first (default 1,000). OTHER_FILTERS more filters
# (capacity 1,000, one item each: per-user filters) are made first over every slot, a quarter
# of them in the moving slots, so that the group holds many filters, as one serving a filter
# per user does. MOVE_FLAGS are passed to `cluster move` (e.g. --copies=1).
#
#   tests/bench/move.sh                      # 1 GB of filters
#   SIZE_MB=256 WRITE_BATCHES=0 tests/bench/move.sh
#   KIND=cuckoo WRITTEN=4 tests/bench/move.sh
#   KIND=windowed SIZE_MB=512 tests/bench/move.sh
#   OTHER_FILTERS=400000 FILTERS=64 SIZE_MB=64 ITEMS=10 WRITTEN=8 tests/bench/move.sh
#
# Needs the README's set-up (./scripts/test.sh has built everything) and etcd (etcd-server).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
SIZE_MB=${SIZE_MB:-1024}
FILTERS=${FILTERS:-64}
RATE=${RATE:-200000}
WRITE_BATCHES=${WRITE_BATCHES:-1}
KIND=${KIND:-bloom}
WRITTEN=${WRITTEN:-$FILTERS}
ITEMS=${ITEMS:-1000}
read -ra move_flags <<<"${MOVE_FLAGS:-}"
OTHER_FILTERS=${OTHER_FILTERS:-0}
SERVER=${SERVER:-$BUILD/server/bloom-server}  # another bloom-server: compare pods
BENCH=$BUILD/loadtest/bloom-bench
CLI=${CLI:-$BUILD/client/bloom-cli}  # another bloom-cli: compare movers
# shellcheck source=tests/bench/bench_env.sh
source tests/bench/bench_env.sh
start_etcd
A_PORT=$(free_port)
B_PORT=$(free_port)
for group in a b; do
  port=$A_PORT
  [[ $group == b ]] && port=$B_PORT
  "$SERVER" --listen="127.0.0.1:$port" --advertise_address="127.0.0.1:$port" \
    --data_dir="$WORK/$group" --etcd_endpoints="127.0.0.1:$ETCD_PORT" --cluster="bench/$group" \
    --shard_map=bench/shardmap --allow_unauthenticated_replication >"$WORK/$group.log" 2>&1 &
  PIDS+=($!)
done
wait_serving "127.0.0.1:$A_PORT"
wait_serving "127.0.0.1:$B_PORT"
"$CLI" --server="127.0.0.1:$A_PORT" cluster init bench/a bench/b >/dev/null

if [[ $OTHER_FILTERS -gt 0 ]]; then
  "$BENCH" --target=bloom --address="127.0.0.1:$A_PORT" --clients=4 --batch=1 --mix=query \
    --create_filters --filters="$OTHER_FILTERS" --capacity=1000 --error_rate=0.01 \
    --ops=1 --label=others >"$WORK/others.out"
fi
# The filters to move: FILTERS names in slots 0-1023, each about SIZE_MB/FILTERS MB of bits
# (a BLOOM filter at 1% takes about 1.2 bytes per item of capacity).
PYTHONPATH=$BUILD/protos/python:client/python /usr/bin/python3 - "$A_PORT" "$FILTERS" "$SIZE_MB" \
  "$KIND" "$ITEMS" <<'PY'
import sys
from bloom_client import BloomClient
from bloom_shards import slot_of
port, filters, size_mb, kind = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
items = int(sys.argv[5])
capacity = int(size_mb * 1e6 / filters / 1.2)
# A windowed filter: an hour in 4 slices, each holding a quarter of the capacity (5 of them
# live at the turn of a slice).
window = {"window": 3600, "window_slices": 4} if kind == "windowed" else {}
if window:
    kind, capacity = "bloom", int(capacity / 1.25)
client = BloomClient(f"127.0.0.1:{port}", timeout=60)
made, n = 0, 0
while made < filters:
    name = f"moving-{n}"
    n += 1
    if slot_of(name, 4096) > 1023:
        continue
    client.reserve(name, capacity=capacity, error_rate=0.01, non_scaling=True, kind=kind,
                   **window)
    client.add(name, [f"item-{i}" for i in range(items)])
    made += 1
PY

load() {  # duration label
  "$BENCH" --target=bloom --address="127.0.0.1:$A_PORT" --clients=4 --batch=10 --mix=query \
    --create_filters --filters=1024 --capacity=100000 --error_rate=0.01 --rate="$RATE" \
    --duration="$1" --label="$2" >"$WORK/$2.out"
  sed -n 's/.*latency per request: \(.*\)/\1/p' "$WORK/$2.out"
}
echo "load alone: $(load 20s alone)"
load 60s during >/dev/null &
LOAD=$!
if [[ $WRITE_BATCHES == 1 ]]; then
  # Adds to the moving filters until $WORK/stop exists; prints the batches' latencies.
  PYTHONPATH=$BUILD/protos/python:client/python /usr/bin/python3 - "$A_PORT" "$WORK" "$WRITTEN" \
    <<'PY' >"$WORK/writer.out" &
import os, sys, time
import grpc
from bloom_client import BloomClient
from bloom_shards import slot_of
port, work, written = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
names, n = [], 0
while len(names) < written:
    name = f"moving-{n}"
    n += 1
    if slot_of(name, 4096) <= 1023:
        names.append(name)
client = BloomClient(f"127.0.0.1:{port}", timeout=60, shard_routing=True)
took, batch = [], 0
while not os.path.exists(f"{work}/stop"):
    items = [f"w{batch}-{i}" for i in range(1000)]
    start = time.monotonic()
    while True:
        try:
            client.add(names[batch % len(names)], items)
            break
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.005)
    took.append(time.monotonic() - start)
    batch += 1
took.sort()
print(f"{len(took)} batches of 1000 items, p50 {took[len(took) // 2] * 1000:.1f} ms, "
      f"max {took[-1] * 1000:.0f} ms")
PY
  WRITER=$!
fi
sleep 5
start=$(date +%s.%N)
"$CLI" --server="127.0.0.1:$B_PORT" --timeout=120s cluster move --slots=0-1023 --to=bench/b \
  "${move_flags[@]}" >"$WORK/move.out"
end=$(date +%s.%N)
if [[ $WRITE_BATCHES == 1 ]]; then
  sleep 2
  touch "$WORK/stop"
  wait "$WRITER"
fi
wait "$LOAD"
seconds=$(echo "$end - $start" | bc -l)
moved=$(sed -n 's/.*(\([0-9]*\) filters, \([0-9]*\) bytes copied.*/\1/p' "$WORK/move.out")
bytes=$(sed -n 's/.*(\([0-9]*\) filters, \([0-9]*\) bytes copied.*/\2/p' "$WORK/move.out")
paused=$(sed -n 's/.*writes paused \([0-9]*\) ms.*/\1/p' "$WORK/move.out")
printf 'move of %s MB in %d filters: %.1f s, %.0f MB/s, writes to the moving slots paused %s ms\n' \
  "$((bytes / 1000000))" "$moved" "$seconds" "$(echo "$bytes / $seconds / 1000000" | bc -l)" \
  "$paused"
echo "load during the move: $(sed -n 's/.*latency per request: \(.*\)/\1/p' "$WORK/during.out")"
grep '^round\|^copied\|^moved\|^the pause' "$WORK/move.out"
if [[ $WRITE_BATCHES == 1 ]]; then echo "writer: $(cat "$WORK/writer.out")"; fi
