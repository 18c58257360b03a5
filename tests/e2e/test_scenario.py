"""The npugraph_ex smoke failure, reproduced with good and bad
torch_npu-like builds, traced, and explained by `why` (and `diff`)."""
import json
import os
import subprocess
import sys

import pytest

from e2e_util import LIB, SCENARIO, VIEWER, export, ident, interpreters, protoc_decodes, run, traces, viewer, why

SEED_ERROR = "AttributeError: module 'torch_npu.dynamo.npugraph_ex' has no attribute 'npu_fx_compiler'"


def scenario(py, build, workdir, traced, runner, extra=()):
    env = os.environ.copy()
    args = [sys.executable, SCENARIO, "--build", build, "--workdir", str(workdir), "--python", py,
            "--runner", runner] + list(extra)
    if traced:
        args += ["--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/traces/" % workdir]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def runner_for(py):
    return "pytest" if py == "/usr/bin/python3" else "unittest"


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_bad_build_fails_as_reported_and_why_explains(py, tmp_path):
    runner = runner_for(py)
    plain = scenario(py, "bad", tmp_path / "plain", False, runner)
    traced = scenario(py, "bad", tmp_path / "bad", True, runner)
    assert plain.returncode != 0 and traced.returncode == plain.returncode
    out = traced.stdout + traced.stderr
    assert out.count(SEED_ERROR) >= 4 and "return getattr(self._npugraph_ex, name)" in out
    files = traces(str(tmp_path / "bad" / "traces"))
    for f in files:
        protoc_decodes(f)
    story = why(files, "npugraph_ex")
    entries = story["entries"]
    # 1. the standalone package, put there by the import system, replaced by the proxy
    first = entries[0]
    assert first["is_module"] and first["via"] == "import"
    assert first["origin"].endswith("workspace/torchair/npugraph_ex/__init__.py")
    proxy = entries[1]
    assert proxy["type"] == "torch_npu.dynamo._LazyNpuGraphEx" and proxy["is_proxy"]
    assert proxy["via"] == "assignment" and first["replaced_by"] == proxy["object"]
    assert proxy["set_by"]["file"] == "torch_npu/dynamo/__init__.py"
    # 2. the child was bound on the standalone package, not on what sits there now
    child = [c for c in story["children"] if c["name"] == "npu_fx_compiler"]
    assert child and child[0]["bound_on"] == first["object"]
    # 3. the forwarding failed with the reported error, at the setUp line, per test
    failed = [a for a in story["proxy_accesses"]
              if a["attribute"] == "npu_fx_compiler" and a["outcome"] != "ok"]
    assert len(failed) >= 4
    for a in failed:
        assert a["object"] == proxy["object"]
        assert a["outcome"] == SEED_ERROR
        assert a["forwarded_to"] == "torch_npu.dynamo.npugraph_ex"
        assert a["where"]["file"].endswith("stream_test.py") and "setUp" in a["where"]["function"]
    if runner == "pytest":
        assert all(a["test"] and "stream_test.py::StreamTest::" in a["test"] for a in failed)
    text = viewer("why", *files, "npugraph_ex").stdout
    assert "torch_npu/dynamo/__init__.py:42" in text


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_good_build_passes_traced(py, tmp_path):
    r = scenario(py, "good", tmp_path / "good", True, runner_for(py))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    story = why(traces(str(tmp_path / "good" / "traces")), "npugraph_ex")
    assert not any(e["is_proxy"] for e in story["entries"])


def test_diff_good_bad_root_cause_first(tmp_path):
    py = "/usr/bin/python3"
    for name, build in (("good", "good"), ("good2", "good"), ("bad", "bad")):
        scenario(py, build, tmp_path / name, True, "pytest")
    g, g2, b = (str(tmp_path / n / "traces") for n in ("good", "good2", "bad"))
    r = viewer("diff", g, b, "--format", "json")
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    top = d["findings"][0]
    assert top["kind"] == "sys_modules_replaced" and top["module"] == "npugraph_ex"
    assert any(w["file"] == "torch_npu/dynamo/__init__.py" for w in top["where"])
    blob = json.dumps(top)
    assert "npu_fx_compiler" in blob and "setUp" in blob
    same = viewer("diff", g, g2, "--format", "json")
    assert same.returncode == 0, [f for f in json.loads(same.stdout)["findings"] if f["severity"] != "info"]
    md = viewer("diff", g, b, "--format", "markdown")
    assert md.returncode == 1 and len(md.stdout.encode()) < 60 * 1024 and "npugraph_ex" in md.stdout


def test_diff_with_xdist(tmp_path):
    py = "/usr/bin/python3"
    for name, build in (("good", "good"), ("good2", "good"), ("bad", "bad")):
        scenario(py, build, tmp_path / name, True, "pytest", ["--xdist", "2"])
    g, g2, b = (str(tmp_path / n / "traces") for n in ("good", "good2", "bad"))
    assert len(traces(b)) >= 3
    r = viewer("diff", g, b, "--format", "json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["findings"][0]["kind"] == "sys_modules_replaced"
    same = viewer("diff", g, g2, "--format", "json")
    assert same.returncode == 0, [f for f in json.loads(same.stdout)["findings"] if f["severity"] != "info"]
