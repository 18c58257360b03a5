"""Debian's six (python3-six): the six.moves lazy modules, which six serves
through its own meta path importer (`six.moves.*` entries in sys.modules
that are lazy descriptors or aliases of stdlib modules)."""
import os
import sys

from _debian import import_debian_package  # noqa: E402  (sibling helper)


def main():
    six = import_debian_package("six")
    if six is None:
        print("SKIP: six not installed (Debian package python3-six)")
        return 0
    print("six.PY3: %s" % six.PY3)
    # Attribute access on six.moves: a lazy descriptor imports the stdlib module.
    from six.moves import configparser
    import configparser as real_configparser
    print("six.moves.configparser is configparser: %s" % (configparser is real_configparser))
    from six.moves import range as six_range
    print("six.moves.range is range: %s" % (six_range is range))
    # Dotted import through six's meta path importer.
    import six.moves.urllib.parse
    from six.moves.urllib.parse import urlencode, quote
    print("urlencode: %s" % urlencode([("a", "1"), ("b", "x y")]))
    print("quote: %s" % quote("a b/c"))
    import urllib.parse
    print("six.moves.urllib.parse.urlencode is urllib.parse.urlencode: %s"
          % (six.moves.urllib.parse.urlencode is urllib.parse.urlencode))
    from six.moves import queue
    print("queue.Queue maxsize: %s" % queue.Queue(maxsize=3).maxsize)
    moves_entries = sorted(n for n in sys.modules if n.startswith("six.moves"))
    print("six.moves.urllib.parse in sys.modules: %s" % ("six.moves.urllib.parse" in moves_entries))
    print("six.moves.configparser in sys.modules: %s" % ("six.moves.configparser" in moves_entries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
