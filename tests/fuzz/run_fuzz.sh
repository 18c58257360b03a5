#!/usr/bin/env bash
# run_fuzz.sh SRC_DIR BUILD_DIR SECONDS [LIBIMPTRACE]
# Builds tests/fuzz as its own clang project, seeds a corpus (real traces made with the
# tracer when it is given, plus a few hand-made edge cases) and runs the reader fuzzer for
# SECONDS. Any crash, sanitizer report, timeout (>10 s on one input) or memory blow-up
# (>2 GiB) fails the test; the reproducer is left in BUILD_DIR/artifacts/.
set -euo pipefail
src=$1 bld=$2 secs=$3 lib=${4:-}
command -v clang++ >/dev/null || { echo "fuzz_reader: clang++ missing (Debian package clang)" >&2; exit 1; }
cmake -S "$src" -B "$bld" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$bld" -j2 > "$bld/build.log" 2>&1 || { tail -n 40 "$bld/build.log" >&2; exit 1; }
corpus=$bld/corpus seeds=$bld/seeds
rm -rf "$seeds" && mkdir -p "$corpus" "$seeds" "$bld/artifacts"
printf '' > "$seeds/empty"
printf '\x0a\x00' > "$seeds/empty-record"
printf '\x0a\xff\xff\xff\xff\x0f' > "$seeds/huge-length"
if [ -n "$lib" ] && [ -f "$lib" ]; then
  for py in /usr/bin/python3 /root/.pyenv/versions/3.12.1/bin/python; do
    [ -x "$py" ] || continue
    ( cd "$seeds" && env -u PYTHONPATH LD_PRELOAD="$lib" IMPTRACE_OUTPUT="$seeds/" "$py" -c \
        'import json, csv, importlib, sys
class P:
    def __getattr__(self, n): raise AttributeError(n)
sys.modules["proxy_mod"] = P()
try: import no_such_module
except ImportError: pass
import xml.dom' ) || true
  done
fi
# Bundles: a compressed trace, a .tar.gz of a run (with its junit XML), and a tar member
# climbing out with "..".
first=$(ls "$seeds"/*.pb 2>/dev/null | head -n 1 || true)
[ -n "$first" ] || { printf '\x0a\x02\x08\x01' > "$seeds/tiny.pb"; first=$seeds/tiny.pb; }
gzip -c "$first" > "$seeds/trace.pb.gz"
mkdir -p "$bld/tarroot/run" && cp "$first" "$bld/tarroot/run/a.pb"
printf '<testsuites><testsuite hostname="h"><testcase classname="t.a" name="x"><failure message="/home/u/&quot;a&quot;">/home/u/a.py &lt;b&gt;</failure></testcase><testcase classname="t.a" name="y"/><![CDATA[/home/u]]><!-- c --></testsuite></testsuites>' \
  > "$bld/tarroot/run/junit.xml"
tar czf "$seeds/bundle.tar.gz" -C "$bld/tarroot" run
tar czf "$seeds/dotdot.tar.gz" -C "$bld/tarroot/run" --transform 's,^,../,' a.pb
rm -rf "$bld/tarroot"
# libFuzzer prefers small inputs; real traces are larger, so let it read them whole.
"$bld/reader_fuzz" "$corpus" "$seeds" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -max_len=262144 -print_final_stats=1 -artifact_prefix="$bld/artifacts/" 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
