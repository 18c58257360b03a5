"""Debian's real packages on /usr/bin/python3: the stories and the diff must be true on
code nobody wrote for imptrace (lazy_loader's attach, six.moves, pytest's own plugins, a
broken package put first on PYTHONPATH)."""
import glob
import json
import os
import subprocess

import pytest

from e2e_util import export, run, viewer, why

PY = "/usr/bin/python3"


def needs(*modules):
    r = run([PY, "-c", "import " + ", ".join(modules)], traced=False)
    if r.returncode != 0:
        pytest.skip("needs Debian's %s: %s" % (", ".join(modules), r.stderr.strip()[-200:]))


def traced(cmd, outdir, env=None, cwd=None):
    r = run(cmd, traced=True, outdir=str(outdir), env=env, cwd=cwd)
    assert any(n.endswith(".pb") for n in os.listdir(str(outdir))), r.stderr
    return r


def test_function_bound_over_its_submodule_is_no_proxy(tmp_path):
    # lazy_loader.attach binds the function some_func over the submodule some_func it came
    # from: a true mismatch of the binding, but a function is no proxy.
    needs("lazy_loader")
    # The second import_module finds the submodule loaded (3.11 still runs find-and-load)
    # and the binding is checked again: the package's attribute is the function then.
    traced([PY, "-c", "import importlib; from lazy_loader.tests import fake_pkg; fake_pkg.some_func; "
                      "importlib.import_module('lazy_loader.tests.fake_pkg.some_func')"], tmp_path / "t")
    story = why([str(tmp_path / "t")], "lazy_loader.tests.fake_pkg")
    values = [c for c in story["children"] if c["name"] == "some_func"]
    assert values, story["children"]
    text = viewer("why", str(tmp_path / "t"), "lazy_loader.tests.fake_pkg").stdout
    assert "mismatch (attribute holds function (obj:" in text, text
    assert "function [proxy]" not in text, text
    # lazy_loader.attach's __getattr__ is the package's own (PEP 562): no proxy either.
    assert "Attribute lookups through the module __getattr__ (PEP 562) for" in text, text
    assert "through proxies" not in text, text
    assert "function [proxy]" not in viewer("show", str(tmp_path / "t")).stdout


SUITE_A = '''
from six.moves import urllib

def test_six():
    assert urllib.parse.quote("a b") == "a%20b"

def test_yaml():
    import yaml
    assert yaml.safe_load("a: 1") == {"a": 1}
'''


def test_broken_package_on_pythonpath_is_the_failed_import_first(tmp_path):
    # A package first on PYTHONPATH that raises ImportError, imported inside a test: the
    # import failed and the error left the test (pytest reported the failure). importlib's
    # own removal of the half-made module is part of that import, not a sys.modules
    # replacement of its own.
    needs("yaml", "six", "pytest")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text(SUITE_A)
    shim = tmp_path / "shim" / "yaml"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("yaml shim: broken build")\n')
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)]
    g = traced(cmd, tmp_path / "good", cwd=str(tmp_path))
    assert g.returncode == 0, g.stdout
    b = traced(cmd, tmp_path / "bad", env={"PYTHONPATH": str(tmp_path / "shim")}, cwd=str(tmp_path))
    assert b.returncode == 1 and "1 failed" in b.stdout, b.stdout
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    assert r.returncode == 1, r.stderr
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"], first["severity"]) == ("import_failed", "yaml", "error"), first
    assert "yaml shim: broken build" in first["summary"] and "handled" not in first["summary"], first
    replaced = [f for f in findings for f in [f] + f.get("related", []) if f["kind"] == "sys_modules_replaced"]
    assert not replaced, replaced
    shown = viewer("show", str(tmp_path / "bad")).stdout
    assert "failed imports that propagated" in shown and "yaml: ImportError: yaml shim" in shown, shown


CUT_SHORT = '''
import os, signal, json
if os.environ["CUT"] == "early":
    os.kill(os.getpid(), signal.SIGKILL)
import six, yaml
os.kill(os.getpid(), signal.SIGKILL)
'''


def test_processes_cut_short_in_both_runs_meet_where_the_earlier_stopped(tmp_path):
    # multiprocessing.Pool.terminate() SIGTERMs its workers wherever they are: the same
    # worker stops at another import in each run. The good one stopping earlier is no
    # module_added in the bad one.
    needs("six", "yaml")
    (tmp_path / "cut.py").write_text(CUT_SHORT)
    for side, cut in (("good", "early"), ("bad", "late")):
        r = traced([PY, "cut.py"], tmp_path / side, env={"CUT": cut}, cwd=str(tmp_path))
        assert r.returncode == -9, r.stderr
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    assert r.returncode == 0, r.stdout
    d = json.loads(r.stdout)
    assert not [f for f in d["findings"] if f["severity"] != "info"], d["findings"]
    assert any("cut short in both runs" in w for w in d["warnings"]), d["warnings"]
    assert "cut short in both runs" in r.stderr, r.stderr
    # The other way round, the cut-short bad process is compared up to where it stopped.
    r = viewer("diff", str(tmp_path / "bad"), str(tmp_path / "good"))
    assert r.returncode == 0, r.stdout


def test_from_import_of_a_missing_name_is_one_propagated_failure(tmp_path):
    # `from six.moves import nonexistent_thing`: importlib tries the submodule
    # six.moves.nonexistent_thing and swallows its ModuleNotFoundError; the statement then
    # raises "cannot import name". Only the latter left helper.
    needs("six")
    (tmp_path / "helper.py").write_text("import six\nfrom six.moves import nonexistent_thing\n")
    r = traced([PY, "-c", "import helper"], tmp_path / "t", cwd=str(tmp_path))
    assert "cannot import name 'nonexistent_thing'" in r.stderr, r.stderr
    shown = viewer("show", str(tmp_path / "t")).stdout
    propagated = shown.split("failed imports that propagated", 1)[1].split("failed imports handled", 1)[0]
    assert "helper: ImportError: cannot import name 'nonexistent_thing' from 'six.moves'" in propagated, shown
    assert "six.moves.nonexistent_thing" not in propagated, shown


def test_module_loaded_by_lazy_loader_is_no_missing_module(tmp_path):
    # lazy_loader.load("yaml") puts an importlib.util.LazyLoader module under the key by
    # assignment and runs yaml at first use, without find-and-load for yaml itself: yaml
    # was not missing from the bad run, it got there another way, which the key's story
    # tells (found with lazy_loader's own tests in reverse order).
    needs("lazy_loader", "yaml")
    (tmp_path / "use.py").write_text(
        "import os, lazy_loader\n"
        "yaml = lazy_loader.load('yaml') if os.environ['HOW'] == 'lazy' else __import__('yaml')\n"
        "assert yaml.safe_load('a: 1') == {'a': 1}\n")
    traced([PY, "use.py"], tmp_path / "good", env={"HOW": "import"}, cwd=str(tmp_path))
    traced([PY, "use.py"], tmp_path / "bad", env={"HOW": "lazy"}, cwd=str(tmp_path))
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"]) == ("sys_modules_replaced", "yaml"), findings
    assert first["where"][0]["file"] == "lazy_loader/__init__.py", first
    missing = [f for f in findings if f["kind"] in ("module_missing", "module_added") and f["module"] == "yaml"]
    assert not missing, missing


def test_a_copy_of_a_trace_is_not_a_second_process(tmp_path):
    # `gzip -k` beside the original, or an artifact copied twice: one process, read once.
    needs("six")
    traced([PY, "-c", "import six.moves.urllib.parse"], tmp_path / "run")
    (pb,) = [n for n in os.listdir(str(tmp_path / "run"))]
    subprocess.run(["gzip", "-k", str(tmp_path / "run" / pb)], check=True)
    r = viewer("show", str(tmp_path / "run"))
    assert r.stdout.startswith("1 process\n"), r.stdout
    assert "the same process (pid" in r.stderr and "counted once" in r.stderr, r.stderr
    traced([PY, "-c", "import six.moves.urllib.parse"], tmp_path / "again")
    r = viewer("diff", str(tmp_path / "again"), str(tmp_path / "run"))
    assert r.returncode == 0 and "good 1 process" in r.stdout and "bad 1 process" in r.stdout, r.stdout


def test_failure_reraised_by_its_importer_and_then_handled_is_handled(tmp_path):
    # requests.adapters: `try: from urllib3.contrib.socks import ... except ImportError`;
    # urllib3.contrib.socks warns and re-raises `import socks`'s error. Both failures end
    # in requests' except clause: the program went on, nothing propagated.
    needs("requests")
    if run([PY, "-c", "import socks"], traced=False).returncode == 0:
        pytest.skip("PySocks is installed here: urllib3.contrib.socks imports fine")
    r = traced([PY, "-W", "ignore", "-c", "import requests"], tmp_path / "t")
    assert r.returncode == 0, r.stderr
    shown = viewer("show", str(tmp_path / "t")).stdout
    assert "failed imports that propagated" not in shown, shown
    tree = viewer("tree", str(tmp_path / "t"), "--under", "urllib3.contrib.socks").stdout
    assert "socks" in tree and "propagated" not in tree, tree


def test_package_name_over_its_submodule_is_no_binding_error(tmp_path):
    # lazy_loader.attach binds the function some_func over the submodule some_func (as
    # `from .quantize import quantize` does in torch.ao.quantization). The binding is looked
    # at again only when the submodule is imported again: a run that did so is no error
    # against one that did not.
    needs("lazy_loader")
    base = "import importlib; from lazy_loader.tests import fake_pkg; fake_pkg.some_func"
    traced([PY, "-c", base], tmp_path / "good")
    traced([PY, "-c", base + "; importlib.import_module('lazy_loader.tests.fake_pkg.some_func')"], tmp_path / "bad")
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    assert r.returncode == 0, r.stdout
    findings = json.loads(r.stdout)["findings"]
    mismatch = [f for f in findings if f["kind"] == "binding_mismatch"]
    assert mismatch and all(f["severity"] == "info" for f in mismatch), findings
    shown = viewer("show", str(tmp_path / "bad")).stdout
    assert "not bound on its parent" not in shown, shown
    assert "submodule names the package bound to its own attribute: 1" in shown, shown


def test_circular_import_names_the_import_that_raised_first(tmp_path):
    # pkg -> pkg.a -> pkg.b -> `from .a import A` while pkg.a is half made: the error is
    # raised in pkg.b and carried out through pkg.a and pkg. One story, pkg.b first.
    for side, a, b in (("good", "A = 1\nfrom .b import B\n", "import json\nB = 2\n"),
                       ("bad", "from .b import B\nA = 1\n", "import json\nfrom .a import A\nB = 2\n")):
        pkg = tmp_path / side / "pkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("from .a import A\n")
        (pkg / "a.py").write_text(a)
        (pkg / "b.py").write_text(b)
        traced([PY, "-c", "import pkg"], tmp_path / (side + "-run"), env={"PYTHONPATH": str(tmp_path / side)})
    r = viewer("diff", str(tmp_path / "good-run"), str(tmp_path / "bad-run"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"]) == ("import_failed", "pkg.b"), findings
    assert "partially initialized module 'pkg.a'" in first["summary"], first
    assert first["where"][0]["file"] == "pkg/a.py", first
    assert sorted(f["module"] for f in first["related"]) == ["pkg", "pkg.a"], first


def test_serial_against_xdist_misses_nothing_the_workers_imported(tmp_path):
    # The same suite serially and with `-n 2`: under xdist the workers import the tests
    # and what they use, not pytest's main process. six and yaml are not missing from the
    # xdist run.
    needs("yaml", "six", "xdist")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text(SUITE_A)
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)]
    traced(cmd, tmp_path / "serial", cwd=str(tmp_path))
    traced(cmd + ["-p", "xdist", "-n", "2"], tmp_path / "xdist", cwd=str(tmp_path))
    r = viewer("diff", str(tmp_path / "serial"), str(tmp_path / "xdist"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    missing = [f for f in findings if f["kind"] == "module_missing"]
    assert not missing, missing


def test_uncaught_exception_on_313_is_no_collections_abc_replacement(tmp_path):
    # 3.13 imports traceback to print an uncaught exception; traceback imports
    # collections.abc, whose module puts _collections_abc under its own name. Neither the
    # interpreter's reporting nor that alias is a cause against a run that did not fail.
    found = sorted(glob.glob("/root/.pyenv/versions/3.13*/bin/python"))
    if not found:
        pytest.skip("no pyenv CPython 3.13 here")
    traced([found[0], "-c", "import json"], tmp_path / "good")
    r = traced([found[0], "-c", "import json; 1/0"], tmp_path / "bad")
    assert "ZeroDivisionError" in r.stderr, r.stderr
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    loud = [f for f in json.loads(r.stdout)["findings"] if f["severity"] != "info"]
    assert r.returncode == 0 and not loud, loud
    shown = viewer("show", str(tmp_path / "bad")).stdout
    assert "collections.abc" not in shown, shown


def test_test_module_failing_at_collection_is_an_error_from_where_it_was_raised(tmp_path):
    # test_x.py imports helper, which `from six.moves import`s a name six.moves lacks in
    # the bad run: pytest reports a collection error (not a handled import), and the story
    # starts at helper, which raised it, with test_x carrying it.
    needs("six", "pytest")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_x.py").write_text("import helper\n\ndef test_x():\n    assert helper.VALUE == 1\n")
    for side, text in (("good", "import six\nVALUE = 1\n"),
                       ("bad", "import six\nfrom six.moves import nonexistent_thing\nVALUE = 1\n")):
        (tmp_path / side).mkdir()
        (tmp_path / side / "helper.py").write_text(text)
        traced([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)], tmp_path / (side + "-run"),
               env={"PYTHONPATH": str(tmp_path / side)}, cwd=str(tmp_path))
    r = viewer("diff", str(tmp_path / "good-run"), str(tmp_path / "bad-run"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"], first["severity"]) == ("import_failed", "helper", "error"), findings
    assert [f["module"] for f in first["related"] if f["kind"] == "import_failed"] == ["test_x"], first
    assert "handled" not in first["related"][0]["summary"], first


def test_import_systems_own_lookups_through_numpy_getattr_are_no_anomaly(tmp_path):
    # `import numpy.array_api`: its _array_object.py does `from numpy import array_api`
    # while numpy.array_api is still being imported. numpy's __getattr__ answers the
    # import system's hasattr() in _handle_fromlist and the statement's getattr with
    # AttributeError, and the import system then takes sys.modules['numpy.array_api']:
    # normal Python, no failed lookup worth a look.
    needs("numpy.array_api")
    traced([PY, "-W", "ignore", "-c", "import numpy.array_api"], tmp_path / "t")
    shown = viewer("show", str(tmp_path / "t")).stdout
    assert ".array_api on module 'numpy'" not in shown and "\n  anomalies:" not in shown, shown


BLOCKED_LAST = '''
import sys
from unittest import mock
with mock.patch.dict(sys.modules, {"json": None}):
    try:
        import json.decoder
    except ImportError:
        pass
'''


def test_last_import_of_a_program_that_exited_0_was_handled(tmp_path):
    # The program's last import fails and its try/except goes on to a clean exit: nothing
    # is imported after it, but an error that left the main thread's code would have ended
    # the program with status 1. The blocking None under 'json' is mock's, and mock put the
    # module back.
    (tmp_path / "story.py").write_text(BLOCKED_LAST)
    r = traced([PY, "story.py"], tmp_path / "t", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    shown = viewer("show", str(tmp_path / "t")).stdout
    assert "failed imports that propagated" not in shown, shown
    handled = viewer("show", "--all", str(tmp_path / "t")).stdout.split("failed imports handled by their importer")
    assert len(handled) == 2 and "\n    json" in handled[1] and "imported at story.py:6" in handled[1], shown


SPAWNED = '''
import multiprocessing as mp

def work():
    import json

if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=work)
    p.start()
    p.join()
'''


def test_spawned_childs_main_module_is_no_replacement(tmp_path):
    # A spawn (or forkserver) child runs the parent's script under '__mp_main__' with
    # runpy and makes it '__main__' too: how multiprocessing runs a main module.
    (tmp_path / "story.py").write_text(SPAWNED)
    r = traced([PY, "story.py"], tmp_path / "t", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    shown = viewer("show", str(tmp_path / "t")).stdout
    assert shown.startswith("3 processes\n"), shown
    assert "replaced by non-import code" not in shown and "\n  anomalies:" not in shown, shown
    assert "main module swapped in by runpy or multiprocessing: " in shown, shown


MODE_SUITE = '''
import sys, types
from unittest import mock

def test_setitem(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_mod", types.ModuleType("fake_mod"))
    import fake_mod

def test_patch_dict():
    with mock.patch.dict(sys.modules, {"json": types.ModuleType("json")}):
        import json
    import json
    assert json.dumps
'''


def test_pytest_import_modes_differ_only_in_layout(tmp_path):
    # --import-mode=prepend names tests/test_a.py `test_a`; importlib names it
    # `tests.test_a`, assigns it to sys.modules itself and imports the package `tests`. And
    # mock.patch.dict(sys.modules) clears the dict and puts every module back: the keys
    # held one object all along. One file under two names is the layout, not a cause.
    needs("pytest")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(MODE_SUITE)
    (tmp_path / "tests" / "test_b.py").write_text("def test_b():\n    import decimal\n")
    base = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    for mode in ("prepend", "importlib"):
        r = traced(base + ["--import-mode=" + mode], tmp_path / mode, cwd=str(tmp_path))
        assert r.returncode == 0, r.stdout
    for good, bad in (("prepend", "importlib"), ("importlib", "prepend")):
        r = viewer("diff", str(tmp_path / good), str(tmp_path / bad), "--format", "json")
        assert r.returncode == 0, r.stdout
        findings = json.loads(r.stdout)["findings"]
        assert all(f["severity"] == "info" for f in findings), findings
        layout = [f for f in findings if "layout difference" in f["summary"]]
        assert layout and any("test_a (as tests.test_a)" in f["summary"] for f in layout), findings


def test_module_blocked_and_put_back_by_mock_says_so(tmp_path):
    # mock.patch.dict(sys.modules, {"json": None}) replaces json with None and puts the
    # module back on exit: show says where it went back, why counts one module, not two.
    (tmp_path / "story.py").write_text(
        "import sys, json\nfrom unittest import mock\n"
        "with mock.patch.dict(sys.modules, {'json': None}):\n    pass\n")
    r = traced([PY, "story.py"], tmp_path / "t", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    shown = viewer("show", str(tmp_path / "t")).stdout
    line = [l for l in shown.splitlines() if "sys.modules['json'] replaced" in l]
    assert len(line) == 1 and "None, blocking the import" in line[0], shown
    assert ", put back later at unittest/mock.py:" in line[0] and "_unpatch_dict" in line[0], shown
    story = viewer("why", str(tmp_path / "t"), "json").stdout
    assert story.startswith("sys.modules['json']: 2 objects sat under this name in 3 entries"), story
    assert story.count("the same object as entry #1, put back") == 1, story


def test_a_vendored_copy_under_another_name_is_still_a_missing_module(tmp_path):
    # Another file with the same last name part (a vendored copy outside the working
    # directory) is not the same module under another name: mylib stays missing.
    site = tmp_path / "site"
    (site / "vend").mkdir(parents=True)
    (site / "mylib.py").write_text("X = 1\n")
    (site / "vend" / "__init__.py").write_text("")
    (site / "vend" / "mylib.py").write_text("X = 1\n")
    work = tmp_path / "work"
    work.mkdir()
    env = {"PYTHONPATH": str(site)}
    traced([PY, "-c", "import mylib"], tmp_path / "good", env=env, cwd=str(work))
    traced([PY, "-c", "import vend.mylib"], tmp_path / "bad", env=env, cwd=str(work))
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    missing = [f for f in findings if f["kind"] == "module_missing" and f["module"] == "mylib"]
    assert r.returncode == 1 and missing and missing[0]["severity"] == "warning", findings


def test_failed_import_of_a_shadowing_file_names_the_file(tmp_path):
    # A broken json.py first on PYTHONPATH: `import json` (made by requests) fails in the bad
    # run. The error alone reads as if the stdlib's json were broken; the module the import
    # made came from the shadowing file, and the story says so.
    needs("requests")
    (tmp_path / "app.py").write_text("import requests\n")
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "json.py").write_text('raise ImportError("broken copy")\n')
    traced([PY, "app.py"], tmp_path / "good", cwd=str(tmp_path))
    b = traced([PY, "app.py"], tmp_path / "bad", env={"PYTHONPATH": str(shim)}, cwd=str(tmp_path))
    assert "broken copy" in b.stderr, b.stderr
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    first = json.loads(r.stdout)["findings"][0]
    assert (first["kind"], first["module"]) == ("import_failed", "json"), first
    assert "the failing json came from shim/json.py under %s, not from json/__init__.py" % tmp_path in first["summary"], first
    assert first["bad"] == "ImportError: broken copy (from shim/json.py under %s)" % tmp_path, first
    related = [x for x in first.get("related", []) if x["module"] == "requests"]
    assert related and "came from" not in related[0]["summary"], related


def test_module_that_replaced_itself_is_no_anomaly_in_show(tmp_path):
    # pygments.lexers ends with `sys.modules[__name__] = _automodule(...)`, a ModuleType
    # subclass with a __getattr__: the module chose to be that object, and
    # pygments.lexers.python bound on it is bound on its parent (Python agrees: the
    # attribute is the submodule).
    needs("pygments")
    code = ("import sys\nfrom pygments.lexers import PythonLexer\n"
            "assert sys.modules['pygments.lexers'].python is sys.modules['pygments.lexers.python']\n")
    traced([PY, "-c", code], tmp_path / "t")
    shown = viewer("show", str(tmp_path / "t")).stdout
    assert "sys.modules['pygments.lexers'] replaced" not in shown, shown
    assert "not bound on its parent" not in shown, shown
    assert "module wrappers and lazy proxies packages put under their own names while imported: 1 (pygments: 1;" \
        in shown, shown
    assert "children bound on what their package put under its own name: 1" in shown, shown
    # A proxy it still is (a ModuleType subclass overriding __getattr__), counted, not listed;
    # --all lists it with the other normal replacements.
    assert "proxies: 1 " in shown, shown
    assert "proxy under sys.modules['pygments.lexers']" not in shown, shown
    listed = viewer("show", "--all", str(tmp_path / "t")).stdout
    assert "sys.modules['pygments.lexers']: module 'pygments.lexers' (obj:" in listed, listed
    assert "during the import of pygments.lexers" in listed, listed


def test_module_that_replaced_itself_in_the_bad_run_only_is_no_root_cause(tmp_path):
    # Only the bad run imports pygments.lexers: that import is the difference
    # (module_added); its self-replacement, and the children bound on it, are the module's
    # design at info, not a proxy error ranked above it.
    needs("pygments")
    (tmp_path / "pg.py").write_text("import os, json\nif os.environ.get('HL'):\n"
                                    "    from pygments.lexers import PythonLexer\n")
    traced([PY, "pg.py"], tmp_path / "good", cwd=str(tmp_path))
    traced([PY, "pg.py"], tmp_path / "bad", env={"HL": "1"}, cwd=str(tmp_path))
    for args in ([str(tmp_path / "good"), str(tmp_path / "bad")],
                 ["--good", str(tmp_path / "good"), "--bad", str(tmp_path / "bad")]):
        r = viewer("diff", *args, "--format", "json")
        findings = json.loads(r.stdout)["findings"]
        assert (findings[0]["kind"], findings[0]["module"]) == ("module_added", "pygments"), findings[0]
        about = [f for f in findings for f in [f] + f.get("related", []) if f["module"].startswith("pygments.lexers")]
        assert about and all(f["severity"] == "info" for f in about), about
        assert any("replaced itself under its own name" in f["summary"] for f in about), about


VF_LIKE = '''import sys, types
class VFModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.vf = 1
    def __getattr__(self, attr):
        return getattr(self.vf, attr)
sys.modules[__name__] = VFModule(__name__)
'''


def test_module_that_replaced_itself_with_an_object_without_spec_is_no_anomaly(tmp_path):
    # torch/_VF.py's shape: the object it puts under its own name has no __spec__, so its
    # import records no origin; the replaced module's file says it is the module's own line.
    (tmp_path / "vf_like.py").write_text(VF_LIKE)
    traced([PY, "-c", "import vf_like"], tmp_path / "t", cwd=str(tmp_path))
    shown = viewer("show", str(tmp_path / "t")).stdout
    assert "sys.modules['vf_like'] replaced" not in shown, shown
    assert "module wrappers and lazy proxies packages put under their own names while imported: 1 (vf_like: 1;" \
        in shown, shown


def test_python_upgrade_is_no_collections_abc_replacement(tmp_path):
    # The same program on 3.12 (good) and 3.13 (bad): 3.13's collections/abc.py makes its
    # name an alias of _collections_abc while it is imported, 3.12 imports it plainly. The
    # standard library changed with the interpreter; nothing replaced the module.
    pys = {}
    for v in ("3.12", "3.13"):
        found = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python" % v))
        if not found:
            pytest.skip("needs pyenv's Python %s" % v)
        pys[v] = found[0]
    for side, v in (("good", "3.12"), ("bad", "3.13")):
        traced([pys[v], "-c", "import collections.abc, json"], tmp_path / side)
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    replaced = [f for f in findings for f in [f] + f.get("related", []) if f["kind"] == "sys_modules_replaced"]
    assert not replaced, replaced


# ---- where a proxy's lookup was forwarded -------------------------------------------------

def forwards(paths, module):
    """attribute -> (outcome, forwarded_to) of the lookups through sys.modules[module]."""
    return {a["attribute"]: (a["outcome"], a["forwarded_to"]) for a in why(paths, module)["proxy_accesses"]
            if a["kind"] == "getattr"}


def test_pygments_lexer_is_forwarded_to_its_lexer_module_not_the_name_table(tmp_path):
    # pygments.lexers replaces itself with an _automodule whose __getattr__ looks the name up
    # in _mapping.LEXERS, then imports the lexer's module: the class comes from there.
    needs("pygments")
    traced([PY, "-c", "import pygments.lexers as l\nl.PythonLexer\nl.CLexer\nl.PythonLexer\n"
            "try:\n    l.NoSuchLexer\nexcept AttributeError:\n    pass\n"], tmp_path / "t")
    got = forwards([str(tmp_path / "t")], "pygments.lexers")
    assert got["PythonLexer"] == ("ok", "pygments.lexers.python"), got
    assert got["CLexer"] == ("ok", "pygments.lexers.c_cpp"), got
    # Raised by the proxy's own code: nothing was forwarded (3.10+'s AttributeError.obj is None).
    assert got["NoSuchLexer"] == ("AttributeError: NoSuchLexer", None), got
    text = viewer("why", str(tmp_path / "t"), "pygments.lexers").stdout
    assert "forwarded to pygments.lexers._mapping" not in text, text
    assert "forwarded to pygments.lexers.python" in text, text


# pygments.lexers' shape, on a package of its own: a name table in a submodule, one module
# per class, the package replacing itself in sys.modules with a ModuleType subclass whose
# __getattr__ imports the module the table names.
AUTOMODULE = {
    "lexpkg/__init__.py": '''
import sys
import types
from lexpkg._mapping import LEXERS
_cache = {}
def _load(name):
    mod = __import__(name, None, None, ["__all__"])
    for n in mod.__all__:
        _cache[n] = getattr(mod, n)
class _automodule(types.ModuleType):
    def __getattr__(self, name):
        where = LEXERS.get(name)
        if where:
            _load(where)
            cls = _cache[name]
            setattr(self, name, cls)
            return cls
        raise AttributeError(name)
oldmod = sys.modules[__name__]
newmod = _automodule(__name__)
newmod.__dict__.update(oldmod.__dict__)
sys.modules[__name__] = newmod
del newmod.newmod, newmod.oldmod, newmod.sys, newmod.types
''',
    "lexpkg/_mapping.py": 'LEXERS = {"PyLexer": "lexpkg.py", "CLexer": "lexpkg.c", "HolderLexer": "lexpkg.holder"}\n',
    "lexpkg/py.py": '__all__ = ["PyLexer"]\nclass PyLexer:\n    pass\n',
    "lexpkg/c.py": '__all__ = ["CLexer"]\nclass CLexer:\n    pass\n',
    # Re-exports another module's class: found in this module, which is where it came from.
    "lexpkg/holder.py": 'from lexpkg.py import PyLexer as HolderLexer\n__all__ = ["HolderLexer"]\n',
    # A lazy proxy that holds one module and forwards every lookup to it.
    "lazyone/__init__.py": '''
import importlib
import sys
import types
class _Lazy(types.ModuleType):
    def __getattr__(self, name):
        return getattr(self._target, name)
_proxy = _Lazy(__name__)
_proxy._target = importlib.import_module("lazyone.real")
sys.modules[__name__] = _proxy
''',
    "lazyone/real.py": "X = 1\n",
}


def pyenv(version):
    found = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python" % version))
    if not found:
        pytest.skip("needs pyenv's Python %s" % version)
    return found[-1]


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.12", "debian"])
def test_forwarded_to_the_module_that_holds_the_result(version, tmp_path):
    py = PY if version == "debian" else pyenv(version)
    for name, text in AUTOMODULE.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    traced([py, "-c", "import lexpkg\n"
            "try:\n    lexpkg.Early\nexcept AttributeError:\n    pass\n"
            "lexpkg.CLexer\nlexpkg.PyLexer\nlexpkg.HolderLexer\n"
            "try:\n    lexpkg.NoSuch\nexcept AttributeError:\n    pass\n"
            "import lazyone\nlazyone.X\n"
            "try:\n    lazyone.Missing\nexcept AttributeError:\n    pass\n"], tmp_path / "t", cwd=str(tmp_path))
    got = forwards([str(tmp_path / "t")], "lexpkg")
    # Raised by the proxy's own code while it holds one module (the name table): nothing
    # was forwarded there, on every version (before 3.10 told by the message, which is not
    # the held module's "module 'lexpkg._mapping' has no attribute 'Early'").
    assert got["Early"] == ("AttributeError: Early", None), got
    # A lazy proxy holding one module, whose own lookup failed: forwarded there.
    lazy = forwards([str(tmp_path / "t")], "lazyone")
    assert lazy["X"] == ("ok", "lazyone.real"), lazy
    assert lazy["Missing"] == ("AttributeError: module 'lazyone.real' has no attribute 'Missing'", "lazyone.real"), lazy
    assert got["CLexer"] == ("ok", "lexpkg.c"), got
    assert got["PyLexer"] == ("ok", "lexpkg.py"), got
    assert got["HolderLexer"] == ("ok", "lexpkg.holder"), got
    # Before 3.10 an AttributeError does not say whose lookup failed, and the proxy holds
    # several modules by then: no target rather than a guess. From 3.10 it says none.
    assert got["NoSuch"] == ("AttributeError: NoSuch", None), got


def test_stdlib_module_shadowed_by_a_file_beside_the_script_is_the_story(tmp_path):
    # A `calendar.py` of the user's own beside the script: it imports fine, and pandas dies
    # later in `_strptime` reading `calendar.day_abbr`. The same name under another sys.path
    # entry is another file when one is the standard library's; the failure where the error
    # was raised (through the dotted `pandas.util.version`, whose package `pandas.util`
    # failed inside) is one story with every import it stopped and the shadowing file;
    # children bound on packages importlib took out after their own import failed are no
    # binding error.
    needs("pandas")
    for side in ("good", "bad"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "app.py").write_text("import pandas\nprint(pandas.Timestamp('2020-01-01').month_name())\n")
    (tmp_path / "bad" / "calendar.py").write_text("def holidays():\n    return []\n")
    g = traced([PY, "good/app.py"], tmp_path / "t-good", cwd=str(tmp_path))
    assert g.returncode == 0, g.stderr
    b = traced([PY, "bad/app.py"], tmp_path / "t-bad", cwd=str(tmp_path))
    assert "has no attribute 'day_abbr'" in b.stderr, b.stderr
    r = viewer("diff", str(tmp_path / "t-good"), str(tmp_path / "t-bad"), "--format", "json")
    assert r.returncode == 1, r.stderr
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"], first["severity"]) == ("import_failed", "_strptime", "error"), first
    assert ("'calendar' came from calendar.py under %s, not from calendar.py under /usr/lib/python3" %
            (tmp_path / "bad")) in first["summary"], first
    related = first.get("related", [])
    shadow = [x for x in related if x["kind"] == "origin_changed" and x["module"] == "calendar"]
    assert shadow and "shadowing the standard library's" in shadow[0]["summary"], related
    assert {"pandas", "pandas.util.version", "pandas.util"} <= {x["module"] for x in related}, related
    loud = [f["kind"] + " " + f["module"] for f in findings[1:] if f["severity"] != "info"]
    assert not loud, loud
    bindings = [x for f in findings for x in [f] + f.get("related", []) if x["kind"].startswith("binding_")]
    assert not bindings, bindings
    # `why pandas`: importlib took the half-made package out because its import failed,
    # told at the line that imported it, not at importlib's own frame.
    entry = why([str(tmp_path / "t-bad")], "pandas")["entries"][0]
    assert entry["removed_by_failed_import"] and entry["removed_at"]["file"] == "app.py", entry
    assert entry["removed_at"]["line"] == 1, entry
    text = viewer("why", str(tmp_path / "t-bad"), "pandas").stdout
    assert "removed from sys.modules by the import system when its import at app.py:1 in <module> failed" in text, text
    assert "<frozen importlib" not in text, text
    # `show`: the import where the error was raised, with the ones that carried it out.
    shown = viewer("show", str(tmp_path / "t-bad")).stdout
    prop = shown.split("failed imports that propagated", 1)[1].split("failed imports handled", 1)[0]
    assert "    _strptime: AttributeError: module 'calendar' has no attribute 'day_abbr'\n" in prop, prop
    assert "enclosing imports failed with it: pandas, pandas.compat" in prop, prop
    assert "    pandas: AttributeError" not in prop, prop


def test_codec_looked_up_only_when_a_cache_was_rebuilt_is_no_warning(tmp_path):
    # matplotlib reads font names (UTF-16-BE in TrueType name tables) only when it builds its
    # font cache: a cold cache makes the codec registry import encodings.utf_16_be. Which
    # encodings a program decoded is its data, not its imports: info, exit 0.
    needs("matplotlib")
    env = {"MPLCONFIGDIR": str(tmp_path / "mpl"), "MPLBACKEND": "Agg"}
    cmd = [PY, "-c", "import matplotlib.pyplot"]
    traced(cmd, tmp_path / "cold", env=env, cwd=str(tmp_path))
    traced(cmd, tmp_path / "warm", env=env, cwd=str(tmp_path))
    cold = export(str(tmp_path / "cold"))["processes"][0]["imports"]
    warm = export(str(tmp_path / "warm"))["processes"][0]["imports"]
    codecs = {i["name"] for i in cold if i["name"].startswith("encodings.")} - \
        {i["name"] for i in warm if i["name"].startswith("encodings.")}
    if not codecs:
        pytest.skip("no font of this system needed another codec to build matplotlib's cache")
    for good, bad in (("warm", "cold"), ("cold", "warm")):
        r = viewer("diff", str(tmp_path / good), str(tmp_path / bad), "--format", "json")
        findings = json.loads(r.stdout)["findings"]
        assert r.returncode == 0, findings
        told = [f for f in findings if f["module"] in codecs]
        assert told and all(f["severity"] == "info" and "codec registry" in f["summary"] for f in told), told


NX_SUITE = '''
import pytest

@pytest.mark.parametrize("n", range(4))
def test_graph(n):
    import networkx as nx
    assert nx.path_graph(n + 2).number_of_edges() == n + 1
'''


def test_package_shadowed_by_a_local_stand_in_is_one_origin_story(tmp_path):
    # A local `networkx/` stand-in first on PYTHONPATH, in two xdist workers: what the real
    # networkx imports (gzip, pickle, 270 networkx modules) and the stand-in does not is
    # that file's doing, told with the origin_changed that ranks first, not a
    # module_missing warning each above it.
    needs("networkx", "xdist")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_nx.py").write_text(NX_SUITE)
    shim = tmp_path / "shim" / "networkx"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("from .graph import *  # noqa\n")
    (shim / "graph.py").write_text("def path_graph(n):\n    raise NotImplementedError\n")
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "xdist", "-n", "2", str(suite)]
    g = traced(cmd, tmp_path / "good", cwd=str(tmp_path))
    assert g.returncode == 0, g.stdout
    b = traced(cmd, tmp_path / "bad", env={"PYTHONPATH": str(tmp_path / "shim")}, cwd=str(tmp_path))
    assert b.returncode == 1, b.stdout
    r = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    assert r.returncode == 1, r.stderr
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"]) == ("origin_changed", "networkx"), first
    assert "the good run's networkx imported" in first["summary"] and "gzip" in first["good"], first
    assert "the bad run's networkx imported 1 module(s) the good run's did not: networkx.graph" in first["summary"], first
    loud = [f["kind"] + " " + f["module"] for f in findings[1:] if f["severity"] != "info"]
    assert not loud, loud


MOCKED_SUITE = '''
import yaml

def test_load():
    assert yaml.safe_load("a: 1") == {"a": 1}

def test_requests():
    import requests
    assert requests.codes.ok == 200
'''


def test_what_a_mocked_package_and_its_conftest_imported_is_one_story_each(tmp_path):
    # A conftest.py that only the bad run has puts a MagicMock under sys.modules['requests'].
    # What the good run's `import requests` imported (http, email, six) belongs to that
    # key's story; what the conftest imported (unittest.mock, asyncio and 30 more) to the
    # conftest's module_added: not one module_missing or module_added warning each.
    needs("requests", "yaml")
    for side in ("good", "bad"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "test_m.py").write_text(MOCKED_SUITE)
    (tmp_path / "bad" / "conftest.py").write_text(
        "import sys\nfrom unittest import mock\nsys.modules['requests'] = mock.MagicMock()\n")
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    assert traced(cmd, tmp_path / "t-good", cwd=str(tmp_path / "good")).returncode == 0
    assert traced(cmd, tmp_path / "t-bad", cwd=str(tmp_path / "bad")).returncode == 1
    r = viewer("diff", str(tmp_path / "t-good"), str(tmp_path / "t-bad"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["module"], first["severity"]) == ("sys_modules_replaced", "requests", "error"), first
    folded = [x for x in first.get("related", []) if x["kind"] == "module_missing"]
    assert folded and "where sys.modules['requests'] held another object" in folded[0]["summary"], first
    assert "http" in folded[0]["good"].split(", ") and "urllib3" in folded[0]["good"].split(", "), folded
    # pytest exiting 1 because a test failed ran every test: nothing is "not reached".
    assert not [f for f in findings if "not reached" in f["summary"]], findings
    loud = [f for f in findings[1:] if f["severity"] != "info"]
    assert [(f["kind"], f["module"]) for f in loud] == [("module_added", "conftest")], loud
    assert "asyncio" in loud[0]["bad"].split(", ") and "unittest.mock" in loud[0]["bad"], loud


def test_identical_main_threads_do_not_make_the_runs_identical(tmp_path):
    # The first divergence compares main threads: a worker thread that imported yaml in the
    # bad run only leaves them identical, and the closing line must not say the runs'
    # import sequences are.
    needs("yaml")
    (tmp_path / "w.py").write_text(
        "import os, threading, importlib\n"
        "t = threading.Thread(target=importlib.import_module, args=(os.environ['MOD'],))\n"
        "t.start(); t.join()\n")
    traced([PY, "w.py"], tmp_path / "good", env={"MOD": "json"}, cwd=str(tmp_path))
    traced([PY, "w.py"], tmp_path / "bad", env={"MOD": "yaml"}, cwd=str(tmp_path))
    text = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad")).stdout
    assert "main threads: identical; other threads imported differently in 1 paired process" in text, text
    same = viewer("diff", str(tmp_path / "good"), str(tmp_path / "good")).stdout
    assert "Import sequences of paired processes' main threads: identical.\n" in same, same
