#!/usr/bin/env bash
# Runs every fuzz target of the repository for FUZZTIME each (300 inputs by
# default) and fails if any crashes: an input that breaks the target's
# property, a 5xx answer among them. A failing input is kept under its
# package's testdata/fuzz, where plain `go test` replays it from then on.
#
# Each package holding a fuzz target is built once (`go test -c -fuzz`,
# instrumented for coverage) and its targets are listed by that binary
# (-test.list, as `go test -list` does), so a new target runs without
# editing this script. Targets run FUZZ_JOBS at a time (2 by default), each
# with one fuzzing worker: rebuilding per target and running one at a time
# would take twice as long on the 2-core CI machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

# A count, not a duration: when a duration runs out while a worker is in
# the middle of an input (the HTTP targets take 10-20 ms each), Go's fuzzing
# can report "context deadline exceeded" as a failure (seen here on CI).
fuzztime="${FUZZTIME:-300x}"
jobs="${FUZZ_JOBS:-2}"
start=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache="$(go env GOCACHE)/fuzz"

# Packages whose tests declare a fuzz target; the binary lists them exactly.
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do
  pkg=$(go list "$dir")
  bin="$work/$(echo "$pkg" | tr / _).test"
  go test -c -fuzz . -o "$bin" "$dir"
  for target in $("$bin" -test.list '^Fuzz' | grep '^Fuzz' || true); do
    echo "$dir $bin $target $cache/$pkg" >>"$work/targets"
  done
done
count=$(wc -l <"$work/targets")

# run_target DIR BINARY TARGET CACHEDIR runs one target in its package's
# directory (where testdata/fuzz lives) and shows its log when it fails.
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

if ! xargs -P "$jobs" -L 1 bash -c 'run_target "$1" "$2" "$3" "$4" "$5" "$6"' _ \
    < <(awk -v w="$work" -v t="$fuzztime" '{print $0, w, t}' "$work/targets"); then
  echo "== a fuzz target crashed (see above) after $((SECONDS - start))s"
  exit 1
fi
echo "== $count fuzz targets passed, $fuzztime each, in $((SECONDS - start))s"
