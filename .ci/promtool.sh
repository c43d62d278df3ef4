#!/usr/bin/env bash
# Prints the path of a promtool binary, installing it when absent.
#
# Order: promtool on PATH; a cached copy in $PROMTOOL_ROOT (default
# /tmp/promtool-root); otherwise the Debian package "prometheus" is downloaded
# with `apt-get download` and unpacked with `dpkg -x` (no install, no daemon).
# All diagnostics go to stderr so stdout is only the path.
#
# Usage:
#   "$(.ci/promtool.sh)" check rules dashboards/alerts.yml
#   "$(.ci/promtool.sh)" test rules dashboards/alerts_test.yml
set -euo pipefail

root="${PROMTOOL_ROOT:-/tmp/promtool-root}"
cached="$root/usr/bin/promtool"

if p="$(command -v promtool 2>/dev/null)"; then
	printf '%s\n' "$p"
	exit 0
fi

if [[ -x "$cached" ]]; then
	printf '%s\n' "$cached"
	exit 0
fi

for tool in apt-get dpkg; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "promtool.sh: promtool not found and $tool is unavailable" >&2
		exit 1
	fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Let apt's unprivileged _apt user write the download (avoids the "unsandboxed" warning).
if [[ $EUID -eq 0 ]] && id _apt >/dev/null 2>&1; then
	chown _apt "$tmp"
fi

# apt-get download needs package lists; refresh them only when the first try fails.
if ! (cd "$tmp" && apt-get download -qq prometheus >&2); then
	echo "promtool.sh: refreshing apt package lists" >&2
	apt-get update -qq >&2
	(cd "$tmp" && apt-get download -qq prometheus >&2)
fi

shopt -s nullglob
debs=("$tmp"/prometheus_*.deb)
if [[ ${#debs[@]} -eq 0 ]]; then
	echo "promtool.sh: apt-get download produced no prometheus .deb" >&2
	exit 1
fi

mkdir -p "$root"
dpkg -x "${debs[0]}" "$root"

if [[ ! -x "$cached" ]]; then
	echo "promtool.sh: $cached missing after unpacking ${debs[0]##*/}" >&2
	exit 1
fi
printf '%s\n' "$cached"
