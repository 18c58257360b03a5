"""Stand-in for torch_npu's package init: import torch, then hook dynamo."""
import torch

import torch_npu.utils._dynamo

__version__ = "2.7.1.post9.imptrace.scenario"

torch_npu.utils._dynamo.add_dynamo_methods()
