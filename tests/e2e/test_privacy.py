"""Private output.

- Trace files are 0600 whatever the umask (000 tried), directories the tracer creates for
  `IMPTRACE_OUTPUT=dir/` are 0700, and that holds in fork children too.
- Never following a symlink: a dangling symlink planted at the output name (the classic
  /tmp attack: the victim would create the target) is left dangling, its target never
  created; a FIFO at the output name is neither opened nor waited on; pre-existing files
  keep their bytes (a numbered sibling is used).
- An output directory that cannot be created (a path under a regular file: ENOTDIR; as
  root, permission bits cannot make a directory unwritable), a full disk (a 64 KiB tmpfs
  filled up, when this machine allows mounting one) and a file-size limit (RLIMIT_FSIZE:
  CPython ignores SIGXFSZ, so writes fail with EFBIG mid-run) leave the program
  unaffected (same status and stdout) with exactly one "imptrace:" warning line.
- A secret in the environment (AWS_SECRET_ACCESS_KEY and others) never appears in any
  byte of any trace (parent, fork child, exec'd child), even when the program copies it
  into module globals, sys.modules keys' values, a proxy's results or a module's __file__.
  Only allow-listed variables are in the header.
- An allow-listed variable set after the header (from Python or by C's setenv, in place or
  appended, after other variables were added or removed) is recorded once per change, in
  order, at the next top-level import; a change to any other variable is not.
- Secure execution: a setuid copy of the interpreter (owner nobody, run by root, so
  AT_SECURE is set) under LD_PRELOAD writes no trace and runs as untraced. The tracer's
  own getauxval(AT_SECURE) check cannot be reached from here: the loader already drops
  LD_PRELOAD in such processes, and a later dlopen finds Python initialised (inert).
"""
import os
import resource
import stat
import subprocess
import uuid

import pytest

from e2e_util import LIB, export, protoc_decodes, run, traces

PY = "/usr/bin/python3"
MANY = "import json, csv, decimal, email.message, http.client, xml.dom.minidom, sqlite3, tarfile\nprint('ok')\n"


def test_modes_under_umask_zero(tmp_path):
    out = tmp_path / "a" / "b"
    code = "import os, json\npid = os.fork()\nif pid == 0:\n    import csv\n    os._exit(0)\nos.waitpid(pid, 0)\n"
    r = run([PY, "-c", code], traced=True, outdir=str(out), preexec_fn=lambda: os.umask(0))
    assert r.returncode == 0, r.stderr
    files = traces(str(out))
    assert len(files) == 2
    for f in files:
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f
    for d in (tmp_path / "a", out):
        assert stat.S_IMODE(os.stat(str(d)).st_mode) == 0o700, d


def test_dangling_symlink_not_followed(tmp_path):
    victim = tmp_path / "victim"
    link = tmp_path / "trace.pb"
    os.symlink(str(victim), str(link))
    r = run([PY, "-c", "import json"], traced=True, env={"IMPTRACE_OUTPUT": str(link)})
    assert r.returncode == 0 and r.stderr == ""
    assert not os.path.exists(str(victim)), "the tracer created the symlink's target"
    assert os.path.islink(str(link))
    sibling = tmp_path / "trace.1.pb"
    assert sibling.exists() and not os.path.islink(str(sibling))
    protoc_decodes(str(sibling))


def test_fifo_at_output_name_not_opened(tmp_path):
    fifo = tmp_path / "trace.pb"
    os.mkfifo(str(fifo))
    r = run([PY, "-c", "import json; print('ok')"], traced=True, env={"IMPTRACE_OUTPUT": str(fifo)}, timeout=30)
    assert r.returncode == 0 and r.stdout == "ok\n" and r.stderr == ""
    assert stat.S_ISFIFO(os.lstat(str(fifo)).st_mode)


def test_existing_files_keep_their_bytes(tmp_path):
    target = tmp_path / "t.pb"
    names = ["t.pb", "t.1.pb", "t.2.pb"]
    for i, n in enumerate(names):
        (tmp_path / n).write_bytes(b"keep %d" % i)
    r = run([PY, "-c", "import json"], traced=True, env={"IMPTRACE_OUTPUT": str(target)})
    assert r.returncode == 0
    for i, n in enumerate(names):
        assert (tmp_path / n).read_bytes() == b"keep %d" % i
    protoc_decodes(str(tmp_path / "t.3.pb"))


def one_warning(r, plain):
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("imptrace: "), r.stderr
    return lines[0]


def test_output_dir_cannot_be_created(tmp_path):
    plain = run([PY, "-c", MANY], traced=False)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run([PY, "-c", MANY], traced=True, outdir=str(blocker / "sub"))
    line = one_warning(r, plain)
    assert "cannot create" in line
    assert blocker.read_text() == "x"


def test_file_size_limit_mid_run(tmp_path):
    """RLIMIT_FSIZE 4 KiB: the header and the first records fit, later writes get EFBIG."""
    plain = run([PY, "-c", MANY], traced=False)
    lim = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    r = run([PY, "-c", MANY], traced=True, outdir=str(tmp_path / "out"), preexec_fn=lim)
    line = one_warning(r, plain)
    assert "cannot write" in line
    files = traces(str(tmp_path / "out"))
    assert len(files) == 1 and os.path.getsize(files[0]) <= 4096


def test_tight_address_space_limit(tmp_path):
    """The tracer's address space stays within 12 MiB of the untraced program's peak, and
    under RLIMIT_AS at that (`ulimit -v` in some CI jobs) the traced program runs to its
    end with every import in the trace. The tracer maps its tables as they grow: with a
    reservation of 64 MiB up front the peak check failed, and with 32 MiB a program under
    `ulimit -v` failed with MemoryError once its own memory grew into what was taken."""
    src = tmp_path / "src"
    pkg = src / "aspkg"
    pkg.mkdir(parents=True)
    n = 2000
    (pkg / "__init__.py").write_text("".join("from . import m%d\n" % i for i in range(n)))
    for i in range(n):
        (pkg / ("m%d.py" % i)).write_text("X = %d\n" % i)
    code = "import aspkg\nprint(open('/proc/self/status').read().split('VmPeak:')[1].split()[0])\n"
    run([PY, "-c", code], traced=False, cwd=str(src))  # writes the bytecode caches
    plain = run([PY, "-c", code], traced=False, cwd=str(src))
    assert plain.returncode == 0, plain.stderr
    # Address space, not just memory: a reservation made early succeeds under the limit
    # and starves the program later, so the peak is compared directly.
    free = run([PY, "-c", code], traced=True, outdir=str(tmp_path / "free"), cwd=str(src))
    assert free.returncode == 0, free.stderr
    assert int(free.stdout.strip()) - int(plain.stdout.strip()) <= 12 * 1024
    limit = (int(plain.stdout.strip()) + 12 * 1024) * 1024
    lim = lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = tmp_path / "out"
    r = run([PY, "-c", code], traced=True, outdir=str(out), cwd=str(src), preexec_fn=lim)
    assert r.returncode == 0, r.stderr[-2000:]
    names = {i["name"] for i in export(traces(str(out))[0])["processes"][0]["imports"]}
    assert {"aspkg", "aspkg.m0", "aspkg.m%d" % (n - 1)} <= names
    assert sum(1 for x in names if x.startswith("aspkg.m")) == n


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (%s): full-disk covered by the RLIMIT_FSIZE test"
                    % r.stderr.strip())
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def test_full_disk(tiny_tmpfs):
    plain = run([PY, "-c", MANY], traced=False)
    # Leave about one page free: the header fits, the rest does not.
    fd = os.open(str(tiny_tmpfs / "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    os.ftruncate(fd, os.fstat(fd).st_size - 4096)
    os.close(fd)
    r = run([PY, "-c", MANY], traced=True, outdir=str(tiny_tmpfs))
    line = one_warning(r, plain)
    assert "No space left" in line or "cannot" in line


def test_secret_env_never_recorded(tmp_path):
    secret = "s3cr3t-" + uuid.uuid4().hex
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "leaky.py").write_text(
        "import os, sys, types\n"
        "KEY = os.environ['AWS_SECRET_ACCESS_KEY']\n"
        "class Proxy:\n"
        "    def __getattr__(self, name):\n"
        "        return KEY + name\n"
        "sys.modules['leaky_proxy'] = Proxy()\n"
        "m = types.ModuleType('leaky_mod')\n"
        "m.secret = KEY\n"
        "sys.modules['leaky_mod'] = m\n")
    code = ("import os, sys, subprocess\n"
            "sys.path.insert(0, %r)\n"
            "import leaky, leaky_proxy, leaky_mod\n"
            "leaky_proxy.anything\n"
            "leaky_mod.secret\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    import csv\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n"
            "subprocess.run([sys.executable, '-c', 'import os, json; os.environ[\"AWS_SECRET_ACCESS_KEY\"]'], check=True)\n"
            "print('ok')\n") % str(mods)
    out = tmp_path / "out"
    env = {"AWS_SECRET_ACCESS_KEY": secret, "GITHUB_TOKEN": secret + "-gh", "DB_PASSWORD": secret + "-db",
           "PYTHONPATH": str(mods)}
    r = run([PY, "-c", code], traced=True, outdir=str(out), env=env)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    files = traces(str(out))
    assert len(files) == 3
    token = secret.split("-", 1)[1].encode()
    for f in files:
        data = open(f, "rb").read()
        assert token not in data, "secret found in %s" % f
        assert token[:16] not in data and token[-16:] not in data
        protoc_decodes(f)
    allowed = ("PYTHONPATH", "LD_PRELOAD", "VIRTUAL_ENV", "PYTEST_XDIST_WORKER")
    for p in export(str(out))["processes"]:
        for name in p["env"]:
            assert name in allowed or name.startswith("IMPTRACE_"), name


ENV_CHANGES = """\
import os, ctypes
libc = ctypes.CDLL(None)
import json
os.environ["PYTEST_XDIST_WORKER"] = "gw0"
import csv
libc.setenv(b"PYTEST_XDIST_WORKER", b"gw1", 1)
import decimal
libc.setenv(b"NOT_ALLOWED", b"x", 1)
import fractions
libc.setenv(b"NOT_ALLOWED", b"y", 1)
libc.unsetenv(b"BEFORE_THEM")
libc.setenv(b"VIRTUAL_ENV", b"/venv", 1)
import statistics
libc.setenv(b"PYTEST_XDIST_WORKER", b"gw2", 1)
import shlex
os.environ["PYTEST_XDIST_WORKER"] = "gw2"
import difflib
"""


@pytest.mark.parametrize("py", [PY, "/root/.pyenv/versions/3.12.1/bin/python"])
def test_environment_changes_recorded_in_order(tmp_path, py):
    if not os.path.exists(py):
        pytest.skip(py + " missing")
    out = tmp_path / "out"
    # BEFORE_THEM first, so that unsetting it moves every allowed entry down one slot.
    env = {"BEFORE_THEM": "1", "PATH": os.environ["PATH"], "NOT_ALLOWED": "0"}
    r = run([py, "-c", ENV_CHANGES], traced=True, outdir=str(out), env=env)
    assert r.returncode == 0, r.stderr
    [f] = traces(str(out))
    text = protoc_decodes(f).decode()
    updates = []
    for block in text.split("env_update {")[1:]:
        lines = block.split("}")[0].split("\n")
        fields = dict(l.strip().split(": ", 1) for l in lines if ": " in l)
        updates.append((fields["name"].strip('"'), fields["value"].strip('"')))
    assert updates == [("PYTEST_XDIST_WORKER", "gw0"), ("PYTEST_XDIST_WORKER", "gw1"),
                       ("VIRTUAL_ENV", "/venv"), ("PYTEST_XDIST_WORKER", "gw2")], updates


def test_setuid_interpreter_stays_untraced(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a setuid copy owned by another user")
    try:
        import pwd
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user 'nobody'")
    real = os.path.realpath(PY)
    suid = tmp_path / os.path.basename(real)
    suid.write_bytes(open(real, "rb").read())
    os.chown(str(suid), nobody, -1)
    os.chmod(str(suid), 0o4755)
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(str(out), 0o777)   # writable by the setuid process, were it to trace
    os.chmod(str(tmp_path), 0o755)
    code = "import os, json; print(os.getuid(), os.geteuid())"
    plain = run([str(suid), "-c", code], traced=False)
    if plain.stdout.split()[1:] != [str(nobody)]:
        pytest.skip("setuid bit not honoured here (nosuid mount?): %r" % plain.stdout)
    r = run([str(suid), "-c", code], traced=True, outdir=str(out))
    assert (r.returncode, r.stdout, r.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert os.listdir(str(out)) == []
    # Loading the library late with ctypes in the secure process: still nothing. (dlopen
    # itself may refuse: the tracer uses initial-exec TLS, "cannot allocate memory in
    # static TLS block"; either way the program goes on untraced.)
    late = ("import ctypes, json\ntry:\n    ctypes.CDLL(%r)\nexcept OSError:\n    pass\n"
            "import csv; print('ok')") % LIB
    r = run([str(suid), "-c", late], traced=False, env={"IMPTRACE_OUTPUT": str(out) + "/"}, cwd=str(out))
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    assert os.listdir(str(out)) == []
