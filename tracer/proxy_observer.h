// Proxy forwarding, observed from below Python. A forward is a call of a Python function:
// a PEP 562 module's __getattr__ (module_getattro calls it when the normal lookup
// misses), a proxy class's __getattr__ (slot_tp_getattr_hook, same) or __setattr__
// (slot_tp_setattro, on every write). CPython makes those calls from C, through the
// function object's C entry point (PyFunctionObject.vectorcall). The tracer observes the
// functions it learns of by swapping that entry point for one that calls CPython's own
// and then records the call.
//
// Nothing Python code can reach is replaced or added: module dicts, class dicts, the
// functions themselves, their code, names, docs, signatures and pickling stay what they
// are, traced or not. No type's slot changes either, so an attribute found normally
// costs exactly what it did (no check is added to any lookup), and no CPython fast path
// that compares slots (3.12+'s hasattr shortcut for modules, the specialising
// interpreter's checks, object.__setattr__'s "can't apply this __setattr__" check on
// 3.8-3.12) sees anything different.
//
// What is recorded, exactly: every call of an observed function from C, and on
// 3.8-3.10 every call of it at all (3.11+ may run a direct Python-to-Python call without
// going through the entry point; such calls are not forwarding). A successful call that
// repeats one already recorded is counted rather than recorded (access_repeats.h). What is not observed:
//  - a function assigned as a proxy class's __getattr__/__setattr__, or as a module's
//    __getattr__, after the tracer saw the class or the module (the new function has
//    CPython's own entry point);
//  - proxy classes none of whose instances ever sat under a sys.modules key, and PEP 562
//    modules that never went through an import the tracer saw;
//  - sub-interpreters (their calls go through the hook, which then only calls CPython's).
#pragma once

#include "cpython_api.h"
#include "process_state.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {

struct AccessSite;

// True when a call at this point would be recorded (tracer enabled, main interpreter, not
// inside the tracer's own work). Inline: the hook asks on its repeated path.
[[gnu::always_inline]] inline bool forward_observable() {
  return g_settings.enabled && g_settings.proxies && TraceWriter::usable() && !t_state.inside_tracer &&
         g_main_interpreter.interp && py.PyInterpreterState_Get() == g_main_interpreter.interp;
}

// Provided by the recorder (proxies.cpp), called by the hook with the GIL held.
//  - record_forward: one call, after it ran. `result` null means it failed and the error
//    indicator holds the error; record_forward leaves the indicator as it found it.
//    `kind` is a ProxyAccess::Kind; for MODULE_GETATTR `proxy` is the module, or the
//    function itself when its module is no longer in sys.modules. `site`: where a
//    successful call came from (access_repeats.h), when known; the hook has already found
//    that it was not a repeat to count. `stored`: for SETATTR the value written (the
//    module that then binds it is where the write went), else null.
void record_forward(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* result, PyObject* stored,
                    const AccessSite* site);

// A module that an import returned: its module-level __getattr__ (PEP 562), when it is a
// Python function, gets observed. Main interpreter, GIL held. Idempotent.
void observe_module(PyObject* module);

// A proxy class found under a sys.modules key, with a Python-level __getattr__ and/or
// __setattr__ somewhere in its MRO: those functions get observed. Idempotent.
void observe_proxy_class(PyObject* type, bool getattr, bool setattr);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_observed_functions();

}  // namespace imptrace
