"""`imptrace run` as a wrapper in CI: signals reach the traced command's whole process
group and the wrapper exits with its status; each run gets its own directory; an -o
directory holding traces is refused without --append; the tracer is found in a build tree,
an installed prefix and $IMPTRACE_LIB."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from e2e_util import LIB, VIEWER, clean_env, traces

PY = "/usr/bin/python3"
# Starts a grandchild (the shape of pytest-xdist workers), says so, then sleeps.
SLEEPER = ("import subprocess, sys, time, os\n"
           "p = subprocess.Popen([sys.executable, '-c', 'import time; print(1, flush=True); time.sleep(120)'],\n"
           "                     stdout=subprocess.PIPE)\n"
           "p.stdout.readline()\n"
           "open(sys.argv[1], 'w').write('%d %d' % (os.getpid(), p.pid))\n"
           "time.sleep(120)\n")


def start(args, cwd, env=None):
    return subprocess.Popen([VIEWER, "run"] + args, cwd=str(cwd), env=env or clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and open(path).read().strip():
            return [int(x) for x in open(path).read().split()]
        time.sleep(0.05)
    raise AssertionError("the traced command never started")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def reap(pid, timeout):
    """The wait status of `pid`, or None (after killing its group) when it has not ended."""
    end = time.time() + timeout
    while time.time() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def gone(pids, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT])
def test_signal_is_forwarded_and_status_kept(tmp_path, sig):
    marker = tmp_path / "pids"
    w = start(["-o", "out", "--", PY, "-c", SLEEPER, str(marker)], tmp_path)
    child, grandchild = wait_for(str(marker))
    w.send_signal(sig)
    out, err = w.communicate(timeout=60)
    assert gone([child, grandchild]), "a traced process outlived imptrace run"
    if sig == signal.SIGINT:
        # Python turns SIGINT into KeyboardInterrupt, then ends by the signal (3.8+)
        assert w.returncode in (130, 1), err
    else:
        assert w.returncode == 128 + sig, err
    assert "traces in %s" % (tmp_path / "out") in err, err
    assert "imptrace: next: imptrace show" in err
    assert len(traces(str(tmp_path / "out"))) == 2


def test_command_status_and_closing_lines(tmp_path):
    r = subprocess.run([VIEWER, "run", "-o", "o", PY, "-c", "import json; raise SystemExit(7)"],
                       cwd=str(tmp_path), env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 7
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "imptrace: tracing into %s" % (tmp_path / "o")
    assert re.match(r"imptrace: 1 process, \d+ imports \(\d+ failed\), 0 anomalies; traces in %s$"
                    % re.escape(str(tmp_path / "o")), lines[-2]), lines[-2]
    assert lines[-1].startswith("imptrace: next: imptrace show %s" % (tmp_path / "o"))


def test_each_run_has_its_own_directory(tmp_path):
    dirs = []
    for _ in range(3):
        r = subprocess.run([VIEWER, "run", "--", PY, "-c", "import csv"], cwd=str(tmp_path),
                           env=clean_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        first = r.stderr.splitlines()[0]
        assert first.startswith("imptrace: tracing into ")
        dirs.append(first[len("imptrace: tracing into "):])
    assert len(set(dirs)) == 3
    for d in dirs:
        assert os.path.dirname(d) == str(tmp_path / "imptrace-traces")
        assert len(traces(d)) == 1
    assert os.path.realpath(str(tmp_path / "imptrace-traces" / "latest")) == dirs[-1]
    show = subprocess.run([VIEWER, "show", str(tmp_path / "imptrace-traces" / "latest")],
                          capture_output=True, text=True, timeout=60)
    assert show.returncode == 0 and show.stdout.startswith("1 process")


def test_output_with_traces_needs_append(tmp_path):
    run = lambda *a: subprocess.run([VIEWER, "run"] + list(a) + ["--", PY, "-c", "import csv"], cwd=str(tmp_path),
                                    env=clean_env(), capture_output=True, text=True, timeout=60)
    assert run("-o", "o").returncode == 0
    again = run("-o", "o")
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1
    assert "--append" in again.stderr and len(traces(str(tmp_path / "o"))) == 1
    assert run("-o", "o", "--append").returncode == 0
    assert len(traces(str(tmp_path / "o"))) == 2
    assert run("--append").returncode == 2  # a default run directory is always new


def test_bad_usage(tmp_path):
    for args in (["-o"], [], ["--bogus", "--", "true"], ["-o", ""], ["--output="]):
        r = subprocess.run([VIEWER, "run"] + args, cwd=str(tmp_path), env=clean_env(),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.startswith("imptrace: ")
    r = subprocess.run([VIEWER, "run", "-o", "x", "--", "/no/such/program"], cwd=str(tmp_path),
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and "traces in" not in r.stderr and "no trace in" in r.stderr


def test_library_lookup(tmp_path):
    # An installed layout: PREFIX/bin/imptrace and PREFIX/lib/imptrace/libimptrace.so.
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib" / "imptrace").mkdir(parents=True)
    shutil.copy(VIEWER, str(prefix / "bin" / "imptrace"))
    exe = str(prefix / "bin" / "imptrace")

    def run(out, env=None):
        return subprocess.run([exe, "run", "-o", out, "--", PY, "-c", "import csv"], cwd=str(tmp_path),
                              env=clean_env(**(env or {})), capture_output=True, text=True, timeout=60)

    missing = run("a")
    assert missing.returncode == 2 and "IMPTRACE_LIB" in missing.stderr
    assert str(prefix / "bin" / "libimptrace.so") in missing.stderr
    assert run("b", {"IMPTRACE_LIB": LIB}).returncode == 0 and len(traces(str(tmp_path / "b"))) == 1
    bad = run("c", {"IMPTRACE_LIB": str(tmp_path / "nope.so")})
    assert bad.returncode == 2 and "nope.so" in bad.stderr
    shutil.copy(LIB, str(prefix / "lib" / "imptrace" / "libimptrace.so"))
    assert run("d").returncode == 0 and len(traces(str(tmp_path / "d"))) == 1


def run_in_terminal_until_ready(tmp_path, code):
    """`imptrace run -o out -- python -c code` in tmp_path, in the foreground of a new
    pseudo-terminal, read until the command printed "ready" (or a minute passed): the
    child's pid, the terminal's fd and what it printed so far."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(str(tmp_path))
        os.execve(VIEWER, [VIEWER, "run", "-o", "out", "--", PY, "-c", code], clean_env())
    out = b""
    end = time.time() + 60
    while b"ready" not in out and time.time() < end:
        out += os.read(fd, 4096)
    return pid, fd, out


def test_ctrl_c_in_a_terminal(tmp_path):
    """In a terminal's foreground, Ctrl-C reaches the command as without the wrapper: Python
    raises KeyboardInterrupt, runs its handler, and its own exit status comes back."""
    code = ("import time\n"
            "try:\n    print('ready', flush=True)\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)\n    raise SystemExit(42)\n")
    pid, fd, out = run_in_terminal_until_ready(tmp_path, code)
    os.write(fd, b"\x03")
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 42, text
    assert "interrupted" in text and "traces in %s" % (tmp_path / "out") in text


def test_ctrl_z_does_not_strand_the_command(tmp_path):
    """Ctrl-Z stops the command; the wrapper stops with it where a shell can continue it,
    and otherwise (no job control here: the pty's session has no shell) continues the
    command rather than leaving it stopped forever."""
    code = "import time\nprint('ready', flush=True)\ntime.sleep(1.5)\nprint('done', flush=True)\nraise SystemExit(5)\n"
    pid, fd, out = run_in_terminal_until_ready(tmp_path, code)
    os.write(fd, b"\x1a")
    os.set_blocking(fd, False)
    end = time.time() + 20
    while time.time() < end:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            time.sleep(0.05)
            continue
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    status = reap(pid, 30)
    text = out.decode(errors="replace")
    assert status is not None, "imptrace run and its command stayed stopped: " + text
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 5, text
    assert "done" in text and "traces in" in text


def test_closing_lines_wait_for_a_child_the_command_left_behind(tmp_path):
    # multiprocessing's forkserver outlives the program by moments: counted at once, its
    # half-written trace read as a process that ended abnormally, with imports missing.
    code = ("import subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(0.7); import json'])\n")
    r = subprocess.run([VIEWER, "run", "-o", "o", "--", PY, "-c", code], cwd=str(tmp_path), env=clean_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    summary = r.stderr.strip().splitlines()[-2]
    assert re.match(r"imptrace: 2 processes, \d+ imports \(\d+ failed\), 0 anomalies; traces in ", summary), summary
    shown = subprocess.run([VIEWER, "show", "o"], cwd=str(tmp_path), capture_output=True, text=True).stdout
    assert "ended abnormally" not in shown, shown
    imports = sum(int(n) for n in re.findall(r"imports: (\d+)", shown))
    assert "2 processes, %d imports" % imports in summary, (summary, shown)
