"""A module object dies and a new one takes its address: the tracer must give the new one
a different identity. Each round puts a fresh types.ModuleType under one key, removes it
and drops it; CPython's allocator hands the freed memory to the next round's module. The
stores run through exec (a fresh code object each time) so that 3.11's specialising
interpreter never turns them into direct dict stores the tracer only sees at boundaries.
Prints how many distinct addresses the rounds used."""
import sys
import types

ROUNDS = 20


def main():
    addresses = []
    for i in range(ROUNDS):
        m = types.ModuleType("reuse_mod")
        m.ROUND = i
        exec("sys.modules['reuse_mod'] = m", {"sys": sys, "m": m})
        addresses.append(id(m))
        exec("del sys.modules['reuse_mod']", {"sys": sys})
        del m
    print("rounds %d distinct addresses %d" % (ROUNDS, len(set(addresses))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
