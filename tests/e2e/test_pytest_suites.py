"""Debian's pytest (/usr/bin/python3, python3-pytest + python3-pytest-xdist)
on a generated suite of 360 tests gives the same results traced and untraced, serial and
with `-p xdist -n 2`.

The generated suite mixes what perturbs imports in real projects: packages with
conftest.py fixtures, parametrize, skip/skipif/xfail (strict and not), importorskip of a
missing module, deliberate failures and errors, tests that import stdlib modules for the
first time, importlib.import_module, sys.modules monkeypatching, a lazy proxy module in
sys.modules, module __getattr__ (PEP 562) and reload. Outcomes are compared per test node
id (from --junitxml) and by the summary counts. Each traced run's trace files (one per
xdist worker too) must decode, and imports made inside tests carry the node id.
"""
import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

from e2e_util import export, protoc_decodes, run, traces

PY = "/usr/bin/python3"
N_MODULES = 12

CONFTEST = '''
import pytest

@pytest.fixture
def stdlib_module(request):
    import importlib
    return importlib.import_module(request.param if hasattr(request, "param") else "json")

@pytest.fixture(scope="session")
def session_value():
    import decimal
    return decimal.Decimal("1.5")
'''

LAZY = '''
import importlib, sys, types

class _Lazy(types.ModuleType):
    def __getattr__(self, name):
        real = importlib.import_module("colorsys")
        return getattr(real, name)

def install(name):
    sys.modules[name] = _Lazy(name)
    return sys.modules[name]
'''

PEP562 = '''
def __getattr__(name):
    if name == "answer":
        return 42
    raise AttributeError(name)
'''

MODULE = '''
import importlib
import sys
import pytest

STDLIB = {stdlib!r}

@pytest.mark.parametrize("i", range(10))
def test_param(i):
    assert i * 2 == i + i

@pytest.mark.parametrize("name", STDLIB)
def test_import_module(name):
    mod = importlib.import_module(name)
    assert mod.__name__ == name

def test_session(session_value):
    assert float(session_value) == 1.5

def test_fixture(stdlib_module):
    assert stdlib_module.dumps([1]) == "[1]"

@pytest.mark.skip(reason="always skipped")
def test_skip():
    pass

@pytest.mark.skipif(sys.platform.startswith("linux"), reason="linux")
def test_skipif():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_xfail():
    assert False

@pytest.mark.xfail(reason="flaky-looking but passes")
def test_xpass():
    assert True

def test_importorskip():
    pytest.importorskip("imptrace_no_such_module_{idx}")

def test_fails():
    assert {idx} == -1, "deliberate failure"

def test_import_error():
    with pytest.raises(ModuleNotFoundError):
        import imptrace_missing_{idx}

def test_monkeypatch_sys_modules(monkeypatch):
    import types
    fake = types.ModuleType("fake_mod_{idx}")
    fake.value = {idx}
    monkeypatch.setitem(sys.modules, "fake_mod_{idx}", fake)
    import fake_mod_{idx}
    assert fake_mod_{idx}.value == {idx}

def test_lazy_proxy():
    from helpers import lazy
    m = lazy.install("lazy_colorsys_{idx}")
    assert m.rgb_to_hsv(1, 0, 0)[0] == 0.0
    del sys.modules["lazy_colorsys_{idx}"]

def test_pep562():
    from helpers import pep562
    assert pep562.answer == 42
    with pytest.raises(AttributeError):
        pep562.question

def test_reload():
    import helpers.pep562
    importlib.reload(helpers.pep562)

@pytest.fixture
def broken():
    raise RuntimeError("fixture error")

def test_error(broken):
    pass
'''

STDLIB_POOL = ["json", "csv", "decimal", "fractions", "statistics", "colorsys", "difflib",
               "textwrap", "shlex", "heapq", "bisect", "uuid", "ipaddress", "calendar",
               "html.parser", "xml.dom.minidom", "email.message", "http.client", "wave",
               "sqlite3", "zipfile", "tarfile", "plistlib", "configparser", "pprint",
               "string", "gettext", "locale", "optparse", "getopt", "glob", "fnmatch",
               "filecmp", "netrc", "mailbox", "mimetypes", "quopri", "base64"]


def make_suite(root):
    (root / "helpers").mkdir()
    (root / "helpers" / "__init__.py").write_text("")
    (root / "helpers" / "lazy.py").write_text(LAZY)
    (root / "helpers" / "pep562.py").write_text(PEP562)
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    for i in range(N_MODULES):
        pkg = root / "tests" / ("pkg%d" % (i % 3))
        if not pkg.exists():
            pkg.mkdir()
            (pkg / "__init__.py").write_text("")
        stdlib = STDLIB_POOL[(i * 3) % len(STDLIB_POOL):][:8]
        (pkg / ("test_gen%02d.py" % i)).write_text(MODULE.format(idx=i, stdlib=stdlib))


def outcomes(junit):
    res = {}
    for case in ET.parse(str(junit)).getroot().iter("testcase"):
        nid = "%s::%s" % (case.get("classname"), case.get("name"))
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = child.tag + ":" + (child.get("type") or "") + ":" + (child.get("message") or "")[:60]
                break
        res[nid] = kind
    return res


def summary(stdout):
    last = [l for l in stdout.splitlines() if re.search(r"\d+ (passed|failed)", l)]
    assert last, stdout[-2000:]
    counts = dict((k, int(v)) for v, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)", last[-1]))
    counts["errors"] = counts.pop("error", 0) + counts.pop("errors", 0)
    return counts


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    make_suite(root)
    return root


def run_pytest(suite, tmp, traced, xdist):
    junit = tmp / ("junit-%s-%s.xml" % (traced, xdist))
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEsxX", "--junitxml", str(junit)]
    if xdist:
        cmd += ["-p", "xdist", "-n", "2"]
    out = tmp / ("traces-%s" % xdist)
    r = run(cmd, traced=traced, outdir=str(out), cwd=str(suite), timeout=600,
            env={"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return r, outcomes(junit), summary(r.stdout), out


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist-n2"])
def test_generated_suite_same_results(suite, tmp_path, xdist):
    plain, p_out, p_sum, _ = run_pytest(suite, tmp_path, False, xdist)
    traced, t_out, t_sum, out = run_pytest(suite, tmp_path, True, xdist)
    assert len(p_out) >= 300, p_sum
    assert p_sum["failed"] == N_MODULES and p_sum["errors"] == N_MODULES, plain.stdout[-2000:]
    assert (traced.returncode, t_sum) == (plain.returncode, p_sum), traced.stdout[-3000:]
    diff = {k: (p_out.get(k), t_out.get(k)) for k in set(p_out) | set(t_out) if p_out.get(k) != t_out.get(k)}
    assert diff == {}
    assert "imptrace" not in traced.stderr
    files = traces(str(out))
    for f in files:
        protoc_decodes(f)
    procs = export(str(out))["processes"]
    if xdist:
        # execnet workers: `python -u -c "import sys;exec(eval(sys.stdin.readline()))"`.
        # (PYTEST_XDIST_WORKER is set by the worker itself, after the header is written.)
        workers = [p for p in procs if any("exec(eval(sys.stdin" in a for a in p["argv"])]
        assert len(workers) == 2, [p["argv"] for p in procs]
        tested = [i for p in workers for i in p["imports"] if i["test"]]
    else:
        assert len(procs) == 1
        tested = [i for i in procs[0]["imports"] if i["test"]]
    # Imports made inside tests are attributed to their node ids.
    assert any("test_import_module" in i["test"] for i in tested)


def test_xdist_and_serial_agree(suite, tmp_path):
    """The generated suite itself is deterministic: serial and -n 2 give one outcome set
    (so the comparison above tests the tracer, not the suite)."""
    _, serial, s_sum, _ = run_pytest(suite, tmp_path, True, False)
    _, par, x_sum, _ = run_pytest(suite, tmp_path, True, True)
    assert s_sum == x_sum
    assert serial == par


def test_xdist_worker_traces_name_their_worker(tmp_path):
    (tmp_path / "test_small.py").write_text(
        "import pytest\n@pytest.mark.parametrize('i', range(6))\ndef test_x(i):\n    import json\n")
    out = tmp_path / "out"
    r = run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist", "-n", "2"],
            traced=True, outdir=str(out), cwd=str(tmp_path),
            env={"PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    procs = export(str(out))["processes"]
    workers = [p for p in procs if any("exec(eval(sys.stdin" in a for a in p["argv"])]
    assert len(workers) == 2
    assert sorted(p["env"].get("PYTEST_XDIST_WORKER") for p in workers) == ["gw0", "gw1"]
