"""Crashes and abnormal exits.

Each program imports a marker module (colorsys) as its last recorded event, then dies:
SIGKILL, SIGSEGV (ctypes.string_at(0)), os.abort(), SIGTERM, os._exit(3), an uncaught
KeyboardInterrupt (CPython re-raises SIGINT), sys.exit(5), an exception in an atexit
handler (which also imports), imports in __del__ during finalisation (module globals and
a gc'd reference cycle), and a daemon thread importing while the main thread exits.
On every pyenv interpreter, Debian's static python3 and python3.11-dbg, Debian sid's 3.14
and 3.15 (scripts/sid.sh's chroot), traced and
untraced: same exit status or signal, same stdout, same stderr. The trace decodes with
protoc and the viewer, and contains the marker import.
"""
import os
import re
import signal

import pytest

from e2e_util import export, interpreters, protoc_decodes, run, sid_interpreters, traces, ident

PYS = interpreters() + [p for p in ["/usr/bin/python3.11-dbg"] if os.path.exists(p)] + sid_interpreters()

MARK = "import colorsys\n"
PROGRAMS = {
    "sigkill": (MARK + "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", -signal.SIGKILL),
    "sigsegv": (MARK + "import ctypes\nctypes.string_at(0)\n", -signal.SIGSEGV),
    "abort": (MARK + "import os\nos.abort()\n", -signal.SIGABRT),
    "sigterm": (MARK + "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n", -signal.SIGTERM),
    "os_exit": (MARK + "import os\nos._exit(3)\n", 3),
    "keyboard_interrupt": (MARK + "raise KeyboardInterrupt\n", -signal.SIGINT),
    "sys_exit": (MARK + "import sys\nsys.exit(5)\n", 5),
    "atexit_raises": ("import atexit\n"
                      "def bye():\n"
                      "    import colorsys\n"
                      "    raise RuntimeError('atexit boom')\n"
                      "atexit.register(bye)\n"
                      "print('main done')\n", 0),
    "del_imports_at_finalisation": (
        MARK +
        "class Holder:\n"
        "    def __del__(self):\n"
        "        try:\n"
        "            import fractions\n"
        "            print('del imported', fractions.__name__, flush=True)\n"
        "        except BaseException as e:\n"
        "            print('del failed', type(e).__name__, flush=True)\n"
        "class Cycle:\n"
        "    def __init__(self):\n"
        "        self.me = self\n"
        "    def __del__(self):\n"
        "        import statistics, uuid\n"
        "keep = Holder()\n"
        "Cycle()\n"
        "import sys\n"
        "sys.modules['colorsys'].holder = Holder()\n", 0),
    "daemon_thread_importing_at_exit": (
        MARK +
        "import threading, importlib, sys, types\n"
        "def spin():\n"
        "    n = 0\n"
        "    while True:\n"
        "        name = 'spin_%d' % (n % 20)\n"
        "        sys.modules[name] = types.ModuleType(name)\n"
        "        importlib.import_module(name)\n"
        "        del sys.modules[name]\n"
        "        n += 1\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        # Long enough for thousands of imports and sys.modules changes, the last one cut
        # off by the exit; each 0.1 s more is about 6 MB of trace to decode twice.
        "import time; time.sleep(0.05)\n", 0),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("py", PYS, ids=ident)
def test_dies_exactly_as_untraced(py, name, tmp_path):
    code, expected = PROGRAMS[name]
    plain = run([py, "-c", code], traced=False, cwd=str(tmp_path), timeout=60)
    out = tmp_path / "out"
    traced = run([py, "-c", code], traced=True, outdir=str(out), cwd=str(tmp_path), timeout=60)
    assert plain.returncode == expected, plain.stderr
    # Addresses in reprs ("<function bye at 0x7f...>") differ run to run, traced or not.
    norm = lambda s: re.sub(r"0x[0-9a-f]+", "0x?", s)
    assert (traced.returncode, traced.stdout, norm(traced.stderr)) == \
        (plain.returncode, plain.stdout, norm(plain.stderr))
    files = traces(str(out))
    assert len(files) == 1, files
    protoc_decodes(files[0])
    (proc,) = export(files[0])["processes"]
    imported = [i["name"] for i in proc["imports"] if i["ok"]]
    assert "colorsys" in imported
    if name == "atexit_raises":
        assert "atexit boom" in plain.stderr


# ---- Hostile trace files against the viewer binary ---------------------------
# (The libFuzzer target tests/fuzz/reader_fuzz.cpp covers the reader in-process; this runs
# the shipped executable on damaged real traces: exit 0, 1 or 2, never a signal, within
# 10 s and 1 GiB of address space each.)
import random
import resource
import subprocess

from e2e_util import VIEWER

HOSTILE_PROGRAM = (
    "import sys, types, json, csv\n"
    "class Lazy(types.ModuleType):\n"
    "    def __getattr__(self, n):\n"
    "        import colorsys\n"
    "        return getattr(colorsys, n)\n"
    "sys.modules['lazy_thing'] = Lazy('lazy_thing')\n"
    "import lazy_thing\nlazy_thing.rgb_to_hsv\n"
    "try:\n    import no_such_mod\nexcept ImportError:\n    pass\n"
    "import xml.dom.minidom\n")


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def run_viewer(args):
    try:
        r = subprocess.run([VIEWER] + args, capture_output=True, timeout=10, preexec_fn=limited)
    except subprocess.TimeoutExpired:
        raise AssertionError("viewer hung on %s" % args)
    assert r.returncode in (0, 1, 2), "viewer %s died: %d %s" % (args, r.returncode, r.stderr[-500:])
    if r.returncode == 2:
        err = r.stderr.decode(errors="replace").strip().splitlines()
        assert len(err) >= 1 and err[-1].startswith("imptrace: "), r.stderr[-500:]
    return r


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("real")
    r = run(["/usr/bin/python3", "-c", HOSTILE_PROGRAM], traced=True, outdir=str(d))
    assert r.returncode == 0, r.stderr
    (f,) = traces(str(d))
    return open(f, "rb").read(), f


def check_bytes(tmp_path, name, data, good):
    p = tmp_path / (name + ".pb")
    p.write_bytes(data)
    rs = [run_viewer(["show", str(p)]), run_viewer(["export", str(p), "--format", "json"])]
    rs.append(run_viewer(["diff", good, str(p), "--format", "json"]))
    return rs


def test_bit_flips_never_crash_the_viewer(real_trace, tmp_path):
    data, good = real_trace
    rng = random.Random(1234)
    outcomes = {}
    for n in range(120):
        b = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        for r in check_bytes(tmp_path, "flip%d" % n, bytes(b), good):
            outcomes[r.returncode] = outcomes.get(r.returncode, 0) + 1
    print("bit-flip viewer exit statuses:", outcomes)


def test_truncations_read_up_to_last_record(real_trace, tmp_path):
    data, good = real_trace
    full = export(good)["processes"][0]
    cuts = sorted(set([0, 1, 2, 5, len(data) - 1] + random.Random(7).sample(range(len(data)), 40)))
    for cut in cuts:
        rs = check_bytes(tmp_path, "cut%d" % cut, data[:cut], good)
        if rs[1].returncode == 0:
            import json
            procs = json.loads(rs[1].stdout)["processes"]
            for p in procs:
                got = [i["name"] for i in p["imports"]]
                # What is read is a prefix-consistent subset of the full trace's imports.
                assert set(got) <= {i["name"] for i in full["imports"]}


def test_absurd_inputs(real_trace, tmp_path):
    data, good = real_trace
    rng = random.Random(99)
    cases = {
        "empty": b"",
        "random": bytes(rng.randrange(256) for _ in range(20000)),
        "huge_length": b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
        "length_past_end": b"\x0a\xf0\x01" + b"\x00" * 10,
        "bad_varint": b"\x0a" + b"\xff" * 20,
        "deep_groups": b"\x0a\x80\x80\x04" + b"\x0b" * 65536,   # 64 KiB of nested start-group tags
        "deep_messages": b"".join([b"\x0a\x7f"] * 4000),
        "many_empty_records": b"\x0a\x00" * 200000,
        "two_traces_concatenated": data + data,
        "trace_then_garbage": data + bytes(rng.randrange(256) for _ in range(3000)),
        "zeros": b"\x00" * 100000,
    }
    for name, b in cases.items():
        check_bytes(tmp_path, name, b, good)


def test_newer_schema_refused_clearly(real_trace, tmp_path):
    data, good = real_trace
    # Record 1 is the header: 0a <len> 0a <len> 08 <schema_major>. Bump the major version.
    b = bytearray(data)
    i = 0
    assert b[i] == 0x0A
    i += 1
    while b[i] & 0x80:
        i += 1
    i += 1
    assert b[i] == 0x0A
    i += 1
    while b[i] & 0x80:
        i += 1
    i += 1
    assert b[i] == 0x08 and b[i + 1] < 0x7F
    b[i + 1] = 0x7E
    p = tmp_path / "newer.pb"
    p.write_bytes(bytes(b))
    r = run_viewer(["show", str(p)])
    assert r.returncode == 2
    err = r.stderr.decode()
    assert len(err.strip().splitlines()) == 1 and ("newer" in err or "version" in err), err


# Killed while the tracer creates its file: strace kills the process when the tracer makes
# room for the header (its first fallocate), after the file was made and before the header
# is in it. The file appears under its name only with its header, so nothing is left, as
# of a process that imported nothing (one killed later: "sigkill" above).
STRACE = "/usr/bin/strace"


def test_killed_while_creating_its_trace_leaves_no_empty_file(tmp_path):
    if not os.path.exists(STRACE):
        pytest.skip("needs strace")
    from e2e_util import LIB, clean_env
    out = tmp_path / "out"
    env = clean_env(LD_PRELOAD=LIB, IMPTRACE_OUTPUT=str(out) + "/")
    cmd = [STRACE, "-qq", "-f", "-o", "/dev/null", "-e", "trace=fallocate",
           "-e", "inject=fallocate:signal=SIGKILL:when=1", "/usr/bin/python3", "-c", "import json, colorsys"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if "ptrace" in r.stderr or "Operation not permitted" in r.stderr:
        pytest.skip("strace cannot trace here: " + r.stderr.strip())
    assert r.returncode in (128 + signal.SIGKILL, -signal.SIGKILL), (r.returncode, r.stderr)
    assert out.is_dir(), "the tracer did not get as far as its directory"
    left = [(f, os.path.getsize(out / f)) for f in sorted(os.listdir(out))]
    assert left == [], left


def test_where_the_file_cannot_be_linked_it_is_made_under_its_name(tmp_path):
    # No link (EPERM for every linkat: no /proc, no privilege): the file is made under its
    # name as it was before the unnamed file, and holds the whole trace.
    if not os.path.exists(STRACE):
        pytest.skip("needs strace")
    from e2e_util import LIB, clean_env
    out = tmp_path / "out"
    env = clean_env(LD_PRELOAD=LIB, IMPTRACE_OUTPUT=str(out) + "/")
    cmd = [STRACE, "-qq", "-f", "-o", "/dev/null", "-e", "trace=linkat", "-e", "inject=linkat:error=EPERM",
           "/usr/bin/python3", "-c", "import json, colorsys"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if "ptrace" in r.stderr or "Operation not permitted" in r.stderr:
        pytest.skip("strace cannot trace here: " + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    (proc,) = export(str(out))["processes"]
    assert "colorsys" in [i["name"] for i in proc["imports"]] and proc["end"]["how"] == "exit", proc["end"]
