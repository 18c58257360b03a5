"""Every command's help lists each option its parser accepts, one line each, and the
README's "Commands" section lists the same options."""
import os
import re
import subprocess

import pytest

from e2e_util import SRC, VIEWER

COMMANDS = ["show", "tree", "why", "export", "diff", "report", "run", "help"]
HELP_ONLY = {"-h", "--help"}  # handled by main.cpp for every command


def call(*args):
    return subprocess.run([VIEWER] + list(args), capture_output=True, text=True, timeout=60)


def names(spelling):
    """'-o, --output FILE' -> {'-o', '--output'}"""
    return {part.strip().split()[0] for part in spelling.split(", ") if part.strip().startswith("-")}


def help_options(cmd):
    r = call("help", cmd)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text == call(cmd, "--help").stdout if cmd != "help" else True
    section = text.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    opts = {}
    for line in section.splitlines():
        assert line.startswith("  -"), line
        spelling, desc = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        assert desc.strip(), line
        for n in names(spelling):
            opts[n] = spelling
    return opts


def documented_options():
    """{command: set of option names} from the README's Commands section."""
    def parse(path):
        if not os.path.exists(path):
            return None
        text = open(path).read()
        m = re.search(r"^## Commands\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        if not m:
            return None
        docs = {}
        for cmd, body in re.findall(r"^### imptrace (\w+)[^\n]*\n(.*?)(?=^### |\Z)", m.group(1), re.S | re.M):
            docs[cmd] = set()
            # Every option spelt in backticks before a bullet's dash; -h/--help, which every
            # command takes, is said once above the subsections.
            for bullet in re.findall(r"^- (`-.*?) \u2014 ", body, re.M):
                for spelling in re.findall(r"`(-[^`]*)`", bullet):
                    docs[cmd] |= names(spelling)
            docs[cmd] |= HELP_ONLY
        return docs if set(docs) >= set(COMMANDS) else None
    path = os.path.join(SRC, "README.md")
    docs = parse(path)
    if not docs:
        pytest.fail("README.md has no '## Commands' section with a subsection for every command")
    return path, docs


def parsed_options():
    """{command: option names its parser accepts}, read from the sources."""
    out = {}
    for f in sorted(os.listdir(os.path.join(SRC, "viewer"))):
        if not f.endswith(".cpp"):
            continue
        src = open(os.path.join(SRC, "viewer", f)).read()
        for m in re.finditer(r"int run_(\w+)\(const std::vector<std::string>& args\) \{(.*?)\n\}", src, re.S):
            cmd, body = m.group(1), m.group(2)
            calls = re.findall(r"parse_args\(args,\s*\{([^}]*)\}(?:,\s*\{([^}]*)\})?", body)
            found = set()
            for lists in calls:
                for lst in lists:
                    found |= set(re.findall(r'"(-[-\w]+)"', lst))
            if not calls:  # a hand-written parser (run): the options it compares against
                found = {o.rstrip("=") for o in re.findall(r'"(-[-\w]+=?)"', body)} - {"--"}
            out[cmd] = found
    return out


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_lists_what_the_parser_accepts(cmd):
    opts = help_options(cmd)
    assert HELP_ONLY <= set(opts)
    if cmd != "help":
        assert parsed_options()[cmd] == set(opts) - HELP_ONLY, cmd
        # each listed option is accepted (a usage error, if any, is not about the option)
        for name, spelling in opts.items():
            if name in HELP_ONLY:
                continue
            takes_value = " " in spelling.split(", ")[-1]
            args = [cmd, name] + (["x"] if takes_value else [])
            r = call(*args)
            assert "unknown option" not in r.stderr, (args, r.stderr)


def test_documentation_agrees_with_help():
    path, docs = documented_options()
    for cmd in COMMANDS:
        assert docs[cmd] == set(help_options(cmd)), (path, cmd)


def test_general_help_and_errors(tmp_path):
    r = call("help")
    assert r.returncode == 0
    for cmd in COMMANDS:
        assert "\n  %s " % cmd in r.stdout
    status = r.stdout.split("Exit status:\n", 1)[1]
    for code in ("0", "1", "2"):
        assert re.search(r"^  %s  " % code, status, re.M), status
    assert call("help", "diff").stdout != r.stdout
    bad = call("help", "frobnicate")
    assert bad.returncode == 2 and bad.stderr.startswith("imptrace: ")
    # `run`'s options end where CMD starts: the command's --help is its own
    ran = subprocess.run([VIEWER, "run", "-o", str(tmp_path / "x"), "--", "true", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0 and "usage: imptrace run" not in ran.stdout and "no trace in" in ran.stderr


def test_man_pages():
    for cmd in [None] + COMMANDS:
        r = call("help", "--man", *([cmd] if cmd else []))
        assert r.returncode == 0 and r.stdout.startswith(".TH IMPTRACE")
        if cmd:
            for name in help_options(cmd):
                assert name.replace("-", "\\-") in r.stdout, (cmd, name)


def test_version_names_commit():
    r = call("--version")
    assert r.returncode == 0
    line = r.stdout.strip()
    assert re.match(r"^imptrace \d+\.\d+\.\d+ \((git [0-9a-f]{7,}(-dirty)?|not built from git)\)$", line), line
    if "(git " in line and os.path.exists(os.path.join(SRC, ".git")):
        # the build names a commit of this checkout's history (HEAD when built after the
        # last commit; an ancestor when the tests run on a build made before it)
        commit = line.split("(git ", 1)[1].rstrip(")").split("-")[0]
        r = subprocess.run(["git", "-C", SRC, "merge-base", "--is-ancestor", commit, "HEAD"], capture_output=True)
        assert r.returncode == 0, (line, r.stderr)
