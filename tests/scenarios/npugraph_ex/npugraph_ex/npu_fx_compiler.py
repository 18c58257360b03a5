"""Stand-in for npugraph_ex.npu_fx_compiler.

A "graph" here is a list of op names; the compiler returns what the
optimisation pass made of it.  Tests monkeypatch `_optimize_fx`, which is why
they need `npugraph_ex.npu_fx_compiler` to be this very module object.
"""


def _optimize_fx(graph):
    # The real pass rewrites an FX graph; keeping the op order is enough here.
    return list(graph)


def get_compiler(config=None):
    config = dict(config or {})

    def compiler(graph):
        # Looked up at call time, so a patched _optimize_fx takes effect.
        return {"ops": _optimize_fx(graph), "config": config}

    return compiler


def compile_fx(graph, config=None):
    return get_compiler(config)(graph)


def get_npu_backend(config=None):
    return get_compiler(config)
