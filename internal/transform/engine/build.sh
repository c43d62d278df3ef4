#!/usr/bin/env bash
# Builds quickjs.wasm: QuickJS with shim.c, compiled to WebAssembly (WASI
# reactor) for internal/transform. The built file is committed; run this
# only to change the engine, then commit quickjs.wasm with the change.
#
#   bash internal/transform/engine/build.sh DIR
#
# DIR is a checkout of https://github.com/bellard/quickjs at $commit below.
# Needs Debian's clang-14, lld-14, wasi-libc and libclang-rt-14-dev-wasm32
# (apt-get install clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32).
#
# Two lines of QuickJS are changed in a copy, for WASI: CONFIG_ATOMICS is
# not defined (no threads, so no Atomics.wait), and dtoa.c does not include
# setjmp.h (unused; WASI has none).
set -euo pipefail

commit=d73189dd5a582c19c565774bd56fed4e72d33c99 # 2025-09-13, "fixed compilation with clang"
src="${1:?usage: build.sh QUICKJS_CHECKOUT}"
here="$(cd "$(dirname "$0")" && pwd)"

if [ "$(git -C "$src" rev-parse HEAD)" != "$commit" ]; then
  echo "build.sh: $src is not at $commit" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for f in quickjs.c quickjs.h quickjs-atom.h quickjs-opcode.h libregexp.c libregexp.h \
  libregexp-opcode.h libunicode.c libunicode.h libunicode-table.h cutils.c cutils.h \
  dtoa.c dtoa.h list.h VERSION; do
  git -C "$src" show "$commit:$f" >"$work/$f"
done
sed -i 's|^#define CONFIG_ATOMICS$|/* no threads in WebAssembly: no Atomics.wait */|' "$work/quickjs.c"
sed -i 's|^#include <setjmp.h>$|/* setjmp.h: unused, and not in WASI */|' "$work/dtoa.c"
grep -q 'no threads in WebAssembly' "$work/quickjs.c"
grep -q 'setjmp.h: unused' "$work/dtoa.c"
cp "$here/shim.c" "$work/"

# The stack (1 MiB, first in memory so that overflowing it traps instead
# of writing over the heap) must match stackBytes in ../engine.go.
clang-14 --target=wasm32-wasi -nostdinc \
  -isystem /usr/lib/llvm-14/lib/clang/14.0.6/include -isystem /usr/include/wasm32-wasi \
  -O2 -D_GNU_SOURCE -DCONFIG_VERSION="\"$(cat "$work/VERSION")\"" \
  -mexec-model=reactor \
  -Wl,-z,stack-size=1048576 -Wl,--stack-first -Wl,--strip-all \
  -o "$here/quickjs.wasm" \
  "$work/shim.c" "$work/quickjs.c" "$work/libregexp.c" "$work/libunicode.c" "$work/cutils.c" "$work/dtoa.c"
sha256sum "$here/quickjs.wasm"
