"""GOOD build (before ee15004): dynamo integration is set up eagerly."""
import importlib
import sys

import torch


def add_dynamo_methods():
    # Eager: torch._dynamo (through torch's PEP 562 __getattr__) and the
    # bundled npugraph_ex copy are imported right now, at `import torch_npu`.
    dynamo = torch._dynamo
    real = importlib.import_module("torch_npu.dynamo.npugraph_ex")
    from torch_npu.dynamo import register_npugraph_ex_backend
    register_npugraph_ex_backend(dynamo, real)
    # The top-level name is only filled when nobody owns it yet: a standalone
    # npugraph_ex imported earlier (the smoke tests' case) keeps its object,
    # and with it the children bound on it.
    sys.modules.setdefault("npugraph_ex", real)
