"""Takes itself out of sys.modules with dict.pop (no __delitem__: 3.8-3.11 find it by
comparing) while its own import is in progress; importlib's own pop at the end of the
load then fails with KeyError."""
import sys

sys.modules.pop(__name__)
