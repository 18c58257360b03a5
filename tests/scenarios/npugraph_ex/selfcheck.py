#!/usr/bin/env python3
"""Check the scenario itself (no tracer involved): for each interpreter, the
good build passes and the bad build fails every test in setUp with the
report's AttributeError, raised through the proxy's forwarding line.

    selfcheck.py [--runner auto|pytest|unittest] [PYTHON...]

Without PYTHON arguments, every interpreter of this machine's usual set that
exists is checked.  Exit status 0 when all checks hold.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run_scenario.py")

DEFAULT_PYTHONS = ["/root/.pyenv/versions/%s/bin/python" % v for v in
                   ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0")]
DEFAULT_PYTHONS.append("/usr/bin/python3")

# From shared/seed/npugraph_ex-smoke-failure.txt.
MESSAGE = ("AttributeError: module 'torch_npu.dynamo.npugraph_ex' "
           "has no attribute 'npu_fx_compiler'")
SETUP_LINE = "self.optimize_fx_bak = npugraph_ex.npu_fx_compiler._optimize_fx"
FORWARD_LINE = "return getattr(self._npugraph_ex, name)"


def run(python, build, runner, workdir):
    proc = subprocess.run(
        [sys.executable, RUN, "--build", build, "--workdir", workdir,
         "--python", python, "--runner", runner],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return proc.returncode, proc.stdout


def tests_passed(output):
    # unittest: "Ran N tests" + "OK"; pytest: "N passed".
    m = re.search(r"^Ran (\d+) tests? in ", output, re.M)
    if m and re.search(r"^OK$", output, re.M):
        return int(m.group(1))
    m = re.search(r"=+ (\d+) passed in ", output)
    return int(m.group(1)) if m else 0


def count(output, needle):
    # pytest prefixes the exception line with "E   ", unittest prints it bare.
    return sum(1 for line in output.splitlines()
               if line.strip().lstrip("E").strip() == needle
               or line.strip().lstrip(">").strip() == needle)


def check(python, runner):
    problems = []
    with tempfile.TemporaryDirectory(prefix="npugraph_ex-selfcheck-") as tmp:
        rc, out = run(python, "good", runner, os.path.join(tmp, "good"))
        n = tests_passed(out)
        if rc != 0 or n == 0:
            problems.append("good build: exit %d, %d tests passed" % (rc, n))
        rc, bad = run(python, "bad", runner, os.path.join(tmp, "bad"))
        if rc == 0:
            problems.append("bad build passed")
        for what, needle in (("message", MESSAGE), ("setUp line", SETUP_LINE),
                             ("forwarding line", FORWARD_LINE)):
            seen = count(bad, needle)
            if seen != n:
                problems.append("bad build: %s seen %d times, want %d" % (what, seen, n))
    return problems, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", default="auto", choices=("auto", "pytest", "unittest"))
    ap.add_argument("pythons", nargs="*")
    args = ap.parse_args()
    pythons = args.pythons or [p for p in DEFAULT_PYTHONS if os.path.exists(p)]
    failed = False
    for python in pythons:
        problems, n = check(python, args.runner)
        status = "ok" if not problems else "FAIL"
        print("%-45s %-8s %s (%d tests)" % (python, args.runner, status, n))
        for p in problems:
            print("    " + p)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
