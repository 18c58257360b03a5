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
    if os.path.dirname(py) == SID_WRAPPERS:
        return "sid-" + os.path.basename(py).replace("python", "")
    return py.replace("/usr/bin/", "debian-").replace("/root/.pyenv/versions/", "pyenv-").replace("/bin/python", "")


# CPython 3.14 and 3.15 come from Debian sid, in the chroot scripts/sid.sh makes (cached at
# /var/cache/imptrace/sid). Each runs through a wrapper in BUILD/sid/ that enters the
# chroot with /tmp and the source and build trees at the same paths (tests/e2e/sid_python),
# so a test runs it like any interpreter of this machine.
SID = os.environ.get("IMPTRACE_SID") or "/var/cache/imptrace/sid"
SID_VERSIONS = ("3.14", "3.15")
# Their debug builds (python3.14-dbg, python3.15-dbg in the chroot): the mode tests run them.
SID_DEBUG_VERSIONS = ("3.14-dbg", "3.15-dbg")
SID_WRAPPERS = os.path.join(BUILD, "sid")
_sid_state = {}


def sid_unavailable():
    """Why the chroot's interpreters cannot run here, or None when they can."""
    if "why" not in _sid_state:
        _sid_state["why"] = _sid_check()
    return _sid_state["why"]


def _sid_check():
    why_file = SID + ".unavailable"
    if os.path.exists(why_file):
        with open(why_file) as f:
            return "no Debian sid chroot: " + f.read().strip()
    missing = [v for v in SID_VERSIONS if not os.path.exists(os.path.join(SID, "usr/bin/python" + v))]
    if missing:
        return "no python%s in %s (scripts/sid.sh makes the chroot)" % ("/".join(missing), SID)
    os.makedirs(SID_WRAPPERS, exist_ok=True)
    dirs = ":".join(sorted({"/tmp", SRC, BUILD}))
    for v in SID_VERSIONS + SID_DEBUG_VERSIONS:
        w = os.path.join(SID_WRAPPERS, "python" + v)
        text = "#!/bin/sh\nexec %s %s %s /usr/bin/python%s \"$@\"\n" % (
            os.path.join(SRC, "tests", "e2e", "sid_python"), SID, dirs, v)
        if not os.path.exists(w) or open(w).read() != text:
            with open(w + ".tmp", "w") as f:
                f.write(text)
            os.chmod(w + ".tmp", 0o755)
            os.replace(w + ".tmp", w)
    r = subprocess.run([os.path.join(SID_WRAPPERS, "python3.15"), "-c", "pass"], capture_output=True, text=True,
                       cwd="/tmp", timeout=60)
    if r.returncode != 0:
        return "cannot enter the chroot %s (root, unshare and mount are needed): %s" % (SID, r.stderr.strip()[-300:])
    return None


def sid_python(version):
    """The wrapper that runs the chroot's python<version> ("3.14", "3.15", "3.14-dbg", "3.15-dbg")."""
    return os.path.join(SID_WRAPPERS, "python" + version)


def sid_marks():
    """What a test parameter on the chroot's interpreters carries: a skip with the reason
    when the chroot cannot be used here."""
    import pytest
    why = sid_unavailable()
    return [pytest.mark.skip(reason=why)] if why else []


def sid_interpreters(versions=SID_VERSIONS):
    """pytest parameters for the chroot's interpreters (skipped, saying why, without it)."""
    import pytest
    return [pytest.param(sid_python(v), marks=sid_marks()) for v in versions]


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


def write_json_round_trip_suite(suite, files, imports, cases):
    """A pytest suite in `suite` (a pathlib.Path made here) of `files` files test_mNN.py,
    each starting with the source lines `imports` and holding one test parametrized over
    `cases` values: many small tests, so collecting them and their imports is the work."""
    suite.mkdir()
    for i in range(files):
        (suite / ("test_m%02d.py" % i)).write_text(
            imports + "import pytest\n\n\n"
            "@pytest.mark.parametrize(\"n\", range(%d))\n"
            "def test_value(n):\n"
            "    assert json.loads(json.dumps(n)) == n\n" % cases)


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
