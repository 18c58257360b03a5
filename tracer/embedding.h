// What an embedding host does to the interpreter from C, seen from inside: the libpython
// functions that create sub-interpreters (Py_NewInterpreter, Py_NewInterpreterFromConfig)
// are interposed by libimptrace.so, which exports them for that reason alone. A host that
// links a shared libpython calls them through its PLT, and the preloaded library comes
// first in the lookup: the interposer marks the creation and calls libpython's own.
// Nowhere else can be reached this way:
//  - a static libpython (Debian's /usr/bin/python3, a host linked with libpython.a)
//    defines them in the executable, which comes before any preloaded library: the
//    interposers are never called there, and LifetimeBegin says so;
//  - libpython's own calls (the _interpreters/_xxsubinterpreters modules) are bound inside
//    it; the audit hook covers those (audit_hook.h).
// A plain `python` run never calls them: they cost it nothing.
#pragma once

namespace imptrace {

// Whether the host's calls of Py_NewInterpreter* reach the interposers.
bool subinterpreter_creation_seen();

// Provided by the bootstrap, called by the interposers with the GIL held: the audit hook
// is listed for the creation's extent (the new interpreter's first imports reach it), and
// `created`, the new interpreter (current when the creation succeeded), gets the tracer
// installed if its imports did not do it.
void subinterpreter_creation_begins();
void subinterpreter_creation_ends(bool created);

}  // namespace imptrace
