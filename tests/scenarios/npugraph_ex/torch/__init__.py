"""Stand-in for `torch`: only what the npugraph_ex failure depends on.

Like the real package, `torch._dynamo` is not imported with `torch`; a PEP 562
module `__getattr__` imports it on first attribute access.  This is what lets
torch_npu "defer" its dynamo work: touching `torch._dynamo` runs an import.
"""
import importlib

__version__ = "2.7.1+imptrace.scenario"

# Submodules loaded on first attribute access instead of at `import torch`.
_LAZY_SUBMODULES = ("_dynamo",)


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        # import_module binds the child on this package, so later accesses
        # find it in the module dict and never come back here.
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module {!r} has no attribute {!r}".format(__name__, name))
