#!/usr/bin/env bash
# Prepares the AArch64 smoke test (tests/e2e/test_aarch64.py): the tracer (and the viewer,
# packaged as an arm64 .deb for tests/e2e/test_package.py) cross-built into build-aarch64/,
# and a sysroot of Debian's arm64 CPython 3.11 (the seed failure's platform; run here under
# qemu-aarch64-static) in build-aarch64/sysroot. Called by test.sh; any step that fails
# leaves the test to skip with the reason, never fails the run (the sysroot needs Debian's
# arm64 archive, which a machine may not reach).
set -uo pipefail
cd "$(dirname "$0")/.."
out=build-aarch64
log() { echo "imptrace aarch64: $*" >&2; }
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  log "no cross compiler or qemu: test_aarch64 will skip"; exit 0
fi
mkdir -p "$out" && rm -f "$out/build-failed"
# Tracer and viewer, then the arm64 .deb (build-aarch64/imptrace_<version>_arm64.deb) the
# same way as the native one; the viewer's man pages are generated under qemu.
cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DIMPTRACE_BUILD_VIEWER=ON -DIMPTRACE_BUILD_TESTS=OFF >/dev/null && cmake --build "$out" -j2 >/dev/null \
  && cmake --build "$out" --target package >/dev/null \
  || { log "cross build failed: test_aarch64 and test_package will fail"; touch "$out/build-failed"; exit 0; }
root="$out/sysroot"
[ -x "$root/usr/bin/python3.11" ] && exit 0
debs=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 zlib1g libexpat1 libssl3 libffi8)
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq || { log "cannot add arm64 to apt: test_aarch64 will skip"; exit 0; }
fi
dl=$(mktemp -d)
(cd "$dl" && apt-get download -qq "${debs[@]/%/:arm64}" >/dev/null 2>&1) || {
  $sudo apt-get update -qq; (cd "$dl" && apt-get download -qq "${debs[@]/%/:arm64}" >/dev/null 2>&1); } \
  || { log "cannot download arm64 packages: test_aarch64 will skip"; rm -rf "$dl"; exit 0; }
mkdir -p "$root.tmp" && for d in "$dl"/*.deb; do dpkg -x "$d" "$root.tmp"; done && mv "$root.tmp" "$root"
rm -rf "$dl"
log "sysroot ready: $root"
