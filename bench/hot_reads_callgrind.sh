#!/bin/bash
# Instructions and cache misses per read of issue 21's two hot loops (bench/run.py's
# hotgetattr and hotproxy, the same modules from bench/proxy_modules.py), without start-up:
# (events(60,000 reads) - events(20,000 reads)) / 40,000 under callgrind's cache simulation.
# Counts, not times: a loaded machine does not move them.
#
#   bench/hot_reads_callgrind.sh LIB|none PYTHON [hotgetattr|hotproxy]...
#
# Prints one line per loop: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw per read.
set -euo pipefail
lib=$1 py=$2
shift 2
loops=("${@:-hotgetattr hotproxy}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$(cd "$(dirname "$0")" && pwd)
PYTHONPATH="$src" python3 - "$work" <<'PY'
import os, sys
from proxy_modules import forwarding_proxy_module, pep562_module
root = sys.argv[1]
open(os.path.join(root, "hot_lazy.py"), "w").write(pep562_module(42))
open(os.path.join(root, "hot_proxied.py"), "w").write(forwarding_proxy_module("hot_real", 42))
for name, module in (("hotgetattr", "hot_lazy"), ("hotproxy", "hot_proxied")):
    open(os.path.join(root, name + "_main.py"), "w").write(
        "import sys\nimport %s\nfor _ in range(int(sys.argv[1])):\n    %s.value\n" % (module, module))
PY
events() {  # loop reads
  local out="$work/cg.out" trace="$work/trace"
  rm -rf "$out" "$trace"
  local pre=()
  [ "$lib" != none ] && pre=(LD_PRELOAD="$lib")
  (cd "$work" && env PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 "${pre[@]}" IMPTRACE_OUTPUT="$trace/" \
    valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$out" "$py" "$1_main.py" "$2" >/dev/null 2>&1)
  grep -m1 '^summary:\|^totals:' "$out" | cut -d' ' -f2-
}
for loop in ${loops[@]}; do
  a=$(events "$loop" 20000)
  b=$(events "$loop" 60000)
  python3 -c 'import sys; a, b = (list(map(int, s.split())) for s in sys.argv[2:4])
print(sys.argv[1], " ".join("%.1f" % ((y - x) / 40000) for x, y in zip(a, b)))' "$loop" "$a" "$b"
done
