"""The profiling build (cmake -DIMPTRACE_SELF_TIMING=ON, tracer/self_timing.h): it builds,
leaves the traced program's output alone, and prints its table of the hook's own cycles
at exit; the default build carries none of it."""
import os
import re
import subprocess

from e2e_util import LIB, PROGRAMS, SRC, clean_env


def test_default_build_has_no_self_timing():
    syms = subprocess.run(["nm", "-C", LIB], capture_output=True, text=True, check=True).stdout
    assert "self_timing" not in syms


def test_profiling_build_reports_its_cycles(tmp_path):
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", SRC, "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DIMPTRACE_SELF_TIMING=ON",
                    "-DIMPTRACE_BUILD_VIEWER=OFF", "-DIMPTRACE_BUILD_TESTS=OFF"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2", "--target", "imptrace_tracer"], check=True,
                   capture_output=True)
    lib = str(build / "libimptrace.so")
    assert "self_timing" in subprocess.run(["nm", "-C", lib], capture_output=True, text=True, check=True).stdout
    prog = ["/usr/bin/python3", os.path.join(PROGRAMS, "import_zoo.py")]
    plain = subprocess.run(prog, capture_output=True, text=True, env=clean_env())
    out = tmp_path / "out"
    out.mkdir()
    timed = subprocess.run(prog, capture_output=True, text=True,
                           env=clean_env(LD_PRELOAD=lib, IMPTRACE_OUTPUT=str(out) + "/"))
    assert timed.returncode == plain.returncode == 0
    assert timed.stdout == plain.stdout
    m = re.search(r"imptrace self-timing: (\d+) imports, (\d+) ticks per import", timed.stderr)
    assert m, timed.stderr
    assert int(m.group(1)) > 20 and int(m.group(2)) > 0
    for section in ("begin: stack, shadow, path", "end: name, module", "end: commit to file"):
        assert section in timed.stderr
    assert re.search(r"per import: median \d+, p90 \d+, p99 \d+", timed.stderr)
    # What it adds to stderr is its table only.
    assert timed.stderr.startswith(plain.stderr)
