#!/usr/bin/env bash
# Makes sure what webhookd and its tests need is installed and running on
# this machine: Go, PostgreSQL (127.0.0.1:5432, database "webhookd"),
# Redis (127.0.0.1:6379, noeviction), RabbitMQ (127.0.0.1:5672), and for
# the tests Chromium (the portal's browser tests), redis-sentinel and
# PgBouncer. Safe to run again;
# it only acts on what is missing. Debian/Ubuntu, as root or with sudo.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# Go: go.mod names the version. A go >= 1.21 fetches that toolchain itself
# (GOTOOLCHAIN=auto); an older one (Debian 12 ships 1.19) or none is
# replaced by the toolchain the Go module proxy serves, in /usr/local/go.
go_usable() {
  local v
  v=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || return 1
  [ -n "$v" ] && [ "$(printf '%s\n1.21\n' "$v" | sort -V | head -1)" = "1.21" ]
}
export PATH="/usr/local/go/bin:$PATH"
if ! go_usable; then
  want=$(sed -n 's/^go //p' "$(dirname "$0")/../go.mod")
  arch=$(dpkg --print-architecture)
  echo "services: installing Go $want (Debian's go fetches the toolchain module)" >&2
  command -v go >/dev/null 2>&1 || apt_install golang-go ca-certificates
  tmp=$(mktemp -d)
  dir=$(cd "$tmp" && GO111MODULE=on GOFLAGS=-modcacherw GOPATH="$tmp/gopath" \
    go mod download -json "golang.org/toolchain@v0.0.1-go${want}.linux-${arch}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "services: could not download the Go toolchain" >&2; exit 1; }
  $SUDO rm -rf /usr/local/go
  $SUDO cp -r "$dir" /usr/local/go
  $SUDO chmod -R u+w /usr/local/go
  $SUDO chmod +x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/*
  rm -rf "$tmp"
  hash -r
fi
# The README's commands call plain `go`: make sure it is on the default PATH.
if ! command -v go >/dev/null 2>&1 || [ "$(command -v go)" = /usr/local/go/bin/go ] && [ ! -e /usr/local/bin/go ]; then
  $SUDO ln -sf /usr/local/go/bin/go /usr/local/bin/go
  $SUDO ln -sf /usr/local/go/bin/gofmt /usr/local/bin/gofmt
fi

# PostgreSQL.
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "services: installing PostgreSQL" >&2
  apt_install postgresql postgresql-client
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "services: starting PostgreSQL" >&2
  ver=$(ls /etc/postgresql | sort -V | tail -1)
  hba=/etc/postgresql/$ver/main/pg_hba.conf
  # Local development and CI: trust connections from this machine only.
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    $SUDO sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  fi
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main start || $SUDO pg_ctlcluster "$ver" main start
  for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
fi
if ! psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='webhookd'" | grep -q 1; then
  psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE webhookd"
fi

# PgBouncer: the store's tests run behind one in transaction mode; they
# start their own, so only the binary is needed (Debian's unit stays off).
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  echo "services: installing PgBouncer" >&2
  apt_install pgbouncer
fi

# The documentation's shell examples (TestDocsShellExamplesRun) run curl
# and jq, as a reader of the README would.
for tool in curl jq; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "services: installing $tool" >&2
    apt_install "$tool"
  fi
done

# Redis.
if ! command -v redis-server >/dev/null 2>&1; then
  echo "services: installing Redis" >&2
  apt_install redis-server
fi
# The Sentinel tests start their own redis-sentinel processes.
if ! command -v redis-sentinel >/dev/null 2>&1; then
  echo "services: installing Redis Sentinel" >&2
  apt_install redis-sentinel
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "services: starting Redis" >&2
  mkdir -p /tmp/webhookd-redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp/webhookd-redis --maxmemory-policy noeviction --logfile /tmp/webhookd-redis/redis.log
  for _ in $(seq 1 50); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.2; done
fi
# RabbitMQ: the broker destinations' tests publish to it (127.0.0.1:5672,
# guest/guest, which RabbitMQ allows from this machine only). Tests use
# queues of their own and never stop it.
if ! command -v rabbitmq-server >/dev/null 2>&1; then
  echo "services: installing RabbitMQ" >&2
  apt_install rabbitmq-server
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  echo "services: starting RabbitMQ" >&2
  $SUDO rabbitmq-server -detached
  for _ in $(seq 1 150); do (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && break; sleep 0.2; done
fi
# rabbitmq destination kind (internal/destination/rabbitmq): its
# conformance test publishes as a user of its own, whose password differs
# from its name (guest/guest cannot show that a read masks the password),
# allowed to write to the default exchange and nothing else.
if ! $SUDO rabbitmqctl list_users 2>/dev/null | grep -q '^webhookd-conformance[[:space:]]'; then
  echo "services: adding RabbitMQ user webhookd-conformance" >&2
  $SUDO rabbitmqctl add_user webhookd-conformance conformance-pw-5e1d >/dev/null
fi
$SUDO rabbitmqctl set_permissions -p / webhookd-conformance '^$' '^amq\.default$' '^$' >/dev/null
# Mosquitto: the mqtt destination's tests publish to it (127.0.0.1:1883,
# anonymous) and start private brokers of their own from its binaries
# (mosquitto, mosquitto_passwd: both in Debian's package mosquitto; the
# tests need no mosquitto-clients). Debian's /etc/mosquitto/mosquitto.conf
# defines no listener, so Mosquitto 2 starts in "local only mode":
# 127.0.0.1:1883 and [::1]:1883, anonymous. Without systemd nothing makes
# the pid file's and the log's directories, and without them the daemon
# exits at once, silently: make them as Debian's unit does.
if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  echo "services: installing Mosquitto" >&2
  apt_install mosquitto
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  echo "services: starting Mosquitto" >&2
  $SUDO mkdir -m 740 -p /run/mosquitto /var/log/mosquitto
  $SUDO chown mosquitto /run/mosquitto /var/log/mosquitto
  $SUDO /usr/sbin/mosquitto -d -c /etc/mosquitto/mosquitto.conf
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null && break; sleep 0.2; done
  (exec 3<>/dev/tcp/127.0.0.1/1883) 2>/dev/null || { echo "services: Mosquitto does not listen on 127.0.0.1:1883 (see /var/log/mosquitto/mosquitto.log)" >&2; exit 1; }
fi
# NATS: the nats destination's tests publish to it (127.0.0.1:4222,
# JetStream on, no auth; each test makes a stream of its own and deletes
# it) and run servers of their own in process for auth, TLS and restarts
# (nats-server as a Go module: nothing to install for those). Debian's
# package nats-server brings the binary only: without systemd nothing
# starts it, so start it as the developers' machines do, with JetStream's
# store in /var/lib/nats-server.
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  echo "services: installing NATS" >&2
  apt_install nats-server
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  echo "services: starting NATS" >&2
  $SUDO mkdir -p /var/lib/nats-server
  $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break; sleep 0.2; done
  (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null || { echo "services: NATS does not listen on 127.0.0.1:4222 (see /var/log/nats-server.log)" >&2; exit 1; }
fi
# kinesalite: the kinesis destination's tests (internal/destination/kinesis)
# start it themselves, one process per test on a free port of 127.0.0.1,
# from ~/.cache/webhookd-kinesalite (the constant Dir of
# internal/testfixtures/kinesistest). Only the install is needed here:
# nothing to start,
# nothing exported. Uses apt_install from the top of services.sh.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "services: installing Node.js and npm (kinesalite)" >&2
  apt_install nodejs npm
fi
kinesalite_dir="$HOME/.cache/webhookd-kinesalite"
if [ ! -f "$kinesalite_dir/node_modules/kinesalite/package.json" ]; then
  echo "services: installing kinesalite in $kinesalite_dir" >&2
  mkdir -p "$kinesalite_dir"
  npm install --prefix "$kinesalite_dir" --no-audit --no-fund --loglevel=error --no-update-notifier kinesalite@3.3.3 >/dev/null
fi
# Chromium: the portal's browser tests drive Debian's headless Chromium.
if [ ! -x /usr/bin/chromium ]; then
  echo "services: installing Chromium" >&2
  apt_install chromium
fi
echo "services: PostgreSQL, Redis, RabbitMQ, Mosquitto and NATS are up" >&2
