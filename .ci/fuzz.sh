#!/usr/bin/env bash
# Runs every fuzz target of the repository for FUZZTIME each (300 inputs by
# default) and fails if any crashes: an input that breaks the target's
# property, a 5xx answer among them. A failing input is kept under its
# package's testdata/fuzz, where plain `go test` replays it from then on.
#
#   bash .ci/fuzz.sh            build, then run (what a developer types)
#   bash .ci/fuzz.sh build DIR  only build the binaries and their list in DIR
#   bash .ci/fuzz.sh run DIR    only run what `build DIR` made
#
# The two halves exist for .ci/run, which builds while the tests run: the
# 14 instrumented builds (`go test -c -fuzz`, every dependency compiled
# again with coverage instrumentation) cost more than the 300 inputs of
# all 42 targets, and fill the CPU the end-to-end tests leave idle.
#
# Each package holding a fuzz target is built once and its targets are
# listed by that binary (-test.list, as `go test -list` does), so a new
# target runs without editing this script. Builds and targets run
# FUZZ_JOBS at a time (2 by default), each target with one fuzzing
# worker: rebuilding per target and running one at a time would take
# twice as long on the 2-core CI machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

# A count, not a duration: when a duration runs out while a worker is in
# the middle of an input (the HTTP targets take 10-20 ms each), Go's fuzzing
# can report "context deadline exceeded" as a failure (seen here on CI).
fuzztime="${FUZZTIME:-300x}"
jobs="${FUZZ_JOBS:-2}"
start=$SECONDS
cache="$(go env GOCACHE)/fuzz"

# build_package DIR WORK builds DIR's instrumented test binary into WORK
# and writes one line per target (directory, binary, target, package) to
# BINARY.targets. A failed build fails the whole step.
build_package() {
  local pkg bin
  pkg=$(go list "$1")
  bin="$2/$(echo "$pkg" | tr / _).test"
  go test -c -fuzz . -o "$bin" "$1" || return 1
  local listed
  listed=$("$bin" -test.list '^Fuzz') || return 1
  for target in $(echo "$listed" | grep '^Fuzz' || true); do
    echo "$1 $bin $target $pkg" >>"$bin.targets"
  done
}
export -f build_package

build() {
  local work=$1
  mkdir -p "$work"
  rm -f "$work"/*.targets "$work/targets"
  # Packages whose tests declare a fuzz target; the binary lists them.
  grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u |
    xargs -P "$jobs" -I{} bash -c 'build_package "$1" "$2"' _ {} "$work"
  cat "$work"/*.targets >"$work/targets"
  echo "== built $(ls "$work"/*.test | wc -l) fuzz binaries in $((SECONDS - start))s"
}

# run_target DIR BINARY TARGET CACHEDIR LOGDIR FUZZTIME runs one target in
# its package's directory (where testdata/fuzz lives) and shows its log
# when it fails.
run_target() {
  local log="$5/$(basename "$2").$3.log"
  if (cd "$1" && "$2" -test.run '^$' -test.fuzz "^$3\$" -test.fuzztime "$6" \
      -test.parallel 1 -test.fuzzcachedir "$4/$3") >"$log" 2>&1; then
    echo "ok   $1 $3"
  else
    echo "FAIL $1 $3"
    cat "$log"
    return 1
  fi
}
export -f run_target

run() {
  local work=$1 count
  start=$SECONDS
  count=$(wc -l <"$work/targets")
  if ! xargs -P "$jobs" -L 1 bash -c 'run_target "$1" "$2" "$3" "$4" "$5" "$6"' _ \
      < <(awk -v c="$cache" -v w="$work" -v t="$fuzztime" '{print $1, $2, $3, c "/" $4, w, t}' "$work/targets"); then
    echo "== a fuzz target crashed (see above) after $((SECONDS - start))s"
    exit 1
  fi
  echo "== $count fuzz targets passed, $fuzztime each, in $((SECONDS - start))s"
}

case "${1:-}" in
build) build "$2" ;;
run) run "$2" ;;
"")
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  build "$work"
  run "$work"
  ;;
*) echo "usage: bash .ci/fuzz.sh [build DIR | run DIR]" >&2; exit 2 ;;
esac
