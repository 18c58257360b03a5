// Where Python code is: the stack of the running thread as CodeLocations, and where a
// function is defined.
#pragma once

#include "cpython_api.h"
#include "record_values.h"

namespace imptrace {

// Frames kept for a sys.modules change or a proxy access.
constexpr int kStackDepth = 8;

// Walks the Python stack from the current frame into `out`, at most `max` entries. With
// skip_importlib, importlib's own frames are passed over so the first entry is the code
// that asked for the import. Returns the count.
int capture_stack(CodeLocation* out, int max, bool skip_importlib);

// Who is beginning an import now: `importer`, the first frame outside importlib (where
// the walk reaches `fromlist_frame`, a FrameWalk point() of the frame whose
// `from ... import` importlib's
// _handle_fromlist is serving, that frame: it is what the walk would find). When that
// importer is a `__getattr__` (PEP 562, as in concurrent.futures' lazy ThreadPoolExecutor,
// numpy's and lazy_loader's lazy submodules), `trigger` gets the first frame outside
// importlib beyond it: the attribute access that made the import (a `from pkg import
// name` reaches __getattr__ through _handle_fromlist's hasattr). Other code between a
// `from ... import` and the import (six.moves' lazy descriptors) gets `fromlist_frame` as
// its trigger. False when there is no importer. `importer_code`, when given: the
// importer's code object (borrowed; null when importlib's own), for
// release_code_if_unused at the end of the import that ran it.
bool capture_importer(CodeLocation* importer, CodeLocation* trigger, const void* fromlist_frame,
                      PyObject** importer_code = nullptr);

// Called at the end of an import with the code object that imported that module's own
// imports (its body, as a rule): when the cache's reference is the last one, the entry is
// dropped and that reference returned, for the caller to release outside the writer lock
// (freeing a code object may run a weakref callback). Else null. The cache keeps every
// code object it describes alive so that an address keeps meaning the same code; kept
// until evicted, each finished module's body (its constants, names and line table) would
// live a few hundred imports longer than untraced: on `import scipy, sympy` that is 370 of
// the 540 page faults the tracer would add (bench/results.md, "The code cache and the
// memory it keeps").
PyObject* release_code_if_unused(PyObject* code);

// Whether the innermost Python frame is importlib's own (its code cached, no line read).
bool caller_is_importlib();

// Where a function is defined: its code's file and first line.
CodeLocation function_location(PyObject* fn);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_code();

// Makes the pages of its table now, in one system call (tracer_memory::populate): slots are
// spread by hash, so a few hundred imports touch most of its pages, each first touch a
// fault (10-15 us on CI's virtual machines). Once, at the main interpreter's installation.
void populate_code_cache();

}  // namespace imptrace
