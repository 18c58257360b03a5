"""Sharing a run: `pack` makes one .tar.gz of runs (optionally with the traces' strings
redacted), every command reads bundles and .pb.gz traces, `--redact` takes user, host and
install paths out of what the commands print, and bad bundles are refused with one line."""
import gzip
import io
import json
import os
import socket
import subprocess
import sys
import tarfile

import pytest

from e2e_util import LIB, SCENARIO, VIEWER, protoc_decodes, traces

PY = "/usr/bin/python3"
USER = "alice"


def scenario(build, home, name):
    """The seed scenario, traced, with its layout and traces under HOME (a user's home)."""
    work = home / "work" / name
    out = home / "runs" / name
    args = [sys.executable, SCENARIO, "--build", build, "--workdir", str(work), "--python", PY,
            "--runner", "pytest", "--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/" % out]
    env = dict(os.environ, HOME=str(home))
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env, cwd=str(home))
    assert (r.returncode == 0) == (build == "good"), r.stdout[-2000:] + r.stderr[-2000:]
    return str(out)


def imptrace(*args, home=None):
    env = dict(os.environ)
    if home:
        env["HOME"] = str(home)
    return subprocess.run([VIEWER] + [str(a) for a in args], capture_output=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("bundles")
    home = base / "home" / USER
    home.mkdir(parents=True)
    good = scenario("good", home, "good")
    bad = scenario("bad", home, "bad")
    return base, home, good, bad


def secrets(base):
    found = [USER.encode(), str(base).encode(), b"/home/"]
    host = socket.gethostname()
    if len(host) >= 3 and host != "localhost":
        found.append(host.encode())
    return found


def assert_clean(data, base, what):
    for s in secrets(base):
        assert s not in data, "%s carries %r" % (what, s)


def findings(r):
    assert r.returncode == 1, r.stderr
    return [(f["kind"], f["module"], f["severity"]) for f in json.loads(r.stdout)["findings"]]


def test_pack_redacted_bundles_diff_like_the_runs(runs):
    base, home, good, bad = runs
    out = base / "out"
    out.mkdir(exist_ok=True)
    for name, run in (("good", good), ("bad", bad)):
        r = imptrace("pack", run, "--redact", "-o", out / (name + ".tar.gz"), home=home)
        assert r.returncode == 0, r.stderr
        assert b"bytes per import" in r.stdout and b"redacted" in r.stdout
        raw = (out / (name + ".tar.gz")).read_bytes()
        assert_clean(raw, base, name + ".tar.gz")
        inner = gzip.decompress(raw)
        assert_clean(inner, base, name + ".tar.gz decompressed")
        with tarfile.open(out / (name + ".tar.gz")) as tar:
            members = tar.getmembers()
            names = [m.name for m in members]
            assert "manifest.json" in names
            manifest = json.load(tar.extractfile("manifest.json"))
            assert manifest["redacted"] is True and len(manifest["runs"]) == 1
            run_name = manifest["runs"][0]["name"]
            pbs = [m for m in members if m.name.endswith(".pb")]
            assert pbs and all(m.name.startswith(run_name + "/") and m.isfile() for m in pbs)
            assert len(pbs) == len(traces(run)) and manifest["runs"][0]["files"] == sorted(m.name for m in pbs)
            for m in pbs:
                path = out / ("%s-%s" % (name, os.path.basename(m.name)))
                path.write_bytes(tar.extractfile(m).read())
                protoc_decodes(str(path))
    original = imptrace("diff", good, bad, "--format", "json")
    packed = imptrace("diff", out / "good.tar.gz", out / "bad.tar.gz", "--format", "json")
    assert findings(packed) == findings(original)
    top = json.loads(packed.stdout)["findings"][0]
    assert top["kind"] == "sys_modules_replaced" and top["module"] == "npugraph_ex"
    assert any(w["file"] == "torch_npu/dynamo/__init__.py" for w in top["where"])
    text = imptrace("diff", out / "good.tar.gz", out / "bad.tar.gz")
    assert text.returncode == 1 and b"npugraph_ex" in text.stdout
    assert_clean(text.stdout, base, "diff of redacted bundles")
    show = imptrace("show", out / "bad.tar.gz")
    assert show.returncode == 0 and b"bad.tar.gz#bad/" in show.stdout
    exported = json.loads(imptrace("export", out / "bad.tar.gz").stdout)
    origins = [i["origin"] for p in exported["processes"] for i in p["imports"]]
    assert "~/work/bad/workspace/torchair/npugraph_ex/__init__.py" in origins
    assert "<site-packages>/torch_npu/dynamo/__init__.py" in origins


def test_several_runs_in_one_bundle(runs):
    base, home, good, bad = runs
    both = base / "both.tar.gz"
    r = imptrace("pack", good, bad, "-o", both)
    assert r.returncode == 0, r.stderr
    show = imptrace("show", both)
    assert show.returncode == 0
    assert show.stdout.count(b"both.tar.gz#good/") == len(traces(good))
    assert show.stdout.count(b"both.tar.gz#bad/") == len(traces(bad))
    refused = imptrace("diff", both, str(both) + "#bad")
    assert refused.returncode == 2
    err = refused.stderr.decode()
    assert err.count("\n") == 1 and "2 runs" in err and "#good" in err
    picked = imptrace("diff", str(both) + "#good", str(both) + "#bad", "--format", "json")
    assert findings(picked) == findings(imptrace("diff", good, bad, "--format", "json"))
    missing = imptrace("show", str(both) + "#nope")
    assert missing.returncode == 2 and b"no run named 'nope'" in missing.stderr
    # A bundle into a bundle: its runs keep their names.
    again = base / "again.tar.gz"
    assert imptrace("pack", both, "-o", again).returncode == 0
    with tarfile.open(again) as tar:
        assert json.load(tar.extractfile("manifest.json"))["runs"][1]["name"] == "bad"


def test_pb_gz_is_read_directly(runs):
    base, home, good, bad = runs
    src = [f for f in traces(bad) if f.endswith(".pb")][0]
    gz = base / (os.path.basename(src) + ".gz")
    gz.write_bytes(gzip.compress(open(src, "rb").read()))
    plain = imptrace("export", src, "--format", "json")
    packed = imptrace("export", gz, "--format", "json")
    assert plain.returncode == 0 and packed.returncode == 0, packed.stderr
    a, b = json.loads(plain.stdout), json.loads(packed.stdout)
    assert a["processes"][0]["imports"] == b["processes"][0]["imports"]


def test_redact_on_every_output(runs):
    base, home, good, bad = runs
    report = base / "report.html"
    outs = {
        "report": (imptrace("report", good, bad, "--redact", "-o", report), lambda: report.read_bytes()),
        "markdown": (imptrace("diff", good, bad, "--redact", "--format", "markdown"), None),
        "json": (imptrace("diff", good, bad, "--redact", "--format", "json"), None),
        "show": (imptrace("show", good, "--redact", "--all"), None),
        "tree": (imptrace("tree", good, "--redact"), None),
        "why": (imptrace("why", bad, "npugraph_ex", "--redact", "--format", "json"), None),
        "export": (imptrace("export", bad, "--redact"), None),
        "chrome": (imptrace("export", bad, "--redact", "--format", "chrome"), None),
    }
    for what, (r, read) in outs.items():
        assert r.returncode in (0, 1), (what, r.stderr)
        data = read() if read else r.stdout
        assert_clean(data, base, what)
    plain = imptrace("show", good)
    assert str(home).encode() in plain.stdout  # the unredacted view does carry them
    assert b"ModuleNotFoundError" in outs["show"][0].stdout
    exported = json.loads(outs["export"][0].stdout)
    assert all(p["executable"].startswith("/usr/bin/python3") for p in exported["processes"])  # kept
    assert any(i["origin"].startswith("<site-packages>/torch_npu/") for p in exported["processes"]
               for i in p["imports"] if i["origin"])
    assert any(i["origin"].startswith("<python>/") for p in exported["processes"]
               for i in p["imports"] if i["origin"])
    assert json.loads(outs["json"][0].stdout)["findings"][0]["kind"] == "sys_modules_replaced"



def test_redact_paths_outside_homes(runs, tmp_path):
    """A job laid out outside any home (a vendor tree, a CI workspace under /srv or /tmp):
    its directories are replaced by stable placeholders, in the view and in a packed trace,
    and the story keeps its file names."""
    base, home, good, bad = runs
    job = tmp_path / "srv" / "acme-secret-ci"
    args = [sys.executable, SCENARIO, "--build", "bad", "--workdir", str(job / "work"), "--python", PY,
            "--runner", "pytest", "--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/" % (job / "out")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]
    run = str(job / "out")
    assert b"acme-secret-ci" in imptrace("show", run, "--all").stdout
    shown = imptrace("show", run, "--all", "--redact")
    why = imptrace("why", run, "npugraph_ex", "--redact", "--format", "json")
    exported = imptrace("export", run, "--redact")
    packed = tmp_path / "job.tar.gz"
    pack = imptrace("pack", run, "--redact", "-o", packed)
    assert pack.returncode == 0, pack.stderr
    for what, out in (("show", shown), ("why", why), ("export", exported)):
        assert out.returncode in (0, 1), (what, out.stderr)
        assert b"acme-secret-ci" not in out.stdout and str(tmp_path).encode() not in out.stdout, what
    from_pack = imptrace("export", packed)
    assert b"acme-secret-ci" not in from_pack.stdout  # (its trace_file is the bundle's own path)
    origins = [i["origin"] for p in json.loads(exported.stdout)["processes"] for i in p["imports"]
               if i["origin"] and i["name"] == "npugraph_ex"]
    assert origins and all(o.endswith("/__init__.py") for o in origins), origins
    # One directory, one placeholder: the view and the packed trace agree.
    packed_origins = [i["origin"] for p in json.loads(from_pack.stdout)["processes"] for i in p["imports"]
                      if i["origin"] and i["name"] == "npugraph_ex"]
    assert sorted(set(packed_origins)) == sorted(set(origins))
    assert all(o.startswith("<") for o in origins), origins


def tar_bytes(entries):
    """A .tar.gz from (TarInfo, data) pairs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def member(name, data=b"", kind=tarfile.REGTYPE, link=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = link
    return info, data if kind == tarfile.REGTYPE else None


def huge_member():
    info = tarfile.TarInfo("run/x.pb")
    info.size = 1 << 40
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    return gzip.compress(header)


def bomb():
    c = __import__("zlib").compressobj(9, 8, 31)
    chunk = bytes(1 << 20)
    parts = [c.compress(chunk) for _ in range(300)]
    return b"".join(parts) + c.flush()


@pytest.mark.parametrize("case", ["corrupt_gzip", "cut_gzip", "dotdot", "absolute", "symlink", "hardlink",
                                  "huge_size", "zip_bomb", "fifo", "not_a_trace"])
def test_bad_bundles_are_one_line_and_status_2(case, runs, tmp_path):
    base, home, good, bad = runs
    trace = open(traces(good)[0], "rb").read()
    ok = tar_bytes([member("run/x.pb", trace)])
    data = {
        "corrupt_gzip": ok[:40] + bytes(b ^ 0x5a for b in ok[40:80]) + ok[80:],
        "cut_gzip": ok[: len(ok) // 2],
        "dotdot": tar_bytes([member("../x.pb", trace)]),
        "absolute": tar_bytes([member("/tmp/x.pb", trace)]),
        "symlink": tar_bytes([member("run/x.pb", kind=tarfile.SYMTYPE, link="/etc/passwd")]),
        "hardlink": tar_bytes([member("run/x.pb", kind=tarfile.LNKTYPE, link="run/y.pb")]),
        "huge_size": huge_member(),
        "zip_bomb": bomb(),
        "fifo": tar_bytes([member("run/x.pb", kind=tarfile.FIFOTYPE)]),
        "not_a_trace": tar_bytes([member("run/x.pb", b"\x0a\x05hello world")]),
    }[case]
    path = tmp_path / "bad.tar.gz"
    path.write_bytes(data)
    for cmd in (["show", path], ["diff", path, path], ["pack", path, "-o", tmp_path / "o.tar.gz"]):
        r = imptrace(*cmd)
        assert r.returncode == 2, (case, cmd, r.stdout[-300:], r.stderr)
        err = r.stderr.decode()
        assert err.startswith("imptrace: ") and err.count("\n") == 1, (case, err)
        assert "not an imptrace trace" not in err or case == "not_a_trace", err
    assert not (tmp_path / "o.tar.gz").exists()


def test_junit_members_too_large_or_not_junit(runs, tmp_path):
    """A junit member over its limit is one line and status 2 wherever the bundle is read;
    an *.xml that is not junit is left out by pack, with a line."""
    base, home, good, bad = runs
    trace = open(traces(good)[0], "rb").read()
    pb = tarfile.TarInfo("run/x.pb")
    pb.size = len(trace)
    xml = tarfile.TarInfo("run/junit.xml")
    xml.size = 65 << 20  # declared only: refused before any of it is read
    padded = trace + bytes(-len(trace) % 512)
    huge = tmp_path / "huge.tar.gz"
    huge.write_bytes(gzip.compress(pb.tobuf(format=tarfile.GNU_FORMAT) + padded + xml.tobuf(format=tarfile.GNU_FORMAT)))
    for cmd in (["show", huge], ["diff", "--good", huge, "--bad", huge], ["pack", huge, "-o", tmp_path / "o.tar.gz"]):
        r = imptrace(*cmd)
        err = r.stderr.decode()
        assert r.returncode == 2 and err.count("\n") == 1 and "64 MiB for junit XML" in err, (cmd, err)
    assert not (tmp_path / "o.tar.gz").exists()

    run = tmp_path / "run"
    run.mkdir()
    (run / "x.pb").write_bytes(trace)
    (run / "config.xml").write_text("<config><path>/opt/x</path></config>")
    r = imptrace("pack", run, "-o", tmp_path / "p.tar.gz")
    assert r.returncode == 0 and "config.xml: not junit XML" in r.stderr.decode(), r.stderr
    with tarfile.open(tmp_path / "p.tar.gz") as t:
        assert "run/config.xml" not in t.getnames() and "run/x.pb" in t.getnames()
