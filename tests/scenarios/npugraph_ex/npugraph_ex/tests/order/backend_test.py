"""Order-dependent variant of the smoke tests (tests/order): here torch_npu is first
imported inside a test, as a test registering the NPU backend would. With the bad build
that import replaces sys.modules['npugraph_ex'] with the lazy proxy, so the stream tests
fail when this test runs before them and pass when it runs after them."""


def test_npu_backend_registered():
    import torch
    import torch_npu

    assert torch_npu.__name__ == "torch_npu" and torch.__name__ == "torch"
