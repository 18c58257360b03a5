// The observed functions of proxy_observer.h and their entry-point hook.
#include "proxy_observer.h"

#include <string.h>

#include "access_repeats.h"
#include "records.h"
#include "tracer_memory.h"

namespace imptrace {
namespace {

using fields::ProxyAccess::GETATTR;
using fields::ProxyAccess::MODULE_GETATTR;
using fields::ProxyAccess::SETATTR;

// One observed function. The function is not owned: an entry is consulted only by the
// hook, and the hook runs only for a live function whose entry point the tracer set,
// whose entry is the one written then (a function later allocated at a dead one's address
// starts with CPython's entry point, and observing it rewrites the entry). `name` (a
// module's __name__, for MODULE_GETATTR) is held: a str reference, deliberately kept
// while the entry lives.
struct Observed {
  PyObject* fn;
  uint32_t kind;
  PyObject* name;
};
constexpr size_t kObserved = 4096;  // a power of two; observing stops at 3/4 full

struct ProxyObserver {
  // CPython's _PyFunction_Vectorcall: every Python function's entry point. Where it is
  // not exported (3.13), learned from the first function observed.
  VectorcallFn function_vectorcall;
  // Observed functions by address, open addressing.
  Observed observed[kObserved];
  size_t n_observed;
  // Kept for the process lifetime (deliberate), made in the main interpreter.
  PyObject* getattr_str;  // "__getattr__"
  PyObject* setattr_str;  // "__setattr__"
  PyObject* name_str;     // "__name__"
};
ProxyObserver g_observer;

size_t home(PyObject* fn) {
  uintptr_t a = reinterpret_cast<uintptr_t>(fn) >> 4;
  return (a ^ (a >> 12)) & (kObserved - 1);
}

const Observed* find(PyObject* fn) {
  for (size_t i = home(fn), n = 0; n < kObserved; i = (i + 1) & (kObserved - 1), ++n) {
    if (g_observer.observed[i].fn == fn) return &g_observer.observed[i];
    if (!g_observer.observed[i].fn) return nullptr;
  }
  return nullptr;
}

bool strings_ready() {
  if (g_observer.getattr_str) return true;
  if (!py.PyType_Lookup) return false;
  PyObject* ga = py.PyUnicode_InternFromString("__getattr__");
  PyObject* sa = py.PyUnicode_InternFromString("__setattr__");
  PyObject* nm = py.PyUnicode_InternFromString("__name__");
  if (!ga || !sa || !nm) {
    py.PyErr_Clear();
    return false;
  }
  g_observer.setattr_str = sa;
  g_observer.name_str = nm;
  g_observer.getattr_str = ga;  // last: it says the other two are there
  return true;
}

// Everything but a repeat of the thread's memo (access_repeats.h): out of line, so that
// the hook's repeated path stays a few contiguous cache lines.
// `shape`: call_shape(nargsf, kwnames).
[[gnu::noinline]] void observe_call(PyObject* fn, PyObject* const* args, size_t shape, PyObject* res) {
  const Observed* o = find(fn);
  if (!o || !forward_observable()) return;
  uint32_t kind = o->kind;
  if (shape != call_shape(arguments_of_kind(kind), nullptr)) return;  // keywords, or another count
  PyObject* attr = kind == MODULE_GETATTR ? args[0] : args[1];
  // The repeated path (access_repeats.h) for a site other than the memo's, before
  // anything else is looked up. A module's __getattr__ is its site's object there: each
  // observed function stands for one module, and the module itself is looked up only when
  // the access is recorded (the site's identity check then fails on the function, sending
  // the access to the full record, which checks the module).
  AccessSite site;
  site.code = nullptr;
  site.fn = fn;
  if (res && count_repeat(kind, kind == MODULE_GETATTR ? fn : args[0], attr, res, &site)) return;
  const AccessSite* sited = site.code ? &site : nullptr;
  if (kind == MODULE_GETATTR) {
    // The module by the name taken when it was observed: the function's globals are not
    // always the module's (Debian's lazy_loader.attach defines __getattr__ in lazy_loader
    // itself), and holding the name rather than the module adds no reference to it.
    PyObject* modules = py.PyImport_GetModuleDict();
    PyObject* module = modules && o->name ? dict_lookup(modules, o->name) : nullptr;
    record_forward(MODULE_GETATTR, module ? module : fn, attr, res, nullptr, sited);
  } else {
    record_forward(kind, args[0], attr, res, kind == SETATTR ? args[2] : nullptr, sited);
  }
}

// The hook: CPython's own entry point first, with everything as received, then the
// record, or the count of a repeat. The result and the error indicator go back as CPython
// left them.
PyObject* observed_entry(PyObject* fn, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  // What is left of nargsf and kwnames after the call is one word (fewer registers kept
  // across it).
  size_t shape = call_shape(nargsf, kwnames);
  PyObject* res = g_observer.function_vectorcall(fn, args, nargsf, kwnames);
  if (__builtin_expect(res != nullptr, 1) && count_memo_repeat(fn, args, shape, res)) return res;
  observe_call(fn, args, shape, res);
  return res;
}

// Starts observing `fn` (a Python function, else nothing happens) as `kind`.
void observe_function(PyObject* fn, uint32_t kind, PyObject* name) {
  VectorcallFn* entry = function_vectorcall(fn);
  if (!entry) return;
  VectorcallFn cur = __atomic_load_n(entry, __ATOMIC_ACQUIRE);
  ProxyObserver& s = g_observer;
  if (!s.function_vectorcall)
    s.function_vectorcall = py.PyFunction_Vectorcall ? py.PyFunction_Vectorcall : cur != &observed_entry ? cur : nullptr;
  // Not CPython's entry point (already ours, or someone else's: a profiler, a JIT): left
  // alone.
  if (cur != s.function_vectorcall) return;
  size_t i = home(fn);
  while (s.observed[i].fn && s.observed[i].fn != fn) i = (i + 1) & (kObserved - 1);
  if (!s.observed[i].fn) {
    if (s.n_observed >= kObserved / 4 * 3) return;
    ++s.n_observed;
  }
  if (name) py.Py_IncRef(name);
  PyObject* old = s.observed[i].fn == fn ? s.observed[i].name : nullptr;
  s.observed[i] = Observed{fn, kind, name};
  if (old) py.Py_DecRef(old);
  repeats_forget_memos();  // a memo may name fn by the kind it had
  __atomic_store_n(entry, &observed_entry, __ATOMIC_RELEASE);
}

}  // namespace

void observe_module(PyObject* module) {
  if (!strings_ready()) return;
  PyObject* t = type_of(module);
  if (t != py.PyModule_Type && !py.PyType_IsSubtype(t, py.PyModule_Type)) return;
  PyObject* d = py.PyModule_GetDict(module);
  if (!d) { py.PyErr_Clear(); return; }
  // Most modules have no __getattr__: their name is not looked up (a lookup in a module's
  // dict is a hundred instructions and a cache miss or two, at every import).
  PyObject* getattr = dict_lookup(d, g_observer.getattr_str);
  if (!getattr) return;
  PyObject* name = dict_lookup(d, g_observer.name_str);
  if (name && type_of(name) == py.PyUnicode_Type) observe_function(getattr, MODULE_GETATTR, name);
}

namespace {

// The MRO's entry under `name`, as CPython's slot functions find it, with no metaclass code
// run; borrowed (the class's dict holds it). Read along the MRO (class_lookup), not with
// _PyType_Lookup, which would give the class a type version tag the untraced program
// gives it later or never; _PyType_Lookup where the MRO cannot be read.
PyObject* class_entry(PyObject* type, PyObject* name) {
  PyObject* v = nullptr;
  if (!class_lookup(type, name, &v)) return py.PyType_Lookup(type, name);
  if (v) py.Py_DecRef(v);
  return v;
}

}  // namespace

void observe_proxy_class(PyObject* type, bool getattr, bool setattr) {
  if (!strings_ready()) return;
  if (getattr) observe_function(class_entry(type, g_observer.getattr_str), GETATTR, nullptr);
  if (setattr) observe_function(class_entry(type, g_observer.setattr_str), SETATTR, nullptr);
}

void forget_lifetime_observed_functions() {
  tracer_memory::clear_static(g_observer.observed, sizeof g_observer.observed);
  g_observer.n_observed = 0;
  repeats_forget_memos();
  g_observer.getattr_str = g_observer.setattr_str = g_observer.name_str = nullptr;
}

}  // namespace imptrace
