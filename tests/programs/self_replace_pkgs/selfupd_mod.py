"""Replaces itself in sys.modules through dict.update, which no __setitem__ hook sees
(3.8-3.11 find it by comparing at the next import boundary), then imports another module
while its own import is still in progress."""
import sys


class _Replacement:
    def __init__(self, module):
        self.__dict__["_module"] = module

    def __getattr__(self, name):
        return getattr(self._module, name)


value = 7
sys.modules.update({__name__: _Replacement(sys.modules[__name__])})
import selfupd_child  # noqa: E402,F401  (an import boundary inside this import)
