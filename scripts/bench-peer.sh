#!/usr/bin/env bash
# webhookd against Hookdeck Outpost on this machine (webhookd-bench
# -scenario peer): the two engines alternated, each run on a fresh
# database and an emptied Redis database, one load generator for both.
# Arguments go to the bench; the three shapes of issue 42:
#
#   scripts/bench-peer.sh -rate 300 -events 9000                       # light load
#   scripts/bench-peer.sh -events 20000 -payload 1024                  # full speed, fan-out 1
#   scripts/bench-peer.sh -events 2000 -subscriptions 10 -payload 1024 # fan-out 10
#
# Outpost is built from a checkout of github.com/hookdeck/outpost
# (PEER_OUTPOST_SRC) with its RabbitMQ message queue and its Postgres log
# store, settings at its defaults but DELIVERY_MAX_CONCURRENCY=100 (its
# default of 1 serialises every delivery) and logging at warn, as
# webhookd's. Its CPU counts its server and the RabbitMQ broker's
# (beam.smp): the broker is where its queue lives, as webhookd's is in
# Redis and Postgres.
#
# Environment (defaults in brackets):
#   PEER_OUTPOST_SRC  Outpost's source checkout (required)
#   PEER_SERVER       Postgres server URL, no database [postgres://postgres@127.0.0.1:5432]
#   PEER_RABBITMQ     RabbitMQ URL [amqp://guest:guest@127.0.0.1:5672]
#   PEER_RUNS         runs of each engine [2]
#   PEER_OUT          where the figures (JSON) and logs go [./peer-out]
#   PEER_DISK_PROBE   a directory on the disk of Postgres's WAL, where the
#                     bench times a flush every 10 ms (-disk-probe) [the
#                     data directory's parent, when it is on this machine
#                     and writable; "none": no probe]
set -euo pipefail
cd "$(dirname "$0")/.."

src="${PEER_OUTPOST_SRC:?PEER_OUTPOST_SRC: a checkout of github.com/hookdeck/outpost}"
server="${PEER_SERVER:-postgres://postgres@127.0.0.1:5432}"
rabbitmq="${PEER_RABBITMQ:-amqp://guest:guest@127.0.0.1:5672}"
runs="${PEER_RUNS:-2}"
out="${PEER_OUT:-$PWD/peer-out}"
mkdir -p "$out"
bin="$(mktemp -d)"
pid=""

stop_engine() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	pid=""
}
cleanup() {
	stop_engine
	rm -rf "$bin"
}
trap cleanup EXIT

go build -o "$bin/webhookd" ./cmd/webhookd
go build -o "$bin/webhookd-bench" ./cmd/webhookd-bench
(cd "$src" && go build -o "$bin/" ./cmd/outpost ./cmd/outpost-server)

# The disk's flush times go beside each run's latency: a commit waits for
# one, and a disk that stalls a second holds every publish that long.
probe="${PEER_DISK_PROBE:-}"
if [ -z "$probe" ]; then
	probe="$(dirname "$(psql -Atq "$server/postgres" -c 'SHOW data_directory' 2>/dev/null || echo /nonexistent/x)")"
	[ -d "$probe" ] && [ -w "$probe" ] || probe=none
fi
probe_flag=()
if [ "$probe" != none ]; then
	probe_flag=(-disk-probe "$probe")
fi

broker="$(pgrep -o beam.smp)" || { echo "no RabbitMQ (beam.smp) running on this machine" >&2; exit 1; }
fresh() { # database, Redis URL
	export PGOPTIONS='--client-min-messages=warning'
	psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
	redis-cli -u "$2" FLUSHDB >/dev/null
}
wait_ready() { # URL, log
	until curl -sf "$1" >/dev/null; do
		kill -0 "$pid" || { echo "engine exited: see $2" >&2; exit 1; }
		sleep 0.2
	done
}

run_webhookd() {
	local n=$1 redis_url=redis://127.0.0.1:6379/14
	shift
	fresh peer_webhookd "$redis_url"
	WEBHOOKD_DATABASE_URL="$server/peer_webhookd" WEBHOOKD_REDIS_URL="$redis_url" \
		WEBHOOKD_MASTER_KEY="$(head -c32 /dev/urandom | base64)" WEBHOOKD_INGEST_TOKEN=bench-token \
		WEBHOOKD_ALLOW_HTTP_TARGETS=true WEBHOOKD_ALLOW_PRIVATE_TARGETS=true WEBHOOKD_LOG_LEVEL=warn \
		WEBHOOKD_LISTEN=127.0.0.1:18380 WEBHOOKD_INTERNAL_LISTEN=127.0.0.1:18381 \
		bash -c "'$bin/webhookd' migrate && exec '$bin/webhookd' serve" >"$out/webhookd-$n.log" 2>&1 &
	pid=$!
	wait_ready http://127.0.0.1:18381/readyz "$out/webhookd-$n.log"
	"$bin/webhookd-bench" -scenario peer -peer webhookd -json -token bench-token -pid "$pid" \
		-api http://127.0.0.1:18380 -internal http://127.0.0.1:18381 \
		-database "$server/peer_webhookd" -redis "$redis_url" "${probe_flag[@]}" "$@" | tee "$out/webhookd-$n.json"
	stop_engine
}

run_outpost() {
	local n=$1 redis_db=15
	shift
	fresh peer_outpost "redis://127.0.0.1:6379/$redis_db"
	# Outpost's configuration is its environment; these are its names.
	export API_KEY=peer-key API_JWT_SECRET=peer-jwt AES_ENCRYPTION_SECRET=peer-encryption-secret-32-bytes! \
		API_PORT=18390 REDIS_HOST=127.0.0.1 REDIS_PORT=6379 REDIS_PASSWORD= REDIS_DATABASE=$redis_db \
		POSTGRES_URL="$server/peer_outpost?sslmode=disable" RABBITMQ_SERVER_URL="$rabbitmq" \
		TOPICS=user.created DELIVERY_MAX_CONCURRENCY=100 LOG_LEVEL=warn DISABLE_TELEMETRY=true GIN_MODE=release
	"$bin/outpost" migrate apply --yes >"$out/outpost-$n.log" 2>&1
	"$bin/outpost-server" >>"$out/outpost-$n.log" 2>&1 &
	pid=$!
	wait_ready http://127.0.0.1:18390/healthz "$out/outpost-$n.log"
	"$bin/webhookd-bench" -scenario peer -peer outpost -json -token unused -pid "$pid,$broker" \
		-peer-api http://127.0.0.1:18390 -peer-key peer-key \
		-database "$server/peer_outpost" -redis "redis://127.0.0.1:6379/$redis_db" "${probe_flag[@]}" "$@" | tee "$out/outpost-$n.json"
	stop_engine
}

for n in $(seq "$runs"); do
	run_webhookd "$n" "$@"
	run_outpost "$n" "$@"
done
