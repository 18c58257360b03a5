"""Bad input to the viewer: one clear line on stderr, exit status 2, never a crash."""
import os
import subprocess

import pytest

from e2e_util import VIEWER, run, traces


def call(*args):
    return subprocess.run([VIEWER] + list(args), capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def good_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("t")
    run(["/usr/bin/python3", "-c", "import json, csv"], traced=True, outdir=str(d))
    return traces(str(d))[0]


def test_missing_empty_garbage(tmp_path):
    empty = tmp_path / "empty.pb"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.pb"
    junk.write_bytes(os.urandom(4096))
    for args in (["show", str(tmp_path / "nope.pb")], ["show", str(empty)], ["tree", str(junk)],
                 ["frobnicate"], ["export", str(empty), "--format", "yaml"], []):
        r = call(*args)
        assert r.returncode == 2, (args, r.returncode)
        assert len(r.stderr.strip().splitlines()) >= 1 and "Traceback" not in r.stderr


def test_fifo_named_as_a_trace_is_refused_not_waited_on(good_trace, tmp_path):
    # Opening a FIFO for reading waits for a writer: the viewer must say what it is instead.
    fifo = tmp_path / "pipe.pb"
    os.mkfifo(str(fifo))
    for args in (["show", str(fifo)], ["diff", str(fifo), good_trace],
                 ["pack", str(fifo), "-o", str(tmp_path / "b.tar.gz")]):
        r = subprocess.run([VIEWER] + args, capture_output=True, text=True, timeout=20)
        assert r.returncode == 2 and "not a regular file" in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_why_of_no_module_name_is_a_usage_error(good_trace):
    for name in ("", ".json", "json.", "a..b"):
        r = call("why", good_trace, name)
        assert r.returncode == 2 and "needs a module name" in r.stderr, (name, r.returncode, r.stderr)


def test_truncated_trace_reads_prefix(good_trace, tmp_path):
    data = open(good_trace, "rb").read()
    cut = tmp_path / "cut.pb"
    cut.write_bytes(data[: len(data) - 7])
    r = call("show", str(cut))
    assert r.returncode == 0 and "truncat" in r.stderr.lower()
    for n in range(0, len(data), max(1, len(data) // 300)):
        cut.write_bytes(data[:n])
        r = call("export", str(cut), "--format", "json")
        assert r.returncode in (0, 2), (n, r.returncode, r.stderr)


@pytest.mark.parametrize("cmd", [["show"], ["tree"], ["export", "--format", "json"], ["export", "--format", "chrome"]])
def test_commands_on_real_trace(good_trace, cmd):
    args = [cmd[0], good_trace] + cmd[1:]
    r = call(*args)
    assert r.returncode == 0, r.stderr
    assert r.stdout


def test_run_traces_every_process_and_keeps_exit_status(tmp_path):
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import csv']); sys.exit(3)"
    r = subprocess.run([VIEWER, "run", "-o", str(tmp_path / "out"), "--", "/usr/bin/python3", "-c", code],
                       capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 3
    assert len(traces(str(tmp_path / "out"))) == 2
    assert "2 processes" in r.stderr
    assert call("run", "-o").returncode == 2 and call("run").returncode == 2
    missing = subprocess.run([VIEWER, "run", "--", "/no/such/program"], capture_output=True, text=True,
                             timeout=60, cwd=str(tmp_path))
    assert missing.returncode == 127
