// What the whole tracer shares about the process: the settings read once at start, and the
// main interpreter's objects found when the tracer installs itself there. Written by the
// bootstrap (settings.enabled last, so a hook never sees a half-made state), read
// everywhere else.
#pragma once

#include "cpython_api.h"

namespace imptrace {

struct TracerSettings {
  bool enabled;          // the audit hook is registered: the hooks may record
  bool proxies;          // IMPTRACE_PROXIES=0 turns proxy instrumentation off
  bool native_stacks;    // IMPTRACE_NATIVE_STACKS=1
  bool keep_audit_hook;  // IMPTRACE_AUDIT_HOOK=1: the audit hook stays listed all run
};
extern TracerSettings g_settings;

struct MainInterpreter {
  void* interp;                // null until the tracer is installed there
  PyObject* sys_modules;       // its sys.modules (a reference kept for the process)
  PyObject* sys_dict;          // its sys.__dict__ (borrowed from sys, which lives on)
  PyObject* module_spec_type;  // importlib's ModuleSpec (a reference kept)
  PyObject* bootstrap_dict;    // importlib._bootstrap's dict (borrowed: its module lives on)
  // Set by the audit hook's last event (when it is listed); Py_IsFinalizing says the same
  // earlier. From then on CPython itself empties sys.modules (values set to None, keys
  // deleted), which is teardown, not the program's doing.
  bool finalizing;
};
extern MainInterpreter g_main_interpreter;

// Which lifetime of the main interpreter (Py_Initialize* ... Py_FinalizeEx) this is,
// counted from 1 and bumped when one has ended (an embedding host may initialise Python
// again). The Python objects the tracer keeps belong to one lifetime: when it ends they
// are dropped without being touched (they may be freed already), and made again.
extern uint32_t g_lifetime;

// The main interpreter's sys.modules, null until the tracer is installed there.
inline PyObject* sys_modules() { return g_main_interpreter.sys_modules; }

inline bool finalizing() { return g_main_interpreter.finalizing || py.Py_IsFinalizing(); }

}  // namespace imptrace
