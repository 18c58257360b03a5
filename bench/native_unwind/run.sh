#!/usr/bin/env bash
# backtrace() against libunwind for native stacks (README "Native callers", bench/results.md):
#   bash bench/native_unwind/run.sh [aarch64]
# Builds chain.c three ways and native_unwind.c, then runs both unwinders. With `aarch64`
# the programs are cross-built and run under qemu in build-aarch64/sysroot, with Debian's
# arm64 libunwind8 unpacked beside it (build-aarch64/libunwind-arm64).
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc=gcc; run=()
if [ "${1:-}" = aarch64 ]; then
  root=$(cd ../.. && pwd)/build-aarch64/sysroot
  uw=$(cd ../.. && pwd)/build-aarch64/libunwind-arm64
  if [ ! -e "$uw/usr/lib/aarch64-linux-gnu/libunwind.so.8" ]; then
    dl=$(mktemp -d) && chmod 755 "$dl"
    (cd "$dl" && apt-get download -qq libunwind8:arm64 liblzma5:arm64 >/dev/null)
    mkdir -p "$uw" && for d in "$dl"/*.deb; do dpkg -x "$d" "$uw"; done && rm -rf "$dl"
  fi
  cc=aarch64-linux-gnu-gcc
  run=(env QEMU_LD_PREFIX="$root" LD_LIBRARY_PATH="$uw/usr/lib/aarch64-linux-gnu:$uw/lib/aarch64-linux-gnu" qemu-aarch64-static)
fi
$cc -O2 -fPIC -shared -fno-omit-frame-pointer -o "$out/chain_fp.so" chain.c
$cc -O2 -fPIC -shared -fomit-frame-pointer -o "$out/chain_nofp.so" chain.c
$cc -O2 -fPIC -shared -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables -o "$out/chain_nofp_nocfi.so" chain.c
$cc -O2 -rdynamic -o "$out/native_unwind" native_unwind.c -ldl
for how in backtrace libunwind; do
  "${run[@]}" "$out/native_unwind" "$how" "$out/chain_fp.so" "$out/chain_nofp.so" "$out/chain_nofp_nocfi.so"
done
