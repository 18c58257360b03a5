#!/bin/sh
# The many-run diff at scale: `imptrace diff --good RUN... --bad RUN...` over RUNS runs of
# IMPORTS imports each (half passing, half failing), wall and CPU seconds and peak RSS.
# Target (issue 19): 50 runs of 5,000 imports in under 5 s and 1 GiB. Not part of the
# pass/fail suite; exit status 1 when a round misses the target.
#
#   bench/many_runs.sh [BUILD_DIR] [RUNS] [IMPORTS] [ROUNDS]     (defaults: build 50 5000 3)
#
# Inputs: `diff_bench_gen` (tests/unit/diff_bench_gen.cpp) writes one passing and one
# failing run of IMPORTS imports (the failing one with the npugraph_ex-like replacement);
# each is copied into RUNS/2 run directories. Copies cost the viewer what distinct runs
# cost: every run is read, its facts built and freed in turn (nothing is shared or cached
# between runs). Needs /usr/bin/time.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
runs=${2:-50}
n=${3:-5000}
rounds=${4:-3}
viewer=$build/imptrace
gen=$build/tests/unit/diff_bench_gen
[ -x "$viewer" ] && [ -x "$gen" ] || { echo "no $viewer or $gen (build first)" >&2; exit 2; }
scratch=$(mktemp -d /tmp/imptrace-many-runs.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$scratch"' EXIT

"$gen" "$scratch/src" "$n" >/dev/null
half=$((runs / 2))
good="" bad=""
i=1
while [ $i -le $half ]; do
  mkdir -p "$scratch/good$i" "$scratch/bad$i"
  cp "$scratch/src/good/run.pb" "$scratch/good$i/"
  cp "$scratch/src/bad/run.pb" "$scratch/bad$i/"
  good="$good $scratch/good$i"
  bad="$bad $scratch/bad$i"
  i=$((i + 1))
done

echo "imptrace diff --good ($half runs) --bad ($half runs), $n imports per run ($(du -k "$scratch/src/good/run.pb" | cut -f1) KiB each); $(date -u +%Y-%m-%d), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| round | wall s | CPU s (user+sys) | peak MiB | < 5 s wall, < 1 GiB |"
echo "|---:|---:|---:|---:|---|"
fail=0
r=1
while [ $r -le "$rounds" ]; do
  # shellcheck disable=SC2086
  /usr/bin/time -f '%e %U %S %M' -o "$scratch/time" "$viewer" diff --good $good --bad $bad >"$scratch/out" 2>"$scratch/err" || {
    rc=$?; [ $rc -eq 1 ] || { echo "exit $rc" >&2; cat "$scratch/err" >&2; exit 2; }; }
  read -r e u s m <<EOT
$(tail -n 1 "$scratch/time")
EOT
  line=$(echo "$e $u $s $m" | awk '{ok = ($1 < 5.0 && $4 < 1048576) ? "yes" : "NO"; printf "%.2f %.2f %.1f %s", $1, $2 + $3, $4 / 1024, ok}')
  set -- $line
  [ "$4" = yes ] || fail=1
  echo "| $r | $1 | $2 | $3 | $4 |"
  r=$((r + 1))
done
grep -q "support: bad $half/$half, good 0/$half" "$scratch/out" || { echo "the top finding's support is not bad $half/$half, good 0/$half" >&2; exit 2; }
exit $fail
