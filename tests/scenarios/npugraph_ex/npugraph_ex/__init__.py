"""Stand-in for torchair's separately packaged `npugraph_ex`.

The same directory is used twice by the CI pipeline: as the standalone project
(`workspace/torchair/npugraph_ex`, found through PYTHONPATH as top-level
`npugraph_ex`) and as a copy inside torch_npu
(`site-packages/torch_npu/dynamo/npugraph_ex`, module name
`torch_npu.dynamo.npugraph_ex`).  The absolute self-import below is the one from
the report: in the copy it still names the *top-level* `npugraph_ex`, so it is
satisfied by whatever sys.modules holds under that name, and the child module
it loads is bound on that object, never on the copy.
"""
from npugraph_ex.npu_fx_compiler import (
    compile_fx, get_npu_backend, get_compiler
)

__all__ = ["compile_fx", "get_npu_backend", "get_compiler"]
