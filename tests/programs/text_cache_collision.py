"""A binding whose parent and attribute names share a slot of the tracer's text cache.

Recording the binding of `collide_pkg.m207` looks up "collide_pkg" and then "m207" through
a direct-mapped cache of str objects (tracer/string_interning.cpp, text_str: 1024 slots by hash.h's
hash_bytes); these two names land in the same slot, so the second lookup frees the str
the first one made. A tracer that kept using the first str afterwards corrupted the
interpreter's allocator; the many small strings made below bring that out as a crash.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "text_cache_collision_pkgs"))


def main():
    import collide_pkg.m207
    import collide_pkg.m1
    junk = ["collide_%03d" % i for i in range(20000)]
    import json  # noqa: F401  (more imports, more allocations, after the binding)
    print("values: %d, strings: %d" % (collide_pkg.m207.x + collide_pkg.m1.x, len(junk)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
