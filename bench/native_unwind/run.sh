#!/usr/bin/env bash
# backtrace() against libunwind for native stacks (README "Native callers", bench/results.md):
#   bash bench/native_unwind/run.sh [aarch64]
# Builds chain.c three ways and native_unwind.c, then runs both unwinders. With `aarch64`
# the programs are cross-built and run under qemu in build-aarch64/sysroot (which holds
# Debian's arm64 libunwind8).
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc=gcc; run=()
if [ "${1:-}" = aarch64 ]; then
  # Debian's arm64 libunwind8 is part of the sysroot scripts/aarch64.sh unpacks.
  root=$(cd ../.. && pwd)/build-aarch64/sysroot
  [ -e "$root/usr/lib/aarch64-linux-gnu/libunwind.so.8" ] || { echo "no arm64 libunwind in $root: run scripts/aarch64.sh" >&2; exit 1; }
  cc=aarch64-linux-gnu-gcc
  run=(qemu-aarch64-static -L "$root")
fi
$cc -O2 -fPIC -shared -fno-omit-frame-pointer -o "$out/chain_fp.so" chain.c
$cc -O2 -fPIC -shared -fomit-frame-pointer -o "$out/chain_nofp.so" chain.c
$cc -O2 -fPIC -shared -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables -o "$out/chain_nofp_nocfi.so" chain.c
$cc -O2 -rdynamic -o "$out/native_unwind" native_unwind.c -ldl
for how in backtrace libunwind; do
  "${run[@]}" "$out/native_unwind" "$how" "$out/chain_fp.so" "$out/chain_nofp.so" "$out/chain_nofp_nocfi.so"
done
