"""A module that replaces itself in sys.modules with an instance of a class
(the "module as object" idiom, e.g. for properties or a callable module).
The import statement hands the importer whatever sys.modules holds after the
body ran, so importers get the instance, never this module object.
"""
import sys

_ORIGINAL = sys.modules[__name__]


class _SelfReplacing(object):
    """Exposes computed attributes that a plain module could not."""

    def __init__(self, original):
        self._original = original
        self.reads = 0

    @property
    def answer(self):
        self.reads += 1
        return 42

    def original_name(self):
        return self._original.__name__


sys.modules[__name__] = _SelfReplacing(_ORIGINAL)
