"""The stream smoke tests of tests/smoke, looking `npugraph_ex` up afresh in every setUp
(as code under test that imports it lazily does): they see whatever sys.modules holds
when they run, so they fail only after a test that let torch_npu replace it."""
import importlib
import unittest

from npugraph_ex.npu_fx_compiler import compile_fx


class StreamTest(unittest.TestCase):
    def setUp(self):
        self.npugraph_ex = importlib.import_module("npugraph_ex")
        self.optimize_fx_bak = self.npugraph_ex.npu_fx_compiler._optimize_fx

    def tearDown(self):
        self.npugraph_ex.npu_fx_compiler._optimize_fx = self.optimize_fx_bak

    def test_single_stream_keeps_ops(self):
        out = compile_fx(["matmul", "add", "relu"])
        self.assertEqual(out["ops"], ["matmul", "add", "relu"])

    def test_multi_stream_uses_patched_optimizer(self):
        self.npugraph_ex.npu_fx_compiler._optimize_fx = lambda graph: ["stream:" + op for op in graph]
        out = compile_fx(["record", "wait"])
        self.assertEqual(out["ops"], ["stream:record", "stream:wait"])
