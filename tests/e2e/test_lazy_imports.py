"""PEP 810 lazy imports on CPython 3.15 (Debian sid's, through scripts/sid.sh's chroot):
each lazy binding's story as a user reads it. Where it was declared (file:line, the name
bound), where its first use resolved it (file:line, the test running then, what it became)
or failed (both places, the test that paid), and the ones never used; `why` tells it and
`show` lists the failed and never-used ones; a diff of an eager run against a lazy one
(PYTHON_LAZY_IMPORTS=all) names the failure that only the lazy run has, at both places.
Programs that run the stdlib and Debian's pytest under lazy mode give the same output
traced and untraced."""
import json
import re
import textwrap

import pytest

from e2e_util import run, sid_python, sid_unavailable, traces, viewer, why

PY = sid_python("3.15")
pytestmark = pytest.mark.skipif(bool(sid_unavailable()), reason=str(sid_unavailable()))


def write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def loc(l):
    return (l or {}).get("file"), (l or {}).get("line")


APP = {
    "app/__init__.py": "",
    "app/plugins.py": """\
        lazy import json
        lazy import missing_backend
        lazy from collections import OrderedDict as OD
        lazy import csv
        def dump(x):
            return json.dumps(x)
        def backend():
            return missing_backend.run()
        def ordered():
            return OD(a=1)
        """,
    "test_app.py": """\
        from app import plugins
        def test_dump():
            assert plugins.dump([1]) == "[1]"
        def test_backend():
            plugins.backend()
        def test_ordered():
            assert list(plugins.ordered()) == ["a"]
        """,
}


def test_declared_resolved_failed_and_never_used_with_the_test_that_paid(tmp_path):
    work = tmp_path / "w"
    write(work, APP)
    cmd = [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"]
    plain = run(cmd, traced=False, cwd=str(work))
    out = tmp_path / "t"
    traced = run(cmd, traced=True, outdir=str(out), cwd=str(work))
    assert plain.returncode == traced.returncode == 1, traced.stdout[-2000:]
    assert "1 failed, 2 passed" in plain.stdout and "1 failed, 2 passed" in traced.stdout

    story = why([str(out)], "json")["lazy"]
    mine = [l for l in story if l["module"] == "app.plugins"]
    assert len(mine) == 1 and mine[0]["name"] == "json" and mine[0]["outcome"] == "resolved"
    assert loc(mine[0]["declared_at"]) == ("app/plugins.py", 1)
    assert loc(mine[0]["used_at"]) == ("app/plugins.py", 6) and mine[0]["used_at"]["function"] == "dump"
    assert mine[0]["test"] == "test_app.py::test_dump"

    failed = why([str(out)], "missing_backend")["lazy"]
    assert len(failed) == 1 and failed[0]["outcome"] == "failed"
    assert loc(failed[0]["declared_at"]) == ("app/plugins.py", 2)
    assert loc(failed[0]["used_at"]) == ("app/plugins.py", 8)
    assert failed[0]["test"] == "test_app.py::test_backend"
    assert failed[0]["error"].startswith("ModuleNotFoundError")
    text = viewer("why", str(out), "missing_backend").stdout
    assert "declared at app/plugins.py:2" in text and "first used at app/plugins.py:8 in backend" in text
    assert "FAILED there" in text and "test_app.py::test_backend" in text

    shown = viewer("show", "--all", str(out)).stdout
    assert "lazy imports that failed at first use:" in shown
    assert "missing_backend (app.plugins.missing_backend): ModuleNotFoundError" in shown
    never = shown.split("lazy imports declared and never used:")[1]
    assert "csv (app.plugins.csv) at app/plugins.py:4" in never
    assert "json (app.plugins.json)" not in never


STORY = """\
    import sys
    sys.path.insert(0, "vendor")
    import vendored_mod
    sys.path.remove("vendor")
    print(vendored_mod.f())
    """


def test_diff_eager_against_lazy_names_the_lazy_only_failure_at_both_places(tmp_path):
    """The import moves from its statement to the first use; with sys.path changed in
    between, only the lazy run fails, at the use, for a statement two lines up."""
    work = tmp_path / "w"
    write(work, {"story.py": STORY, "vendor/vendored_mod.py": "def f():\n    return 'vendored'\n"})
    eager = run([PY, "story.py"], traced=True, outdir=str(tmp_path / "eager"), cwd=str(work))
    assert eager.returncode == 0 and eager.stdout == "vendored\n"
    lazy = run([PY, "story.py"], traced=True, outdir=str(tmp_path / "lazy"), cwd=str(work),
               env={"PYTHON_LAZY_IMPORTS": "all"})
    assert lazy.returncode == 1 and "ModuleNotFoundError" in lazy.stderr
    r = viewer("diff", str(tmp_path / "eager"), str(tmp_path / "lazy"), "--format", "json")
    assert r.returncode == 1
    findings = json.loads(r.stdout)["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    assert [(f["kind"], f["module"]) for f in errors] == [("import_failed", "vendored_mod")]
    f = errors[0]
    assert [loc(w) for w in f["where"]] == [("story.py", 5), ("story.py", 3)]
    assert "lazy import declared at story.py:3" in f["summary"]
    # The eager run has no lazy story to tell about it; the lazy one does.
    assert why([str(tmp_path / "eager")], "vendored_mod")["lazy"] == []
    assert why([str(tmp_path / "lazy")], "vendored_mod")["lazy"][0]["outcome"] == "failed"


def test_diff_eager_against_x_lazy_imports_all_ranks_the_lazy_only_failure_first(tmp_path):
    """Under -X lazy_imports=all the stdlib's own lazy bindings make probes fail in new
    places (info findings of kinds ranked above import_failed): the one failure that only
    the lazy run has, an error, is still the first finding, with the use and the statement."""
    work = tmp_path / "w"
    write(work, {"story.py": STORY, "vendor/vendored_mod.py": "def f():\n    return 'vendored'\n"})
    eager = run([PY, "story.py"], traced=True, outdir=str(tmp_path / "eager"), cwd=str(work))
    assert eager.returncode == 0 and eager.stdout == "vendored\n"
    lazy = run([PY, "-X", "lazy_imports=all", "story.py"], traced=True, outdir=str(tmp_path / "lazy"), cwd=str(work))
    assert lazy.returncode == 1 and "ModuleNotFoundError" in lazy.stderr
    r = viewer("diff", str(tmp_path / "eager"), str(tmp_path / "lazy"), "--format", "json")
    findings = json.loads(r.stdout)["findings"]
    first = findings[0]
    assert (first["kind"], first["severity"], first["module"]) == ("import_failed", "error", "vendored_mod")
    assert [loc(w) for w in first["where"]] == [("story.py", 5), ("story.py", 3)]
    assert "lazy import declared at story.py:3" in first["summary"]
    # What it outranks is still there, below every warning and error.
    severities = [f["severity"] for f in findings]
    assert "info" in severities
    assert severities.index("info") > max(i for i, s in enumerate(severities) if s != "info")


def test_lazy_from_a_name_its_module_lacks_fails_at_first_use_not_never_used(tmp_path):
    """`lazy from textwrap import nosuch`: textwrap imports fine, so the failing first use
    imports nothing; what the trace holds is the use's probe for a submodule
    textwrap.nosuch that found none, and no resolution after it. The binding failed at the
    use, it was not "never used". For a package (json) the probe itself fails. A name the
    module has, never used, stays never used."""
    write(tmp_path, {"prog.py": """\
        lazy from textwrap import nosuch
        lazy from textwrap import dedent
        lazy from json import nosuch as nosuch_json
        def use():
            return nosuch
        def use_json():
            return nosuch_json
        for f in (use, use_json):
            try:
                f()
            except ImportError as e:
                print(type(e).__name__)
        """})
    out = tmp_path / "t"
    traced = run([PY, "prog.py"], traced=True, outdir=str(out), cwd=str(tmp_path))
    assert traced.returncode == 0 and traced.stdout == "ImportError\nImportError\n", traced.stderr[-2000:]
    story = {l["name"]: l for l in why([str(out)], "textwrap")["lazy"] if l["module"] == "__main__"}
    s = story["nosuch"]
    assert s["outcome"] == "failed" and s["failed_lookup"] == "textwrap.nosuch"
    assert s["error"] == "ImportError: textwrap has no attribute or submodule nosuch"
    assert loc(s["declared_at"]) == ("prog.py", 1)
    assert loc(s["used_at"]) == ("prog.py", 5) and s["used_at"]["function"] == "use"
    assert story["dedent"]["outcome"] == "never_used"
    [j] = [l for l in why([str(out)], "json")["lazy"] if l["module"] == "__main__"]
    assert j["outcome"] == "failed" and loc(j["used_at"]) == ("prog.py", 7)
    text = viewer("why", str(out), "textwrap.nosuch").stdout
    assert "first used at prog.py:5 in use" in text
    assert "FAILED there: ImportError: textwrap has no attribute or submodule nosuch" in text
    assert "never used" not in text
    shown = viewer("show", "--all", str(out)).stdout
    failed, never = shown.split("lazy imports that failed at first use:")[1].split("lazy imports declared and never used:")
    assert "textwrap.nosuch (__main__.nosuch): ImportError: textwrap has no attribute or submodule nosuch" in failed
    assert "first used at prog.py:5 in use" in failed and "json.nosuch (__main__.nosuch_json)" in failed
    never = never.split("\n  anomalies:")[0]
    assert "nosuch" not in never and "textwrap.dedent (__main__.dedent)" in never


def test_stdlib_and_debian_packages_under_lazy_all_same_output(tmp_path):
    """sys.set_lazy_imports('all') over the stdlib, and Debian's pytest (with pluggy,
    iniconfig, packaging) under -X lazy_imports=all: the program's output is the same
    traced and untraced; what was used is resolved, what was not stays declared."""
    code = textwrap.dedent("""\
        import sys
        sys.set_lazy_imports("all")
        import json, csv, decimal, argparse, fractions, statistics, textwrap, difflib
        import email.mime.text
        from xml.dom import minidom
        print(json.dumps({"d": str(decimal.Decimal("1.5") + 1)}))
        print(statistics.mean([1, 2, 3]), fractions.Fraction(1, 3))
        print(minidom.parseString("<a><b/></a>").documentElement.firstChild.tagName)
        print(email.mime.text.MIMEText("hi")["Content-Type"])
        """)
    plain = run([PY, "-c", code], traced=False, cwd=str(tmp_path))
    out = tmp_path / "t"
    traced = run([PY, "-c", code], traced=True, outdir=str(out), cwd=str(tmp_path))
    assert plain.returncode == traced.returncode == 0, traced.stderr[-2000:]
    assert (plain.stdout, plain.stderr) == (traced.stdout, traced.stderr)
    proc = json.loads(viewer("export", str(out), "--format", "json").stdout)["processes"][0]
    names = {i["name"] for i in proc["imports"]}
    assert {"json", "decimal", "statistics", "fractions", "xml.dom.minidom", "email.mime.text"} <= names
    assert "difflib" not in names and "argparse" not in names  # declared, never used
    for m, outcome in (("json", "resolved"), ("difflib", "never_used"), ("argparse", "never_used")):
        story = [l for l in why([str(out)], m)["lazy"] if l["module"] == "__main__"]
        assert [l["outcome"] for l in story] == [outcome], (m, story)
    # `from xml.dom import minidom` made lazy: the name bound is minidom, resolved at line 8.
    story = [l for l in why([str(out)], "xml.dom.minidom")["lazy"] if l["module"] == "__main__"]
    assert [(l["name"], l["target"], l["outcome"]) for l in story] == [("minidom", "xml.dom.minidom", "resolved")]
    assert loc(story[0]["declared_at"])[1] == 5 and loc(story[0]["used_at"])[1] == 8

    # Debian's pytest 9 under -X lazy_imports=all stops before collecting (CPython raises
    # ImportCycleError for _pytest.pathlib's lazy `fnmatch`): traced, it stops the same
    # way, and the trace tells where that binding was declared and first used.
    (tmp_path / "test_some.py").write_text("import json\ndef test_n():\n    assert json.loads('1') == 1\n")
    cmd = [PY, "-X", "lazy_imports=all", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_some.py"]
    plain = run(cmd, traced=False, cwd=str(tmp_path))
    out = tmp_path / "pytest"
    traced = run(cmd, traced=True, outdir=str(out), cwd=str(tmp_path))
    assert (plain.returncode, plain.stdout, plain.stderr) == (traced.returncode, traced.stdout, traced.stderr)
    assert plain.returncode != 0 and "ImportCycleError" in plain.stderr
    shown = viewer("show", str(out)).stdout
    m = re.search(r"lazy imports \(PEP 810\): (\d+) declared, (\d+) resolved at first use", shown)
    assert m and int(m.group(1)) > 100 and int(m.group(2)) > 50, shown[-3000:]
    story = [l for l in why([str(out)], "fnmatch")["lazy"] if l["module"] == "_pytest.pathlib"]
    assert [l["outcome"] for l in story] == ["failed"] and "ImportCycleError" in story[0]["error"]
    assert loc(story[0]["declared_at"])[0] == "_pytest/pathlib.py"
    assert story[0]["used_at"]["function"] == "fnmatch_ex"
