#!/usr/bin/env bash
# The whole test suite: unit tests (format, reader, diff) and end-to-end tests that run
# real interpreters under LD_PRELOAD. CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
imptrace_ensure_packages
# CPython 3.14 and 3.15 in a Debian sid chroot (cached in /var/cache/imptrace/sid): never
# fails the run by itself; their tests skip, saying why, when it could not be made. Made
# while the build runs: on a machine without the cache it is minutes of downloading, and
# its apt runs inside the chroot (debootstrap itself is one of the packages above), so it
# takes no lock the steps below need.
bash scripts/sid.sh & sid_setup=$!
imptrace_build
# The tracer cross-built for AArch64 and an arm64 CPython to run it in (qemu): never fails
# the run by itself; test_aarch64 skips, saying why, when it could not be prepared.
bash scripts/aarch64.sh || true
wait "$sid_setup" || true
# The end-to-end tests run on every CPython found; say which, up front.
echo "imptrace: interpreters for the end-to-end tests:" \
  $(ls -d /root/.pyenv/versions/3.{8,9,10,11,12,13}*/bin/python /usr/bin/python3 /usr/bin/python3.11-dbg 2>/dev/null) \
  $(ls -d "${IMPTRACE_SID:-/var/cache/imptrace/sid}"/usr/bin/python3.1[45] 2>/dev/null | sed 's|^|sid:|')
(cd build && ctest --output-on-failure -j2 --timeout 900 "$@")
# The viewer and its unit tests again under ASan+UBSan (the tracer is not built there: it
# runs inside uninstrumented hosts). Any sanitizer report fails the run, save the few
# explained in tests/fuzz/ubsan.supp.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DIMPTRACE_SANITIZE=ON -DIMPTRACE_BUILD_TRACER=OFF >/dev/null
cmake --build build-asan -j2
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions="$PWD/../tests/fuzz/ubsan.supp" \
  ctest --output-on-failure -j2 --timeout 900 "$@")
