"""BAD build (models torch_npu ee15004 "defer dynamo and inductor imports").

Nothing dynamo-related is imported here any more; instead a lazy proxy is
installed under the top-level name `npugraph_ex`.
"""
import torch_npu.dynamo


def add_dynamo_methods():
    torch_npu.dynamo.install_lazy_npugraph_ex()
