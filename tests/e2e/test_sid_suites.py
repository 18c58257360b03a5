"""CPython's own import suites on Debian sid's 3.14 and 3.15 (scripts/sid.sh's chroot):
test_cpython_suites' check, traced and untraced with the same results, in a ctest entry of
its own so that it runs beside test_cpython_suites rather than after it."""
import pytest

import test_cpython_suites
from e2e_util import ident, sid_interpreters


@pytest.mark.parametrize("py", sid_interpreters(), ids=ident)
def test_import_suites_same_result_on_sid(py, tmp_path):
    test_cpython_suites.test_import_suites_same_result(py, tmp_path)
