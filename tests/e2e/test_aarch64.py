"""The seed failure's platform: the tracer cross-built for AArch64 (build-aarch64/, made by
scripts/aarch64.sh) runs inside Debian's arm64 CPython 3.11 under qemu-aarch64-static, with
the runner's own command (`python3 -m pytest`, serially and with xdist workers), and the
x86_64 viewer tells the same story from the arm64 traces as from x86_64 ones. Skips, with
the reason, when the cross build or the arm64 sysroot could not be made on this machine."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from e2e_util import SCENARIO, SRC, export, protoc_decodes, traces, viewer, why

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


def scenario(py, workdir, traced, build="bad", runner="unittest", extra=()):
    args = [sys.executable, SCENARIO, "--build", build, "--workdir", str(workdir), "--python", py,
            "--runner", runner]
    if traced:
        args += ["--env", "A64_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/traces/" % workdir]
    args += ["--"] + list(extra) if extra else []
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


def assert_seed_story(files):
    """What `why npugraph_ex` must say about a bad run, on any architecture."""
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


def assert_diff_names_the_proxy(good_dir, bad_dir):
    r = viewer("diff", good_dir, bad_dir, "--format", "json")
    assert r.returncode == 1, r.stderr
    first = json.loads(r.stdout)["findings"][0]
    assert (first["kind"], first["module"]) == ("sys_modules_replaced", "npugraph_ex"), first


def test_bad_build_on_aarch64_is_explained(arm64_python, tmp_path):
    plain = scenario(arm64_python, tmp_path / "plain", False)
    traced = scenario(arm64_python, tmp_path / "bad", True)
    assert plain.returncode != 0 and traced.returncode == plain.returncode, traced.stderr[-3000:]
    assert (traced.stdout + traced.stderr).count(SEED_ERROR) >= 4
    files = traces(str(tmp_path / "bad" / "traces"))
    assert files, traced.stderr[-3000:]
    for f in files:
        protoc_decodes(f)
    assert_seed_story(files)


def test_runner_command_good_and_bad_on_aarch64(arm64_python, tmp_path):
    """`LD_PRELOAD=libimptrace.so python3 -m pytest` as the runner runs it, good and bad
    builds: the bad one fails exactly as untraced, the good one passes, and the x86_64
    viewer's diff of the arm64 traces puts the proxy under sys.modules first."""
    plain = scenario(arm64_python, tmp_path / "plain", False, runner="pytest")
    bad = scenario(arm64_python, tmp_path / "bad", True, runner="pytest")
    good = scenario(arm64_python, tmp_path / "good", True, build="good", runner="pytest")
    assert "4 failed" in plain.stdout and plain.returncode == 1, plain.stdout[-3000:]
    assert bad.returncode == plain.returncode and "4 failed" in bad.stdout, bad.stdout[-3000:]
    assert good.returncode == 0 and "4 passed" in good.stdout, good.stdout[-3000:] + good.stderr[-3000:]
    assert SEED_ERROR in bad.stdout
    files = traces(str(tmp_path / "bad" / "traces"))
    assert len(files) == 1, bad.stderr[-3000:]
    protoc_decodes(files[0])
    assert export(files[0])["processes"][0]["argv"][1:3] == ["-m", "pytest"]
    assert_seed_story(files)
    assert_diff_names_the_proxy(str(tmp_path / "good" / "traces"), str(tmp_path / "bad" / "traces"))


def binfmt_aarch64():
    """True when the kernel can start an arm64 executable by itself (binfmt_misc)."""
    for name in ("qemu-aarch64", "qemu-aarch64-static"):
        try:
            with open("/proc/sys/fs/binfmt_misc/" + name) as f:
                if f.readline().strip() == "enabled":
                    return True
        except OSError:
            pass
    return False


def test_xdist_workers_on_aarch64(arm64_python, tmp_path):
    """xdist workers are new arm64 processes. With binfmt_misc the runner's `-n 2` starts
    them; without it an arm64 process cannot exec an arm64 binary, so the workers are
    started through the same qemu wrapper (`--tx popen//python=WRAPPER`), which is what
    binfmt_misc would do. Each worker writes its own trace, and the diff of two such runs
    still names the proxy first."""
    if binfmt_aarch64():
        workers = ["-p", "xdist", "-n", "2"]
    else:
        workers = ["-p", "xdist", "--tx", "2*popen//python=" + arm64_python, "-d"]
    bad = scenario(arm64_python, tmp_path / "bad", True, runner="pytest", extra=workers)
    good = scenario(arm64_python, tmp_path / "good", True, build="good", runner="pytest", extra=workers)
    assert bad.returncode == 1 and "4 failed" in bad.stdout, bad.stdout[-3000:] + bad.stderr[-3000:]
    assert good.returncode == 0 and "4 passed" in good.stdout, good.stdout[-3000:] + good.stderr[-3000:]
    for d in ("good", "bad"):
        files = traces(str(tmp_path / d / "traces"))
        assert len(files) == 3, files  # the controller and two workers
        procs = export(*files)["processes"]
        assert len({p["pid"] for p in procs}) == 3
        assert sum("exec(eval(sys.stdin.readline()))" in " ".join(p["argv"]) for p in procs) == 2
    assert_seed_story(traces(str(tmp_path / "bad" / "traces")))
    assert_diff_names_the_proxy(str(tmp_path / "good" / "traces"), str(tmp_path / "bad" / "traces"))


def test_native_stacks_on_aarch64(arm64_python, tmp_path):
    """Stack capture is architecture-specific: on arm64 the native stack of an import
    reaches the interpreter loop and names it, and never shows the tracer's own frames."""
    env = dict(os.environ, A64_PRELOAD=LIB, IMPTRACE_OUTPUT=str(tmp_path) + "/", IMPTRACE_NATIVE_STACKS="1")
    r = subprocess.run([arm64_python, "-c", "import json"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    imports = export(*traces(str(tmp_path)))["processes"][0]["imports"]
    stack = [i for i in imports if i["name"] == "json"][0]["native_stack"]
    assert "_PyEval_EvalFrameDefault" in {f["symbol"] for f in stack}
    assert not any("libimptrace" in f["object"] for f in stack)


def test_native_callers_on_aarch64(arm64_python, tmp_path):
    """The native-caller extension (test_native_callers) cross-built for arm64 and imported
    under qemu with native stacks on: the x86_64 viewer names each caller from the arm64
    files (elfutils reads either architecture), file:line included."""
    from test_native_callers import PROGRAM, SOURCES, expected_callers
    include = os.path.join(ROOT, "usr", "include", "python3.11")
    if not os.path.exists(os.path.join(include, "Python.h")):
        pytest.skip("no arm64 Python headers in %s (scripts/aarch64.sh)" % ROOT)
    mods = tmp_path / "mods"
    mods.mkdir()
    objs = []
    for src, cc in (("nativeimp.c", "aarch64-linux-gnu-gcc"), ("nativeimp_loaders.cpp", "aarch64-linux-gnu-g++")):
        obj = str(tmp_path / (src + ".o"))
        subprocess.run([cc, "-O0", "-g", "-fPIC", "-I" + include, "-idirafter", os.path.join(ROOT, "usr", "include"),
                        "-c", os.path.join(SOURCES, src), "-o", obj], check=True)
        objs.append(obj)
    so = str(mods / "nativeimp.cpython-311-aarch64-linux-gnu.so")
    subprocess.run(["aarch64-linux-gnu-g++", "-shared", "-Wl,--build-id", "-o", so] + objs, check=True)
    for name in ("ni_from_init", "ni_from_static", "ni_from_cpp"):
        (mods / (name + ".py")).write_text("VALUE = %r\n" % name)
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM.format(dir=str(mods)))
    out = tmp_path / "traces"
    env = dict(os.environ, A64_PRELOAD=LIB, IMPTRACE_OUTPUT=str(out) + "/", IMPTRACE_NATIVE_STACKS="1")
    r = subprocess.run([arm64_python, str(prog)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    files = traces(str(out))
    proc = export(*files)["processes"][0]
    assert proc["machine"] == "aarch64"
    by_name = {i["name"]: i for i in proc["imports"]}
    for name, (function, source, line) in expected_callers().items():
        c = by_name[name]["native_caller"]
        assert c and c["object"] == so and c["function"] == function and c["unsymbolised"] is None, c
        assert c["file"].endswith("/native_importer/" + source) and c["line"] == line, c
    assert [n for n, i in by_name.items() if i["native_caller"]] == list(expected_callers())
