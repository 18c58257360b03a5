#!/bin/sh
# Viewer speed on traces of 100,000 imports : CPU seconds
# and peak RSS of `show`, `tree`, `why`, `diff` (and, for information, `why --format json`,
# `export --format json`, `diff --format json`). Not part of the pass/fail suite: a
# benchmark-style check that prints a table and says which commands miss the targets
# (under 1 s CPU and under 300 MiB peak RSS each); exit status 1 when any does.
#
#   bench/viewer_speed.sh [BUILD_DIR] [IMPORTS] [ROUNDS]      (defaults: build 100000 3)
#
# Inputs, generated afresh in a scratch directory (kept with KEEP=1): the two runs
# `diff_bench_gen` writes (tests/unit/diff_bench_gen.cpp), the same bench/run.py measures.
# Needs /usr/bin/time.
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

[ -x "$gen" ] || { echo "no $gen (build first)" >&2; exit 2; }
"$gen" "$scratch" "$n" >/dev/null

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

g=$scratch/good; b=$scratch/bad
echo "Viewer on traces of $n imports ($(du -k "$g/run.pb" | cut -f1) KiB per run), median CPU (user+sys) of $rounds runs, max peak RSS; $(date -u +%Y-%m-%d), $(nproc) CPUs, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
echo
printf '| %-34s | %8s | %9s | %-10s |\n' command "CPU s" "peak MiB" "< 1 s, < 300 MiB"
echo '|---|---:|---:|---|'
measure "show" yes "$viewer" show "$g"
measure "tree" yes "$viewer" tree "$g"
measure "why pkg3.mod5" yes "$viewer" why "$g" pkg3.mod5
measure "why pkg3 --format json" info "$viewer" why "$g" pkg3 --format json
measure "diff" yes "$viewer" diff "$g" "$b"
measure "diff --format json" info "$viewer" diff "$g" "$b" --format json
measure "export --format json" info "$viewer" export "$g" --format json
exit $fail
