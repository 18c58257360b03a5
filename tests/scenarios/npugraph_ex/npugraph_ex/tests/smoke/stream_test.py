"""Smoke tests of the standalone npugraph_ex package (model of
torchair/npugraph_ex/tests/smoke/stream_test.py).

The import order below is the one that matters:
1. the package under test is imported from PYTHONPATH (workspace/torchair),
   which binds child `npu_fx_compiler` on the standalone `npugraph_ex` object;
2. torch and torch_npu are imported; torch_npu may put something else under
   sys.modules['npugraph_ex'];
3. `import npugraph_ex` then returns whatever sys.modules['npugraph_ex'] holds.
Every setUp reads `npugraph_ex.npu_fx_compiler`, so the whole suite fails in
setUp when that object does not lead to the child bound in step 1.
"""
import unittest

from npugraph_ex.npu_fx_compiler import compile_fx

import torch
import torch_npu

import npugraph_ex


class StreamTest(unittest.TestCase):
    def setUp(self):
        self.optimize_fx_bak = npugraph_ex.npu_fx_compiler._optimize_fx

    def tearDown(self):
        npugraph_ex.npu_fx_compiler._optimize_fx = self.optimize_fx_bak

    def test_single_stream_keeps_ops(self):
        out = compile_fx(["matmul", "add", "relu"])
        self.assertEqual(out["ops"], ["matmul", "add", "relu"])

    def test_multi_stream_uses_patched_optimizer(self):
        # The patch is applied through `npugraph_ex.npu_fx_compiler`, the
        # call goes through `compile_fx` imported at the top: both must be
        # the same module object for the patch to be seen.
        npugraph_ex.npu_fx_compiler._optimize_fx = lambda graph: ["stream:" + op for op in graph]
        out = compile_fx(["record", "wait"])
        self.assertEqual(out["ops"], ["stream:record", "stream:wait"])

    def test_aclgraph_backend_config(self):
        backend = npugraph_ex.get_npu_backend({"mode": "reduce-overhead"})
        out = backend(["capture", "replay"])
        self.assertEqual(out["config"], {"mode": "reduce-overhead"})
        self.assertEqual(out["ops"], ["capture", "replay"])

    def test_backend_registered_with_dynamo(self):
        self.assertIn("npugraph_ex", torch._dynamo.list_backends())


if __name__ == "__main__":
    unittest.main()
