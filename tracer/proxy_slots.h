// Proxy forwarding, observed from below Python: the attribute slots of types.ModuleType
// (a PEP 562 module's __getattr__) and of proxy classes (a class's own __getattr__ and
// __setattr__). Nothing Python code can reach is replaced: module dicts, class dicts,
// functions, their code, names, docs, signatures and pickling stay what they are, traced
// or not. What changes is a C function pointer: the tp_getattro slot of ModuleType and of
// proxy classes, and the C entry point of a proxy class's __setattr__ function, as for
// sys.modules' store slot and object's __class__ setter (cpython_api.h).
//
// The getattro hooks take the same steps as the slot functions they stand in for
// (CPython's module_getattro and slot_tp_getattr_hook), calling the same functions in
// the same order, so that an attribute found normally costs what it did, every user
// function runs exactly as often as it would, and the error indicator is left exactly as
// the original leaves it. When a step would need something they cannot do with exported
// functions, they call the original slot instead (and that access is not recorded).
//
// What is not observed:
//  - a proxy class whose __getattr__ or __setattr__ Python code assigns after the tracer
//    saw the class: CPython's update_slot then puts its own slot function back;
//  - reads on subclasses of a proxy class (CPython gives each class its own slot), and
//    on proxy classes none of whose instances ever sat under a sys.modules key (the
//    tracer learns of classes there);
//  - a module's own __getattr__ called by name (`mod.__getattr__("x")`): that is a plain
//    call, not forwarding;
//  - sub-interpreters (their modules go through the hook, which then only calls the
//    original).
#pragma once

#include "cpython_api.h"

namespace imptrace {

// Provided by the recorder (tracer.cpp), called by the hooks with the GIL held.
//  - forward_observable: true when an access now would be recorded (tracer enabled, main
//    interpreter, not inside the tracer's own work). The hooks ask it on a miss only.
//  - record_forward: one access, after the forward ran. `result` null means it failed and
//    the error indicator holds the error; record_forward leaves the indicator as it found
//    it. `kind` is a ProxyAccess::Kind.
bool forward_observable();
void record_forward(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* result);

// Swaps types.ModuleType's tp_getattro for the PEP 562 observer. Main interpreter, once,
// GIL held. False when the slot could not be patched (module __getattr__ then goes
// unrecorded; nothing else changes).
bool install_module_getattr_observer();

// A module the tracer found under a sys.modules key. ModuleType subclasses that define
// no attribute methods of their own got ModuleType's original slot function copied into
// their own slot when they were created (CPython's update_one_slot takes the function a
// wrapper descriptor wraps, not the base's current slot): such a type gets the observer
// too when one of its instances has a module-level __getattr__.
void observe_module(PyObject* module);

// A proxy class found under a sys.modules key, with a Python-level __getattr__ and/or
// __setattr__ somewhere in its MRO: its tp_getattro slot and its __setattr__ function's
// entry point get the observers. Idempotent.
void observe_proxy_class(PyObject* type, bool getattr, bool setattr);

}  // namespace imptrace
