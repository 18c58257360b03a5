// The audit hook's place in the runtime's list. The audit hook is how the tracer gets
// control at the first import of each interpreter. Once the main interpreter is set up it
// has nothing left to do there, but while it is in the runtime's list CPython builds an
// argument tuple for every audit event, four per import (about 1.5 % of a start-up that
// imports thousands of small modules). So it steps out of the list, and back in when it
// is needed again:
//  - a module that creates sub-interpreters is imported (their first import must reach
//    the hook to be traced);
//  - os's exec functions could not be observed;
//  - while C code creates a sub-interpreter (Py_NewInterpreter*, seen where libpython is
//    shared: embedding.cpp), for the imports its creation makes.
// __class__ assignments are seen by object's __class__ setter instead (patched at
// installation; if that fails, the hook stays). IMPTRACE_AUDIT_HOOK=1 keeps it in for the
// whole run: for sub-interpreters created by C code in a host that links libpython
// statically. The node is never freed while out of the list (24 bytes). When a lifetime of
// the interpreter ends, the hook is put back in the list for the next Py_Initialize.
#pragma once

#include "cpython_api.h"

namespace imptrace {

struct AuditHookPlace {
  void* entry;        // our node in the list (allocated at registration, see bootstrap.cpp)
  void** head;        // the word in _PyRuntime that points at the list
  bool stepped_out;
  bool exec_wrapped;  // os.execv/os.execve are observed: the os.exec event is not needed
  bool needed;        // a module that creates sub-interpreters was imported in this lifetime
  int creating;       // sub-interpreters being created by C code right now (atomic)
};
extern AuditHookPlace g_audit_hook;

// Leaves the runtime's list, when that is safe and nothing needs the hook.
void audit_hook_step_out();

// Back at the head of the runtime's list (GIL held, or no interpreter at all).
void audit_hook_step_in();

// After a successful import in the main interpreter: observes os's exec and _exit
// functions when `os` arrives, and brings the hook back when a module arrives that needs it.
void keep_audit_hook_where_needed(PyObject* name, PyObject* module);

// Before the process image is replaced, the file gives back its reserve (the new image
// starts its own trace).
void before_exec();

}  // namespace imptrace
