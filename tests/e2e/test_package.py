"""Install and packages: `cmake --install` lays out bin/, lib/imptrace/, share/; the CPack
.deb unpacked into a scratch root (dpkg -x) runs the seed scenario from its own binaries
and diffs it; the AArch64 cross build's arm64 .deb, when scripts/aarch64.sh made one,
holds arm64 binaries that run under qemu."""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from e2e_util import BUILD, SCENARIO, SRC, clean_env, traces

A64 = os.environ.get("IMPTRACE_A64_BUILD") or os.path.join(SRC, "build-aarch64")
LAYOUT = ["bin/imptrace", "lib/imptrace/libimptrace.so", "share/imptrace/imptrace.proto",
          "share/man/man1/imptrace.1", "share/man/man1/imptrace-diff.1", "share/man/man1/imptrace-run.1"]


def version():
    for line in open(os.path.join(SRC, "CMakeLists.txt")):
        if line.startswith("project(imptrace VERSION "):
            return line.split()[2]
    raise AssertionError("no project version in CMakeLists.txt")


def elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF", path
    return struct.unpack("<H", head[18:20])[0]  # 62 x86-64, 183 AArch64


def unpack(deb, root):
    subprocess.run(["dpkg-deb", "-x", deb, str(root)], check=True)
    info = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Version", "Architecture"],
                          capture_output=True, text=True, check=True).stdout
    return dict(line.split(": ", 1) for line in info.strip().splitlines())


def test_cmake_install_layout(tmp_path):
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(tmp_path / "p")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for f in LAYOUT:
        assert os.path.isfile(str(tmp_path / "p" / f)), f
    exe = str(tmp_path / "p" / "bin" / "imptrace")
    run = subprocess.run([exe, "run", "-o", str(tmp_path / "t"), "--", "/usr/bin/python3", "-c", "import csv"],
                         env=clean_env(), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert len(traces(str(tmp_path / "t"))) == 1


@pytest.fixture(scope="module")
def deb():
    r = subprocess.run(["cmake", "--build", BUILD, "--target", "package"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    path = os.path.join(BUILD, "imptrace_%s_amd64.deb" % version())
    assert os.path.isfile(path), os.listdir(BUILD)
    return path


def test_deb_runs_the_seed_scenario(deb, tmp_path):
    root = tmp_path / "root"
    fields = unpack(deb, root)
    assert fields == {"Package": "imptrace", "Version": version(), "Architecture": "amd64"}
    for f in LAYOUT:
        assert os.path.isfile(str(root / "usr" / f)), f
    exe = str(root / "usr" / "bin" / "imptrace")
    assert elf_machine(exe) == 62
    assert subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.startswith(
        "imptrace %s (" % version())
    runs = {}
    for build in ("good", "bad"):
        out = tmp_path / ("traces-" + build)
        r = subprocess.run([exe, "run", "-o", str(out), "--", sys.executable, SCENARIO, "--build", build,
                            "--workdir", str(tmp_path / build), "--python", "/usr/bin/python3",
                            "--runner", "pytest"],
                           env=clean_env(), capture_output=True, text=True, timeout=300)
        assert (r.returncode == 0) == (build == "good"), r.stdout[-2000:] + r.stderr[-2000:]
        assert "traces in %s" % out in r.stderr
        runs[build] = str(out)
    d = subprocess.run([exe, "diff", runs["good"], runs["bad"], "--format", "json"], capture_output=True, text=True,
                       timeout=120)
    assert d.returncode == 1, d.stderr
    top = json.loads(d.stdout)["findings"][0]
    assert top["kind"] == "sys_modules_replaced" and top["module"] == "npugraph_ex"
    # the packaged schema decodes the traces
    proto = root / "usr" / "share" / "imptrace" / "imptrace.proto"
    with open(traces(runs["bad"])[0], "rb") as f:
        dec = subprocess.run(["protoc", "--decode=imptrace.Trace", "-I" + str(proto.parent), str(proto)], stdin=f,
                             capture_output=True)
    assert dec.returncode == 0, dec.stderr[:300]


def test_arm64_deb(tmp_path):
    debs = glob.glob(os.path.join(A64, "imptrace_*_arm64.deb"))
    if not debs:
        if os.path.exists(os.path.join(A64, "build-failed")):
            pytest.fail("the AArch64 cross build failed (scripts/aarch64.sh in the CI log)")
        pytest.skip("no arm64 .deb in %s (scripts/aarch64.sh makes it)" % A64)
    assert os.path.basename(debs[0]) == "imptrace_%s_arm64.deb" % version()
    root = tmp_path / "root"
    assert unpack(debs[0], root)["Architecture"] == "arm64"
    for f in LAYOUT:
        assert os.path.isfile(str(root / "usr" / f)), f
    assert elf_machine(str(root / "usr" / "bin" / "imptrace")) == 183
    assert elf_machine(str(root / "usr" / "lib" / "imptrace" / "libimptrace.so")) == 183
    qemu = shutil.which("qemu-aarch64-static")
    if not qemu or not os.path.isdir("/usr/aarch64-linux-gnu"):
        pytest.skip("no qemu-aarch64-static or AArch64 C++ runtime (scripts/deps.sh) to run the arm64 binaries")
    viewer = [qemu, "-L", "/usr/aarch64-linux-gnu", str(root / "usr" / "bin" / "imptrace")]
    r = subprocess.run(viewer + ["help", "run"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "--append" in r.stdout, r.stderr
    # The seed scenario in Debian's arm64 CPython (the sysroot scripts/aarch64.sh makes, as
    # test_aarch64 uses it) with the packaged tracer, explained by the packaged viewer.
    sysroot = os.path.join(A64, "sysroot")
    py = os.path.join(sysroot, "usr", "bin", "python3.11")
    if not os.access(py, os.X_OK):
        pytest.skip("no arm64 CPython sysroot in %s (scripts/aarch64.sh could not download it)" % sysroot)
    wrapper = tmp_path / "python3-arm64"
    wrapper.write_text("#!/bin/sh\nexec %s -L %s -E LD_PRELOAD=\"$A64_PRELOAD\" %s \"$@\"\n" % (qemu, sysroot, py))
    wrapper.chmod(0o755)
    out = tmp_path / "traces"
    run = subprocess.run([sys.executable, SCENARIO, "--build", "bad", "--workdir", str(tmp_path / "bad"),
                          "--python", str(wrapper), "--runner", "unittest",
                          "--env", "A64_PRELOAD=" + str(root / "usr" / "lib" / "imptrace" / "libimptrace.so"),
                          "--env", "IMPTRACE_OUTPUT=%s/" % out],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0 and traces(str(out)), run.stderr[-3000:]
    why = subprocess.run(viewer + ["why", str(out), "npugraph_ex", "--format", "json"], capture_output=True,
                         text=True, timeout=300)
    assert why.returncode == 0, why.stderr
    entries = json.loads(why.stdout)["entries"]
    assert entries[0]["via"] == "import" and entries[1]["is_proxy"] and entries[0]["replaced_by"] == entries[1]["object"]
