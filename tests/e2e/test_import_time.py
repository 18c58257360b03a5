"""Import time as people look at it, on real runs: `tree`'s filters on Debian's `import
torch`, failed imports handled vs propagated in `show`, and the one-run and two-run HTML
reports rendered in headless Chromium (the chart draws, hover tells, click zooms, every
anomaly's link reaches its story)."""
import html
import json
import os
import re
import shutil
import subprocess

import pytest

from e2e_util import PROGRAMS, VIEWER, run, traces

PY = "/usr/bin/python3"
TREE_LINE = re.compile(r"^  \s*(\d+\.\d+)\s+(\d+\.\d+)  ( *)(\S+)")


def call(*args):
    return subprocess.run([VIEWER] + list(args), capture_output=True, text=True, timeout=300)


def tree_rows(text):
    """(cumulative ms, self ms, depth, module) of each import line of `imptrace tree`."""
    rows = []
    for line in text.splitlines():
        m = TREE_LINE.match(line)
        if m:
            rows.append((float(m.group(1)), float(m.group(2)), len(m.group(3)) // 2, m.group(4)))
    return rows


def siblings(rows, column):
    """`column` (0 cumulative, 1 self) of each import, grouped by the path of its importers."""
    out = {}
    path = []
    for row in rows:
        path[row[2]:] = [row[3]]
        out.setdefault(tuple(path[:-1]), []).append(row[column])
    return out


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory):
    if subprocess.run([PY, "-c", "import torch"], capture_output=True, timeout=300).returncode != 0:
        pytest.fail("Debian's python3-torch is needed (scripts/deps.sh installs it)")
    d = str(tmp_path_factory.mktemp("torch"))
    r = run([PY, "-c", "import torch"], traced=True, outdir=d)
    assert r.returncode == 0, r.stderr
    assert len(traces(d)) == 1
    return d


APP = """\
import subprocess, sys
subprocess.run([sys.executable, "-c", "import csv"], check=True)
try:
    import optional_accel  # not installed: the program copes
except ImportError:
    pass
import {last}
"""


@pytest.fixture(scope="module")
def failing_runs(tmp_path_factory):
    """A good run and a bad one whose last import fails because of what it imports."""
    src = tmp_path_factory.mktemp("src")
    (src / "needs_missing.py").write_text("import time\ntime.sleep(0.05)\nimport missing_mod\n")
    (src / "fine.py").write_text("import time\ntime.sleep(0.05)\n")
    (src / "good.py").write_text(APP.format(last="fine"))
    (src / "bad.py").write_text(APP.format(last="needs_missing"))
    out = {}
    for name in ("good", "bad"):
        d = str(tmp_path_factory.mktemp(name))
        r = run([PY, str(src / (name + ".py"))], traced=True, outdir=d, cwd=str(src))
        assert r.returncode == (0 if name == "good" else 1), r.stderr
        assert len(traces(d)) == 2, traces(d)  # the program and its `python -c "import csv"`
        out[name] = d
    return out


def chromium():
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("headless Chromium is needed (scripts/deps.sh installs chromium-headless-shell)")


# Appended to a copy of the report: drives the page's own chart like a user (hover, click
# on the bar of `target`, then the "all" crumb) and writes what it saw into the page.
PROBE = """
<script>
(function(){
var target=%s, out={};
out.flames=document.querySelectorAll('div.flame').length;
out.threads=[].map.call(document.querySelectorAll('.fthread .fhead'),function(h){return h.textContent;});
var bars=document.querySelectorAll('.flame .fbar'), bar=null;
out.bars=bars.length;
out.hot=document.querySelectorAll('.fbar.hot').length;
out.hot_names=[].map.call(document.querySelectorAll('.fbar.hot'),function(b){return b.title.split('\\n')[0];});
bars.forEach(function(b){if(!bar&&b.title.split('\\n')[0]===target)bar=b;});
out.found=!!bar;
if(bar){
  var sec=bar.closest('.fthread');
  bar.dispatchEvent(new MouseEvent('mouseover',{bubbles:true}));
  out.info=sec.querySelector('.finfo').textContent;
  out.before=sec.querySelectorAll('.fbar').length;
  bar.dispatchEvent(new MouseEvent('click',{bubbles:true}));
  var now=sec.querySelectorAll('.fbar'),top=null;
  now.forEach(function(b){if(b.style.top==='0px')top=b;});
  out.zoomed=now.length;
  out.zoomed_top=top?top.title.split('\\n')[0]:null;
  out.zoomed_top_width=top?parseFloat(top.style.width):0;
  out.chart_width=sec.querySelector('.fchart').clientWidth;
  out.head=sec.querySelector('.fhead').textContent;
  sec.querySelector('.fcrumb').click();
  out.unzoomed=sec.querySelectorAll('.fbar').length;
}
var links=[].map.call(document.querySelectorAll('a[href^="#why-"]'),function(a){return a.getAttribute('href').slice(1);});
out.links=links.length;
out.broken_links=links.filter(function(id){return !document.getElementById(id);});
var pre=document.createElement('pre');pre.id='probe';pre.textContent=JSON.stringify(out);document.body.appendChild(pre);
})();
</script>
"""


def render(report, target, tmp_path):
    """Loads `report` in headless Chromium with PROBE appended; returns what PROBE saw."""
    page = tmp_path / "probed.html"
    text = open(report, encoding="utf-8").read()
    assert text.rstrip().endswith("</body></html>")
    page.write_text(text.replace("</body></html>", PROBE % json.dumps(target) + "</body></html>"),
                    encoding="utf-8")
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=" + str(tmp_path / "profile"), "--window-size=1400,1000",
                        "--virtual-time-budget=10000", "--dump-dom", "file://" + str(page)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="probe">(.*?)</pre>', r.stdout, re.S)
    assert m, "the page's script did not run: " + r.stdout[-2000:]
    return json.loads(html.unescape(m.group(1)))


def test_tree_filters_on_torch(torch_run):
    full = call("tree", torch_run)
    assert full.returncode == 0, full.stderr
    rows = tree_rows(full.stdout)
    assert len(rows) > 500 and (0, "torch") in [(r[2], r[3]) for r in rows], full.stdout[:500]
    header = full.stdout.splitlines()[0]
    assert re.match(r"process \d+: /usr/bin/python3 -c 'import torch'  \[python 3\.\d+\.\d+ static, \d+ imports, ",
                    header), header

    cut = call("tree", torch_run, "--min-ms", "5")
    rows5 = tree_rows(cut.stdout)
    assert 0 < len(rows5) < len(rows) / 2
    assert all(r[0] >= 5.0 for r in rows5)
    assert re.search(r"\((\d+) of %d imports shown\)" % len(rows), cut.stdout), cut.stdout[-300:]
    # The same imports, in the same order, as the full tree's lines of 5 ms or more.
    assert [r[3] for r in rows5] == [r[3] for r in rows if r[0] >= 5.0]

    deep = tree_rows(call("tree", torch_run, "--depth", "2").stdout)
    assert {r[2] for r in deep} == {0, 1}

    top = call("tree", torch_run, "--sort", "cumulative", "--top", "3", "--depth", "3")
    trows = tree_rows(top.stdout)
    assert "more (" in top.stdout
    for kids in siblings(trows, 0).values():
        assert len(kids) <= 3
        assert kids == sorted(kids, reverse=True)  # --sort cumulative, per level

    self_sorted = tree_rows(call("tree", torch_run, "--sort", "self", "--depth", "2").stdout)
    levels = siblings(self_sorted, 1)
    assert max(len(k) for k in levels.values()) > 5
    for kids in levels.values():
        assert kids == sorted(kids, reverse=True)  # --sort self, per level

    under = call("tree", torch_run, "--under", "torch.nn")
    urows = tree_rows(under.stdout)
    assert urows and all(r[3] == "torch.nn" or r[3].startswith("torch.nn.") for r in urows if r[2] == 0)
    assert "imports of torch.nn" in under.stdout
    assert len(urows) < len(rows)


def test_show_counts_handled_failures_of_torch(torch_run):
    r = call("show", torch_run)
    assert r.returncode == 0, r.stderr
    m = re.search(r"imports: \d+ \((\d+) failed[;)]", r.stdout)
    assert m and int(m.group(1)) > 10, r.stdout[:800]
    # `import torch` works: every failure on the way was an optional dependency's probe.
    assert "failed imports handled by their importer: %s (" % m.group(1) in r.stdout, r.stdout[:1500]
    assert "propagated" not in r.stdout
    assert "    org.python.core: " not in r.stdout
    everything = call("show", torch_run, "--all")
    assert "    org.python.core: ModuleNotFoundError: No module named 'org'\n      imported at copy.py:" in everything.stdout
    assert everything.stdout.count("ModuleNotFoundError") + everything.stdout.count("ImportError") >= int(m.group(1))


def test_failures_that_propagated_stand_apart(failing_runs):
    r = call("show", failing_runs["bad"])
    assert r.returncode == 0, r.stderr
    prop, _, handled = r.stdout.partition("failed imports handled by their importer")
    assert "failed imports that propagated" in prop
    assert "    missing_mod: ModuleNotFoundError: No module named 'missing_mod'\n      imported at needs_missing.py:3" in prop
    # needs_missing only carried missing_mod's error out: told with the import that raised it.
    assert "raised here; 1 enclosing import failed with it: needs_missing\n" in prop, prop
    assert "    needs_missing: ModuleNotFoundError" not in prop, prop
    assert "optional_accel" not in prop and "optional_accel" in handled
    # Two processes, each with its header, in one tree.
    t = call("tree", failing_runs["bad"])
    assert t.returncode == 0, t.stderr
    headers = [l for l in t.stdout.splitlines() if l.startswith("process ")]
    assert len(headers) == 2, t.stdout
    assert any("bad.py" in h for h in headers) and any("-c 'import csv'" in h for h in headers)
    assert "missing_mod  FAILED ModuleNotFoundError: No module named 'missing_mod' (propagated)" in t.stdout
    assert "optional_accel  FAILED ModuleNotFoundError: No module named 'optional_accel' (handled)" in t.stdout
    # diff: the propagating failure is an error-level finding above anything handled.
    d = call("diff", failing_runs["good"], failing_runs["bad"], "--format", "json")
    assert d.returncode == 1, d.stderr
    findings = json.loads(d.stdout)["findings"]
    failed = [f for f in findings if f["kind"] == "import_failed"]
    assert failed and failed[0]["module"] in ("needs_missing", "missing_mod"), findings


def test_one_run_report_in_chromium(torch_run, tmp_path):
    out = tmp_path / "torch.html"
    r = call("report", torch_run, "-o", str(out))
    assert r.returncode == 0 and r.stderr.startswith("imptrace: report written to "), r.stderr
    text = out.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text and "src=" not in text.replace("data-src=", "")
    for section in ('id="chart"', 'id="slowest"', 'id="failed"', 'id="anomalies"', "<table class=\"handled\">"):
        assert section in text
    seen = render(str(out), "torch.nn", tmp_path)
    assert seen["flames"] == 1 and seen["bars"] > 100, seen
    assert seen["found"], seen
    assert seen["info"].startswith("torch.nn\ncumulative ") and "self " in seen["info"], seen["info"]
    assert "imported at torch/" in seen["info"], seen["info"]
    # Zoomed to torch.nn: it spans the chart, its subtree is all that is drawn.
    assert seen["zoomed_top"] == "torch.nn", seen
    assert seen["zoomed_top_width"] > 0.95 * seen["chart_width"], seen
    assert 1 < seen["zoomed"] < seen["before"], seen
    assert "zoomed: all \u203a torch \u203a" in seen["head"] and seen["head"].endswith("torch.nn"), seen["head"]
    assert seen["unzoomed"] == seen["before"], seen
    # torch's modules that put wrappers under their own names (torch._VF, torch.backends.*)
    # are its design: no anomaly, no story to link.
    assert "0 identity anomalies" in text and seen["links"] == 0, seen
    assert "Why: sys.modules['torch._VF']" not in text


FOREIGN_PROXY = """\
import sys, types
import json
class Lazy(types.ModuleType):
    def __getattr__(self, name):
        return getattr(sys.modules["json"], name)
sys.modules["jsonish"] = Lazy("jsonish")  # not under json's name, nor during its import
import jsonish
jsonish.dumps
"""


def test_one_run_report_links_anomalies_to_their_stories(tmp_path):
    (tmp_path / "app.py").write_text(FOREIGN_PROXY)
    d = str(tmp_path / "t")
    assert run([PY, str(tmp_path / "app.py")], traced=True, outdir=d).returncode == 0
    out = tmp_path / "app.html"
    assert call("report", d, "-o", str(out)).returncode == 0
    text = out.read_text(encoding="utf-8")
    links = re.findall(r'<a href="#(why-[^"]+)">', text)
    assert "why-jsonish" in links, text[:3000]
    assert all('id="%s"' % l in text for l in links), links
    assert "<h3 id=\"why-jsonish\">Why: sys.modules['jsonish']</h3>" in text


def test_two_run_report_charts_both_sides_and_marks_findings(failing_runs, tmp_path):
    out = tmp_path / "diff.html"
    r = call("report", failing_runs["good"], failing_runs["bad"], "-o", str(out))
    assert r.returncode == 1, r.stderr  # exits as diff does: the failed import is a finding
    seen = render(str(out), "needs_missing", tmp_path)
    assert seen["flames"] == 4, seen  # two processes a side
    assert seen["found"] and "FAILED (propagated): ModuleNotFoundError" in seen["info"], seen
    assert "needs_missing" in seen["hot_names"], seen


def test_one_run_report_charts_each_thread(tmp_path):
    d = str(tmp_path / "t")
    r = run([PY, PROGRAMS + "/threads_import.py"], traced=True, outdir=d)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "threads.html"
    assert call("report", d, "-o", str(out)).returncode == 0
    seen = render(str(out), "thr_mod_3", tmp_path)
    # The main thread and the eight importing threads, each its own chart.
    assert len(seen["threads"]) == 9, seen["threads"]
    assert seen["found"] and seen["zoomed_top"] == "thr_mod_3", seen
    assert seen["zoomed"] == 2, seen  # thr_mod_3 and the thr_dep_3 it imports
    t = call("tree", d, "--under", "thr_mod_3")
    assert [r[3] for r in tree_rows(t.stdout)] == ["thr_mod_3", "thr_dep_3"], t.stdout


def test_bad_input_is_one_line_and_exit_2(torch_run, tmp_path):
    cases = [
        ["report", str(tmp_path / "nope"), "-o", str(tmp_path / "x.html")],
        ["report", torch_run, "-o", str(tmp_path / "no" / "such" / "dir.html")],
        ["report", torch_run],
        ["report", torch_run, "-o", str(tmp_path / "x.html"), "--slower-threshold", "2x"],
        ["tree", torch_run, "--min-ms", "fast"],
        ["tree", torch_run, "--sort", "name"],
        ["tree", torch_run, "--top", "0"],
        ["tree", torch_run, "--depth", "-1"],
        ["tree", torch_run, "--under", ""],
        ["show", torch_run, "--all=1"],
    ]
    for args in cases:
        r = call(*args)
        assert r.returncode == 2, (args, r.returncode, r.stdout[:200])
        first = r.stderr.splitlines()[0] if r.stderr else ""
        assert first.startswith("imptrace: ") and "Traceback" not in r.stderr, (args, r.stderr)
        # A usage error adds the usage line; an input error is that one line alone.
        assert len(r.stderr.splitlines()) == 1 or r.stderr.splitlines()[1].startswith("usage: imptrace"), r.stderr
    assert not (tmp_path / "x.html").exists()
