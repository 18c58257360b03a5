#!/usr/bin/env bash
# The whole test suite: unit tests (format, reader, diff) and end-to-end tests that run
# real interpreters under LD_PRELOAD. CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
imptrace_ensure_packages
imptrace_build
cd build
ctest --output-on-failure -j2 --timeout 900 "$@"
