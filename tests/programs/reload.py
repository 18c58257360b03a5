"""importlib.reload of a module whose source changed on disk.

The module is written into a fresh temporary directory so it can be edited.
Bytecode writing is off: a .pyc written for the first version could be
reused for the second when both have the same size and mtime second.
"""
import importlib
import os
import shutil
import sys
import tempfile

SOURCE = '''\
VERSION = {version}
# Survives a reload: reload re-executes the body in the same module dict.
try:
    LOADS += 1
except NameError:
    LOADS = 1
'''


def write_module(directory, version):
    with open(os.path.join(directory, "reload_target.py"), "w") as f:
        f.write(SOURCE.format(version=version))


def main():
    sys.dont_write_bytecode = True
    tmp = tempfile.mkdtemp(prefix="imptrace-reload-")
    try:
        sys.path.insert(0, tmp)
        write_module(tmp, 1)
        import reload_target
        from reload_target import VERSION as early_version
        first = reload_target
        print("first load: VERSION=%s LOADS=%s" % (reload_target.VERSION, reload_target.LOADS))

        write_module(tmp, 2)
        # The path finder caches directory listings; tell it the file changed.
        importlib.invalidate_caches()
        returned = importlib.reload(reload_target)
        print("reload returned the same object: %s" % (returned is first))
        print("sys.modules entry unchanged: %s" % (sys.modules["reload_target"] is first))
        print("after reload: VERSION=%s LOADS=%s" % (reload_target.VERSION, reload_target.LOADS))
        print("name bound by an earlier from-import is stale: VERSION=%s" % early_version)
    finally:
        sys.path.remove(tmp)
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
