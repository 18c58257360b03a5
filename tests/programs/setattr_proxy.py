"""A proxy under sys.modules['bindpkg'] whose __setattr__ loads the real
package when the import system binds a child onto it.

`import bindpkg.child` finds the proxy as the parent, uses its __path__ to
find the child, loads the child, then does setattr(sys.modules['bindpkg'],
'child', <module>) -- which lands in the proxy's __setattr__.  That loads the
real package, puts it under sys.modules['bindpkg'] and binds the child on it.
"""
import importlib.util
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "setattr_proxy_pkgs"))

EVENTS = []


class LoadOnBindProxy(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        # find_spec locates the package without running its body.
        spec = importlib.util.find_spec(name)
        # Written into the instance dict directly: our own __setattr__ is for
        # the import system's binding only.
        self.__dict__["_real_spec"] = spec
        self.__dict__["__path__"] = list(spec.submodule_search_locations)
        self.__dict__["_real"] = None

    def _load_real(self):
        real = self.__dict__["_real"]
        if real is None:
            spec = self.__dict__["_real_spec"]
            real = importlib.util.module_from_spec(spec)
            self.__dict__["_real"] = real
            # The real package takes over the name before its body runs, as a
            # normal import would have it.
            sys.modules[self.__name__] = real
            spec.loader.exec_module(real)
            EVENTS.append("proxy loaded the real package")
        return real

    def __setattr__(self, name, value):
        child = "%s.%s" % (self.__name__, name)
        if isinstance(value, types.ModuleType) and value.__name__ == child:
            EVENTS.append("proxy.__setattr__(%r) from the import system" % name)
            setattr(self._load_real(), name, value)
        else:
            super().__setattr__(name, value)

    def __getattr__(self, name):
        return getattr(self._load_real(), name)


def main():
    proxy = LoadOnBindProxy("bindpkg")
    sys.modules["bindpkg"] = proxy
    EVENTS.append("proxy installed")

    import bindpkg.child
    real = sys.modules["bindpkg"]
    for event in EVENTS:
        print("event: %s" % event)
    print("sys.modules['bindpkg'] is the proxy: %s" % (real is proxy))
    print("sys.modules['bindpkg'] type: %s" % type(real).__name__)
    print("name bound by `import bindpkg.child` is the real package: %s" % (bindpkg is real))
    print("child bound on real package: %s" % (real.__dict__.get("child") is sys.modules["bindpkg.child"]))
    print("child bound on proxy: %s" % ("child" in proxy.__dict__))
    print("real.GREETING = %s" % real.GREETING)
    print("through proxy: %s / %s" % (proxy.GREETING, proxy.child.CHILD))
    return 0


if __name__ == "__main__":
    sys.exit(main())
