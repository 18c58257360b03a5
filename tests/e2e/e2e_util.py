"""Shared helpers of the end-to-end tests: where the build is, which interpreters exist,
running a command under the tracer, and reading traces back (viewer and protoc)."""
import glob
import json
import os
import subprocess
import sys

SRC = os.environ.get("IMPTRACE_SOURCE") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("IMPTRACE_BUILD") or os.path.join(SRC, "build")
LIB = os.path.join(BUILD, "libimptrace.so")
VIEWER = os.path.join(BUILD, "imptrace")
PROTO = os.path.join(SRC, "proto", "imptrace.proto")
PROGRAMS = os.path.join(SRC, "tests", "programs")
SCENARIO = os.path.join(SRC, "tests", "scenarios", "npugraph_ex", "run_scenario.py")


def interpreters():
    """Every CPython 3.8-3.13 found here, pyenv (shared libpython) and Debian's (static)."""
    found = sorted(glob.glob("/root/.pyenv/versions/3.[0-9]*/bin/python"))
    found = [p for p in found if os.path.basename(os.path.dirname(os.path.dirname(p))).split(".")[1] in
             ("8", "9", "10", "11", "12", "13")]
    if os.path.exists("/usr/bin/python3"):
        found.append("/usr/bin/python3")
    sys.stderr.write("imptrace e2e interpreters: %s\n" % " ".join(found))
    return found


def ident(py):
    return py.replace("/usr/bin/", "debian-").replace("/root/.pyenv/versions/", "pyenv-").replace("/bin/python", "")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("IMPTRACE_") and k not in ("LD_PRELOAD", "PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def run(cmd, traced, outdir=None, env=None, **kw):
    e = clean_env(**(env or {}))
    if traced:
        e["LD_PRELOAD"] = LIB
        if outdir:
            e["IMPTRACE_OUTPUT"] = outdir.rstrip("/") + "/"
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, env=e, capture_output=True, text=True, **kw)


def traces(outdir):
    return sorted(glob.glob(os.path.join(outdir, "*.pb*")))


def viewer(*args, check=True):
    r = subprocess.run([VIEWER] + list(args), capture_output=True, text=True, timeout=120)
    if check and r.returncode not in (0, 1):
        raise AssertionError("imptrace %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def export(*paths):
    r = viewer("export", *paths, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def why(paths, module):
    r = viewer("why", *paths, module, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def protoc_decodes(path):
    with open(path, "rb") as f:
        r = subprocess.run(["protoc", "--decode=imptrace.Trace", "-I" + os.path.dirname(PROTO), PROTO],
                           stdin=f, capture_output=True)
    assert r.returncode == 0, "protoc cannot decode %s: %s" % (path, r.stderr[:300])
    return r.stdout


def importtime_names(stderr):
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "imported package" not in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names
