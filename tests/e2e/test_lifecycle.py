"""Inert outside CPython, fork, SIGKILL, os._exit, threads, exec'd children,
output naming and IMPTRACE_DISABLE, unwritable output."""
import os
import signal
import stat
import subprocess
import sys

import pytest

from e2e_util import LIB, PROGRAMS, VIEWER, export, ident, protoc_decodes, run, sid_interpreters, traces, viewer

PY = "/usr/bin/python3"
PYENV = "/root/.pyenv/versions/3.12.1/bin/python"


@pytest.mark.parametrize("cmd", [
    ["sh", "-c", "echo hello; echo err >&2; exit 3"],
    ["ls", "-l", "/etc/debian_version", "/etc/os-release", "/nonexistent-path"],
    ["git", "--version"],
    ["gcc", "--version"],
    ["make", "--version"],
    ["cmake", "--version"],
], ids=lambda c: c[0])
def test_inert_in_non_python_processes(cmd, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    plain = run(cmd, traced=False, cwd=str(cwd))
    traced = run(cmd, traced=True, outdir=str(out), cwd=str(cwd))
    assert (plain.returncode, plain.stdout, plain.stderr) == (traced.returncode, traced.stdout, traced.stderr)
    assert os.listdir(str(out)) == [] and os.listdir(str(cwd)) == []


# CPythons the tracer does not know (it knows 3.8-3.15), where this machine has them.
OLD_CPYTHONS = sorted(p for v in ("2.7", "3.6", "3.7")
                      for p in __import__("glob").glob("/root/.pyenv/versions/%s.*/bin/python" % v))


@pytest.mark.skipif(not OLD_CPYTHONS, reason="no CPython older than 3.8 in /root/.pyenv")
@pytest.mark.parametrize("py", OLD_CPYTHONS, ids=ident)
def test_unknown_cpython_writes_a_trace_that_says_not_traced(py, tmp_path):
    """Never silent, never in the host's streams: one file with the header (the version)
    and the reason, and show says why there is nothing more."""
    out = tmp_path / "out"
    code = "import json, sys; sys.stdout.write('out'); sys.stderr.write('err')"
    plain = run([py, "-c", code], traced=False, cwd=str(tmp_path))
    traced = run([py, "-c", code], traced=True, outdir=str(out), cwd=str(tmp_path))
    assert (plain.returncode, plain.stdout, plain.stderr) == (traced.returncode, traced.stdout, traced.stderr)
    files = traces(str(out))
    assert len(files) == 1
    protoc_decodes(files[0])
    proc = export(files[0])["processes"][0]
    version = py.split("/")[4]
    assert proc["python"].startswith(version) and proc["imports"] == []
    assert proc["not_traced"] == "CPython %s not traced: this tracer knows CPython 3.8-3.15" % version
    text = viewer("show", files[0]).stdout
    assert "CPython %s not traced" % version in text and "imports:" not in text


def test_default_output_name_mode_and_no_overwrite(tmp_path):
    r = run([PY, "-c", "import json"], traced=True, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stderr == ""
    files = os.listdir(str(tmp_path))
    assert len(files) == 1 and files[0].startswith("imptrace.python3") and files[0].endswith(".pb")
    assert stat.S_IMODE(os.stat(str(tmp_path / files[0])).st_mode) == 0o600
    # A fixed name that exists already is never overwritten: a numbered sibling is made.
    fixed = tmp_path / "fixed.pb"
    fixed.write_bytes(b"precious")
    for _ in range(2):
        r = run([PY, "-c", "import json"], traced=True, env={"IMPTRACE_OUTPUT": str(fixed)})
        assert r.returncode == 0
    assert fixed.read_bytes() == b"precious"
    assert (tmp_path / "fixed.1.pb").exists() and (tmp_path / "fixed.2.pb").exists()


def test_output_pattern_expansion(tmp_path):
    r = run([PY, "-c", "import os; print(os.getpid())"], traced=True,
            env={"IMPTRACE_OUTPUT": str(tmp_path) + "/t-%n-%p-%t.pb"})
    pid = r.stdout.strip()
    files = os.listdir(str(tmp_path))
    assert len(files) == 1
    name = files[0]
    assert name.startswith("t-python3") and ("-%s-" % pid) in name and name.endswith(".pb")


def test_disable_and_symlink(tmp_path):
    r = run([PY, "-c", "import json"], traced=True, outdir=str(tmp_path), env={"IMPTRACE_DISABLE": "1"})
    assert r.returncode == 0 and os.listdir(str(tmp_path)) == []
    # A symlink planted at the output name is not followed.
    target = tmp_path / "target"
    target.write_text("x")
    link = tmp_path / "link.pb"
    os.symlink(str(target), str(link))
    r = run([PY, "-c", "import json"], traced=True, env={"IMPTRACE_OUTPUT": str(link)})
    assert r.returncode == 0 and target.read_text() == "x"


def test_unwritable_output_leaves_program_unaffected(tmp_path):
    code = "import json; print('done')"
    plain = run([PY, "-c", code], traced=False)
    r = run([PY, "-c", code], traced=True, env={"IMPTRACE_OUTPUT": "/proc/imptrace-cannot/x.pb"})
    assert r.returncode == plain.returncode and r.stdout == plain.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("imptrace: cannot create trace file")


def test_fork_gives_child_its_own_file(tmp_path):
    code = ("import os, sys, json\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    import csv\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "import decimal\n"
            "print(pid)\n")
    r = run([PY, "-c", code], traced=True, outdir=str(tmp_path))
    assert r.returncode == 0, r.stderr
    child_pid = int(r.stdout.strip())
    files = traces(str(tmp_path))
    assert len(files) == 2
    procs = {p["pid"]: p for f in files for p in export(f)["processes"]}
    assert set(procs) == {child_pid, child_pid and [p for p in procs if p != child_pid][0]}
    child = procs[child_pid]
    parent = [p for pid, p in procs.items() if pid != child_pid][0]
    assert child["forked_from_pid"] == parent["pid"]
    child_names = [i["name"] for i in child["imports"]]
    parent_names = [i["name"] for i in parent["imports"]]
    assert "csv" in child_names and "csv" not in parent_names
    assert "decimal" in parent_names and "decimal" not in child_names
    assert "json" in parent_names and "json" not in child_names  # nothing of the parent's duplicated
    for f in files:
        protoc_decodes(f)


def test_sigkill_leaves_readable_trace(tmp_path):
    code = "import os, signal, json, csv\nos.kill(os.getpid(), signal.SIGKILL)\n"
    r = run([PY, "-c", code], traced=True, outdir=str(tmp_path))
    assert r.returncode == -signal.SIGKILL
    files = traces(str(tmp_path))
    # Records are stored into a mapping of the file ahead of which space is reserved: a
    # killed process leaves that reserve as a trailing `unwritten` field of zeros.
    assert b"unwritten:" in protoc_decodes(files[0])
    names = {i["name"] for i in export(files[0])["processes"][0]["imports"]}
    assert {"json", "csv"} <= names


def reserve_left(path):
    return b"unwritten:" in protoc_decodes(path)


def test_reserve_given_back_at_exit_and_exec(tmp_path):
    """exit() (also sys.exit with a status, an uncaught exception) and exec trim the file to
    its last record; os._exit and signals cannot, and the reserve stays (a valid field)."""
    cases = {
        "exit": ("import json\n", 0, False),
        "sys_exit": ("import json, sys\nsys.exit(3)\n", 3, False),
        "raises": ("import json\nraise SystemError('x')\n", 1, False),
        "exec": ("import json, os, sys\nos.execv(sys.executable, [sys.executable, '-S', '-c', 'pass'])\n", 0, False),
        "os_exit": ("import json, os\nos._exit(0)\n", 0, True),
    }
    for name, (code, status, left) in cases.items():
        out = tmp_path / name
        r = run([PY, "-c", code], traced=True, outdir=str(out))
        assert r.returncode == status, (name, r.stderr)
        files = traces(str(out))
        assert files, name
        for f in files:
            expect = left and "json" in {i["name"] for i in export(f)["processes"][0]["imports"]}
            assert reserve_left(f) == expect, (name, f)


def test_os_exit_loses_nothing(tmp_path):
    code = "import os, json, csv, decimal\nos._exit(7)\n"
    r = run([PY, "-c", code], traced=True, outdir=str(tmp_path))
    assert r.returncode == 7
    names = {i["name"] for i in export(traces(str(tmp_path))[0])["processes"][0]["imports"]}
    assert {"json", "csv", "decimal"} <= names


@pytest.mark.parametrize("py", [PY, PYENV] + sid_interpreters(), ids=ident)
def test_threads_keep_nesting_per_thread(py, tmp_path):
    r = run([py, PROGRAMS + "/threads_import.py"], traced=True, outdir=str(tmp_path / "t"))
    assert r.returncode == 0, r.stderr
    proc = export(traces(str(tmp_path / "t"))[0])["processes"][0]
    imports = proc["imports"]
    threads = {i["thread"] for i in imports}
    assert len(threads) >= 8
    for imp in imports:
        if imp["parent_import"] is not None:
            assert imports[imp["parent_import"]]["thread"] == imp["thread"]


def test_exec_chain_each_process_traced(tmp_path):
    code = ("import subprocess, sys\n"
            "subprocess.run([sys.executable, '-c', 'import subprocess, sys; "
            "subprocess.run([sys.executable, \"-c\", \"import csv\"])'], check=True)\n")
    r = run([PY, "-c", code], traced=True, outdir=str(tmp_path))
    assert r.returncode == 0, r.stderr
    files = traces(str(tmp_path))
    assert len(files) == 3
    pids = {p["pid"] for p in export(str(tmp_path))["processes"]}
    assert len(pids) == 3


@pytest.mark.parametrize("py", [PY, PYENV] + sid_interpreters(), ids=ident)
def test_native_stacks_on_request(py, tmp_path):
    r = run([py, "-c", "import json"], traced=True, outdir=str(tmp_path / "on"), env={"IMPTRACE_NATIVE_STACKS": "1"})
    assert r.returncode == 0 and r.stderr == ""
    imports = export(traces(str(tmp_path / "on"))[0])["processes"][0]["imports"]
    stack = [i for i in imports if i["name"] == "json"][0]["native_stack"]
    symbols = {f["symbol"] for f in stack}
    if ident(py).startswith("sid-"):
        # Debian sid's build: the interpreter loop's frame lies in code no exported symbol
        # covers, so the statement's C import and the module's evaluation name the stack.
        assert {"PyImport_ImportModuleLevelObject", "PyEval_EvalCode"} <= symbols, symbols
    else:
        assert "_PyEval_EvalFrameDefault" in symbols  # the interpreter loop that ran the import statement
    assert not any("libimptrace" in f["object"] for f in stack)
    run([py, "-c", "import json"], traced=True, outdir=str(tmp_path / "off"))
    imports = export(traces(str(tmp_path / "off"))[0])["processes"][0]["imports"]
    assert not any("native_stack" in i for i in imports)


def test_direct_writes_record_the_same(tmp_path):
    """IMPTRACE_MMAP=0 (also the fallback where a file cannot be mapped): one pwritev per
    import, no reserve; the same imports recorded, and a SIGKILLed trace still whole."""
    code = "import json, csv, decimal, email.message\n"
    names = {}
    for mode in ("1", "0"):
        out = tmp_path / ("mmap" + mode)
        r = run([PY, "-c", code], traced=True, outdir=str(out), env={"IMPTRACE_MMAP": mode})
        assert r.returncode == 0, r.stderr
        f = traces(str(out))[0]
        assert not reserve_left(f)
        names[mode] = [i["name"] for i in export(f)["processes"][0]["imports"]]
    assert names["0"] == names["1"]
    out = tmp_path / "killed"
    r = run([PY, "-c", "import json, csv, os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"],
            traced=True, outdir=str(out), env={"IMPTRACE_MMAP": "0"})
    assert r.returncode == -signal.SIGKILL
    f = traces(str(out))[0]
    assert not reserve_left(f)
    assert {"json", "csv"} <= {i["name"] for i in export(f)["processes"][0]["imports"]}
