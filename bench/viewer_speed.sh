#!/bin/sh
# Viewer speed on traces of 100,000 imports : CPU seconds
# and peak RSS of `show`, `tree`, `why`, `diff` (and, for information, `why --format json`,
# `export --format json`, `diff --format json`). Not part of the pass/fail suite: a
# benchmark-style check that prints a table and says which commands miss the targets
# (under 1 s CPU and under 300 MiB peak RSS each); exit status 1 when any does.
#
#   bench/viewer_speed.sh [BUILD_DIR] [IMPORTS] [ROUNDS]      (defaults: build 100000 3)
#
# Inputs, generated afresh in a scratch directory (kept with KEEP=1):
#   bench: the two traces bench/run.py writes (one file each, 100 packages x 10 subpackages
#          x leaf modules, a binding per submodule; "bad" has 2 missing modules, a failed
#          import, a moved origin and a slow import);
#   gen:   the two runs `diff_bench_gen` writes (tests/unit/diff_bench_gen.cpp).
# Needs /usr/bin/python3 and /usr/bin/time.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
n=${2:-100000}
rounds=${3:-3}
viewer=$build/imptrace
gen=$build/tests/unit/diff_bench_gen
[ -x "$viewer" ] || { echo "no $viewer (build first)" >&2; exit 2; }
scratch=$(mktemp -d /tmp/imptrace-viewer-speed.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$scratch"' EXIT

/usr/bin/python3 - "$here" "$scratch" "$n" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import run
d, n = sys.argv[2], int(sys.argv[3])
run.gen_viewer_trace(f"{d}/good.pb", n, "good")
run.gen_viewer_trace(f"{d}/bad.pb", n, "bad")
PY
if [ -x "$gen" ]; then "$gen" "$scratch/gen" "$n" >/dev/null; fi

fail=0
measure() {  # label target(yes|info) argv...
  label=$1; target=$2; shift 2
  best_cpu=""; max_rss=0; i=0
  cpus=""
  while [ $i -lt "$rounds" ]; do
    /usr/bin/time -f '%U %S %M' -o "$scratch/time" "$@" >"$scratch/out" 2>"$scratch/err" || {
      rc=$?; [ $rc -eq 1 ] || { echo "$label: exit $rc" >&2; cat "$scratch/err" >&2; exit 2; }; }
    read -r u s m <<EOT
$(tail -n 1 "$scratch/time")
EOT
    cpus="$cpus $(echo "$u $s" | awk '{printf "%.3f", $1 + $2}')"
    [ "$m" -gt "$max_rss" ] && max_rss=$m
    i=$((i + 1))
  done
  med=$(echo "$cpus" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  mib=$(echo "$max_rss" | awk '{printf "%.1f", $1 / 1024}')
  ok=$(echo "$med $mib" | awk '{print ($1 < 1.0 && $2 < 300) ? "yes" : "NO"}')
  [ "$target" = yes ] && [ "$ok" = NO ] && fail=1
  [ "$target" = yes ] || ok="$ok (info)"
  printf '| %-34s | %8s | %9s | %-10s |\n' "\`$label\`" "$med" "$mib" "$ok"
}

echo "Viewer on traces of $n imports ($(du -k "$scratch/good.pb" | cut -f1) KiB per run), median CPU (user+sys) of $rounds runs, max peak RSS; $(date -u +%Y-%m-%d), $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
echo
printf '| %-34s | %8s | %9s | %-10s |\n' command "CPU s" "peak MiB" "< 1 s, < 300 MiB"
echo '|---|---:|---:|---|'
g=$scratch/good.pb; b=$scratch/bad.pb
measure "show" yes "$viewer" show "$g"
measure "tree" yes "$viewer" tree "$g"
measure "why gpkg3.sub2.mod5" yes "$viewer" why "$g" gpkg3.sub2.mod5
measure "why gpkg3.sub2 --format json" info "$viewer" why "$g" gpkg3.sub2 --format json
measure "diff (bench traces)" yes "$viewer" diff "$g" "$b"
measure "diff --format json (bench)" info "$viewer" diff "$g" "$b" --format json
if [ -d "$scratch/gen/good" ]; then
  measure "diff (diff_bench_gen runs)" yes "$viewer" diff "$scratch/gen/good" "$scratch/gen/bad"
  measure "show (diff_bench_gen good)" yes "$viewer" show "$scratch/gen/good"
fi
measure "export --format json" info "$viewer" export "$g" --format json
exit $fail
