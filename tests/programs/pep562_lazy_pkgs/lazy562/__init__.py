"""Hand-made PEP 562 lazy package: submodules are imported on first
attribute access by the module-level __getattr__, not by `import lazy562`."""
import importlib

_SUBMODULES = ("heavy", "other")

LOADS = []


def __getattr__(name):
    if name in _SUBMODULES:
        LOADS.append(name)
        # import_module binds the child on this package, so the next access
        # is an ordinary attribute hit and does not come back here.
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))


def __dir__():
    return sorted(list(globals()) + list(_SUBMODULES))
