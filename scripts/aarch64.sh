#!/usr/bin/env bash
# Prepares the AArch64 tests (tests/e2e/test_aarch64.py, test_package.py): the tracer and
# the viewer cross-built into build-aarch64/ and packaged as the arm64 .deb, and a sysroot of
# Debian's arm64 CPython 3.11 with pytest (the seed failure's platform; run here under
# qemu-aarch64-static) in build-aarch64/sysroot. Called by test.sh; any step that fails
# leaves the tests to skip with the reason, never fails the run (the sysroot needs Debian's
# arm64 archive, which a machine may not reach).
set -uo pipefail
cd "$(dirname "$0")/.."
out=build-aarch64
log() { echo "imptrace aarch64: $*" >&2; }
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64-static >/dev/null; then
  log "no cross compiler or qemu: test_aarch64 will skip"; exit 0
fi
mkdir -p "$out" && rm -f "$out/build-failed"
sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
# The viewer links zlib (bundles): the static libz.a of Debian's arm64 zlib1g-dev, unpacked
# beside the build rather than installed (the multiarch package would pull arm64 libc6-dev
# and upgrades into the host), so the arm64 viewer needs no zlib at run time.
zroot="$PWD/$out/zlib-arm64"
if [ ! -f "$zroot/usr/include/zlib.h" ] || [ ! -f "$zroot/usr/lib/aarch64-linux-gnu/libz.a" ]; then
  zdl=$(mktemp -d) && chmod 755 "$zdl"
  dpkg --print-foreign-architectures | grep -qx arm64 || { $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq; }
  (cd "$zdl" && apt-get download -qq zlib1g-dev:arm64 >/dev/null 2>&1) \
    || { $sudo apt-get update -qq; (cd "$zdl" && apt-get download -qq zlib1g-dev:arm64 >/dev/null 2>&1); } \
    || log "cannot download Debian's arm64 zlib1g-dev: the cross build of the viewer will fail"
  rm -rf "$zroot" && mkdir -p "$zroot" && for d in "$zdl"/*.deb; do [ -f "$d" ] && dpkg -x "$d" "$zroot"; done
  rm -rf "$zdl"
fi
# Tracer and viewer, then the arm64 .deb (the viewer without elfutils: there is no arm64
# libdw here; arm64 traces are symbolised by an x86_64 viewer, IMPTRACE_SYMBOL_PATH=sysroot) (build-aarch64/imptrace_<version>_arm64.deb) the
# same way as the native one; the viewer's man pages are generated under qemu.
cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
  -DIMPTRACE_BUILD_VIEWER=ON -DIMPTRACE_BUILD_TESTS=OFF -DIMPTRACE_ELFUTILS=OFF -DZLIB_INCLUDE_DIR="$zroot/usr/include" \
  -DZLIB_LIBRARY="$zroot/usr/lib/aarch64-linux-gnu/libz.a" >/dev/null && cmake --build "$out" -j2 >/dev/null \
  && cmake --build "$out" --target package >/dev/null \
  || { log "cross build failed: test_aarch64 and test_package will fail"; touch "$out/build-failed"; exit 0; }
root="$out/sysroot"
# The arm64 interpreter and what it loads (libunwind8 and its liblzma5: the tracer dlopens
# it for native stacks; libgcc_s: glibc's backtrace(), the fallback), its headers (the
# native-caller test builds an arm64 extension), plus pytest and pytest-xdist with their
# dependencies, which are architecture-independent packages: the runner's own command is
# `python3 -m pytest`.
debs=(python3.11-minimal:arm64 libpython3.11-minimal:arm64 libpython3.11-stdlib:arm64 libc6:arm64
  zlib1g:arm64 libexpat1:arm64 libssl3:arm64 libffi8:arm64 libgcc-s1:arm64
  libunwind8:arm64 liblzma5:arm64 libpython3.11-dev:arm64
  python3-pytest python3-pluggy python3-iniconfig python3-packaging python3-py python3-attr
  python3-more-itertools python3-pkg-resources python3-pytest-xdist python3-execnet)
# A sysroot made from another package list is made again.
[ -x "$root/usr/bin/python3.11" ] && [ "$(cat "$root/.packages" 2>/dev/null)" = "${debs[*]}" ] && exit 0
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq || { log "cannot add arm64 to apt: test_aarch64 will skip"; exit 0; }
fi
dl=$(mktemp -d)
chmod 755 "$dl"  # apt's download sandbox user must be able to write there
(cd "$dl" && apt-get download -qq "${debs[@]}" >/dev/null 2>&1) || {
  $sudo apt-get update -qq; (cd "$dl" && apt-get download -qq "${debs[@]}" >/dev/null 2>&1); } \
  || { log "cannot download arm64 packages: test_aarch64 will skip"; rm -rf "$dl"; exit 0; }
rm -rf "$root" "$root.tmp"
mkdir -p "$root.tmp" && for d in "$dl"/*.deb; do dpkg -x "$d" "$root.tmp"; done \
  && echo "${debs[*]}" > "$root.tmp/.packages" && mv "$root.tmp" "$root"
rm -rf "$dl"
log "sysroot ready: $root"
