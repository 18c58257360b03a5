"""Symbol hygiene of libimptrace.so.

- DT_NEEDED names only the C library family (libc, libm, libdl, libpthread, the loader).
- The dynamic symbol table defines only the two libpython functions the tracer interposes
  (Py_NewInterpreter, Py_NewInterpreterFromConfig: embedding.h), every other symbol being
  local by exports.map, and what it needs is versioned glibc only: no libstdc++, libgcc_s/libunwind (_Unwind_*),
  libprotobuf or libpython symbol, defined or undefined.
- At run time (LD_DEBUG=bindings, Debian python3 importing torch, which brings its own
  libstdc++/libgcc_s/protobuf): no object of the host binds any symbol to libimptrace.so,
  and every _Unwind_* binding goes to a library other than ours.
- Inert in a program that is not Python (what a CI job that exports LD_PRELOAD runs most):
  /bin/true with the library preloaded makes no system call that it makes with an empty
  preloaded library (the library's own segments aside), binds no libc function but
  dl_iterate_phdr (the constructor's one question) and, at load, looks up no symbol at all
  (no C runtime start files; no address of `environ`, of an exported function or of a libc
  function taken at load: lazily bound calls only). Counted, not timed: bench/results.md has the figures.
- C++ exceptions thrown and caught inside Debian's python3-torch (tensor index out of
  range -> IndexError, shape mismatch -> RuntimeError, both caught and uncaught) give the
  same stdout, stderr and exit status traced and untraced.
- Built with its profile (IMPTRACE_PGO, tracer/CMakeLists.txt): the profile training ran to
  its end on every interpreter the build named, and left the counts the library was
  compiled with (a tracer that crashed or failed the training program there would be
  skipped by the training and leave that interpreter's paths unprofiled).
"""
import os
import re
import subprocess

import pytest

from e2e_util import BUILD, LIB, export, protoc_decodes, run, traces

PY = "/usr/bin/python3"

ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# Weak references every shared object built by gcc carries (crtstuff), not bound to anything
# of a C++ runtime.
WEAK_CRT = {"_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__gmon_start__",
            "__cxa_finalize"}
FORBIDDEN = re.compile(r"^(_Unwind_|_ZSt|_ZNSt|_ZNKSt|_ZTI|_ZTS|_ZTV|__cxa_(?!atexit$|finalize$)|"
                       r"__gxx_|_ZN6google|_ZN\d+google|Py|_Py|unw_|_U[A-Z]|__gcc_personality)")


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def cache_value(name):
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return None


def test_built_with_a_profile_trained_on_every_interpreter_named():
    if cache_value("IMPTRACE_PGO") not in ("ON", "1", "TRUE"):
        pytest.skip("this build has no profile-guided optimisation (IMPTRACE_PGO off)")
    named = [p for p in (cache_value("IMPTRACE_PGO_PYTHONS") or "").split(";") if p and not p.endswith("-NOTFOUND")]
    if not named:
        pytest.skip("no interpreter named to train the profile on (IMPTRACE_PGO_PYTHONS empty)")
    with open(os.path.join(BUILD, "pgo", "training.txt")) as f:
        report = f.read().splitlines()
    trained = [line[len("trained on "):] for line in report if line.startswith("trained on ")]
    assert trained == named, report
    counts = os.path.join(BUILD, "pgo", "tracer.gcda")
    assert "profile: %s (%d bytes)" % (counts, os.path.getsize(counts)) in report


def dyn_symbols(*flags):
    r = subprocess.run(["nm", "-D"] + list(flags) + [LIB], capture_output=True, text=True, check=True)
    syms = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        kind, name = parts[-2], parts[-1]
        base, _, version = name.partition("@")
        syms.append((kind, base, version.lstrip("@")))
    return syms


def test_needed_is_libc_family_only():
    r = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True, check=True)
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout))
    assert needed, r.stdout
    assert needed <= ALLOWED_NEEDED, "unexpected DT_NEEDED: %s" % sorted(needed - ALLOWED_NEEDED)


INTERPOSED = ["Py_NewInterpreter", "Py_NewInterpreterFromConfig"]


def test_exports_only_the_interposed_functions():
    defined = dyn_symbols("--defined-only")
    # No entry point (constructor + hooks by pointer); only the interposers of embedding.h.
    assert sorted(name for _, name, _ in defined) == INTERPOSED, "libimptrace.so exports %s" % defined
    assert all(kind == "T" for kind, _, _ in defined), defined


def test_undefined_symbols_are_versioned_glibc_only():
    bad = []
    for kind, name, version in dyn_symbols("--undefined-only"):
        if FORBIDDEN.match(name):
            bad.append(name)
        elif name in WEAK_CRT or kind in ("w", "v"):
            continue
        elif not version.startswith("GLIBC_"):
            bad.append("%s@%s" % (name, version))
    assert bad == [], "symbols outside versioned glibc: %s" % bad


def test_no_cxx_runtime_or_protobuf_symbols_at_all():
    r = subprocess.run(["nm", "-D", LIB], capture_output=True, text=True, check=True)
    for needle in ("_Unwind_", "protobuf", "GLIBCXX", "CXXABI", "__gxx_personality", "unw_"):
        assert needle not in r.stdout, needle


# Symbols the loader must look up through every loaded object before main, in every
# process the library is preloaded into: none (calls are bound lazily, at first use).
LOAD_TIME_SYMBOLS = set()


def test_no_symbol_is_looked_up_at_load():
    r = subprocess.run(["readelf", "-rW", LIB], capture_output=True, text=True, check=True)
    looked_up, section = [], None
    for line in r.stdout.splitlines():
        m = re.match(r"Relocation section '([^']+)'", line)
        if m:
            section = m.group(1)
            continue
        fields = line.split()
        # offset, info, type, symbol value, symbol name[@version], "+", addend
        if section and not section.endswith(".plt") and len(fields) >= 5 and re.match(r"^[0-9a-f]{8,}$", fields[0]):
            looked_up.append(fields[4].split("@")[0])
    assert set(looked_up) <= LOAD_TIME_SYMBOLS, "resolved at load in every process: %s" % looked_up
    d = subprocess.run(["readelf", "-dW", LIB], capture_output=True, text=True, check=True).stdout
    assert "BIND_NOW" not in d and "(NOW)" not in d, "libc imports must bind lazily"
    assert "(INIT)" not in d, "C runtime start files linked in (crti/crtbeginS)"


def strace_names(tmp_path, preload, cmd):
    out = tmp_path / ("strace.%s" % os.path.basename(preload))
    subprocess.run(["strace", "-f", "-qq", "-o", str(out)] + cmd, env={"LD_PRELOAD": preload, "PATH": "/usr/bin:/bin"},
                   check=True, capture_output=True)
    names = []
    for line in out.read_text().splitlines():
        m = re.match(r"^(?:\d+\s+)?([a-z0-9_]+)\(", line)
        # The loader maps each library's own segments (their number differs with its
        # layout): mmap/mprotect/munmap are left out; every other call must match.
        if m and m.group(1) not in ("mmap", "mprotect", "munmap"):
            names.append(m.group(1))
    return names


@pytest.fixture(scope="module")
def empty_library(tmp_path_factory):
    d = tmp_path_factory.mktemp("empty")
    (d / "empty.c").write_text("void imptrace_test_empty(void) {}\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(d / "libempty.so"), str(d / "empty.c")], check=True)
    return str(d / "libempty.so")


def test_inert_in_a_program_that_is_not_python(empty_library, tmp_path):
    assert strace_names(tmp_path, LIB, ["/bin/true"]) == strace_names(tmp_path, empty_library, ["/bin/true"])
    r = subprocess.run(["/bin/true"], env={"LD_PRELOAD": LIB, "LD_DEBUG": "bindings"}, capture_output=True, text=True,
                       check=True)
    bound = set(re.findall(r"binding file \S*libimptrace\.so \[0\] to \S+ \[0\]: normal symbol `([^']+)'", r.stderr))
    assert bound, r.stderr
    assert bound <= LOAD_TIME_SYMBOLS | {"dl_iterate_phdr"}, "bound in a process that is not Python: %s" % sorted(bound)
    assert "Py_IsInitialized" not in r.stderr, "the constructor asked dlsym"


# With native stacks on, the tracer dlopens libunwind.so.8 RTLD_LOCAL: nothing binds to it
# but what links it itself (Debian's torch loads libgstreamer, which does), so its _Unwind_*
# and backtrace never take over the host's exceptions.
@pytest.mark.skipif(not have_torch(), reason="Debian python3-torch not installed")
@pytest.mark.parametrize("native", ["", "1"], ids=["", "native_stacks"])
def test_ld_debug_bindings_nothing_binds_to_us(native, tmp_path):
    out = tmp_path / "out"
    logs = tmp_path / "ld"
    logs.mkdir()
    code = ("import torch\n"
            "try:\n    torch.zeros(3)[5]\nexcept IndexError as e:\n    print(e)\n")
    r = run([PY, "-c", code], traced=True, outdir=str(out),
            env={"LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(logs / "ld"), "IMPTRACE_NATIVE_STACKS": native})
    assert r.returncode == 0, r.stderr
    assert "out of bounds" in r.stdout
    lib = os.path.realpath(LIB)
    bound_to_us, unwind_seen, unwind_to_us, to_libunwind = [], 0, [], []
    links_libunwind = {}
    pat = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")
    for f in os.listdir(str(logs)):
        with open(str(logs / f), errors="replace") as fh:
            for line in fh:
                m = pat.search(line)
                if not m:
                    continue
                src, dst, sym = m.groups()
                src, dst = os.path.realpath(src), os.path.realpath(dst)
                if "libunwind.so" in dst and "libunwind.so" not in src:
                    if src not in links_libunwind:
                        d = subprocess.run(["readelf", "-d", src], capture_output=True, text=True).stdout
                        links_libunwind[src] = "[libunwind.so" in d
                    if not links_libunwind[src]:
                        to_libunwind.append(line.strip())
                if sym.startswith("_Unwind_"):
                    unwind_seen += 1
                    if dst == lib:
                        unwind_to_us.append(line.strip())
                if dst == lib and src != lib:
                    bound_to_us.append(line.strip())
    assert unwind_seen > 0, "torch raised no C++ exception through the unwinder?"
    assert unwind_to_us == []
    assert bound_to_us == [], bound_to_us[:5]
    assert to_libunwind == [], to_libunwind[:5]
    files = traces(str(out))
    assert len(files) == 1
    protoc_decodes(files[0])
    if native:
        assert any(i.get("native_stack") for i in export(files[0])["processes"][0]["imports"])


TORCH_PROGRAMS = {
    # Several C++ exceptions thrown in libtorch and caught there or turned into Python
    # errors, on the main thread and on four others at once.
    "caught": ("import torch, threading\n"
               "for i in range(300):\n"
               "    try:\n        torch.zeros(3)[5 + i]\n"
               "    except IndexError as e:\n        last = e\n"
               "print(type(last).__name__, last)\n"
               "try:\n    torch.ones(2, 3) @ torch.ones(4, 5)\n"
               "except RuntimeError as e:\n    print(type(e).__name__, e)\n"
               "errs = []\n"
               "def work():\n"
               "    for i in range(100):\n"
               "        try:\n            torch.zeros(2)[7]\n"
               "        except IndexError as e:\n            errs.append(str(e))\n"
               "ts = [threading.Thread(target=work) for _ in range(4)]\n"
               "[t.start() for t in ts]; [t.join() for t in ts]\n"
               "print(len(errs), sorted(set(errs)))\n"),
    "index_uncaught": "import torch\nprint('before', flush=True)\ntorch.zeros(3)[5]\n",
}


@pytest.mark.skipif(not have_torch(), reason="Debian python3-torch not installed")
@pytest.mark.parametrize("name", sorted(TORCH_PROGRAMS))
@pytest.mark.parametrize("native", ["", "1"], ids=["", "native_stacks"])
def test_torch_cxx_exceptions_same_traced(name, native, tmp_path):
    code = TORCH_PROGRAMS[name]
    plain = run([PY, "-c", code], traced=False, cwd=str(tmp_path))
    traced = run([PY, "-c", code], traced=True, outdir=str(tmp_path / "t"), cwd=str(tmp_path),
                 env={"IMPTRACE_NATIVE_STACKS": native})
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    if name == "index_uncaught":
        assert plain.returncode == 1 and "IndexError: index 5 is out of bounds" in plain.stderr
    else:
        assert plain.returncode == 0, plain.stderr
    files = traces(str(tmp_path / "t"))
    assert len(files) == 1
    protoc_decodes(files[0])
