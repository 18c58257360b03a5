#!/usr/bin/env bash
# The main job: the npugraph_ex smoke scenario (tests/scenarios/npugraph_ex) with a good
# and a bad torch_npu-like build, each run under the tracer, then `imptrace diff`.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
imptrace_ensure_packages
imptrace_build >/dev/null
work=$(mktemp -d /tmp/imptrace-demo.XXXXXX)
lib=$PWD/build/libimptrace.so
for b in good bad; do
  echo "== running the smoke tests with the $b torch_npu build (traced)"
  /usr/bin/python3 tests/scenarios/npugraph_ex/run_scenario.py --build $b --workdir "$work/$b" \
    --python /usr/bin/python3 --runner pytest \
    --env LD_PRELOAD="$lib" --env IMPTRACE_OUTPUT="$work/$b/traces/" 2>&1 | tail -n 3 || true
done
echo
echo "== imptrace diff $work/good/traces $work/bad/traces"
set +e
./build/imptrace diff "$work/good/traces" "$work/bad/traces"
rc=$?
set -e
echo
echo "(traces kept in $work; try: ./build/imptrace why $work/bad/traces npugraph_ex)"
exit $([ $rc -le 1 ] && echo 0 || echo $rc)
