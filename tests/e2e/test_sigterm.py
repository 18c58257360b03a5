"""SIGTERM: recorded as the process's end, and nothing else changes.

The tracer's one-shot handler (tracer/process_end.cpp) is installed only where SIGTERM's
action is still the default. Checked here on 3.8, 3.12 and Debian's static 3.11, traced and
untraced: the same raw wait status and output when a program kills itself, is killed from
outside while another thread sits in a blocking read, handles SIGTERM itself, ignores it, or
blocks it and takes it with sigwait(); signal.getsignal() still says SIG_DFL; a killed
process's trace ends with {"how": "signal", "signal": 15}. Then what the viewer makes of
it: multiprocessing workers terminated in both runs are no finding, a worker terminated
where the good run's finished is the first one, `imptrace run` counts terminated processes
apart from crashes.
"""
import glob
import json
import os
import re
import signal
import subprocess
import textwrap
import time

import pytest

from e2e_util import LIB, VIEWER, clean_env, export, ident, traces, viewer

DEBIAN = "/usr/bin/python3"


def wanted_interpreters():
    found = []
    for v in ("3.8", "3.12"):
        found += sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python" % v))[-1:]
    return found + [p for p in [DEBIAN] if os.path.exists(p)]


PYS = wanted_interpreters()
SIGTERM_END = {"how": "signal", "status": None, "signal": 15}


def spawn(py, code, tmp_path, name, traced, kill_after_line=None):
    """Runs `py -c code` (its own process group), returns (raw wait status, stdout, stderr,
    trace dir). With kill_after_line, SIGTERM is sent from outside once stdout has that many
    lines."""
    env = clean_env()
    out = tmp_path / ("%s-%s" % (name, "traced" if traced else "plain"))
    out.mkdir()
    if traced:
        env["LD_PRELOAD"] = LIB
        env["IMPTRACE_OUTPUT"] = str(out) + "/"
    so, se = tmp_path / (out.name + ".stdout"), tmp_path / (out.name + ".stderr")
    with open(so, "wb") as fo, open(se, "wb") as fe:
        p = subprocess.Popen([py, "-c", code], env=env, stdout=fo, stderr=fe, cwd=str(tmp_path))
    if kill_after_line is not None:
        deadline = time.time() + 60
        while so.read_text().count("\n") < kill_after_line and time.time() < deadline and p.poll() is None:
            time.sleep(0.02)
        os.kill(p.pid, signal.SIGTERM)
    # The raw status, core-dump bit included (Popen keeps only the signal number).
    _, status = os.waitpid(p.pid, 0)
    p.returncode = 0  # reaped here
    return status, so.read_text(), se.read_text(), str(out)


def end_of(trace_dir):
    (proc,) = export(trace_dir)["processes"]
    return proc["end"], [i["name"] for i in proc["imports"] if i["ok"]]


def same_untraced(py, code, tmp_path, name, **kw):
    plain = spawn(py, code, tmp_path, name, False, **kw)
    traced = spawn(py, code, tmp_path, name, True, **kw)
    assert traced[:3] == plain[:3], (traced[:3], plain[:3])
    return plain[0], traced


SELF_KILL = textwrap.dedent("""
    import os, signal, sys
    print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
    import colorsys
    os.kill(os.getpid(), signal.SIGTERM)
    print("survived")
""")


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_sigterm_is_recorded_and_the_process_dies_exactly_as_untraced(py, tmp_path):
    status, (_, out, _, d) = same_untraced(py, SELF_KILL, tmp_path, "self")
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM and not os.WCOREDUMP(status)
    assert out == "True\n"  # signal.getsignal() still says SIG_DFL, traced or not
    end, imported = end_of(d)
    assert end == SIGTERM_END and "colorsys" in imported
    shown = viewer("show", d).stdout
    assert "killed by SIGTERM (signal 15)" in shown, shown


# Killed from outside while a second thread waits in read(2): the signal interrupts no
# other thread (no EINTR anywhere); the process dies as it would.
OUTSIDE = textwrap.dedent("""
    import os, threading, time, colorsys
    r, w = os.pipe()
    def reader():
        try:
            os.read(r, 1)
            print("read returned", flush=True)
        except OSError as e:
            print("read failed", e, flush=True)
    threading.Thread(target=reader).start()
    time.sleep(0.1)
    print("ready", flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_killed_from_outside_with_a_thread_in_a_system_call(py, tmp_path):
    status, (_, out, _, d) = same_untraced(py, OUTSIDE, tmp_path, "outside", kill_after_line=1)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert out == "ready\n"
    assert end_of(d)[0] == SIGTERM_END


OWN_HANDLER = textwrap.dedent("""
    import os, signal, sys
    def bye(sig, frame):
        import colorsys
        print("handled", sig, flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, bye)
    os.kill(os.getpid(), signal.SIGTERM)
    print("not reached")
""")
IGNORED = textwrap.dedent("""
    import os, signal, colorsys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.kill(os.getpid(), signal.SIGTERM)
    print("still here", flush=True)
""")
BLOCKED = textwrap.dedent("""
    import os, signal, colorsys
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    os.kill(os.getpid(), signal.SIGTERM)
    print("pending:", signal.SIGTERM in signal.sigpending(), flush=True)
    print("took", int(signal.sigwait({signal.SIGTERM})), flush=True)
""")
# Back to the default after a handler of its own: dies by SIGTERM, with no record (the
# tracer's handler was replaced, not restored).
RESTORED = textwrap.dedent("""
    import os, signal, colorsys
    old = signal.signal(signal.SIGTERM, lambda *a: None)
    print(old is signal.SIG_DFL, flush=True)
    signal.signal(signal.SIGTERM, old)
    os.kill(os.getpid(), signal.SIGTERM)
""")


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_a_program_that_sets_sigterm_itself_gets_exactly_its_own_behaviour(py, tmp_path):
    status, (_, out, err, d) = same_untraced(py, OWN_HANDLER, tmp_path, "own")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7 and out == "handled 15\n", err
    assert end_of(d)[0] == {"how": "exit", "status": 7, "signal": None}

    status, (_, out, _, d) = same_untraced(py, IGNORED, tmp_path, "ignored")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and out == "still here\n"
    assert end_of(d)[0]["how"] == "exit"

    status, (_, out, _, d) = same_untraced(py, BLOCKED, tmp_path, "blocked")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and out == "pending: True\ntook 15\n"
    assert end_of(d)[0]["how"] == "exit"

    status, (_, out, _, d) = same_untraced(py, RESTORED, tmp_path, "restored")
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM and out == "True\n"


def test_parent_ignoring_sigterm_is_inherited_untouched(tmp_path):
    # SIG_IGN from the parent (`trap '' TERM`, nohup-like launchers) stays SIG_IGN.
    code = "import os, signal\nprint(signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)\nos.kill(os.getpid(), signal.SIGTERM)\n"
    for traced in (False, True):
        env = clean_env()
        if traced:
            env.update(LD_PRELOAD=LIB, IMPTRACE_OUTPUT=str(tmp_path) + "/")
        r = subprocess.run([DEBIAN, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                           preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
        assert (r.returncode, r.stdout) == (0, "True\n"), (traced, r)


# SIGTERM while another thread writes records: the handler records only when the trace
# writer is free, and the process dies by SIGTERM either way; the trace stays readable.
BUSY = textwrap.dedent("""
    import importlib, os, signal, sys, threading, types, time
    def spin():
        n = 0
        while True:
            name = "spin_%d" % (n % 20)
            sys.modules[name] = types.ModuleType(name)
            importlib.import_module(name)
            del sys.modules[name]
            n += 1
    threading.Thread(target=spin, daemon=True).start()
    time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)
""")


def test_sigterm_while_another_thread_writes_the_trace(tmp_path):
    ends = []
    for i in range(6):
        status, _, err, d = spawn(DEBIAN, BUSY, tmp_path, "busy%d" % i, True)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, err
        (proc,) = export(d)["processes"]
        assert proc["end"] in (SIGTERM_END, {"how": "none", "status": None, "signal": None}), proc["end"]
        ends.append(proc["end"]["how"])
    assert "signal" in ends, ends


# ---- the viewer ------------------------------------------------------------------------

# A pool whose two workers hang in a job before its `import json` and are terminated
# there (Pool.terminate() SIGTERMs workers still alive), or that finishes its jobs and is
# closed.
POOL = textwrap.dedent("""
    import multiprocessing as mp, sys, time
    def job(x):
        import colorsys
        if x < 0:
            time.sleep(60)
        import json
        return x * x
    if __name__ == "__main__":
        pool = mp.get_context("fork").Pool(2)
        if sys.argv[1] == "terminate":
            pool.map_async(job, [-1, -1], chunksize=1)
            time.sleep(0.5)
            pool.terminate()
        else:
            print(sum(pool.map(job, range(8))), flush=True)
            pool.close()
        pool.join()
""")
# `with Pool() as pool`: terminate() on the way out. It sends each worker a sentinel, then
# SIGTERMs those still alive: an idle worker exits by itself in one run and is killed by
# SIGTERM in another, by chance.
IDLE_POOL = textwrap.dedent("""
    import multiprocessing as mp
    def job(x):
        import colorsys, json
        return x * x
    if __name__ == "__main__":
        with mp.get_context("fork").Pool(4) as pool:
            print(sum(pool.map(job, range(8))), flush=True)
""")


def traced_pool(tmp_path, name, how, program=POOL):
    (tmp_path / "pool.py").write_text(program)
    out = tmp_path / name
    env = clean_env(LD_PRELOAD=LIB, IMPTRACE_OUTPUT=str(out) + "/")
    r = subprocess.run([DEBIAN, "pool.py", how], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == ("" if how == "terminate" else "140\n"), r.stderr
    return str(out)


def loud(d):
    return [f["summary"] for f in d["findings"] if f["severity"] != "info"]


def test_pool_terminated_in_both_runs_is_no_finding_and_against_a_clean_close_is_the_first(tmp_path):
    good = traced_pool(tmp_path, "good", "terminate")
    bad = traced_pool(tmp_path, "bad", "terminate")
    workers = [p for p in export(bad)["processes"] if p["forked_from_pid"]]
    assert len(workers) == 2 and all(p["end"] == SIGTERM_END for p in workers), [p["end"] for p in workers]
    r = viewer("diff", good, bad, "--format", "json")
    d = json.loads(r.stdout)
    assert r.returncode == 0, loud(d)
    assert not [f for f in d["findings"] if f["kind"] == "process_ended_abnormally"]

    closed = traced_pool(tmp_path, "closed", "close")
    assert all(p["end"]["how"] != "signal" for p in export(closed)["processes"])
    r = viewer("diff", closed, bad, "--format", "json")
    d = json.loads(r.stdout)
    assert r.returncode == 1
    first = d["findings"][0]
    assert first["kind"] == "process_ended_abnormally" and first["severity"] == "error", first
    assert "killed by SIGTERM" in first["summary"] and "its last import was colorsys" in first["summary"], first


def test_idle_pool_workers_terminated_or_not_by_chance_are_no_finding(tmp_path):
    runs = [traced_pool(tmp_path, "r%d" % i, "idle", IDLE_POOL) for i in range(3)]
    for a, b in ((0, 1), (1, 2), (2, 0)):
        r = viewer("diff", runs[a], runs[b], "--format", "json")
        assert r.returncode == 0, loud(json.loads(r.stdout))


def test_run_counts_terminated_processes_apart_from_abnormal_ends(tmp_path):
    (tmp_path / "pool.py").write_text(POOL)
    r = subprocess.run([VIEWER, "run", "-o", "o", "--", DEBIAN, "pool.py", "terminate"], cwd=str(tmp_path),
                       env=clean_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = [l for l in r.stderr.splitlines() if "traces in" in l][0]
    assert "2 terminated by SIGTERM" in summary and "ended abnormally" not in summary, summary
    shown = viewer("show", str(tmp_path / "o")).stdout
    assert shown.count("<- terminated from outside") == 2 and "<- ended abnormally" not in shown, shown


# ---- the same rules in the many-run diff (`--good RUN... --bad RUN...`) ------------------

def many(good, bad):
    r = viewer("diff", "--good", *good, "--bad", *bad, "--format", "json")
    return r, json.loads(r.stdout)


def test_many_runs_pool_terminated_on_both_sides_is_no_finding_and_against_clean_closes_the_first(tmp_path):
    terminated = [traced_pool(tmp_path, "t%d" % i, "terminate") for i in range(3)]
    r, d = many(terminated[:1], terminated[1:])
    assert r.returncode == 0, loud(d)
    assert not [f for f in d["findings"] if f["kind"] == "process_ended_abnormally"], d["findings"]

    closed = [traced_pool(tmp_path, "c%d" % i, "close") for i in range(2)]
    r, d = many(closed, terminated[1:])
    assert r.returncode == 1, d["findings"]
    first = d["findings"][0]
    assert first["kind"] == "process_ended_abnormally" and first["severity"] == "error", first
    assert "killed by SIGTERM" in first["summary"] and first["support"] == {"bad": [2, 2], "good": [0, 2]}, first


def test_many_runs_idle_pool_workers_terminated_or_not_by_chance_are_no_finding(tmp_path):
    runs = [traced_pool(tmp_path, "r%d" % i, "idle", IDLE_POOL) for i in range(4)]
    for good, bad in ((runs[:2], runs[2:]), (runs[2:], runs[:2]), ([runs[0], runs[3]], [runs[1], runs[2]])):
        r, d = many(good, bad)
        assert r.returncode == 0, loud(d)
