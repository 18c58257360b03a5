"""BAD build: torch_npu.dynamo with the deferred-import proxy of ee15004."""
import importlib
import sys
import types


def register_npugraph_ex_backend(dynamo, npugraph_ex_module):
    dynamo.register_backend("npugraph_ex", npugraph_ex_module.get_npu_backend())


class _LazyNpuGraphEx(types.ModuleType):
    """Sits under sys.modules['npugraph_ex'] and loads the bundled copy,
    `torch_npu.dynamo.npugraph_ex`, on first attribute access.

    It forwards lookups to that copy only: children the import system bound
    on a previous `npugraph_ex` object (the standalone package) are not
    reachable through it, and the copy's own absolute imports
    (`from npugraph_ex.npu_fx_compiler import ...`) are satisfied from
    sys.modules without binding anything on the copy.
    """

    @property
    def _npugraph_ex(self):
        # Cached in the instance dict: later lookups don't import again.
        real = self.__dict__.get("_npugraph_ex_module")
        if real is None:
            import torch
            # The deferred part of ee15004: torch._dynamo is first touched
            # here (PEP 562 import in torch), not at `import torch_npu`.
            dynamo = torch._dynamo
            real = importlib.import_module("torch_npu.dynamo.npugraph_ex")
            register_npugraph_ex_backend(dynamo, real)
            self.__dict__["_npugraph_ex_module"] = real
        return real

    def __getattr__(self, name):
        return getattr(self._npugraph_ex, name)


def install_lazy_npugraph_ex():
    # Unconditional: replaces a standalone npugraph_ex that is already imported.
    sys.modules["npugraph_ex"] = _LazyNpuGraphEx("npugraph_ex")
