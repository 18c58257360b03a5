"""What Python code can see of every module it has loaded, written as text so that a run
under the tracer and one without can be compared line by line (test_invisible.py).

    python invisible_probe.py OUT_FILE WORKDIR MODULE...

Imports MODULE... (a name that fails to import is noted, not fatal), then sets up proxies
of its own under sys.modules keys: a ModuleType subclass with __getattr__/__setattr__, a
plain-object proxy with __getattr__/__setattr__, and a PEP 562 module; each goes through
an import boundary (where the tracer learns of it) and then forwards. Then, for every
module in sys.modules: its vars() keys and the type of each value, and for each function
(at module level, and in the module's own classes) its signature, qualname, doc and
source; whether each module-level function pickles by reference; pydoc's text of the
proxy modules and of a few PEP 562 ones; and, in detail, the functions the tracer observes
to follow imports and the process's end (ENTRY_POINTS); what signal.getsignal() says of
every signal.
"""
import hashlib
import importlib
import inspect
import os
import pickle
import pydoc
import re
import sys
import types

ADDRESS = re.compile(r" at 0x[0-9a-f]+")

PROXIES = '''
import sys, types

class ModuleProxy(types.ModuleType):
    """A module subclass that forwards to another module."""
    def __getattr__(self, name):
        """Forwards a missing attribute to the target module."""
        target = self.__dict__["_target"]
        return getattr(target, name)

    def __setattr__(self, name, value):
        self.__dict__.setdefault("_writes", []).append(name)
        super().__setattr__(name, value)


class ObjectProxy:
    """Not a module at all: forwards everything."""
    def __init__(self, target):
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name, value):
        setattr(object.__getattribute__(self, "_target"), name, value)


def forward(name, default=None):
    """A module-level function, pickled by reference."""
    return default
'''

PEP562 = '''
"""A PEP 562 module."""
import importlib

_LAZY = {"dumps": "json", "sqrt": "math"}


def __getattr__(name):
    """Loads a few names on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
'''


def setup_proxies(workdir):
    with open(os.path.join(workdir, "invis_proxies.py"), "w") as f:
        f.write(PROXIES)
    with open(os.path.join(workdir, "invis_pep562.py"), "w") as f:
        f.write(PEP562)
    for name in ("invis_boundary_a", "invis_boundary_b"):
        with open(os.path.join(workdir, name + ".py"), "w") as f:
            f.write("X = 1\n")
    sys.path.insert(0, workdir)
    import invis_proxies
    import invis_pep562
    import json
    modproxy = invis_proxies.ModuleProxy("invis_modproxy")
    modproxy.__dict__["_target"] = json
    sys.modules["invis_modproxy"] = modproxy
    sys.modules["invis_objproxy"] = invis_proxies.ObjectProxy(types.SimpleNamespace(value=41))
    import invis_boundary_a  # an import boundary: the tracer looks at sys.modules here
    import invis_boundary_b
    out = []
    out.append("modproxy.dumps: %s" % modproxy.dumps([1]))
    out.append("modproxy.__name__: %s" % modproxy.__name__)
    try:
        modproxy.no_such_name
    except AttributeError as e:
        out.append("modproxy miss: %s" % e)
    modproxy.written = 1
    out.append("modproxy writes: %s" % modproxy.__dict__.get("_writes"))
    obj = sys.modules["invis_objproxy"]
    obj.value = 42
    out.append("objproxy.value: %s" % obj.value)
    out.append("pep562.sqrt(4): %s" % invis_pep562.sqrt(4))
    out.append("pep562 hasattr: %s %s" % (hasattr(invis_pep562, "dumps"), hasattr(invis_pep562, "nope")))
    out.append("pep562 getattr default: %s" % getattr(invis_pep562, "nope", "default"))
    from invis_pep562 import dumps  # noqa: F401  (IMPORT_FROM through the module's slot)
    return out


# The functions the tracer observes for its own work, each under every name Python code
# reaches it by: importlib's find-and-load and fromlist handling (importlib._bootstrap is
# _frozen_importlib), the exec functions and os._exit (os re-exports posix's builtins).
ENTRY_POINTS = [(("importlib._bootstrap", "_frozen_importlib"), "_find_and_load"),
                (("importlib._bootstrap", "_frozen_importlib"), "_handle_fromlist"),
                (("os", "posix"), "_exit"),
                (("os", "posix"), "execv"),
                (("os", "posix"), "execve")]


def describe_entry_points(lines):
    """Identity, type, names, signature, doc, source, code, repr and pickling of each entry
    point, as the line `entry MODULE.NAME WHAT=VALUE`."""
    import importlib._bootstrap  # noqa: F401  (imported by importlib already)
    for modules, name in ENTRY_POINTS:
        f = getattr(sys.modules[modules[0]], name)
        prefix = "entry %s.%s" % (modules[0], name)
        for m in modules:
            lines.append("%s same_in_%s=%s" % (prefix, m, outcome(
                lambda: sys.modules[m].__dict__[name] is f and getattr(sys.modules[m], name) is f)))
        lines.append("%s type=%s" % (prefix, type(f).__qualname__))
        for attr in ("__name__", "__qualname__", "__module__", "__text_signature__", "__wrapped__"):
            lines.append("%s %s=%s" % (prefix, attr, outcome(lambda: getattr(f, attr))))
        lines.append("%s self=%s" % (prefix, outcome(lambda: f.__self__)))
        lines.append("%s isfunction=%s isbuiltin=%s" % (prefix, inspect.isfunction(f), inspect.isbuiltin(f)))
        lines.append("%s repr=%s" % (prefix, text(repr(f))))
        describe_function(prefix, f, lines)
        lines.append("%s doc_text=%s" % (prefix, outcome(lambda: f.__doc__.splitlines()[0])))
        lines.append("%s code=%s" % (prefix, outcome(lambda: (
            f.__code__.co_name, f.__code__.co_filename, f.__code__.co_firstlineno, f.__code__.co_varnames,
            hashlib.sha1(f.__code__.co_code).hexdigest()))))
        lines.append("%s globals_are_module=%s" % (prefix, outcome(
            lambda: f.__globals__ is sys.modules[modules[0]].__dict__)))
        lines.append("%s defaults=%s kwdefaults=%s" % (prefix, outcome(lambda: f.__defaults__),
                                                         outcome(lambda: f.__kwdefaults__)))
        lines.append("%s pickles=%s" % (prefix, outcome(lambda: pickle.loads(pickle.dumps(f)) is f)))
        lines.append("%s reduce=%s" % (prefix, outcome(lambda: f.__reduce__())))


def describe_signal_handlers(lines):
    """What signal.getsignal() says of every signal. The tracer's end-of-process handlers
    (the fatal signals, SIGTERM) are installed after CPython read the handlers: SIG_DFL stays."""
    import signal
    for s in sorted(signal.valid_signals()):
        lines.append("signal %d handler=%s" % (s, outcome(lambda: repr(signal.getsignal(s)))))


WORKDIR = None  # where the probe's own modules are written: differs between the two runs


def text(value):
    """What differs between any two runs, traced or not: addresses, this process's id (numpy
    puts /proc/<pid>/stat in default arguments), the probe's own directory."""
    value = ADDRESS.sub(" at 0x?", str(value)).replace("/proc/%d/" % os.getpid(), "/proc/<pid>/")
    return value.replace(WORKDIR, "<work>") if WORKDIR else value


def outcome(fn):
    try:
        return text(fn())
    except Exception as e:  # what fails must fail the same way
        return "%s: %s" % (type(e).__name__, text(e))


def describe_function(prefix, f, lines):
    lines.append("%s qualname=%s" % (prefix, outcome(lambda: f.__qualname__)))
    lines.append("%s signature=%s" % (prefix, outcome(lambda: inspect.signature(f))))
    lines.append("%s doc=%s" % (prefix, outcome(lambda: hashlib.sha1(text(f.__doc__).encode()).hexdigest())))
    lines.append("%s source=%s" % (prefix, outcome(
        lambda: hashlib.sha1(text(inspect.getsource(f)).encode()).hexdigest())))


def is_function(v):
    return isinstance(v, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                          types.WrapperDescriptorType, types.MethodDescriptorType, staticmethod, classmethod))


def describe_module(name, m, lines):
    d = m.__dict__ if isinstance(m, types.ModuleType) else vars(m)
    lines.append("module %s type=%s" % (name, type(m).__qualname__))
    for key in list(d):
        v = d[key]
        lines.append("  %s: %s" % (key, type(v).__qualname__))
        if is_function(v):
            describe_function("    ", v, lines)
            if isinstance(v, types.FunctionType) and v.__module__ == name and v.__qualname__ == key:
                lines.append("    pickles=%s" % outcome(lambda: pickle.loads(pickle.dumps(v)) is v))
        elif isinstance(v, type) and getattr(v, "__module__", None) == name:
            # A class's members in name order: some are made in a loop over a set of
            # objects hashed by address (scipy.sparse's ufunc methods), and addresses
            # differ between any two processes that allocate differently.
            for ck, cv in sorted(vars(v).items()):
                lines.append("    %s.%s: %s" % (key, ck, type(cv).__qualname__))
                if is_function(cv):
                    describe_function("      ", cv, lines)


def main():
    global WORKDIR
    out_file, workdir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    WORKDIR = workdir
    lines = []
    for n in names:
        try:
            importlib.import_module(n)
            lines.append("imported %s" % n)
        except Exception as e:
            lines.append("not imported %s: %s" % (n, type(e).__name__))
    lines += setup_proxies(workdir)
    modules = sorted((k, v) for k, v in list(sys.modules.items()) if isinstance(k, str))
    for name, m in modules:
        describe_module(name, m, lines)
    describe_entry_points(lines)
    describe_signal_handlers(lines)
    for name in ("invis_modproxy", "invis_pep562", "invis_proxies", "concurrent.futures", "json"):
        if name in sys.modules:
            doc = pydoc.render_doc(sys.modules[name], renderer=pydoc.plaintext)
            lines.append("pydoc %s:" % name)
            lines.extend("  " + text(line) for line in doc.splitlines())
    with open(out_file, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
