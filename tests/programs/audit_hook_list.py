"""Reports whether a C audit hook of libimptrace.so is in the runtime's list of audit hooks
(_PyRuntime), before and after importing a module that can create sub-interpreters.

Used by tests/e2e/test_audit_hook.py. The list is found the way a debugger would: every
word of _PyRuntime (its size from the symbol table, through dladdr1) that points into
readable memory at a node whose second word (the hook function) lies inside
libimptrace.so's mapping. Prints one line per stage: `<stage> in-list|out`."""
import ctypes
import sys


def mappings():
    spans, ours = [], []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if parts[1].startswith("r"):
                spans.append((lo, hi))
            if len(parts) > 5 and parts[5].endswith("/libimptrace.so"):
                ours.append((lo, hi))
    return spans, ours


def readable(addr, n, spans):
    return any(lo <= addr and addr + n <= hi for lo, hi in spans)


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def hook_in_list():
    libc = ctypes.CDLL(None)
    runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    info, extra = DlInfo(), ctypes.c_void_p()
    RTLD_DL_SYMENT = 1
    if not libc.dladdr1(ctypes.c_void_p(runtime), ctypes.byref(info), ctypes.byref(extra), RTLD_DL_SYMENT):
        raise SystemExit("dladdr1 failed")
    size = ctypes.c_uint64.from_address(extra.value + 16).value  # Elf64_Sym.st_size
    spans, ours = mappings()
    if not ours:
        return False
    words = (ctypes.c_uint64 * (size // 8)).from_address(runtime)
    for w in words:
        node = w
        for _ in range(16):  # follow the list a little way from each candidate head
            if not node or not readable(node, 24, spans):
                break
            fn = ctypes.c_uint64.from_address(node + 8).value
            if any(lo <= fn < hi for lo, hi in ours):
                return True
            node = ctypes.c_uint64.from_address(node).value
    return False


def main():
    print("start %s" % ("in-list" if hook_in_list() else "out"))
    import _testcapi  # noqa: F401  (it can create sub-interpreters)
    print("after-_testcapi %s" % ("in-list" if hook_in_list() else "out"))


if __name__ == "__main__":
    main()
