#!/usr/bin/env bash
# The scale curve (webhookd-bench -scenario scale) against each engine shape
# in turn: 1 api + 1 worker, then 1 api + 3 workers, each on a fresh
# database and an emptied Redis database, with the flat 1 s retry schedule
# the scenario needs. Arguments go to the bench, e.g. a quick run:
#
#   scripts/bench-scale.sh -scale-backlog 10k -scale-merchants 100
#
# -duration caps each phase of a point (publishing, building, draining):
# the default curve's million-delivery backlog needs about an hour on a
# small machine, so give it: scripts/bench-scale.sh -duration 1h
#
# Environment (defaults in brackets):
#   SCALE_SERVER   Postgres server URL, no database [postgres://postgres@127.0.0.1:5432]
#   SCALE_DB       database, dropped and created per shape [webhookd_scale]
#   SCALE_REDIS    Redis URL, its database flushed per shape [redis://127.0.0.1:6379/12]
#   SCALE_PORT     first of the engine's ports: public, then one internal per process [18280]
#   SCALE_WORKERS  the shapes, worker processes each ["1 3"]
#   SCALE_OUT      where the figures (JSON), plots (PNG) and logs go [./scale-out]
#   SCALE_POOL     each engine process's Postgres connections (pool_max_conns) [the engine's 32];
#                  4 processes of 32 exceed a default max_connections of 100
#   SCALE_KEEP=1   keep the database at the end (else dropped: it may hold gigabytes)
set -euo pipefail
cd "$(dirname "$0")/.."

server="${SCALE_SERVER:-postgres://postgres@127.0.0.1:5432}"
db="${SCALE_DB:-webhookd_scale}"
redis_url="${SCALE_REDIS:-redis://127.0.0.1:6379/12}"
port="${SCALE_PORT:-18280}"
shapes="${SCALE_WORKERS:-1 3}"
out="${SCALE_OUT:-$PWD/scale-out}"
mkdir -p "$out"
bin="$(mktemp -d)"
pids=()

stop_engine() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	pids=()
}
cleanup() {
	stop_engine
	rm -rf "$bin"
	if [ "${SCALE_KEEP:-}" != 1 ]; then
		psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
	fi
}
trap cleanup EXIT

go build -o "$bin/webhookd" ./cmd/webhookd
go build -o "$bin/webhookd-bench" ./cmd/webhookd-bench

# A released backlog must start within a second, and no delivery may run
# out of attempts while the receivers are down: a flat 1 s, 60 attempts.
schedule="$(printf '1s,%.0s' {1..59})1s"
bench_db="$server/$db?sslmode=disable"
engine_db="$bench_db${SCALE_POOL:+&pool_max_conns=$SCALE_POOL}"
export WEBHOOKD_DATABASE_URL="$engine_db" WEBHOOKD_REDIS_URL="$redis_url" \
	WEBHOOKD_MASTER_KEY="$(head -c32 /dev/urandom | base64)" WEBHOOKD_INGEST_TOKEN=bench-token \
	WEBHOOKD_ALLOW_HTTP_TARGETS=true WEBHOOKD_ALLOW_PRIVATE_TARGETS=true \
	WEBHOOKD_RETRY_SCHEDULE="$schedule" WEBHOOKD_LISTEN="127.0.0.1:$port"

for workers in $shapes; do
	echo "== 1 api + $workers worker(s)" >&2
	psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
	redis-cli -u "$redis_url" FLUSHDB >/dev/null
	"$bin/webhookd" migrate
	metrics=()
	for i in $(seq 0 "$workers"); do
		role=worker
		[ "$i" = 0 ] && role=api
		internal="127.0.0.1:$((port + 1 + i))"
		WEBHOOKD_INTERNAL_LISTEN="$internal" nice -n 10 "$bin/webhookd" "$role" \
			>"$out/engine-${workers}w-$role-$i.log" 2>&1 &
		pids+=("$!")
		metrics+=("http://$internal")
		until curl -sf "http://$internal/readyz" >/dev/null; do
			kill -0 "${pids[-1]}" || { echo "webhookd $role exited: see $out/engine-${workers}w-$role-$i.log" >&2; exit 1; }
			sleep 0.2
		done
	done
	nice -n 10 "$bin/webhookd-bench" -scenario scale -json -token bench-token \
		-api "http://127.0.0.1:$port" -internal "${metrics[0]}" \
		-database "$bench_db" -redis "$redis_url" \
		-pid "$(IFS=,; echo "${pids[*]}")" -metrics "$(IFS=,; echo "${metrics[*]}")" \
		-scale-plot "$out/scale-${workers}w.png" "$@" | tee "$out/scale-${workers}w.json"
	stop_engine
done
echo "figures, plots and logs in $out" >&2
