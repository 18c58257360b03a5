"""The seed failure's platform: the tracer cross-built for AArch64 (build-aarch64/, made by
scripts/aarch64.sh) runs inside Debian's arm64 CPython 3.11 under qemu-aarch64-static, and
its trace of the bad npugraph_ex build tells the same story as on x86_64. Skips, with the
reason, when the cross build or the arm64 sysroot could not be made on this machine."""
import os
import shutil
import subprocess
import sys

import pytest

from e2e_util import SCENARIO, SRC, protoc_decodes, traces, why

A64 = os.environ.get("IMPTRACE_A64_BUILD") or os.path.join(SRC, "build-aarch64")
LIB = os.path.join(A64, "libimptrace.so")
ROOT = os.path.join(A64, "sysroot")
PY = os.path.join(ROOT, "usr", "bin", "python3.11")
QEMU = shutil.which("qemu-aarch64-static")
SEED_ERROR = "AttributeError: module 'torch_npu.dynamo.npugraph_ex' has no attribute 'npu_fx_compiler'"


@pytest.fixture
def arm64_python(tmp_path):
    """An executable that runs the arm64 interpreter under qemu; A64_PRELOAD in its
    environment becomes the guest's LD_PRELOAD (an x86_64 LD_PRELOAD of an AArch64
    library would only make the host's loader complain)."""
    if os.path.exists(os.path.join(A64, "build-failed")):
        pytest.fail("the AArch64 cross build of the tracer failed (scripts/aarch64.sh in the CI log)")
    if not QEMU:
        pytest.skip("qemu-aarch64-static not installed (scripts/aarch64.sh)")
    if not os.path.exists(LIB):
        pytest.skip("no AArch64 build of the tracer in %s (scripts/aarch64.sh)" % A64)
    if not os.access(PY, os.X_OK):
        pytest.skip("no arm64 CPython sysroot in %s (scripts/aarch64.sh could not download it)" % ROOT)
    wrapper = tmp_path / "python3-arm64"
    wrapper.write_text(
        "#!/bin/sh\n"
        "if [ -n \"${A64_PRELOAD:-}\" ]; then\n"
        "  exec %(q)s -L %(r)s -E LD_PRELOAD=\"$A64_PRELOAD\" %(py)s \"$@\"\n"
        "fi\n"
        "exec %(q)s -L %(r)s %(py)s \"$@\"\n" % {"q": QEMU, "r": ROOT, "py": PY})
    wrapper.chmod(0o755)
    r = subprocess.run([str(wrapper), "-c", "import platform; print(platform.machine())"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "aarch64", r.stderr
    return str(wrapper)


def scenario(py, workdir, traced):
    args = [sys.executable, SCENARIO, "--build", "bad", "--workdir", str(workdir), "--python", py,
            "--runner", "unittest"]
    if traced:
        args += ["--env", "A64_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/traces/" % workdir]
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def test_bad_build_on_aarch64_is_explained(arm64_python, tmp_path):
    plain = scenario(arm64_python, tmp_path / "plain", False)
    traced = scenario(arm64_python, tmp_path / "bad", True)
    assert plain.returncode != 0 and traced.returncode == plain.returncode, traced.stderr[-3000:]
    assert (traced.stdout + traced.stderr).count(SEED_ERROR) >= 4
    files = traces(str(tmp_path / "bad" / "traces"))
    assert files, traced.stderr[-3000:]
    for f in files:
        protoc_decodes(f)
    story = why(files, "npugraph_ex")
    first, proxy = story["entries"][0], story["entries"][1]
    assert first["is_module"] and first["via"] == "import"
    assert proxy["type"] == "torch_npu.dynamo._LazyNpuGraphEx" and proxy["is_proxy"]
    assert proxy["via"] == "assignment" and first["replaced_by"] == proxy["object"]
    child = [c for c in story["children"] if c["name"] == "npu_fx_compiler"]
    assert child and child[0]["bound_on"] == first["object"]
    failed = [a for a in story["proxy_accesses"]
              if a["attribute"] == "npu_fx_compiler" and a["outcome"] != "ok"]
    assert len(failed) >= 4
    assert all(a["outcome"] == SEED_ERROR and a["forwarded_to"] == "torch_npu.dynamo.npugraph_ex"
               for a in failed)
