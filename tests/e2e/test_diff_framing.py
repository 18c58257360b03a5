"""What frames a diff before its causes, on real interpreters, in the two-run and the many-run
diff: a bad process that exited with an error status where the good one did not (an
uncaught exception after its imports), and runs made by different Python versions. Neither may be told as modules the user's code
lost: what the bad process never reached is one info entry, and what each version's
standard library imports for itself belongs to the version's story."""
import glob
import json
import textwrap

import pytest

from e2e_util import run, viewer

PROGRAM = """\
    import os
    import json
    import argparse
    if os.environ.get("FAIL"):
        raise RuntimeError("boom after the imports")
    import email.mime.text
    import decimal
    import statistics
    """


def pyenv(version):
    found = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python" % version))
    if not found:
        pytest.skip("needs pyenv's Python %s" % version)
    return found[0]


def traced_script(tmp_path, name, py, code, env=None):
    work = tmp_path / ("w-" + name)
    work.mkdir()
    (work / "story.py").write_text(textwrap.dedent(code))
    out = tmp_path / name
    r = run([py, "story.py"], traced=True, outdir=str(out), env=env, cwd=str(work))
    return str(out), r


def every_finding(findings):
    return [x for f in findings for x in [f] + f.get("related", [])]


def diff_of(tmp_path, code, good_py, bad_py, bad_env=None, runs=1):
    """`imptrace diff` of `code` run by good_py against bad_py (with bad_env): GOOD BAD for
    one run a side, --good RUN... --bad RUN... for more. Returns (exit status, findings)."""
    good, bad = [], []
    for i in range(runs):
        out, r = traced_script(tmp_path, "good%d" % i, good_py, code)
        assert r.returncode == 0, r.stderr
        good.append(out)
        bad.append(traced_script(tmp_path, "bad%d" % i, bad_py, code, env=bad_env)[0])
    args = good + bad if runs == 1 else ["--good"] + good + ["--bad"] + bad
    d = viewer("diff", *args, "--format", "json")
    return d.returncode, json.loads(d.stdout)["findings"]


@pytest.mark.parametrize("version,runs", [("3.12", 1), ("3.13", 1), ("3.12", 2)],
                         ids=["3.12", "3.13", "3.12-many-runs"])
def test_uncaught_error_after_the_imports_is_an_exit_status_not_missing_modules(version, runs, tmp_path):
    # 3.12 prints the traceback without importing anything; 3.13 imports traceback for it.
    py = pyenv(version)
    status, findings = diff_of(tmp_path, PROGRAM, py, py, {"FAIL": "1"}, runs)
    loud = [f for f in every_finding(findings) if f["severity"] != "info"]
    assert status == 0 and not loud, loud
    assert findings[0]["kind"] == "exit_status_changed", findings
    if runs > 1:
        assert findings[0]["support"] == {"bad": [runs, runs], "good": [0, runs]}, findings[0]
    summary = findings[0]["summary"]
    assert "0 -> 1" in summary and "its last import was argparse at story.py:3" in summary, summary
    if version == "3.13":
        assert "the interpreter imported traceback to print it" in summary, summary
    else:
        assert "an uncaught exception outside imports" in summary, summary
    unreached = [f for f in every_finding(findings) if f["kind"] == "module_missing"]
    assert len(unreached) == 1 and unreached[0]["summary"].startswith("not reached"), unreached
    assert "email.mime.text" in unreached[0]["good"], unreached


def test_failing_test_run_with_the_same_imports_is_no_warning(tmp_path):
    # pytest exits 1 when a test failed; its imports are the passing run's.
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_a.py").write_text(textwrap.dedent("""\
        import os, json
        def test_a():
            import decimal
            assert not os.environ.get("FAIL")
        def test_b():
            import fractions
        """))
    cmd = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)]
    r = run(cmd, traced=True, outdir=str(tmp_path / "good"), cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout
    r = run(cmd, traced=True, outdir=str(tmp_path / "bad"), cwd=str(tmp_path), env={"FAIL": "1"})
    assert r.returncode == 1, r.stdout
    d = viewer("diff", str(tmp_path / "good"), str(tmp_path / "bad"), "--format", "json")
    findings = every_finding(json.loads(d.stdout)["findings"])
    assert d.returncode == 0, findings
    assert not [f for f in findings if f["kind"] in ("module_missing", "module_added")], findings
    ends = [f for f in findings if f["kind"] == "exit_status_changed"]
    assert len(ends) == 1 and "pytest: tests failed" in ends[0]["summary"], ends


@pytest.mark.parametrize("runs", [1, 2], ids=["two-runs", "many-runs"])
def test_python_upgrade_frames_the_diff_and_the_stdlib_is_not_your_code(runs, tmp_path):
    # The same program on 3.12 (good) and 3.13 (bad): each standard library imports its own
    # helpers (3.12's email.utils imports socket and random, 3.13's does not) from its own
    # files. The user's own line that only 3.13 runs is still the user's story.
    code = """\
        import sys, json, email.mime.text, decimal
        if sys.version_info >= (3, 13):
            import fractions
        """
    _, findings = diff_of(tmp_path, code, pyenv("3.12"), pyenv("3.13"), runs=runs)
    top = findings[0]
    assert top["kind"] == "python_version_changed" and top["severity"] == "warning", findings
    assert top["good"].startswith("Python 3.12") and top["bad"].startswith("Python 3.13"), top
    if runs > 1:
        assert top["support"] == {"bad": [runs, runs], "good": [0, runs]}, top
    parts = {f["kind"] for f in top["related"]}
    assert {"module_missing", "origin_changed"} <= parts, top["related"]
    assert all(f["severity"] == "info" for f in top["related"]), top["related"]
    blamed = [f for f in findings[1:] if f["severity"] != "info"]
    assert [(f["kind"], f["module"]) for f in blamed] == [("module_added", "fractions")], blamed
    assert "story.py:3" in blamed[0]["summary"], blamed
