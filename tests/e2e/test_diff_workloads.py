"""On real workloads from Debian's packages: two runs of the same thing diff clean
(hash randomisation, different working directories); one extra import, or one module
swapped in sys.modules, is found."""
import json
import os
import subprocess
import textwrap

import pytest

from e2e_util import SID, run, sid_python, sid_unavailable, traces, viewer, write_json_round_trip_suite

PY = "/usr/bin/python3"


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def traced(tmp_path, name, code, seed, extra_env=None):
    cwd = tmp_path / ("cwd-" + name)
    cwd.mkdir()
    env = {"PYTHONHASHSEED": str(seed)}
    env.update(extra_env or {})
    r = run([PY, "-c", code], traced=True, outdir=str(tmp_path / name), env=env, cwd=str(cwd))
    assert r.returncode == 0, r.stderr[-2000:]
    return str(tmp_path / name)


def diff(a, b):
    r = viewer("diff", a, b, "--format", "json")
    return r.returncode, json.loads(r.stdout) if r.stdout else None


@pytest.mark.skipif(not have_torch(), reason="python3-torch not installed")
def test_import_torch_same_twice_clean_and_changes_found(tmp_path):
    base = "import torch\nx = torch.zeros(2)\n"
    a = traced(tmp_path, "a", base, 1)
    b = traced(tmp_path, "b", base, 2)
    rc, d = diff(a, b)
    assert rc == 0, [f for f in d["findings"] if f["severity"] != "info"][:3]

    extra = traced(tmp_path, "extra", base + "import xml.dom.minidom\n", 3)
    rc, d = diff(a, extra)
    assert rc == 1
    added = [f for f in d["findings"] if f["kind"] == "module_added"]
    assert added and any("xml" in f["module"] for f in added)

    # A working stand-in (a copy of json's namespace), so torch still imports.
    swapped = traced(tmp_path, "swapped", "import json, sys, types\n"
                     "m = types.ModuleType('json'); m.__dict__.update(json.__dict__)\n"
                     "sys.modules['json'] = m\n" + base, 4)
    rc, d = diff(a, swapped)
    assert rc == 1
    top = d["findings"][0]
    assert top["kind"] == "sys_modules_replaced" and top["module"] == "json", top


def test_pytest_run_same_twice_clean(tmp_path):
    suite = tmp_path / "suite"
    write_json_round_trip_suite(suite, 20, "import json, decimal, fractions, csv\n", 10)
    runs = []
    for name, seed in (("r1", 5), ("r2", 6)):
        out = tmp_path / name
        r = run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)], traced=True,
                outdir=str(out), env={"PYTHONHASHSEED": str(seed)}, cwd=str(tmp_path))
        assert r.returncode == 0, r.stdout[-2000:]
        runs.append(str(out))
    rc, d = diff(*runs)
    assert rc == 0, [f for f in d["findings"] if f["severity"] != "info"][:3]


# ---- torch 2.x: Debian sid's python3-torch for 3.14 (scripts/sid.sh's chroot) ------------
TORCH_SUITE = """
    import pytest
    import torch


    def f(x):
        return torch.sin(x) * 2 + x


    # TorchDynamo and AOTAutograd on the CPU; not Inductor's C++ code generation, which
    # needs the headers Debian ships in libtorch-dev.
    compiled = torch.compile(f, backend="aot_eager")


    @pytest.mark.parametrize("n", [4, 8])
    def test_compiled_matches_eager(n):
        x = torch.arange(float(n))
        assert torch.allclose(compiled(x), f(x))


    def test_lazy_submodules():
        assert torch.fx.symbolic_trace(f).graph is not None
        assert torch.distributions.Normal(0.0, 1.0).mean == 0.0
    """


def sid_torch():
    py = sid_python("3.14")
    if sid_unavailable():
        return None, sid_unavailable()
    r = subprocess.run([py, "-c", "import torch, torch._dynamo"], capture_output=True, text=True,
                       cwd="/tmp")
    if r.returncode != 0:
        return None, "python3-torch not installed in %s (scripts/sid.sh installs it)" % SID
    return py, None


def test_torch2_import_and_compile_suite_same_twice_clean(tmp_path):
    """`import torch` and a pytest suite that runs torch.compile on the CPU, under 3.14 with
    Debian sid's torch 2.x (TorchDynamo, AOTAutograd, lazy submodules, PEP 562 __getattr__):
    two runs with different hash seeds and working directories diff clean."""
    py, why = sid_torch()
    if not py:
        pytest.skip(why)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_compile.py").write_text(textwrap.dedent(TORCH_SUITE))
    runs = []
    for name, seed in (("r1", 7), ("r2", 8)):
        cwd = tmp_path / ("cwd-" + name)
        cwd.mkdir()
        out = tmp_path / name
        r = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)], traced=True, outdir=str(out),
                env={"PYTHONHASHSEED": str(seed)},
                cwd=str(cwd), timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert "3 passed" in r.stdout
        runs.append(str(out))
    names = {i["name"] for p in json.loads(viewer("export", runs[0], "--format", "json").stdout)["processes"]
             for i in p["imports"]}
    assert {"torch", "torch._dynamo", "torch._functorch.aot_autograd", "torch.fx", "torch.distributions"} <= names
    rc, d = diff(*runs)
    assert rc == 0, [(f["kind"], f["module"], f["summary"]) for f in d["findings"] if f["severity"] != "info"][:5]
