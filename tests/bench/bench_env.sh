# shellcheck shell=bash
# Sourced by the benches that start servers (move.sh, sharding.sh, sharding_instructions.sh):
#   WORK          a fresh directory, removed at exit, after every process in PIDS is killed;
#   free_port     prints a free port on 127.0.0.1;
#   wait_serving  ADDRESS: waits until `$CLI health` answers there (up to $START_SECONDS, default
#                 10), or ends the bench;
#   start_etcd    starts a one-member etcd in $WORK/etcd and sets ETCD_PORT;
#   ratio A B     prints A / B;  median X...  prints the median of the numbers.
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
wait_serving() {
  local tries=$((${START_SECONDS:-10} * 20))
  for _ in $(seq "$tries"); do
    if "$CLI" --server="$1" health >/dev/null 2>&1; then return 0; fi
    sleep 0.05
  done
  echo "$(basename "$0"): $1 did not start" >&2
  exit 1
}
start_etcd() {
  ETCD_PORT=$(free_port)
  local peer_port
  peer_port=$(free_port)
  etcd --data-dir="$WORK/etcd" --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="default=http://127.0.0.1:$peer_port" --log-level=error >/dev/null 2>&1 &
  PIDS+=($!)
}
ratio() { echo "$1 / $2" | bc -l; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
