"""8 threads importing 8 distinct modules at the same moment.

The modules are generated into a temporary directory.  Each one imports its
own dependency (so every thread has a nested import) and sleeps inside its
body, so that all eight imports are in progress at once; a barrier releases
the threads together.
"""
import os
import shutil
import sys
import tempfile
import threading

N = 8

MODULE = '''\
import time
import thr_dep_{i}
time.sleep(0.05)
VALUE = thr_dep_{i}.BASE * {i}
'''
DEP = '''\
import time
time.sleep(0.02)
BASE = 10
'''


def main():
    tmp = tempfile.mkdtemp(prefix="imptrace-threads-")
    try:
        for i in range(N):
            with open(os.path.join(tmp, "thr_mod_%d.py" % i), "w") as f:
                f.write(MODULE.format(i=i))
            with open(os.path.join(tmp, "thr_dep_%d.py" % i), "w") as f:
                f.write(DEP)
        sys.path.insert(0, tmp)
        # time is imported before the threads start, so the modules' own
        # `import time` finds it in sys.modules in every thread.
        import time  # noqa: F401

        barrier = threading.Barrier(N)
        results = {}
        errors = []

        def worker(i):
            try:
                barrier.wait()
                module = __import__("thr_mod_%d" % i)
                results[i] = (module.VALUE, threading.current_thread().name)
            except Exception as exc:  # reported below; the program then fails
                errors.append("%d: %r" % (i, exc))

        threads = [threading.Thread(target=worker, args=(i,), name="importer-%d" % i)
                   for i in range(N)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sys.path.remove(tmp)
    finally:
        shutil.rmtree(tmp)

    for i in sorted(results):
        print("thr_mod_%d: VALUE=%s thread=%s" % (i, results[i][0], results[i][1]))
    loaded = sorted(n for n in sys.modules if n.startswith(("thr_mod_", "thr_dep_")))
    print("modules loaded: %d" % len(loaded))
    for e in sorted(errors):
        print("error: %s" % e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
