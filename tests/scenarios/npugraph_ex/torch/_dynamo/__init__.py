"""Stand-in for `torch._dynamo`: a backend registry, nothing else."""

_BACKENDS = {}


def register_backend(name, compiler_fn):
    _BACKENDS[name] = compiler_fn
    return compiler_fn


def list_backends():
    return sorted(_BACKENDS)
