"""The outputs one attaches to an issue: `report` exits as `diff` does and writes `-o -` to
stdout; JSON is compact unless --pretty; TERM=dumb and NO_COLOR get no colour; `why` lists
each binding once; the markdown headline counts the rows of its table; the HTML
timeline's legend names only what it draws."""
import json
import os
import re
import subprocess
import sys

import pytest

from e2e_util import LIB, SCENARIO, VIEWER, clean_env


def call(*args, env=None, cwd=None):
    return subprocess.run([VIEWER] + list(args), capture_output=True, text=True, timeout=120,
                          env=env or clean_env(), cwd=cwd)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    out = {}
    for name, build in (("good", "good"), ("bad", "bad")):
        subprocess.run([sys.executable, SCENARIO, "--build", build, "--workdir", str(base / name),
                        "--python", "/usr/bin/python3", "--runner", "pytest",
                        "--env", "LD_PRELOAD=" + LIB, "--env", "IMPTRACE_OUTPUT=%s/traces/" % (base / name)],
                       capture_output=True, text=True, timeout=300)
        out[name] = str(base / name / "traces")
    return out


def test_report_exit_status_and_stdout(runs, tmp_path):
    page = tmp_path / "r.html"
    r = call("report", runs["good"], runs["bad"], "-o", str(page))
    assert r.returncode == 1, r.stderr  # as `diff`: findings of severity warning or above
    assert r.stderr.strip() == "imptrace: report written to %s (%d bytes)" % (page, os.path.getsize(str(page)))
    same = call("report", runs["good"], runs["good"], "-o", str(tmp_path / "same.html"))
    assert same.returncode == 0, same.stderr
    assert call("diff", runs["good"], runs["bad"]).returncode == 1
    dash = call("report", runs["good"], runs["bad"], "-o", "-", cwd=str(tmp_path))
    assert dash.returncode == 1 and dash.stdout == page.read_text() and not (tmp_path / "-").exists()
    assert dash.stderr == ""
    bad = call("report", runs["good"], runs["bad"], "-o", str(tmp_path / "no" / "such" / "dir.html"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_timeline_legend_matches_bars(runs, tmp_path):
    """The import-time chart's legend promises the pink outline only when it draws one, and
    counts exactly the imports it marks (the chart's data: 1 in the ninth column)."""
    def chart(html):
        part = html.split("<h2>Import time</h2>", 1)[1]
        marked = sum(len(re.findall(r',1,"[^"]*"\]', data)) for data in re.findall(r"<script[^>]*>(.*?)</script>", part, re.S))
        return part.split("</p>", 1)[0], marked
    legend, drawn = chart(call("report", runs["good"], runs["bad"], "-o", "-").stdout)
    assert drawn > 0, "the finding's module (npugraph_ex, imported under torch_npu) is marked"
    assert re.findall(r"pink \((\d+)\)", legend) == [str(drawn)], legend
    legend, drawn = chart(call("report", runs["good"], runs["good"], "-o", "-").stdout)
    assert drawn == 0 and "pink" not in legend


def test_json_compact_unless_pretty(runs):
    for args in (["export", runs["bad"], "--format", "json"], ["export", runs["bad"], "--format", "chrome"],
                 ["diff", runs["good"], runs["bad"], "--format", "json"],
                 ["why", runs["bad"], "npugraph_ex", "--format", "json"]):
        compact = call(*args)
        pretty = call(*(args + ["--pretty"]))
        assert compact.stdout.count("\n") == 1, args
        assert pretty.stdout.count("\n") > 10, args
        assert json.loads(compact.stdout) == json.loads(pretty.stdout)


def test_no_colour_for_dumb_terminals(runs):
    import pty
    for extra, coloured in (({"TERM": "xterm"}, True), ({"TERM": "dumb"}, False), ({"TERM": "xterm", "NO_COLOR": "1"}, False)):
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(VIEWER, [VIEWER, "diff", runs["good"], runs["bad"]], clean_env(**extra))
        out = b""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        os.waitpid(pid, 0)
        assert (b"\x1b[" in out) == coloured, extra


def test_why_lists_each_binding_once(runs):
    text = call("why", runs["bad"], "npugraph_ex").stdout
    section = text.split("Children bound on", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert section and len(section) == len(set(section)), section
    assert text.count("Children bound on") == 1


def test_markdown_headline_counts_its_table(runs):
    md = call("diff", runs["good"], runs["bad"], "--format", "markdown").stdout
    m = re.search(r"\*\*(\d+)\*\* findings? \((\d+) error, (\d+) warning, (\d+) info\)", md)
    assert m, md[:500]
    rows = [l for l in md.splitlines() if re.match(r"^\| \d+ \| ", l)]
    assert int(m.group(1)) == len(rows) == int(m.group(2)) + int(m.group(3)) + int(m.group(4))
    for sev, n in (("error", 2), ("warning", 3), ("info", 4)):
        assert sum(1 for l in rows if l.split(" | ")[1] == sev) == int(m.group(n))
