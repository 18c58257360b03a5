"""A package whose init fails after importing a child: the package's entry is
removed, the child's (already completed) entry stays behind."""
import sys

sys.modules["__main__"].ATTEMPTS.append("boom_pkg")
from . import ok_child  # noqa: E402

raise ValueError("boom_pkg init failed after importing ok_child")
