"""`imptrace diff --good RUN... --bad RUN...` on real runs of the seed scenario's
order-dependent variant (tests/order): with the bad build the stream tests fail only when
the test that imports torch_npu runs before them. Runs of both builds in both orders,
with pytest's junit XML in each run's directory; and runs that differ only in noise."""
import json
import os
import subprocess
import sys

import pytest

from e2e_util import LIB, SCENARIO, viewer

PY = "/usr/bin/python3"
TRIGGER = "tests/order/backend_test.py::test_npu_backend_registered"
ORDERS = {
    "trigger_first": ["tests/order/backend_test.py", "tests/order/stream_test.py"],
    "trigger_last": ["tests/order/stream_test.py", "tests/order/backend_test.py"],
}


def scenario(workdir, build, tests=None, seed="0", junit=True):
    """Runs the scenario traced; the run's directory is workdir/traces."""
    run_dir = os.path.join(str(workdir), "traces")
    args = [sys.executable, SCENARIO, "--build", build, "--workdir", str(workdir), "--python", PY,
            "--runner", "pytest", "--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/" % run_dir,
            "--env", "PYTHONHASHSEED=" + seed]
    for t in tests or []:
        args += ["--tests", t]
    args += ["--", "-q"] + (["--junitxml=%s/junit.xml" % run_dir] if junit else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    return r.returncode, run_dir


@pytest.fixture(scope="module")
def order_runs(tmp_path_factory):
    """{'bad': [...], 'good': [...]} run directories, sorted by outcome."""
    base = tmp_path_factory.mktemp("order")
    plan = [("b1", "bad", "trigger_first", "1"), ("b2", "bad", "trigger_first", "2"),
            ("b3", "bad", "trigger_last", "3"), ("g1", "good", "trigger_first", "4"),
            ("g2", "good", "trigger_last", "5")]
    runs = {"bad": [], "good": []}
    for name, build, order, seed in plan:
        status, run_dir = scenario(base / name, build, ORDERS[order], seed)
        # The bad build fails only when the trigger runs first.
        assert (status != 0) == (build == "bad" and order == "trigger_first"), (name, status)
        runs["bad" if status else "good"].append(run_dir)
    return runs


def many(runs, *extra):
    return viewer("diff", "--good", *runs["good"], "--bad", *runs["bad"], *extra)


def test_order_dependent_failure_first_with_full_support_and_its_trigger(order_runs):
    r = many(order_runs, "--format", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert [x["outcome_source"] for x in d["bad"]["runs"] + d["good"]["runs"]] == ["junit"] * 5
    assert all(x["failed"] for x in d["bad"]["runs"]) and not any(x["failed"] for x in d["good"]["runs"])
    top = d["findings"][0]
    assert top["kind"] == "sys_modules_replaced" and top["module"] == "npugraph_ex", top
    # The replacement itself is also in the bad build's passing run (trigger last) ...
    assert top["support"] == {"bad": [2, 2], "good": [1, 3]}, top["support"]
    # ... but its story separates fully: the failing lookups through the proxy.
    assert top["story_support"] == {"bad": [2, 2], "good": [0, 3]}
    failed = [x for x in top["related"] if x["kind"] == "proxy_forward_failed"]
    assert failed and failed[0]["support"] == {"bad": [2, 2], "good": [0, 3]}
    # It names the test that triggered it, in every failing run, before the first failure;
    # in the passing run where it happened, after the tests that fail elsewhere.
    assert top["test"] == TRIGGER
    ev = top["evidence"]
    assert [e["test"] for e in ev["bad"]] == [TRIGGER, TRIGGER]
    assert {e["relative"] for e in ev["bad"]} == {"before_first_failure"}
    happened = [e for e in ev["good"] if e["happened"]]
    assert len(happened) == 1 and happened[0]["test"] == TRIGGER
    assert happened[0]["relative"] == "after_failing_tests"
    assert "in 2/2 failing runs sys.modules['npugraph_ex'] was replaced during `%s`, before the first failing test" % TRIGGER \
        in ev["text"][0]
    assert ev["text"][1].startswith("in 1/3 passing runs it happened too")
    # First failing test from junit.
    assert all(x["first_failing_test"].startswith("tests/order/stream_test.py::StreamTest::")
               for x in d["bad"]["runs"])

    text = many(order_runs).stdout
    assert "support: bad 2/2, good 1/3 (also in 1 passing run)" in text
    assert "story support: bad 2/2, good 0/3" in text and TRIGGER in text and "junit: 2 failed, 1 passed" in text
    md = many(order_runs, "--format", "markdown")
    assert md.returncode == 1 and "| support |" in md.stdout and "bad 2/2, good 1/3" in md.stdout


def test_outcomes_from_exit_status_when_there_is_no_junit(order_runs, tmp_path):
    status, bad = scenario(tmp_path / "b", "bad", ORDERS["trigger_first"], junit=False)
    assert status == 1
    r = viewer("diff", "--good", *order_runs["good"], "--bad", bad, "--format", "json")
    d = json.loads(r.stdout)
    run = d["bad"]["runs"][0]
    assert run["outcome_source"] == "exit_status" and run["failed"] and run["first_failing_test"] is None
    top = d["findings"][0]
    assert top["module"] == "npugraph_ex"
    assert "which test failed first is not known" in top["evidence"]["text"][0]


def test_report_page_for_many_runs(order_runs, tmp_path):
    out = tmp_path / "many.html"
    r = viewer("report", "--good", *order_runs["good"], "--bad", *order_runs["bad"], "-o", str(out))
    assert r.returncode == 1, r.stderr
    page = out.read_text()
    assert "support: bad 2/2, good 1/3" in page and "first failing test" in page
    assert "Why: sys.modules[&#39;npugraph_ex&#39;]" in page or "Why: sys.modules['npugraph_ex']" in page


def test_noise_only_gives_no_warning(tmp_path):
    # One build, other hash seeds, working directories and times on each side.
    good = [scenario(tmp_path / ("g%d" % i), "good", seed=str(i))[1] for i in (1, 2)]
    bad = [scenario(tmp_path / "elsewhere" / "deeper" / ("b%d" % i), "good", seed=str(i))[1] for i in (3, 4)]
    r = viewer("diff", "--good", *good, "--bad", *bad, "--format", "json")
    d = json.loads(r.stdout)
    assert r.returncode == 0, [f for f in d["findings"] if f["severity"] != "info"]
    # The side given contradicts the outcome: said, not hidden.
    assert "given as a failing run, but it passed" in r.stderr


def test_usage_errors():
    for args in (["diff", "--good", "x"], ["diff", "--bad", "x"], ["diff", "a", "--good", "x", "--bad", "y"]):
        r = viewer(*args, check=False)
        assert r.returncode == 2 and "usage:" in r.stderr, (args, r.stderr)


def test_a_bundle_of_several_runs_is_each_of_them(order_runs, tmp_path):
    bundle = str(tmp_path / "failing.tar.gz")
    assert viewer("pack", *order_runs["bad"], "-o", bundle).returncode == 0
    d = json.loads(viewer("diff", "--good", *order_runs["good"], "--bad", bundle, "--format", "json").stdout)
    assert len(d["bad"]["runs"]) == 2 and all("#" in x["path"] for x in d["bad"]["runs"])
    # The junit XML travels in the bundle with its run.
    assert {x["outcome_source"] for x in d["bad"]["runs"]} == {"junit"}
    top = d["findings"][0]
    assert top["module"] == "npugraph_ex" and top["story_support"] == {"bad": [2, 2], "good": [0, 3]}


def essentials(d):
    """What a many-run diff concludes, without the paths it read."""
    top = d["findings"][0]
    runs = {side: sorted([[x["outcome_source"], x["failed"], x["outcome"], x["first_failing_test"]]
                          for x in d[side]["runs"]], key=json.dumps) for side in ("bad", "good")}
    evidence = {side: sorted([[e.get("test"), e.get("relative"), e.get("happened")] for e in top["evidence"][side]],
                             key=json.dumps) for side in ("bad", "good")}
    return (top["kind"], top["module"], top["test"], top["support"], top["story_support"], evidence,
            top["evidence"]["text"], runs)


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
def test_bundled_runs_keep_their_junit_outcomes(order_runs, tmp_path, redact):
    """Runs packed into bundles (the passing ones one bundle each, the failing ones together)
    give the same first finding, support, evidence and outcomes as their directories."""
    flags = ["--redact"] if redact else []
    good = []
    for i, run in enumerate(order_runs["good"]):
        path = str(tmp_path / ("good%d.tar.gz" % i))
        packed = viewer("pack", run, *flags, "-o", path)
        assert packed.returncode == 0 and "test outcomes from junit.xml" in packed.stdout, packed.stderr
        good.append(path + "#" + json.loads(member(path, "manifest.json"))["runs"][0]["name"])
    bad = str(tmp_path / "bad.tar.gz")
    assert viewer("pack", *order_runs["bad"], *flags, "-o", bad).returncode == 0
    manifest = json.loads(member(bad, "manifest.json"))
    assert [len(r["junit"]) for r in manifest["runs"]] == [1, 1] and manifest["redacted"] == redact

    direct = json.loads(many(order_runs, "--format", "json").stdout)
    r = viewer("diff", "--good", *good, "--bad", bad, "--format", "json")
    assert r.returncode == 1, r.stderr
    from_bundles = json.loads(r.stdout)
    assert [x["outcome_source"] for x in from_bundles["bad"]["runs"] + from_bundles["good"]["runs"]] == ["junit"] * 5
    assert essentials(from_bundles) == essentials(direct)

    # The packed XML is still well-formed, and redacted it says nothing of where it ran.
    import xml.etree.ElementTree as ET
    for run in manifest["runs"]:
        text = member(bad, run["junit"][0])
        root = ET.fromstring(text)
        assert root.iter("testcase") and any(c.find("failure") is not None for c in root.iter("testcase"))
        if redact:
            # The failure messages name the module's file under the run's site-packages.
            assert os.path.dirname(order_runs["bad"][manifest["runs"].index(run)]) not in text
            assert "&lt;site-packages&gt;/torch_npu/dynamo/npugraph_ex/__init__.py" in text
            failures = [c.find("failure") for c in root.iter("testcase") if c.find("failure") is not None]
            assert any("<site-packages>/torch_npu/" in (f.text or "") for f in failures)
        else:
            assert text == open(os.path.join(order_runs["bad"][manifest["runs"].index(run)], "junit.xml")).read()


def member(bundle, name):
    import tarfile
    with tarfile.open(bundle) as t:
        return t.extractfile(name).read().decode()
