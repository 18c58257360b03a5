"""Interpreter modes keep their exit status and output with the tracer loaded,
and tracebacks keep the same frames."""
import os

import pytest

from e2e_util import (PROGRAMS, SID_DEBUG_VERSIONS, SID_VERSIONS, export, ident, interpreters, run, sid_interpreters, sid_marks,
                      sid_python, traces)

MODES = [["-X", "dev"], ["-I"], ["-S"], ["-X", "importtime"]]
CODE = "import json, csv, sys; print(json.dumps({'a': 1}), len(sys.argv))"


def cases():
    for py in interpreters():
        for m in MODES:
            yield py, m, {}
        yield py, [], {"PYTHONMALLOC": "debug"}
    if os.path.exists("/usr/bin/python3.11-dbg"):
        yield "/usr/bin/python3.11-dbg", [], {}
        yield "/usr/bin/python3.11-dbg", ["-X", "dev"], {}
    # Debian sid's 3.14, 3.15 and their debug builds (skipped, saying why, without the chroot).
    for v in SID_VERSIONS:
        for m in MODES:
            yield pytest.param(sid_python(v), m, {}, marks=sid_marks())
        yield pytest.param(sid_python(v), [], {"PYTHONMALLOC": "debug"}, marks=sid_marks())
    for v in SID_DEBUG_VERSIONS:
        yield pytest.param(sid_python(v), [], {}, marks=sid_marks())
        yield pytest.param(sid_python(v), ["-X", "dev"], {}, marks=sid_marks())


@pytest.mark.parametrize("py,mode,env", list(cases()),
                         ids=lambda v: ident(v) if isinstance(v, str) else "-".join(v) if isinstance(v, list) else ",".join(v))
def test_mode_unchanged(py, mode, env, tmp_path):
    plain = run([py] + mode + ["-c", CODE], traced=False, env=env)
    traced = run([py] + mode + ["-c", CODE], traced=True, outdir=str(tmp_path), env=env)
    assert traced.returncode == plain.returncode == 0, traced.stderr[-2000:]
    assert traced.stdout == plain.stdout
    if "importtime" not in mode:
        assert traced.stderr == plain.stderr
    files = traces(str(tmp_path))
    assert len(files) == 1
    assert any(i["name"] == "csv" for i in export(files[0])["processes"][0]["imports"])


@pytest.mark.parametrize("py", interpreters() + sid_interpreters(), ids=ident)
def test_traceback_unchanged(py, tmp_path):
    plain = run([py, PROGRAMS + "/traceback_shape.py"], traced=False)
    traced = run([py, PROGRAMS + "/traceback_shape.py"], traced=True, outdir=str(tmp_path))
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    # An uncaught import error prints the same traceback too.
    code = "import importlib; importlib.import_module('no_such_mod_%s')" % "x"
    a = run([py, "-c", code], traced=False)
    b = run([py, "-c", code], traced=True, outdir=str(tmp_path / "b"))
    assert (a.returncode, a.stderr) == (b.returncode, b.stderr)
