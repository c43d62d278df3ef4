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
# The two halves exist so that the binaries can be built apart from the
# runs (see .ci/run).
#
# The binaries are built by one `go test -c` for every package holding a
# fuzz target, with the fuzzing instrumentation (-d=libfuzzer, what
# `go test -fuzz` adds) on this module's packages only. `go test -c -fuzz`
# takes one package at a time and instruments every dependency: the 17
# builds compiled the cloud SDKs, gRPC and the rest again with
# instrumentation, two go commands at once compiling the same packages
# twice: 602 s on the 2-core machine CI runs on. The one command took
# 146 s there with none of its packages compiled yet (26 s with all), and
# shares the dependencies the end-to-end tests' `go build` compiles. The
# fuzzers' coverage guidance therefore stops at the module's edge: it
# steers the 300 inputs through our parsers and handlers, not through a
# library's internals.
#
# Each binary lists its targets (-test.list, as `go test -list` does), so
# a new target runs without editing this script. Targets run FUZZ_JOBS at
# a time (2 by default), each with one fuzzing worker.
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

# build WORK builds the instrumented test binary of every package holding
# a fuzz target into WORK (one go command: the packages share their
# compiled dependencies) and writes one line per target (directory,
# binary, target, package) to WORK/targets. A failed build fails the step.
build() {
  local work=$1 dirs dir bin pkg listed
  mkdir -p "$work"
  rm -f "$work"/*.test "$work/targets"
  # Packages whose tests declare a fuzz target; the binary lists them.
  dirs=$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u)
  # -o DIR names each binary after its package's last element; go test
  # refuses two packages of one name rather than overwrite one.
  # shellcheck disable=SC2086
  # Without DWARF (-ldflags=-w), as scripts/test links the tests: a crash's
  # stack trace reads the symbol table, which stays.
  go test -c -o "$work/" -ldflags=-w -gcflags="$(go list -m)/...=-d=libfuzzer" $dirs
  touch "$work/targets"
  # One go list for every package: it prints them in the order given.
  # shellcheck disable=SC2086
  while read -r dir pkg; do
    bin="$work/$(basename "$pkg").test"
    listed=$("$bin" -test.list '^Fuzz')
    for target in $(echo "$listed" | grep '^Fuzz' || true); do
      echo "$dir $bin $target $pkg" >>"$work/targets"
    done
  done < <(paste -d ' ' <(echo "$dirs") <(go list $dirs))
  echo "== built $(echo "$dirs" | wc -l) fuzz binaries in $((SECONDS - start))s"
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
