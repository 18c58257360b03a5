"""The two module shapes whose attribute reads go through code the tracer watches (the
repeated-access path): a PEP 562 module-level __getattr__, and a ModuleType subclass that
puts itself in sys.modules and forwards to a module it holds. bench/run.py times loops over
them; tests/e2e/test_access_repeats.py checks what the trace says about the same shapes,
so the benchmark measures what the test checks. Standard library only, no test harness."""


def pep562_module(value):
    """Source of a module answering `value` from its module-level __getattr__."""
    return ('def __getattr__(name):\n'
            '    if name == "value":\n'
            '        return %d\n'
            '    raise AttributeError(name)\n') % value


def forwarding_proxy_module(real_name, value):
    """Source of a module that replaces itself in sys.modules by a ModuleType subclass
    forwarding every attribute to a module named `real_name` holding `value`."""
    return ('import sys, types\n'
            'real = types.ModuleType(%r)\n'
            'real.value = %d\n'
            'class Forwarding(types.ModuleType):\n'
            '    def __getattr__(self, name):\n'
            '        return getattr(self._target, name)\n'
            'proxy = Forwarding(__name__)\n'
            'proxy._target = real\n'
            'sys.modules[__name__] = proxy\n') % (real_name, value)
