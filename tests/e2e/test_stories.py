"""Stories on real code: what `why`, `show` and `diff` tell about Debian's packages and
common stdlib idioms, checked as a user would read it — the importer's or remover's
file:line, the kinds and severities, and for pairs of runs that the first finding is the
cause. Each story runs on 3.8, 3.10, 3.12, Debian's 3.11 (those found here) and Debian sid's
3.14 and 3.15 (scripts/sid.sh's chroot); the ones that need Debian's packages run on
Debian's python3."""
import json
import os
import re
import signal
import subprocess
import textwrap

import pytest

from e2e_util import ident, run, sid_interpreters, traces, viewer, why, write_json_round_trip_suite

DEBIAN = "/usr/bin/python3"
WANTED = ("3.8", "3.10", "3.12")


def story_interpreters():
    found = []
    for v in os.listdir("/root/.pyenv/versions") if os.path.isdir("/root/.pyenv/versions") else []:
        if ".".join(v.split(".")[:2]) in WANTED:
            found.append("/root/.pyenv/versions/%s/bin/python" % v)
    if os.path.exists(DEBIAN):
        found.append(DEBIAN)
    return sorted(found)


# Plus Debian sid's 3.14 and 3.15 (skipped, saying why, where the chroot cannot be made).
PYS = story_interpreters() + sid_interpreters()


def has(py, module):
    return subprocess.run([py, "-c", "import " + module], capture_output=True).returncode == 0


def trace_script(tmp_path, name, py, code, env=None, expect_rc=0, args=()):
    """Runs CODE as story.py (so its frames read story.py:N) traced; returns the run's dir."""
    work = tmp_path / ("w-" + name)
    work.mkdir()
    (work / "story.py").write_text(textwrap.dedent(code))
    out = tmp_path / name
    r = run([py, "story.py"] + list(args), traced=True, outdir=str(out), env=env, cwd=str(work))
    if expect_rc is not None:
        assert r.returncode == expect_rc, r.stderr[-3000:]
    return str(out)


def export_json(path):
    r = viewer("export", path, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def diff_json(good, bad):
    r = viewer("diff", good, bad, "--format", "json")
    return r.returncode, json.loads(r.stdout)


def loud(findings):
    return [f for f in findings if f["severity"] in ("error", "warning")]


def loc(l):
    return (l or {}).get("file"), (l or {}).get("line")


# ---- who put it there ------------------------------------------------------------------

@pytest.mark.skipif(not has(DEBIAN, "scipy.stats"), reason="python3-scipy not installed")
def test_reentry_while_initialising_is_a_lookup_not_the_importer(tmp_path):
    """scipy's PEP 562 __getattr__ imports scipy.stats again while scipy.stats runs: the
    outermost import that created the module is its importer; the re-entries are lookups."""
    d = trace_script(tmp_path, "scipy", DEBIAN, "import scipy.stats\n")
    story = why([d], "scipy.stats")
    assert len(story["entries"]) == 1
    assert loc(story["entries"][0]["set_by"]) == ("story.py", 1)
    imports = [i for i in story["imports"] if i["object"]["id"] == story["entries"][0]["object"]]
    assert imports[0]["importer"]["file"] == "story.py" and not imports[0]["reentry"]
    assert len(imports) > 1 and all(i["reentry"] for i in imports[1:])
    text = viewer("why", d, "scipy.stats").stdout
    assert "put there by the import system at story.py:1" in text
    assert "_distn_infrastructure.py:32" not in text.split("Children bound")[0].split("re-entered")[0]


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_import_made_by_a_package_getattr_names_it_and_the_trigger(py, tmp_path):
    """`from concurrent.futures import ThreadPoolExecutor`: the package's PEP 562 __getattr__
    imports .thread. It is the importer; the user's line is what triggered it."""
    if ident(py) == "sid-3.15":
        pytest.skip("3.15's concurrent.futures binds ThreadPoolExecutor with `lazy from .thread import`: "
                    "no __getattr__ runs")
    d = trace_script(tmp_path, "cf", py, "from concurrent.futures import ThreadPoolExecutor\n")
    imp = [i for i in export_json(d)["processes"][0]["imports"] if i["name"] == "concurrent.futures.thread"][0]
    assert imp["importer"]["file"] == "concurrent/futures/__init__.py"
    assert imp["importer"]["function"] == "__getattr__"
    assert loc(imp["trigger"]) == ("story.py", 1)
    text = viewer("why", d, "concurrent.futures.thread").stdout
    assert "concurrent/futures/__init__.py" in text and "story.py:1" in text


PROGRAMS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "programs"))


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_module_replacing_itself_keeps_its_importer(py, tmp_path):
    """`sys.modules[__name__] = obj` in a module's body: the module the import created is
    still told as put there by that import, and the replacement says which import it
    happened in and from where."""
    out = tmp_path / "run"
    r = run([py, os.path.join(PROGRAMS, "self_replace.py")], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    entries = why([str(out)], "selfrep_mod")["entries"]
    assert len(entries) == 2, entries
    assert entries[0]["via"] == "import" and loc(entries[0]["set_by"]) == ("self_replace.py", 10)
    assert entries[1]["via"] == "assignment" and loc(entries[1]["set_by"])[0] == "selfrep_mod.py"
    assert entries[1]["during_import"]["module"] == "selfrep_mod"
    assert loc(entries[1]["during_import"]["importer"]) == ("self_replace.py", 10)
    text = viewer("why", str(out), "selfrep_mod").stdout
    assert "put there by the import system at self_replace.py:10" in text
    assert "during the import of selfrep_mod at self_replace.py:10" in text


@pytest.mark.skipif(not has(DEBIAN, "torch.backends.cudnn"), reason="python3-torch not installed")
def test_torch_cudnn_replacing_itself_keeps_its_importer(tmp_path):
    """torch.backends.cudnn puts a CudnnModule in its own place while torch initialises
    (torch's own import of it created the module, not the user's outer import)."""
    d = trace_script(tmp_path, "torch", DEBIAN, "import torch.backends.cudnn\n")
    entries = why([d], "torch.backends.cudnn")["entries"]
    assert len(entries) == 2, entries
    first, repl = entries
    assert first["via"] == "import" and first["set_by"] and first["set_by"]["file"].startswith("torch/")
    assert repl["via"] == "assignment" and repl["set_by"]["file"] == "torch/backends/cudnn/__init__.py"
    assert repl["during_import"]["module"] == "torch.backends.cudnn"
    assert loc(repl["during_import"]["importer"]) == loc(first["set_by"])


REMOVALS = {
    "pop": 'sys.modules.pop("json")',
    "del": 'del sys.modules["json"]',
    "popitem_last": 'sys.modules["json"] = sys.modules.pop("json"); sys.modules.popitem()',
}


@pytest.mark.parametrize("how", sorted(REMOVALS))
@pytest.mark.parametrize("py", PYS, ids=ident)
def test_removal_is_located_exactly_or_says_it_was_seen_later(py, how, tmp_path):
    code = "import json, sys\nx = 0\n%s\ny = 1\nimport csv\n" % REMOVALS[how]
    d = trace_script(tmp_path, how, py, code)
    e = why([d], "json")["entries"][0]
    assert e["removed"]
    if e["precision"] == "exact":
        assert loc(e["removed_at"]) == ("story.py", 3)
    else:
        # Only where the version cannot see the write (documented): then every output says so.
        assert e["precision"] == "at_boundary" and loc(e["removed_at"]) == ("story.py", 5)
        assert "seen at the next import" in viewer("why", d, "json").stdout
    if how in ("pop", "del"):
        assert e["precision"] == "exact", "dict methods on sys.modules are observed on every version"


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_diff_of_a_removal_says_where_it_was_seen(py, tmp_path):
    """A removal made by C code (PyDict_DelItemString through ctypes): 3.12+'s dict watcher
    locates it exactly; 3.8-3.11 find it at the next import, and the diff says so rather
    than claim that import's line as the place."""
    code = ("import ctypes, json, sys\n"
            "x = %s\n"
            "y = 1\n"
            "import csv\n")
    good = trace_script(tmp_path, "keep", py, code % "0")
    bad = trace_script(tmp_path, "cdel", py, code % 'ctypes.pythonapi.PyDict_DelItemString('
                       'ctypes.py_object(sys.modules), b"json")')
    exact = why([bad], "json")["entries"][0]["precision"] == "exact"
    rc, d = diff_json(good, bad)
    top = d["findings"][0]
    assert rc == 1 and top["kind"] == "sys_modules_replaced" and top["module"] == "json", top
    if exact:
        assert "removed in the bad run at story.py:2 " in top["summary"], top["summary"]
        assert "seen at the next import" not in top["summary"] + top["bad"], top
    else:
        assert "removed in the bad run, seen at the next import, at story.py:4 " in top["summary"], top["summary"]
        assert "removed, seen at the next import, at story.py:4 " in top["bad"], top["bad"]


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_update_replacement_is_located(py, tmp_path):
    code = "import json, sys, types\nm = types.ModuleType('json')\nsys.modules.update({'json': m})\nimport csv\n"
    d = trace_script(tmp_path, "update", py, code)
    entries = why([d], "json")["entries"]
    assert len(entries) == 2 and entries[1]["via"] == "assignment"
    assert loc(entries[1]["set_by"]) == ("story.py", 3) and entries[1]["precision"] == "exact"


# ---- no false root causes --------------------------------------------------------------

@pytest.mark.parametrize("py", PYS, ids=ident)
def test_stdlib_objects_are_not_proxies_and_none_blocks_an_import(py, tmp_path):
    good = trace_script(tmp_path, "good", py, "import sys\n")
    bad = trace_script(tmp_path, "bad", py, "import typing, sys\nsys.modules['blocked_mod'] = None\n")
    rc, d = diff_json(good, bad)
    assert not [f for f in d["findings"] if f["severity"] == "error"], d["findings"][:3]
    blocked = [f for f in d["findings"] if f["module"] == "blocked_mod"]
    assert blocked and blocked[0]["kind"] == "import_blocked"
    assert not any(f["kind"].startswith("proxy") and f["module"].startswith("typing") for f in d["findings"])
    show = viewer("show", bad).stdout
    assert "[proxy]" not in show and "typing.io" not in show.split("anomalies:")[-1]
    e = why([bad], "blocked_mod")["entries"][0]
    assert e["type"] == "NoneType" and not e["is_proxy"] and e["blocked"]


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_reload_is_its_own_finding(py, tmp_path):
    good = trace_script(tmp_path, "good", py, "import json, importlib\n")
    bad = trace_script(tmp_path, "bad", py, "import json, importlib\nimportlib.reload(json)\n")
    rc, d = diff_json(good, bad)
    assert rc == 1 and d["findings"][0]["kind"] == "module_reloaded" and d["findings"][0]["module"] == "json"
    assert not any(f["kind"] == "sys_modules_replaced" for f in d["findings"])
    entries = why([bad], "json")["entries"]
    assert len(entries) == 1 and [loc(r) for r in entries[0]["reloads"]] == [("story.py", 2)]


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_class_change_is_one_entry(py, tmp_path):
    code = """\
        import importlib.util, sys
        spec = importlib.util.find_spec('json')
        loader = importlib.util.LazyLoader(spec.loader)
        spec.loader = loader
        module = importlib.util.module_from_spec(spec)
        sys.modules['json'] = module
        loader.exec_module(module)
        module.dumps
        """
    d = trace_script(tmp_path, "lazy", py, code)
    entries = why([d], "json")["entries"]
    assert len(entries) == 1, entries
    changes = entries[0]["class_changes"]
    assert changes and loc(changes[0]["where"])[0] == "story.py"


@pytest.mark.skipif(not has(DEBIAN, "lazy_loader"), reason="python3-lazy-loader not installed")
def test_lazy_loader_load_is_one_entry_with_the_access_that_loaded_it(tmp_path):
    d = trace_script(tmp_path, "ll", DEBIAN, "import lazy_loader\njson = lazy_loader.load('json')\njson.dumps\n")
    entries = why([d], "json")["entries"]
    assert len(entries) == 1 and not entries[0]["reloads"], entries
    changes = entries[0]["class_changes"]
    assert [c["type"] for c in changes] == ["importlib.util._LazyModule", "module"], changes
    assert loc(changes[-1]["where"]) == ("story.py", 3)
    assert "(this access loaded it)" in viewer("why", d, "json").stdout


@pytest.mark.skipif(not has(DEBIAN, "yaml"), reason="python3-yaml not installed")
def test_same_file_is_never_a_changed_origin(tmp_path):
    """A package directory on sys.path executes files twice (a real misconfiguration): the
    duplicate is found; the same file seen through two sys.path entries is not a new origin."""
    good = trace_script(tmp_path, "good", DEBIAN, "import yaml\n")
    bad = trace_script(tmp_path, "bad", DEBIAN, "import yaml, error\n",
                       env={"PYTHONPATH": "/usr/lib/python3/dist-packages/yaml"})
    rc, d = diff_json(good, bad)
    kinds = [f["kind"] for f in d["findings"]]
    assert "duplicate_module" in kinds
    assert "origin_changed" not in kinds, [f["summary"] for f in d["findings"] if f["kind"] == "origin_changed"][:3]


# ---- processes that ended abnormally ---------------------------------------------------

@pytest.mark.parametrize("py", PYS, ids=ident)
def test_killed_process_is_its_own_finding_and_compared_up_to_its_end(py, tmp_path):
    code = "import json, csv, decimal, email.message, http.client, logging, argparse, os, signal\n%s"
    good = trace_script(tmp_path, "good", py, code % "import xml.dom.minidom, tarfile, zipfile\n")
    bad = trace_script(tmp_path, "bad", py, code % "os.kill(os.getpid(), signal.SIGKILL)\n", expect_rc=-9)
    rc, d = diff_json(good, bad)
    assert rc == 1 and d["findings"][0]["kind"] == "process_ended_abnormally", d["findings"][:2]
    assert "SIGKILL" in d["findings"][0]["summary"] or "no end record" in d["findings"][0]["summary"]
    assert not [f for f in d["findings"] if f["kind"] == "module_missing" and f["severity"] != "info"]
    p = export_json(bad)["processes"][0]
    assert p["end"]["how"] == "none"
    p = export_json(good)["processes"][0]
    assert p["end"] == {"how": "exit", "status": 0, "signal": None}


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_how_a_process_ended_is_recorded(py, tmp_path):
    cases = {
        "exit3": ("import sys\nsys.exit(3)\n", 3, {"how": "exit", "status": 3, "signal": None}),
        "os_exit": ("import os\nos._exit(4)\n", 4, {"how": "os_exit", "status": 4, "signal": None}),
        "segv": ("import ctypes\nctypes.string_at(0)\n", -11, {"how": "signal", "status": None, "signal": 11}),
        "abort": ("import os\nos.abort()\n", -6, {"how": "signal", "status": None, "signal": 6}),
        "sigterm": ("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", -15,
                    {"how": "signal", "status": None, "signal": 15}),
    }
    for name, (code, rc, end) in cases.items():
        d = trace_script(tmp_path, name, py, code, expect_rc=rc)
        assert export_json(d)["processes"][0]["end"] == end, name
        assert ("ended" in viewer("show", d).stdout), name


def inside_a_record(data, near):
    """A cut inside the top-level record that spans byte `near` (a cut on a record boundary
    leaves a whole, valid trace). The file is a run of (tag, varint length, payload)."""
    i = 0
    while i < len(data):
        start = i
        i += 1  # the tag: field 1 (record) or 15 (unwritten), both one byte
        length = shift = 0
        while True:
            b = data[i]
            i += 1
            length |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        i += length
        if i > near and i - start > 4:
            return start + (i - start) // 2
    raise AssertionError("no record spans byte %d" % near)


def test_truncated_trace_says_so_and_invents_nothing(tmp_path):
    good = trace_script(tmp_path, "good", DEBIAN, "import json, csv, decimal, email.message\n")
    f = traces(good)[0]
    data = open(f, "rb").read()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / os.path.basename(f)).write_bytes(data[: inside_a_record(data, len(data) * 2 // 3)])
    p = export_json(str(cut))["processes"][0]
    assert p["truncated"] is True
    rc, d = diff_json(good, str(cut))
    assert not any(f["kind"] == "binding_mismatch" for f in d["findings"])


# ---- different process layouts ---------------------------------------------------------

def seed_scenario(tmp_path, name, build, xdist):
    from e2e_util import LIB, SCENARIO
    work = tmp_path / name
    args = [DEBIAN, SCENARIO, "--build", build, "--workdir", str(work), "--python", DEBIAN,
            "--runner", "pytest", "--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/traces/" % work]
    if xdist:
        args += ["--xdist", "2"]
    subprocess.run(args, capture_output=True, text=True, timeout=300)
    return str(work / "traces")


@pytest.mark.skipif(not has(DEBIAN, "xdist"), reason="python3-pytest-xdist not installed")
@pytest.mark.parametrize("good_xdist,bad_xdist", [(False, True), (True, False)], ids=["serial-vs-n2", "n2-vs-serial"])
def test_serial_against_xdist_still_finds_the_replacement_first(good_xdist, bad_xdist, tmp_path):
    good = seed_scenario(tmp_path, "good", "good", good_xdist)
    bad = seed_scenario(tmp_path, "bad", "bad", bad_xdist)
    assert len(traces(bad if bad_xdist else good)) >= 3
    rc, d = diff_json(good, bad)
    assert rc == 1
    top = d["findings"][0]
    assert (top["kind"], top["module"]) == ("sys_modules_replaced", "npugraph_ex"), [
        (f["kind"], f["module"], f["summary"][:100]) for f in d["findings"][:5]]
    # The workers of one run are a layout, not a cause.
    assert not [f for f in loud(d["findings"]) if f["kind"] in ("process_added", "process_missing")]


# ---- directories -----------------------------------------------------------------------

def test_bad_files_in_a_run_directory_are_skipped_with_a_warning(tmp_path):
    run_dir = trace_script(tmp_path, "run", DEBIAN, "import json\n")
    f = traces(run_dir)[0]
    (tmp_path / "run" / "notes.pb").write_bytes(b"this is not a trace at all")
    (tmp_path / "run" / "header-cut.pb").write_bytes(open(f, "rb").read()[:5])
    os.symlink(f, str(tmp_path / "run" / "link.pb"))
    for cmd in (["show", run_dir], ["export", run_dir, "--format", "json"]):
        r = viewer(*cmd)
        assert r.returncode == 0, r.stderr
        assert "skipped" in r.stderr and "notes.pb" in r.stderr and "header-cut.pb" in r.stderr
    assert len(export_json(run_dir)["processes"]) == 1
    rc, d = diff_json(run_dir, run_dir)
    assert rc == 0 and d.get("warnings") and any("notes.pb" in w for w in d["warnings"])


# ---- good against good stays clean -----------------------------------------------------

@pytest.mark.skipif(not (has(DEBIAN, "torch") and has(DEBIAN, "scipy")), reason="python3-torch/scipy not installed")
def test_torch_and_scipy_twice_is_clean(tmp_path):
    a = trace_script(tmp_path, "a", DEBIAN, "import torch, scipy.stats, sympy\n", env={"PYTHONHASHSEED": "1"})
    b = trace_script(tmp_path, "b", DEBIAN, "import torch, scipy.stats, sympy\n", env={"PYTHONHASHSEED": "7"})
    rc, d = diff_json(a, b)
    assert rc == 0, loud(d["findings"])[:3]
    for name in ("scipy.stats", "sympy", "torch"):
        assert why([a], name)["entries"][0]["set_by"]["file"] == "story.py"


def test_pytest_collection_of_thousands_twice_is_clean(tmp_path):
    suite = tmp_path / "suite"
    write_json_round_trip_suite(suite, 40, "import json, concurrent.futures, typing\n"
                                "from concurrent.futures import ThreadPoolExecutor\n", 60)
    (suite / "conftest.py").write_text("import json, decimal\n")
    runs = []
    for name, seed in (("r1", 3), ("r2", 11)):
        cwd = tmp_path / ("cwd-" + name)
        cwd.mkdir()
        out = tmp_path / name
        r = run([DEBIAN, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", str(suite)],
                traced=True, outdir=str(out), env={"PYTHONHASHSEED": str(seed)}, cwd=str(cwd))
        assert r.returncode == 0 and "2400 tests collected" in r.stdout, r.stdout[-2000:]
        runs.append(str(out))
    rc, d = diff_json(*runs)
    assert rc == 0, loud(d["findings"])[:3]
    show = viewer("show", runs[0]).stdout.split("anomalies:")
    assert len(show) == 1 or "__path__" not in show[1]


# ---- the seed scenario: its cause first, nothing loud it did not cause -----------------

def _scenario(py, build, workdir, runner):
    from e2e_util import LIB, SCENARIO
    import sys
    args = [sys.executable, SCENARIO, "--build", build, "--workdir", str(workdir), "--python", py,
            "--runner", runner, "--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/traces/" % workdir]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert (r.returncode == 0) == (build == "good"), r.stdout[-2000:] + r.stderr[-2000:]
    return str(workdir / "traces")


@pytest.mark.parametrize("runner", ["pytest", "unittest"])
@pytest.mark.parametrize("py", PYS, ids=ident)
def test_seed_scenario_cause_first_and_nothing_else_loud(py, runner, tmp_path):
    """Failure reporting (pytest's and unittest's) imports modules and reads __file__ from
    every proxy in sys.modules: none of that is a cause. What is loud is the scenario's own
    story: npugraph_ex replaced by torch_npu's proxy, and what follows from it."""
    if runner == "pytest" and not has(py, "pytest"):
        pytest.skip("no pytest for " + py)
    good = _scenario(py, "good", tmp_path / "good", runner)
    bad = _scenario(py, "bad", tmp_path / "bad", runner)
    rc, d = diff_json(good, bad)
    assert rc == 1
    top = d["findings"][0]
    assert top["kind"] == "sys_modules_replaced" and top["module"] == "npugraph_ex", top["summary"]
    others = [f for f in loud(d["findings"][1:])
              if not (f["module"].startswith("npugraph_ex") or f["module"].startswith("torch_npu"))]
    assert not others, [(f["kind"], f["module"], f["summary"]) for f in others][:5]
    # inspect.getmodule's __file__ probes of py.* while the failure was reported: one info
    # entry below the causes, never an entry per proxy.
    assert not [f for f in d["findings"] if f["kind"] == "proxy_forward_failed" and f["module"].startswith("py.")]
    reporting = [f for f in d["findings"] if f["kind"] == "failure_reporting"]
    assert len(reporting) <= 1 and all(f["severity"] == "info" for f in reporting)
    if reporting:
        assert d["findings"].index(reporting[0]) > max(i for i, f in enumerate(d["findings"]) if f in loud(d["findings"]))


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_imports_made_while_reporting_a_failure_are_folded(py, tmp_path):
    """The bad run's test errors on a line with a non-ASCII name: unittest prints the
    traceback, and 3.11.4+'s traceback imports unicodedata to place its carets. That import
    is a consequence of the failure: one failure_reporting entry says so, no module_added."""
    code = """\
        import sys, unittest
        FAIL = len(sys.argv) > 1

        class T(unittest.TestCase):
            def test_it(self):
                d = {"\u00e4": [1]}
                x = 1 + d["\u00e4"][2 if FAIL else 0] * 3
                self.assertEqual(x, 4)

        unittest.main(argv=sys.argv[:1])
        """
    good = trace_script(tmp_path, "passes", py, code)
    bad = trace_script(tmp_path, "errors", py, code, args=["fail"], expect_rc=1)
    by_traceback = [i for i in export_json(bad)["processes"][0]["imports"]
                    if i["name"] == "unicodedata" and (i["importer"] or {}).get("file") == "traceback.py"]
    rc, d = diff_json(good, bad)
    assert rc == 0, loud(d["findings"])
    assert not [f for f in d["findings"] if f["kind"] in ("module_added", "module_missing")], d["findings"]
    reporting = [f for f in d["findings"] if f["kind"] == "failure_reporting"]
    if by_traceback:
        assert len(reporting) == 1 and reporting[0]["severity"] == "info", reporting
        assert "unicodedata" in reporting[0]["summary"] and "bad run's failure reporting" in reporting[0]["summary"]
    else:  # 3.8-3.11.3 draw no carets from unicodedata
        assert not reporting, reporting


# ---- show: normal Python is not an anomaly ---------------------------------------------

@pytest.mark.parametrize("py", PYS, ids=ident)
def test_reentry_during_initialisation_is_no_anomaly_and_no_import(py, tmp_path):
    """A package's __getattr__ imports its child again while the child initialises (as
    scipy's does for scipy.stats): the inner import finds the module already loaded and its
    child is bound on the parent when the outer import finishes. Neither is an anomaly."""
    code = """\
        import os, sys
        pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkg")
        os.makedirs(pkg, exist_ok=True)
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write("import importlib\\ndef __getattr__(name):\\n    return importlib.import_module(__name__ + '.' + name)\\n")
        with open(os.path.join(pkg, "sub.py"), "w") as f:
            f.write("import pkg\\nVALUE = 1\\nassert pkg.sub.VALUE == 1\\n")
        sys.path.insert(0, os.path.dirname(pkg))
        import pkg.sub
        assert pkg.sub is sys.modules["pkg.sub"]
        """
    d = trace_script(tmp_path, "reentry", py, code)
    show = viewer("show", d).stdout
    anomalies = show.split("anomalies:")[-1] if "anomalies:" in show else ""
    assert "pkg.sub not bound" not in anomalies, show
    # Counted as export, run and diff count them, the repeat said in the same label.
    imports = export_json(d)["processes"][0]["imports"]
    counted = re.search(r"imports: (\d+) \(\d+ failed; 1 found the module already loaded\)", show)
    assert counted and int(counted.group(1)) == len(imports), show
    _, diffed = diff_json(d, d)
    assert diffed["bad"]["imports"] == len(imports), diffed["bad"]
    imported = [im for im in imports if im["name"] == "pkg.sub"]
    assert len(imported) == 2, imported


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_dunder_probes_through_a_module_getattr_are_no_anomaly(py, tmp_path):
    """`from mod import name` asks a module with a PEP 562 __getattr__ for __path__ (and
    hasattr() probes ask for dunders): AttributeError is the expected answer, not an
    anomaly; so is any AttributeError the program caught (hasattr, getattr with a default,
    try/except), which is how Python asks whether an attribute exists. A name the program
    needed that __getattr__ could not give, the error nothing caught, still is one."""
    code = """\
        import os, sys
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "lazymod.py"), "w") as f:
            f.write("def __getattr__(name):\\n    if name == 'heavy':\\n        return 42\\n"
                    "    raise AttributeError(name)\\n")
        sys.path.insert(0, here)
        from lazymod import heavy
        import lazymod
        hasattr(lazymod, "__wrapped__")
        hasattr(lazymod, "feature_probe")
        getattr(lazymod, "with_default", None)
        try:
            lazymod.optional_feature
        except AttributeError:
            pass
        lazymod.missing_feature
        """
    d = trace_script(tmp_path, "probes", py, code, expect_rc=1)
    show = viewer("show", d).stdout
    anomalies = show.split("anomalies:")[-1] if "anomalies:" in show else ""
    for caught in ("__path__", "__wrapped__", "feature_probe", "with_default", "optional_feature"):
        assert caught not in anomalies, show
    assert "caught AttributeErrors" in show, show
    assert ".missing_feature on module 'lazymod'" in anomalies, show


@pytest.mark.skipif(not has(DEBIAN, "six"), reason="python3-six not installed")
def test_six_moves_is_a_module_object(tmp_path):
    """six.moves is an instance of six._MovedItems, a types.ModuleType subclass: a module
    object (isinstance says so), though not a plain module."""
    d = trace_script(tmp_path, "six", DEBIAN, """\
        import types, sys
        from six.moves import configparser
        assert isinstance(sys.modules["six.moves"], types.ModuleType)
        """)
    story = why([d], "six.moves")
    assert [e["type"] for e in story["entries"]] == ["six._MovedItems"], story["entries"]
    assert story["entries"][0]["is_module"] is True, story["entries"]
    moved = [im for im in export_json(d)["processes"][0]["imports"] if im["name"] == "six.moves"]
    assert moved and moved[0]["object"]["is_module"] is True, moved
