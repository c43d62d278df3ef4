#!/usr/bin/env bash
# Renders dashboards/webhookd.json from real data into dashboards/screenshot.png,
# without Grafana (which Debian does not ship): Debian's prometheus scrapes a
# running engine, loadgen.mjs gives it traffic, a small page (index.html +
# dashboard.js, uPlot from npm) runs every panel's PromQL against Prometheus,
# and Debian's headless chromium takes the screenshot.
#
# Needs a running engine, e.g. (from the repo root):
#   bash .ci/services.sh
#   WEBHOOKD_INGEST_TOKEN=dev WEBHOOKD_ALLOW_HTTP_TARGETS=true \
#   WEBHOOKD_ALLOW_PRIVATE_TARGETS=true WEBHOOKD_DELIVERY_TIMEOUT=2s \
#   WEBHOOKD_RETRY_SCHEDULE=2s,5s,10s,20s go run ./cmd/webhookd serve
# then:
#   bash dashboards/render/render.sh
#
# Environment (all optional):
#   LOAD_SECONDS   how long loadgen publishes (default 300; 0 = no load, render
#                  what Prometheus already has)
#   LOAD_RATE      mean events per second (default 12)
#   PROM_URL       use this Prometheus instead of starting one (it must scrape
#                  the engine with job="webhookd")
#   RANGE          window to render, in minutes, ending when publishing stopped
#                  (default: from 20 s before the load to its end; with no
#                  load, the last 15 minutes)
#   OUT            output file (default dashboards/screenshot.png)
#   WEBHOOKD_INTERNAL_ADDR  engine's internal listener (default 127.0.0.1:8081)
#   WEBHOOKD_INGEST_TOKEN   its ingest token (default dev)
# Prints the panels that showed no data; exits 3 when there are any.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${OUT:-$repo/dashboards/screenshot.png}"
load_seconds="${LOAD_SECONDS:-300}"
load_rate="${LOAD_RATE:-12}"
internal="${WEBHOOKD_INTERNAL_ADDR:-127.0.0.1:8081}"
export WEBHOOKD_INGEST_TOKEN="${WEBHOOKD_INGEST_TOKEN:-dev}"
scrape=2
prom_port=9099
page_port=8099

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_updated=""
apt_install() {
	if [ -z "$apt_updated" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
log() { echo "render: $*" >&2; }

# Tools: node and npm for the page, chromium for the screenshot, the
# prometheus server from Debian's package (unpacked, not installed as a
# service, like .ci/promtool.sh does for promtool).
command -v node >/dev/null && command -v npm >/dev/null || { log "installing nodejs, npm"; apt_install nodejs npm; }
command -v chromium >/dev/null || { log "installing chromium"; apt_install chromium fonts-dejavu-core; }
prometheus_bin() {
	local root="${PROMTOOL_ROOT:-/tmp/promtool-root}"
	if command -v prometheus >/dev/null; then command -v prometheus; return; fi
	if [ ! -x "$root/usr/bin/prometheus" ]; then
		log "unpacking Debian's prometheus into $root"
		local tmp; tmp="$(mktemp -d)"
		[ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1 && chown _apt "$tmp"
		(cd "$tmp" && apt-get download -qq prometheus >&2) || { $SUDO apt-get update -qq; (cd "$tmp" && apt-get download -qq prometheus >&2); }
		mkdir -p "$root" && dpkg -x "$tmp"/prometheus_*.deb "$root" && rm -rf "$tmp"
	fi
	echo "$root/usr/bin/prometheus"
}

(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)

curl -fsS "http://$internal/healthz" >/dev/null || { log "no engine answers on http://$internal/healthz"; exit 1; }

work="$(mktemp -d)"
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

wait_for() { # url, what
	for _ in $(seq 1 100); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.2; done
	log "$2 did not come up at $1"; exit 1
}

if [ -z "${PROM_URL:-}" ]; then
	cat >"$work/prometheus.yml" <<-EOF
	global:
	  scrape_interval: ${scrape}s
	  evaluation_interval: ${scrape}s
	scrape_configs:
	  - job_name: webhookd
	    static_configs:
	      - targets: ["$internal"]
	EOF
	"$(prometheus_bin)" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
		--web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
	pids+=($!)
	PROM_URL="http://127.0.0.1:$prom_port"
	wait_for "$PROM_URL/-/ready" prometheus
	log "prometheus on $PROM_URL scraping http://$internal/metrics every ${scrape}s"
fi

start="$(date +%s)"
end="$start"
if [ "$load_seconds" -gt 0 ]; then
	node "$here/loadgen.mjs" --internal "http://$internal" --duration "$load_seconds" --rate "$load_rate" \
		--mark "$work/published" >&2
	# The window ends when publishing stopped, so the stat panels show the
	# engine under load rather than the drain that follows.
	end="$(cat "$work/published")"
fi
if [ -n "${RANGE:-}" ]; then
	from=$((end - RANGE * 60))
elif [ "$load_seconds" -gt 0 ]; then
	from=$((start - 20))
else
	end="$(date +%s)"; from=$((end - 15 * 60))
fi

node "$here/serve.mjs" --port "$page_port" --prometheus "$PROM_URL" --dashboard "$repo/dashboards/webhookd.json" >"$work/serve.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$page_port/dashboard.json" "render page"

# Page height: the grid's bottom edge (30 px rows + 8 px gutters) plus the bars.
rows="$(node -e 'const d=require(process.argv[1]);console.log(Math.max(...d.panels.map(p=>p.gridPos.y+p.gridPos.h)))' "$repo/dashboards/webhookd.json")"
height=$((rows * 38 + 110))
url="http://127.0.0.1:$page_port/?job=webhookd&scrape=$scrape&from=$from&to=$end"
chrome=(chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars
	--user-data-dir="$work/chrome" --window-size="1600,$height" --virtual-time-budget=30000)

TZ=UTC "${chrome[@]}" --dump-dom "$url" 2>/dev/null >"$work/dom.html"
TZ=UTC "${chrome[@]}" --screenshot="$out" "$url" >/dev/null 2>&1
log "wrote $out ($(stat -c %s "$out") bytes, $(date -u -d "@$from" +%H:%M:%S) to $(date -u -d "@$end" +%H:%M:%S) UTC)"

# The page leaves one JSON line per panel in <pre id="report">.
node -e '
const html = require("fs").readFileSync(process.argv[1], "utf8");
const m = /<pre id="report">([\s\S]*?)<\/pre>/.exec(html);
if (!m || !m[1].trim()) { console.error("render: the page left no report"); process.exit(2); }
const unescape = (s) => s.replace(/&quot;/g, "\"").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
const panels = unescape(m[1]).trim().split("\n").map((l) => JSON.parse(l));
const empty = panels.filter((p) => p.error || !p.points);
for (const p of empty) {
  console.log(`no data: ${p.title}${p.error ? " (" + p.error + ")" : ""}`);
  for (const q of p.queries ?? []) if (q.error || !q.series) console.log(`    ${q.error ?? "0 series"}: ${q.expr}`);
}
console.log(`render: ${panels.length - empty.length}/${panels.length} panels with data`);
process.exit(empty.length ? 3 : 0);
' "$work/dom.html"
