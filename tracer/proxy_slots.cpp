// The slot hooks of proxy_slots.h. Each one mirrors the CPython slot function it stands in
// for (3.8-3.13, Objects/moduleobject.c and Objects/typeobject.c), step by step, with
// exported functions only.
#include "proxy_slots.h"

#include "records.h"

namespace imptrace {
namespace {

// Kept for the process lifetime (deliberate): interned in the main interpreter, where
// every hook that uses them runs.
PyObject* g_getattr_str = nullptr;       // "__getattr__"
PyObject* g_getattribute_str = nullptr;  // "__getattribute__"
PyObject* g_setattr_str = nullptr;       // "__setattr__"
// object.__getattribute__: the wrapper descriptor of PyObject_GenericGetAttr, which
// slot_tp_getattr_hook recognises to take the generic lookup directly. Borrowed from
// object's dict, which lives as long as the main interpreter.
PyObject* g_object_getattribute = nullptr;

// ModuleType's own tp_getattro (module_getattro; 3.12+ _Py_module_getattro).
GetattroFn g_module_getattro = nullptr;
// The slot function CPython gives every class with a Python __getattr__ (its
// slot_tp_getattr_hook): the same function for every such class, learned from the first
// proxy class seen. Not exported, so a class is
// patched only when its slot holds that same function.
GetattroFn g_class_getattr_dispatch = nullptr;

// fn(a, b) as slot_tp_getattr_hook's call_attribute makes it: a vectorcall where 3.9+
// exports one (3.8 has it inline only; its tuple-building call is the same call).
PyObject* call2(PyObject* fn, PyObject* a, PyObject* b) {
  if (py.PyObject_Vectorcall) {
    PyObject* args[2] = {a, b};
    return py.PyObject_Vectorcall(fn, args, 2, nullptr);
  }
  return py.PyObject_CallFunctionObjArgs(fn, a, b, nullptr);
}

// fn(a), as module_getattro's PyObject_CallOneArg makes it.
PyObject* call1(PyObject* fn, PyObject* a) {
  if (py.PyObject_Vectorcall) return py.PyObject_Vectorcall(fn, &a, 1, nullptr);
  return py.PyObject_CallFunctionObjArgs(fn, a, nullptr);
}

bool is_method_descriptor(PyObject* o) {
  return (py.PyType_GetFlags(type_of(o)) & TPFLAGS_METHOD_DESCRIPTOR) != 0;
}

// A module's own __getattr__ (borrowed) when the access would be recorded, else null.
// The dict lookup with an exact str key runs no user code (CPython's lookup is the same).
PyObject* module_getattr_fn(PyObject* m) {
  if (!forward_observable()) return nullptr;
  PyObject* d = py.PyModule_GetDict(m);
  if (!d) { py.PyErr_Clear(); return nullptr; }
  return dict_lookup(d, g_getattr_str);
}

// What module_getattro does once the generic lookup missed and the module has a
// __getattr__ (3.8-3.13 alike): call it with the name, hand back what it returns.
PyObject* call_module_getattr(PyObject* m, PyObject* getattr, PyObject* name) {
  py.Py_IncRef(getattr);  // the call may remove it from the dict
  PyObject* res = call1(getattr, name);
  py.Py_DecRef(getattr);
  record_forward(fields::ProxyAccess::MODULE_GETATTR, m, name, res);
  return res;
}

__attribute__((noinline)) PyObject* module_getattro_miss(PyObject* m, PyObject* name) {
  // A non-AttributeError error from the lookup goes back as module_getattro returns it.
  if (py.PyErr_Occurred()) return nullptr;
  PyObject* getattr = module_getattr_fn(m);
  // No __getattr__ (or not recorded): the original builds its own error ("module 'x' has
  // no attribute", "partially initialized module" ...). It repeats the generic lookup,
  // which on an exact module has no side effect: ModuleType's descriptors (__dict__,
  // __annotations__, __class__) never raise AttributeError.
  if (!getattr) return g_module_getattro(m, name);
  return call_module_getattr(m, getattr, name);
}

// ModuleType's tp_getattro. Its first step is module_getattro's first step, the generic
// lookup (with the suppressing variant 3.12's module_getattro uses for hasattr: a miss
// sets no AttributeError), and a hit returns at once: that is the hot path of every
// module attribute read, and it costs what it did. Only a miss goes further.
//
// 3.12+'s _PyObject_LookupAttr (hasattr, getattr with a default, `from m import x`)
// takes its module shortcut only when the slot is _Py_module_getattro; with this one it
// takes the generic path (call the slot, drop an AttributeError), which calls a module's
// __getattr__ exactly once too: only the cost of a miss differs.
PyObject* module_getattro_hook(PyObject* m, PyObject* name) {
  if (type_of(m) == py.PyModule_Type) {
    PyObject* r = py.PyObject_GenericGetAttrWithDict(m, name, nullptr, 1);
    if (r) return r;
    return module_getattro_miss(m, name);
  }
  // A ModuleType subclass (patched by observe_module): its own descriptors may run user
  // code, so the generic lookup must run exactly once. Without a module __getattr__ the
  // original does it all.
  PyObject* getattr = module_getattr_fn(m);
  if (!getattr) return g_module_getattro(m, name);
  py.Py_IncRef(getattr);
  PyObject* r = py.PyObject_GenericGetAttrWithDict(m, name, nullptr, 1);
  PyObject* res = r || py.PyErr_Occurred() ? r : call_module_getattr(m, getattr, name);
  py.Py_DecRef(getattr);
  return res;
}

// A proxy class's tp_getattro: slot_tp_getattr_hook's steps. Look up __getattr__ and
// __getattribute__ on the type; the attribute comes from object's generic lookup when
// __getattribute__ is object's own, else from calling __getattribute__; on an
// AttributeError, __getattr__ is called, and that call is the forward recorded.
// slot_tp_getattr_hook calls a method descriptor (a Python function) with (self, name);
// other kinds of attribute (staticmethod, a callable object) are bound through
// tp_descr_get, which is not exported: the original slot handles those.
PyObject* class_getattro_hook(PyObject* self, PyObject* name) {
  PyObject* type = type_of(self);
  PyObject* getattr = py.PyType_Lookup(type, g_getattr_str);
  PyObject* getattribute = getattr ? py.PyType_Lookup(type, g_getattribute_str) : nullptr;
  bool generic = !getattribute || getattribute == g_object_getattribute;
  if (!getattr || !is_method_descriptor(getattr) || (!generic && !is_method_descriptor(getattribute)))
    return g_class_getattr_dispatch(self, name);
  py.Py_IncRef(getattr);
  PyObject* res;
  if (generic) {
    res = py.PyObject_GenericGetAttrWithDict(self, name, nullptr, 1);
  } else {
    py.Py_IncRef(getattribute);
    res = call2(getattribute, self, name);
    py.Py_DecRef(getattribute);
    if (!res && py.PyErr_GivenExceptionMatches(py.PyErr_Occurred(), py.PyExc_AttributeError)) py.PyErr_Clear();
  }
  if (!res && !py.PyErr_Occurred()) {
    res = call2(getattr, self, name);
    record_forward(fields::ProxyAccess::GETATTR, self, name, res);
  }
  py.Py_DecRef(getattr);
  return res;
}

// A proxy class's __setattr__ is observed in its function's C entry point, not in the
// class's tp_setattro: on 3.8-3.12, object.__setattr__ and ModuleType.__setattr__ refuse
// to run ("can't apply this __setattr__") on an object whose class has a C-level
// tp_setattro other than CPython's slot_tp_setattro (typeobject.c, hackcheck), and every
// proxy ends its own __setattr__ with super().__setattr__. slot_tp_setattro calls the
// function through PyObject_Vectorcall with (self, name, value); so does any call of it
// from C, and on 3.11+ a call from Python to a function whose entry point is not
// CPython's own. Every call of the function is recorded, as a call of the class's
// __setattr__ (whoever made it).
VectorcallFn g_function_vectorcall = nullptr;  // CPython's _PyFunction_Vectorcall

PyObject* setattr_vectorcall_hook(PyObject* fn, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject* res = g_function_vectorcall(fn, args, nargsf, kwnames);
  // PY_VECTORCALL_ARGUMENTS_OFFSET is the top bit of nargsf.
  size_t nargs = nargsf & ~(size_t(1) << (8 * sizeof(size_t) - 1));
  if (nargs == 3 && !kwnames) record_forward(fields::ProxyAccess::SETATTR, args[0], args[1], res);
  return res;
}

bool proxy_api_present() {
  return py.PyType_Lookup && py.PyObject_GenericGetAttrWithDict && py.PyObject_GenericGetAttr &&
         py.PyBaseObject_Type && py.ob_type_offset >= 0;
}

bool strings_ready() {
  if (g_getattr_str) return true;
  if (!proxy_api_present()) return false;
  g_getattr_str = py.PyUnicode_InternFromString("__getattr__");
  g_getattribute_str = py.PyUnicode_InternFromString("__getattribute__");
  g_setattr_str = py.PyUnicode_InternFromString("__setattr__");
  if (!g_getattr_str || !g_getattribute_str || !g_setattr_str) {
    py.PyErr_Clear();
    g_getattr_str = nullptr;
    return false;
  }
  g_object_getattribute = py.PyType_Lookup(py.PyBaseObject_Type, g_getattribute_str);
  return g_object_getattribute != nullptr;
}

}  // namespace

bool install_module_getattr_observer() {
  if (g_module_getattro || !strings_ready()) return g_module_getattro != nullptr;
  // The original is stored before the swap: another interpreter's thread (3.12+ may run
  // one with its own GIL) can enter the hook as soon as the pointer is in the slot.
  return patch_module_getattro(module_getattro_hook, &g_module_getattro);
}

void observe_module(PyObject* module) {
  if (!g_module_getattro) return;
  PyObject* type = type_of(module);
  if (type == py.PyModule_Type || type_getattro(type) != g_module_getattro) return;
  PyObject* d = py.PyModule_GetDict(module);
  if (!d) { py.PyErr_Clear(); return; }
  if (dict_lookup(d, g_getattr_str)) set_type_getattro(type, module_getattro_hook);
}

void observe_proxy_class(PyObject* type, bool getattr, bool setattr) {
  if (!strings_ready()) return;
  if (getattr) {
    GetattroFn cur = type_getattro(type);
    // The first class tells what CPython's dispatcher is; anything CPython installs for
    // other cases (the generic lookup, ModuleType's) is never it.
    if (cur && !g_class_getattr_dispatch && cur != py.PyObject_GenericGetAttr && cur != g_module_getattro &&
        cur != module_getattro_hook && cur != class_getattro_hook)
      g_class_getattr_dispatch = cur;
    if (cur && cur == g_class_getattr_dispatch) set_type_getattro(type, class_getattro_hook);
  }
  if (setattr) {
    PyObject* fn = py.PyType_Lookup(type, g_setattr_str);  // borrowed; the class keeps it
    VectorcallFn* entry = function_vectorcall(fn);
    if (entry) {
      VectorcallFn cur = __atomic_load_n(entry, __ATOMIC_ACQUIRE);
      // Every Python function starts with the same entry point: the first one seen is it.
      if (!g_function_vectorcall && cur != setattr_vectorcall_hook) g_function_vectorcall = cur;
      if (cur == g_function_vectorcall) __atomic_store_n(entry, &setattr_vectorcall_hook, __ATOMIC_RELEASE);
    }
  }
}

}  // namespace imptrace
