#!/usr/bin/env python3
"""Lay out and run the npugraph_ex smoke scenario (model of the CI failure in
shared/seed/npugraph_ex-smoke-failure.txt).

    run_scenario.py --build good|bad --workdir DIR [--runner auto|pytest|unittest]
                    [--python EXE] [--xdist N] [--tests PATH ...] [--env KEY=VALUE ...]
                    [-- EXTRA...]

Layout made under DIR (removed and made anew on every run, so no state such as
__pycache__ carries over from a previous run or build):

    DIR/site-packages/torch                          torch stand-in
    DIR/site-packages/torch_npu                      the chosen torch_npu build
    DIR/site-packages/torch_npu/dynamo/npugraph_ex   copy of the standalone
                                                     package, without tests/
                                                     (the pipeline's copy step)
    DIR/workspace/torchair/npugraph_ex               the standalone project

Then, in DIR/workspace/torchair/npugraph_ex, with
PYTHONPATH=DIR/site-packages:DIR/workspace/torchair, it runs
    EXE -m pytest tests/smoke/stream_test.py -p no:cacheprovider [-p xdist -n N] EXTRA
    (--tests PATH...: those tests, in that order, instead of tests/smoke/stream_test.py)
or  EXE -m unittest discover -s tests/smoke -t tests/smoke -p *_test.py -v EXTRA
The test process inherits this process's environment (so an LD_PRELOAD set by
the caller applies to it) plus any --env settings, which apply to the test
process only (handy to trace the tests without tracing this driver).
The exit status is the test run's.  Stdlib only; Python 3.8-3.13.
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Never copied: bytecode caches from someone running the sources in place.
_IGNORE_CACHES = shutil.ignore_patterns("__pycache__", "*.pyc")


def _ignore_caches_and_tests(src, names):
    # The pipeline copies the package, not its tests, into torch_npu.
    ignored = set(_IGNORE_CACHES(src, names))
    if os.path.samefile(src, os.path.join(HERE, "npugraph_ex")):
        ignored.add("tests")
    return ignored


def lay_out(build, workdir):
    """Create the fresh install; return (site_packages, torchair, project)."""
    site = os.path.join(workdir, "site-packages")
    torchair = os.path.join(workdir, "workspace", "torchair")
    project = os.path.join(torchair, "npugraph_ex")
    # Only the directories this script owns are removed: other files in DIR
    # (for example traces the caller asked to be written there) stay.
    for owned in (site, os.path.join(workdir, "workspace")):
        if os.path.lexists(owned):
            shutil.rmtree(owned)
    os.makedirs(site)
    os.makedirs(torchair)

    shutil.copytree(os.path.join(HERE, "torch"), os.path.join(site, "torch"),
                    ignore=_IGNORE_CACHES)
    shutil.copytree(os.path.join(HERE, "torch_npu_" + build, "torch_npu"),
                    os.path.join(site, "torch_npu"), ignore=_IGNORE_CACHES)
    shutil.copytree(os.path.join(HERE, "npugraph_ex"),
                    os.path.join(site, "torch_npu", "dynamo", "npugraph_ex"),
                    ignore=_ignore_caches_and_tests)
    shutil.copytree(os.path.join(HERE, "npugraph_ex"), project,
                    ignore=_IGNORE_CACHES)
    return site, torchair, project


def has_pytest(python):
    probe = subprocess.run([python, "-c", "import pytest"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return probe.returncode == 0


def test_command(python, runner, xdist, extra, tests=None):
    if runner == "pytest":
        cmd = [python, "-m", "pytest"] + list(tests or ["tests/smoke/stream_test.py"]) + [
               "-p", "no:cacheprovider"]
        if xdist:
            cmd += ["-p", "xdist", "-n", str(xdist)]
    else:
        # No __init__.py in tests/ or tests/smoke: like pytest's rootdir
        # import, the test module is imported as top-level `stream_test`
        # (importing it as npugraph_ex.tests... would import the package
        # before the test module's own import order runs).
        cmd = [python, "-m", "unittest", "discover", "-s", "tests/smoke",
               "-t", "tests/smoke", "-p", "*_test.py", "-v"]
    return cmd + list(extra)


def parse_args(argv):
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(
        description="Run the npugraph_ex smoke scenario against a good or bad "
                    "torch_npu-like build.")
    ap.add_argument("--build", required=True, choices=("good", "bad"))
    ap.add_argument("--workdir", required=True,
                    help="directory for the fresh install (created if missing)")
    ap.add_argument("--runner", default="auto",
                    choices=("auto", "pytest", "unittest"),
                    help="auto: pytest if the interpreter has it, else unittest")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter running the tests (default: this one)")
    ap.add_argument("--xdist", type=int, default=0, metavar="N",
                    help="pytest only: run with pytest-xdist, N workers")
    ap.add_argument("--tests", action="append", default=[], metavar="PATH",
                    help="pytest only: run these test files or node ids, in this order, "
                         "instead of tests/smoke/stream_test.py (repeatable; "
                         "tests/order holds the order-dependent variant)")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="set a variable for the test process only (repeatable)")
    args = ap.parse_args(argv)
    args.extra = extra
    if args.runner == "auto":
        args.runner = "pytest" if has_pytest(args.python) else "unittest"
    if args.xdist and args.runner != "pytest":
        ap.error("--xdist needs --runner pytest")
    if args.tests and args.runner != "pytest":
        ap.error("--tests needs --runner pytest")
    for item in args.env:
        if "=" not in item or item.startswith("="):
            ap.error("--env wants KEY=VALUE, got %r" % item)
    return args


def main(argv):
    args = parse_args(argv)
    workdir = os.path.abspath(args.workdir)
    site, torchair, project = lay_out(args.build, workdir)

    env = dict(os.environ)
    # Exactly these two entries, as in the pipeline; a caller's PYTHONPATH
    # would change which npugraph_ex is found first.
    env["PYTHONPATH"] = os.pathsep.join([site, torchair])
    for item in args.env:
        key, value = item.split("=", 1)
        env[key] = value

    cmd = test_command(args.python, args.runner, args.xdist, args.extra, args.tests)
    sys.stderr.write("run_scenario: build=%s runner=%s cwd=%s\n"
                     "run_scenario: PYTHONPATH=%s\nrun_scenario: %s\n"
                     % (args.build, args.runner, project, env["PYTHONPATH"],
                        " ".join(cmd)))
    sys.stderr.flush()
    return subprocess.run(cmd, cwd=project, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
