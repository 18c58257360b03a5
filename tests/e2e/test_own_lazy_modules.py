"""A package's own lazy modules are its design, not anomalies: Debian's pytest imports its
vendored `py`, whose __init__.py calls apipkg.initpkg, which puts ApiModule proxies under
'py', 'py.path', 'py.error', ... while py is imported (on 3.11 most of those stores are seen
only at py's end: the interpreter specialises them past the tracer's hook). `show` counts
them on its "normal Python" line and lists them with --all; the same kind of proxy under a
key outside the importing package, or put there later by a test, stays an anomaly."""
import glob

import pytest

from e2e_util import interpreters, run, viewer

PY = "/usr/bin/python3"
NORMAL = "module wrappers and lazy proxies packages put under their own names while imported: "


def needs_py():
    r = run([PY, "-c", "import py, py.path"], traced=False)
    if r.returncode != 0:
        pytest.skip("needs Debian's vendored py package (python3-pytest): %s" % r.stderr.strip()[-200:])


def anomalies(shown):
    return shown.split("\n  anomalies:\n", 1)[1] if "\n  anomalies:\n" in shown else ""


def traced_pytest(tmp_path, test_source):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text(test_source)
    out = tmp_path / "tr"
    r = run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_a.py"], traced=True, outdir=str(out),
            cwd=str(suite))
    assert glob.glob(str(out / "*.pb")), r.stderr
    return r, str(out)


def test_pytests_py_package_is_counted_not_listed(tmp_path):
    needs_py()
    r, out = traced_pytest(tmp_path, "def test_a():\n    assert 1\n")
    assert r.returncode == 0, r.stdout + r.stderr
    shown = viewer("show", out).stdout
    assert "sys.modules['py" not in shown and "child py." not in shown, shown
    assert "\n  anomalies:" not in shown, shown
    line = [l for l in shown.splitlines() if l.startswith("  normal Python, not anomalies:")]
    assert line and NORMAL in line[0], shown
    count = line[0].split(NORMAL, 1)[1]
    n = int(count.split(" ", 1)[0])
    # 'py' itself and the names initpkg sets up under it (py.path, py.error, py.io, ...).
    assert n >= 3 and count.startswith("%d (py: %d;" % (n, n)), line[0]
    assert "children bound on what their package put under its own name: " in line[0], line[0]
    everything = viewer("show", "--all", out).stdout
    listed = everything.split("put under their own names by their package's import (normal Python, not anomalies):\n")
    assert len(listed) == 2, everything
    assert "    sys.modules['py.path']: py._vendored_packages.apipkg.ApiModule 'py.path' [proxy] (obj:" in listed[1]
    assert listed[1].count(", during the import of py\n") == n, listed[1]
    assert "\n  anomalies:" not in everything, everything
    # `run`'s one-line summary counts the same anomalies: none.
    assert viewer("run", "-o", str(tmp_path / "again"), "--", PY, "-c", "import py").stderr.count(" 0 anomalies;") == 1


def test_a_proxy_a_test_puts_under_pys_names_is_still_an_anomaly(tmp_path):
    # The same kind of object put by a test, after py's import finished, under a name in
    # py's namespace and under one outside it: both anomalies, while py's own stay counted.
    needs_py()
    source = (
        "import sys, types\n"
        "import py\n\n"
        "class Lazy(types.ModuleType):\n"
        "    def __getattr__(self, name):\n"
        "        return getattr(py.path, name)\n\n"
        "def test_a():\n"
        "    sys.modules['py.mine'] = Lazy('py.mine')\n"
        "    sys.modules['pathish'] = Lazy('pathish')\n"
        "    assert sys.modules['py.mine'].local\n")
    r, out = traced_pytest(tmp_path, source)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = viewer("show", out).stdout
    listed = anomalies(shown)
    assert "proxy under sys.modules['py.mine']: test_a.Lazy 'py.mine' [proxy]" in listed, shown
    assert "proxy under sys.modules['pathish']: test_a.Lazy 'pathish' [proxy]" in listed, shown
    assert "sys.modules['py.path']" not in listed and "sys.modules['py']" not in listed, shown
    assert NORMAL in shown, shown


LAZY_HELPER = '''import sys, types

class Lazy(types.ModuleType):
    def __getattr__(self, name):
        return name

def install(package, names):
    # apipkg's shape: called from the package's __init__, a store per name in one loop (the
    # stores 3.11 specialises past the tracer's hook after a few rounds).
    sys.modules[package] = Lazy(package)
    for n in names:
        sys.modules[package + "." + n] = Lazy(package + "." + n)
'''


@pytest.mark.parametrize("python", interpreters())
def test_a_package_setting_up_its_names_through_a_helper_is_normal(python, tmp_path):
    # No Debian package needed: lazypkg/__init__.py calls a helper of another top-level
    # module, which puts proxies under 'lazypkg' and 'lazypkg.n0' ... 'lazypkg.n19'.
    (tmp_path / "lazyhelper.py").write_text(LAZY_HELPER)
    (tmp_path / "lazypkg").mkdir()
    (tmp_path / "lazypkg" / "__init__.py").write_text(
        "import lazyhelper\nlazyhelper.install(__name__, ['n%d' % i for i in range(20)])\n")
    (tmp_path / "app.py").write_text("import json\nimport lazypkg\nimport csv\nassert lazypkg.anything == 'anything'\n")
    out = str(tmp_path / "tr")
    r = run([python, "app.py"], traced=True, outdir=out, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    shown = viewer("show", out).stdout
    assert "\n  anomalies:" not in shown, shown
    assert NORMAL + "21 (lazypkg: 21;" in shown, shown
