# shellcheck shell=bash disable=SC2034  # sets the variables its callers use
# Sourced by the sharding benches (sharding.sh, sharding_instructions.sh): starts, in $WORK,
#   one   an unsharded server (the embedded default), at 127.0.0.1:$ONE_PORT, pid $ONE_PID;
#   solo  one sharded group (one pod, its own etcd prefix and map): $SOLO_PORT, $SOLO_PID;
#   a, b  two groups of one pod each, the slots split evenly: $A_PORT/$A_PID, $B_PORT/$B_PID;
# on one real etcd, and returns once both groups' pods hold the map and know both primaries.
# Each server runs under $SERVER_WRAPPER when it is set (a valgrind command line, say), and is
# waited for up to $START_SECONDS (default 10); the sharded ones take $GROUP_ARGS too. The
# caller sets BUILD and has sourced bench_env.sh.
SERVER=$BUILD/server/bloom-server
CLI=$BUILD/client/bloom-cli
read -r -a WRAPPER <<<"${SERVER_WRAPPER:-}"

start_server() {  # log-name port args...: sets STARTED to its pid
  local name=$1 port=$2
  shift 2
  "${WRAPPER[@]}" "$SERVER" --listen="127.0.0.1:$port" "$@" >"$WORK/$name.log" 2>&1 &
  STARTED=$!
  PIDS+=("$STARTED")
}
start_group() {  # name port cluster shard-map
  start_server "$1" "$2" --advertise_address="127.0.0.1:$2" --data_dir="$WORK/$1" \
    --etcd_endpoints="127.0.0.1:$ETCD_PORT" --cluster="$3" --shard_map="$4" \
    --allow_unauthenticated_replication ${GROUP_ARGS:+"$GROUP_ARGS"}
}

start_etcd

ONE_PORT=$(free_port)
start_server one "$ONE_PORT" --data_dir="$WORK/one"
ONE_PID=$STARTED
A_PORT=$(free_port)
start_group a "$A_PORT" bench/a bench/shardmap
A_PID=$STARTED
SOLO_PORT=$(free_port)
start_group solo "$SOLO_PORT" solo/a solo/shardmap
SOLO_PID=$STARTED
B_PORT=$(free_port)
start_group b "$B_PORT" bench/b bench/shardmap
B_PID=$STARTED
wait_serving "127.0.0.1:$ONE_PORT"
wait_serving "127.0.0.1:$A_PORT"
wait_serving "127.0.0.1:$B_PORT"
wait_serving "127.0.0.1:$SOLO_PORT"
"$CLI" --server="127.0.0.1:$A_PORT" cluster init bench/a bench/b >/dev/null
"$CLI" --server="127.0.0.1:$SOLO_PORT" cluster init solo/a >/dev/null
for _ in $(seq $((${START_SECONDS:-10} * 20))); do
  if "$CLI" --server="127.0.0.1:$B_PORT" cluster shards | grep -q "bench/a: .*primary 127" &&
     "$CLI" --server="127.0.0.1:$A_PORT" cluster shards | grep -q "bench/b: .*primary 127"; then
    break
  fi
  sleep 0.05
done
