#!/usr/bin/env bash
# What automatic failover through etcd costs, and how fast it is, in one run on this machine:
#
# 1. Steady state: batched adds (1000 keys per call, bloom-bench, as fast as the clients go) to
#    a primary with one follower at --min_replica_acks=1, once with a static primary
#    (--replicate_from) and once elected through etcd (--etcd_endpoints: the lease renewed, the
#    fence asked before every acknowledgement, the sync set kept). The two repeat ROUNDS times,
#    interleaved; the verdict is the median of the elected/static keys/s ratio within each round.
#    The primary runs alone on CPU 0, everything else on the other CPUs (PIN=0 turns that off).
# 2. Failover time: three pods elected through etcd with the default --leader_ttl (5s) and
#    --min_replica_acks=1. KILLS times, the primary is killed (SIGKILL) while a probe adds an
#    item through another pod every 20 ms; the time from the kill to the first acknowledged
#    probe is the write unavailability. The killed pod is restarted and the cluster left to heal
#    before the next kill. Then SWITCHOVERS planned switchovers (bloom-cli switchover), timed the
#    same way. Prints p50 and max of each.
#
#   tests/bench/failover.sh                       # 3 rounds of 20 s, 10 kills, 5 switchovers
#   ROUNDS=1 KILLS=3 SWITCHOVERS=1 tests/bench/failover.sh
#
# Needs the README's set-up (./scripts/test.sh has built everything) and etcd (install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
DURATION=${DURATION:-20s}
CLIENTS=${CLIENTS:-4}
ROUNDS=${ROUNDS:-3}
KILLS=${KILLS:-10}
SWITCHOVERS=${SWITCHOVERS:-5}
PIN=${PIN:-1}
SERVER_CPUS=0
OTHER_CPUS="1-$(( $(nproc) - 1 ))"
pinned() {
  PINNED=()
  if [[ $PIN == 1 && $(nproc) -ge 2 ]]; then PINNED=(taskset -c "$1"); fi
}
BENCH="$BUILD/loadtest/bloom-bench"
SERVER="$BUILD/server/bloom-server"
CLI="$BUILD/client/bloom-cli"
for tool in "$BENCH" "$SERVER" "$CLI" /usr/bin/etcd /usr/bin/etcdctl; do
  [[ -x "$tool" ]] || { echo "failover.sh: $tool missing: run ./scripts/test.sh first"; exit 2; }
done

work=$(mktemp -d)
declare -A pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

# One etcd member for the whole run (its own clock and disk are not what is measured).
etcd_port=$(free_port)
etcd_peer=$(free_port)
pinned "$OTHER_CPUS"
"${PINNED[@]}" /usr/bin/etcd --name=bench --data-dir="$work/etcd" \
  --listen-client-urls="http://127.0.0.1:$etcd_port" \
  --advertise-client-urls="http://127.0.0.1:$etcd_port" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer" \
  --initial-cluster="bench=http://127.0.0.1:$etcd_peer" --log-level=warn >"$work/etcd.log" 2>&1 &
pids[etcd]=$!
ETCD="127.0.0.1:$etcd_port"
for _ in $(seq 200); do ETCDCTL_API=3 etcdctl --endpoints="$ETCD" endpoint health >/dev/null 2>&1 && break; sleep 0.05; done

# start NAME CPUS PORT ARGS... : a server on 127.0.0.1:PORT, its data in $work/NAME.
start() {
  local name=$1 cpus=$2 port=$3
  shift 3
  mkdir -p "$work/$name"
  rm -f "$work/$name/port"
  pinned "$cpus"
  "${PINNED[@]}" "$SERVER" --listen="127.0.0.1:$port" --port_file="$work/$name/port" \
    --allow_unauthenticated_replication \
    --data_dir="$work/$name/data" --max_batch=100000 "$@" >>"$work/$name/log" 2>&1 &
  pids[$name]=$!
}
wait_port() {
  for _ in $(seq 1200); do [[ -s $work/$1/port ]] && return; sleep 0.05; done
  echo "failover.sh: $1 did not start:"; tail "$work/$1/log"; exit 1
}
stop() { kill -TERM "${pids[$1]}" 2>/dev/null || true; wait "${pids[$1]}" 2>/dev/null || true; unset "pids[$1]"; }
healthy() { for _ in $(seq 1200); do "$CLI" --server="$1" health >/dev/null 2>&1 && return; sleep 0.05; done; }

bench() {  # LABEL ADDRESS SERVER_PID
  pinned "$OTHER_CPUS"
  "${PINNED[@]}" "$BENCH" --address="$2" --label="$1" --mix=add --batch=1000 --clients="$CLIENTS" \
    --capacity=100000000 --duration="$DURATION" --server_pid="$3" --json \
    | tee -a "$work/steady.jsonl" >/dev/null
}

echo "failover.sh: steady state, batched adds, $CLIENTS clients x 1000 keys per call, $DURATION per run, $ROUNDS rounds"
run_static() {
  local round=$1 p f
  p=$(free_port); f=$(free_port)
  start "static-primary-$round" "$SERVER_CPUS" "$p" --min_replica_acks=1
  wait_port "static-primary-$round"
  start "static-follower-$round" "$OTHER_CPUS" "$f" --replicate_from="127.0.0.1:$p"
  healthy "127.0.0.1:$f"
  bench static "127.0.0.1:$p" "${pids[static-primary-$round]}"
  stop "static-follower-$round"; stop "static-primary-$round"
}
run_elected() {
  local round=$1 p f common
  p=$(free_port); f=$(free_port)
  common=(--etcd_endpoints="$ETCD" --cluster="steady-$round" --min_replica_acks=1)
  start "elected-primary-$round" "$SERVER_CPUS" "$p" --advertise_address="127.0.0.1:$p" "${common[@]}"
  wait_port "elected-primary-$round"  # it is elected (nobody else is up) before it serves
  start "elected-follower-$round" "$OTHER_CPUS" "$f" --advertise_address="127.0.0.1:$f" "${common[@]}"
  healthy "127.0.0.1:$f"
  # Until the follower is in the sync set, no write can be acknowledged.
  for _ in $(seq 200); do
    "$CLI" --server="127.0.0.1:$p" replication | grep -q "sync set: *{127.0.0.1:$f}" && break; sleep 0.05
  done
  bench elected "127.0.0.1:$p" "${pids[elected-primary-$round]}"
  stop "elected-follower-$round"; stop "elected-primary-$round"
}
# The order alternates between rounds, so that neither setup always runs on a warmer machine.
for round in $(seq "$ROUNDS"); do
  if (( round % 2 == 1 )); then run_static "$round"; run_elected "$round"
  else run_elected "$round"; run_static "$round"; fi
done
if [[ $ROUNDS != 0 ]]; then
/usr/bin/python3 - "$work/steady.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
ratios, cpu = [], []
for i in range(0, len(rows) - 1, 2):
    pair = {rows[i]["label"]: rows[i], rows[i + 1]["label"]: rows[i + 1]}
    static, elected = pair["static"], pair["elected"]
    ratio = elected["keys_per_second"] / static["keys_per_second"]
    cost = (elected["server_cpu_seconds_per_million_keys"] /
            static["server_cpu_seconds_per_million_keys"])
    ratios.append(ratio)
    cpu.append(cost)
    print(f"  round {i // 2 + 1}: static {static['keys_per_second']:.0f} keys/s, elected "
          f"{elected['keys_per_second']:.0f} keys/s: {ratio:.3f}x; primary CPU per key {cost:.3f}x")
print(f"steady state: elected through etcd {statistics.median(ratios):.3f}x the static primary's "
      f"keys/s (median of {len(ratios)} rounds; target >= 0.95x), primary CPU per key "
      f"{statistics.median(cpu):.3f}x")
EOF
fi

# Failover time: three pods, the default lease TTL.
ports=($(free_port) $(free_port) $(free_port))
pod() {  # I: (re)start pod I
  start "pod-$1" "$OTHER_CPUS" "${ports[$1]}" --advertise_address="127.0.0.1:${ports[$1]}" \
    --etcd_endpoints="$ETCD" --cluster=failover --min_replica_acks=1
}
for i in 0 1 2; do pod "$i"; done
primary() {  # the index of the pod etcd names, or nothing
  local leader
  leader=$(ETCDCTL_API=3 etcdctl --endpoints="$ETCD" get failover/leader --print-value-only 2>/dev/null) || return 0
  for i in 0 1 2; do if [[ $leader == *"address=127.0.0.1:${ports[$i]} "* ]]; then echo "$i"; fi; done
}
# Healed: a primary whose sync set holds both others.
heal() {
  for _ in $(seq 1200); do
    local p
    p=$(primary)
    if [[ -n $p ]] && "$CLI" --server="127.0.0.1:${ports[$p]}" replication 2>/dev/null |
        grep -Eq "sync set: *\{[^,}]+,[^,}]+\}"; then
      return
    fi
    sleep 0.1
  done
  echo "failover.sh: the cluster did not heal"; exit 1
}
n=0
probe_until_acknowledged() {  # THROUGH START: prints the seconds from START to an acknowledged add
  while true; do
    n=$((n + 1))
    if "$CLI" --server="127.0.0.1:${ports[$1]}" --timeout=1s add probe "probe-$n" \
        --create-capacity=1000000 --create-error-rate=0.01 >/dev/null 2>&1; then
      elapsed "$2" "$(now)"; return
    fi
    sleep 0.02
  done
}
heal
: >"$work/kills"
for k in $(seq "$KILLS"); do
  p=$(primary)
  through=$(( (p + 1) % 3 ))
  begin=$(now)
  kill -9 "${pids[pod-$p]}"; wait "${pids[pod-$p]}" 2>/dev/null || true; unset "pids[pod-$p]"
  took=$(probe_until_acknowledged "$through" "$begin")
  echo "  kill $k of pod $p: writes acknowledged again after $took s" | tee -a "$work/kills.log"
  echo "$took" >>"$work/kills"
  pod "$p"
  heal
done
: >"$work/switchovers"
for s in $(seq "$SWITCHOVERS"); do
  p=$(primary)
  to=$(( (p + 1) % 3 ))
  through=$(( (p + 2) % 3 ))
  begin=$(now)
  "$CLI" --server="127.0.0.1:${ports[$p]}" switchover --to="127.0.0.1:${ports[$to]}" >/dev/null &
  sleep 0.01
  took=$(probe_until_acknowledged "$through" "$begin")
  wait $! || { echo "failover.sh: switchover $s failed"; exit 1; }
  echo "  switchover $s from pod $p to pod $to: writes acknowledged again after $took s"
  echo "$took" >>"$work/switchovers"
  heal
done
/usr/bin/python3 - "$work/kills" "$work/switchovers" <<'EOF'
import statistics, sys
for path, what in ((sys.argv[1], "kill -9 of the primary (leader_ttl 5s)"),
                   (sys.argv[2], "planned switchover")):
    values = sorted(float(line) for line in open(path) if line.strip())
    if values:
        print(f"{what}: write unavailability p50 {statistics.median(values):.2f} s, "
              f"max {values[-1]:.2f} s over {len(values)}")
EOF
