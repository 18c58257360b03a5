"""GOOD build: torch_npu.dynamo, no lazy proxy."""


def register_npugraph_ex_backend(dynamo, npugraph_ex_module):
    dynamo.register_backend("npugraph_ex", npugraph_ex_module.get_npu_backend())
