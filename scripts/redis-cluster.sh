#!/usr/bin/env bash
# A Redis Cluster of 3 masters and 3 replicas on this machine, for the
# bench and for trying the engine on a Cluster by hand (the tests start
# their own, internal/store/storetest):
#
#   bash scripts/redis-cluster.sh start [BASE_PORT]   nodes on BASE..BASE+5 (7000)
#   bash scripts/redis-cluster.sh url   [BASE_PORT]   its redis-cluster:// URL
#   bash scripts/redis-cluster.sh stop  [BASE_PORT]
#
#   WEBHOOKD_REDIS_URL=$(bash scripts/redis-cluster.sh url) webhookd serve
#   webhookd-bench -redis "$(bash scripts/redis-cluster.sh url)" ...
#
# redis-cli --cluster create gives each master an equal run of slots, which
# the schedule's shards are laid out for (docs/redis.md).
set -euo pipefail
cmd=${1:-}
base=${2:-7000}
dir=/tmp/webhookd-cluster-$base
ports=$(seq "$base" $((base + 5)))

url() {
  local addrs=()
  for p in $ports; do addrs+=("127.0.0.1:$p"); done
  (IFS=,; echo "redis-cluster://${addrs[*]}")
}

case "$cmd" in
start)
  mkdir -p "$dir"
  for p in $ports; do
    redis-server --port "$p" --cluster-enabled yes --cluster-config-file "$dir/nodes-$p.conf" \
      --cluster-node-timeout 2000 --save "" --appendonly no --dir "$dir" \
      --daemonize yes --pidfile "$dir/$p.pid" --logfile "$dir/$p.log"
  done
  for p in $ports; do
    until redis-cli -p "$p" ping >/dev/null 2>&1; do sleep 0.1; done
  done
  nodes=()
  for p in $ports; do nodes+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log"
  for p in $ports; do
    until redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok'; do sleep 0.2; done
  done
  until [ "$(redis-cli -p "$base" cluster nodes | grep -c slave)" = 3 ]; do sleep 0.2; done
  echo "cluster up: $(url)" >&2
  ;;
url) url ;;
stop)
  for p in $ports; do
    if [ -f "$dir/$p.pid" ]; then kill "$(cat "$dir/$p.pid")" 2>/dev/null || true; fi
  done
  rm -rf "$dir"
  ;;
*) echo "usage: bash scripts/redis-cluster.sh start|url|stop [BASE_PORT]" >&2; exit 2 ;;
esac
