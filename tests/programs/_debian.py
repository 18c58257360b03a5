"""Shared by the programs that use Debian's pure-Python packages (python3-six,
python3-lazy-loader) on interpreters that do not see /usr/lib/python3/dist-packages."""
import os
import sys

DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def import_debian_package(name):
    """Import `name`; if this interpreter can't see it but Debian installed it,
    append Debian's dist-packages to the end of sys.path (so the stdlib and
    this interpreter's own packages keep precedence) and import it from there.
    Returns the module, or None when it isn't installed at all."""
    try:
        return __import__(name)
    except ImportError:
        pass
    if not os.path.isdir(os.path.join(DEBIAN_DIST_PACKAGES, name)) and \
            not os.path.isfile(os.path.join(DEBIAN_DIST_PACKAGES, name + ".py")):
        return None
    sys.path.append(DEBIAN_DIST_PACKAGES)
    try:
        return __import__(name)
    except ImportError:
        return None
