#include "proxies.h"

#include <dlfcn.h>

#include <cstring>

#include "access_repeats.h"
#include "code_location.h"
#include "object_description.h"
#include "process_state.h"
#include "proxy_observer.h"
#include "pytest_context.h"
#include "record_encoder.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

using namespace fields;

constexpr int kMaxProxyClasses = 256;
struct ProxyClasses {
  PyObject* instrumented[kMaxProxyClasses];  // a reference each, kept for the process
  int count;
};
ProxyClasses g_proxy_classes;

// A Python function found on the class (through its MRO) under attr, or null: an object
// whose class gives it a __code__ (functions; Cython's too), asked of the class the same way,
// so that object's inherited slot wrappers (__getattribute__, __setattr__) are told apart
// without an attribute lookup on them. A staticmethod or classmethod gives its function
// (__func__, read as field_n reads: both classes have generic attribute access).
PyObject* python_function_attr(PyObject* type, Name& attr) {
  PyObject* f = class_attr_n(type, attr);
  if (!f) return nullptr;
  static PyObject* const wrappers[] = {static_cast<PyObject*>(dlsym(RTLD_DEFAULT, "PyStaticMethod_Type")),
                                       static_cast<PyObject*>(dlsym(RTLD_DEFAULT, "PyClassMethod_Type"))};
  for (PyObject* w : wrappers) {
    if (!w || type_of(f) != w) continue;
    PyObject* inner = field_n(f, NAME("__func__"));
    py.Py_DecRef(f);
    f = inner;
    if (!f) return nullptr;
    break;
  }
  Ref code(class_attr_n(type_of(f), NAME("__code__")));
  if (!code) { py.Py_DecRef(f); return nullptr; }
  return f;
}

void instrument_proxy_class(PyObject* type) {
  for (int i = 0; i < g_proxy_classes.count; ++i)
    if (g_proxy_classes.instrumented[i] == type) return;
  if (g_proxy_classes.count >= kMaxProxyClasses) return;
  py.Py_IncRef(type);  // deliberate: an instrumented class is remembered for the process
  g_proxy_classes.instrumented[g_proxy_classes.count++] = type;

  Ref ga(python_function_attr(type, NAME("__getattr__")));
  Ref gab(python_function_attr(type, NAME("__getattribute__")));
  Ref sa(python_function_attr(type, NAME("__setattr__")));
  auto r = TraceWriter::begin_record(Record::proxy_class);
  auto& b = TraceWriter::buf();
  wire::put_uint(b, ProxyClass::type, type_name(type));
  put_location(b, ProxyClass::getattr_at, function_location(ga.get()));
  put_location(b, ProxyClass::getattribute_at, function_location(gab.get()));
  put_location(b, ProxyClass::setattr_at, function_location(sa.get()));
  wire::put_bool(b, ProxyClass::module_subclass, py.PyType_IsSubtype(type, py.PyModule_Type) != 0);
  Ref mod(getattr_n(type, NAME("__module__")));
  if (!mod) py.PyErr_Clear();
  wire::put_uint(b, ProxyClass::defined_in, intern_obj(mod.get()));
  TraceWriter::end_record(r);

  // Its forwarding is observed at its functions' C entry points: nothing on the class
  // changes.
  observe_proxy_class(type, ga.get() != nullptr, sa.get() != nullptr);
}

bool is_module(PyObject* o) {
  PyObject* t = type_of(o);
  return t == py.PyModule_Type || py.PyType_IsSubtype(t, py.PyModule_Type);
}

// Whether `module`'s namespace binds `attr` to exactly `value`. Only for an exact str
// name: hashing or comparing anything else could run the program's code.
bool binds(PyObject* module, PyObject* attr, PyObject* value) {
  if (type_of(attr) != py.PyUnicode_Type) return false;
  PyObject* d = py.PyModule_GetDict(module);  // borrowed
  if (!d) { py.PyErr_Clear(); return false; }
  return dict_lookup(d, attr) == value;
}

// Whether `ev` (CPython's own AttributeError, before 3.10) says exactly that `module`
// has no attribute `attr`, in the words of a module's failed lookup. Reads the module's
// __name__ from its dict and the message from its args (a single exact str): no program
// code runs.
bool module_lookup_message(PyObject* ev, PyObject* module, PyObject* attr) {
  PyObject* d = py.PyModule_GetDict(module);  // borrowed
  if (!d) { py.PyErr_Clear(); return false; }
  PyObject* name = dict_get_n(d, NAME("__name__"));  // borrowed
  Py_ssize_t nn = 0, na = 0, nm = 0;
  const char* n = name ? str_utf8(name, &nn) : nullptr;
  const char* a = str_utf8(attr, &na);
  if (!n || !a) return false;
  Ref args(getattr_n(ev, NAME("args")));
  if (!args) { py.PyErr_Clear(); return false; }
  if (py.PyTuple_Size(args.get()) != 1) { py.PyErr_Clear(); return false; }
  const char* m = str_utf8(py.PyTuple_GetItem(args.get(), 0), &nm);
  if (!m) return false;
  static const char kHead[] = "module '", kMid[] = "' has no attribute '";
  const size_t head = sizeof kHead - 1, mid = sizeof kMid - 1;
  const size_t want = head + static_cast<size_t>(nn) + mid + static_cast<size_t>(na) + 1;
  if (static_cast<size_t>(nm) != want) return false;
  const char* at = m;
  if (memcmp(at, kHead, head) != 0) return false;
  at += head;
  if (memcmp(at, n, static_cast<size_t>(nn)) != 0) return false;
  at += nn;
  if (memcmp(at, kMid, mid) != 0) return false;
  at += mid;
  return memcmp(at, a, static_cast<size_t>(na)) == 0 && at[na] == '\'';
}

// The module a forward went to, as far as it can be told without running the program's
// code. A proxy usually holds what it forwards to in its own dict, but it may hold more
// than its target: pygments.lexers' _automodule holds `_mapping` (the table of lexer
// names it reads) and every lexer module it imported, so "the first module in its dict"
// named the table for every lexer class it returned.
//  - a lookup that succeeded: the module held by the proxy whose namespace binds the name
//    to the very object returned (pygments.lexers.python for .PythonLexer); a write that
//    succeeded: the one that binds the name to the value written;
//  - one that failed: AttributeError.obj (3.10+), the object whose lookup failed; when
//    it is None the proxy's own code raised the error (pygments' `raise
//    AttributeError(name)`) and nothing was forwarded;
//  - before 3.10 an AttributeError has no `obj`: the held module is named only when the
//    message is the one its own lookup gives ("module 'm' has no attribute 'a'",
//    CPython's module getattr and the PEP 562 convention). Another message was raised by
//    the proxy's own code (pygments' `raise AttributeError(name)` while it holds only
//    `_mapping`), which forwarded nothing;
//  - otherwise (a result found in none of them, an error that does not say): the module
//    the proxy holds, when it holds exactly one. Among several, no target is recorded
//    rather than a guess.
ObjectDescription forwarded_target(PyObject* proxy, PyObject* attr, PyObject* value, PyObject* ev) {
  // CPython's own AttributeError only: a subclass defined in Python may compute `obj`.
  if (ev && py.minor >= 10 && !(py.PyType_GetFlags(type_of(ev)) & TPFLAGS_HEAPTYPE)) {
    Ref o(getattr_n(ev, NAME("obj")));
    if (!o) py.PyErr_Clear();
    else if (o.get() == py.None) return ObjectDescription();
    else if (o.get() != proxy) return describe(o.get());
  }
  Ref d(py.PyObject_GenericGetDict(proxy, nullptr));
  if (!d) { py.PyErr_Clear(); return ObjectDescription(); }
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  PyObject* only = nullptr;
  bool several = false;
  while (py.PyDict_Next(d.get(), &pos, &k, &v)) {
    if (v == proxy || !is_module(v)) continue;
    if (value && binds(v, attr, value)) return describe(v);
    if (only && only != v) several = true;
    only = v;
  }
  if (!only || several) return ObjectDescription();
  if (!value && ev && py.minor < 10 && py.PyExc_AttributeError && type_of(ev) == *py.PyExc_AttributeError &&
      !module_lookup_message(ev, only, attr))
    return ObjectDescription();
  return describe(only);
}

// `site`: where a successful access came from, when its repeats may be counted.
// `stored`: the value a successful write stored (SETATTR), else null.
void record_proxy_access(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* res, PyObject* stored,
                         PyObject* et, PyObject* ev, PyObject* module_for_record, const AccessSite* site) {
  ThreadState& t = ts();
  PyObject* drop[2] = {nullptr, nullptr};
  {
    WriterLock lock;
    CodeLocation stack[kStackDepth];
    int ns = capture_stack(stack, kStackDepth, false);
    const InFlight* in = innermost(t);
    ObjectDescription object = describe(module_for_record ? module_for_record : proxy);
    uint64_t serial = site && res ? note_recorded_access(*site, res, object.id, drop) : 0;
    auto r = TraceWriter::begin_record(Record::proxy_access);
    auto& b = TraceWriter::buf();
    put_object(b, ProxyAccess::proxy, object);
    wire::put_uint(b, ProxyAccess::attribute, intern_obj(attr));
    wire::put_uint(b, ProxyAccess::kind, kind);
    wire::put_bool(b, ProxyAccess::ok, res != nullptr);
    if (res && kind != ProxyAccess::SETATTR) put_object(b, ProxyAccess::result, describe(res));
    if (!res) {
      uint32_t ty, msg;
      describe_error(et, ev, &ty, &msg);
      wire::put_uint(b, ProxyAccess::error_type, ty);
      wire::put_uint(b, ProxyAccess::error_message, msg);
    }
    if (kind != ProxyAccess::MODULE_GETATTR) {
      PyObject* found = !res ? nullptr : kind == ProxyAccess::SETATTR ? stored : res;
      put_object(b, ProxyAccess::forwarded_to, forwarded_target(proxy, attr, found, ev));
    }
    for (int i = 0; i < ns; ++i) put_location(b, ProxyAccess::stack, stack[i]);
    wire::put_uint(b, ProxyAccess::time_ns, TraceWriter::now_ns());
    wire::put_uint(b, ProxyAccess::thread, t.tid);
    wire::put_uint(b, ProxyAccess::test, current_test());
    wire::put_uint(b, ProxyAccess::during_import, in ? in->index + 1 : 0);
    wire::put_bool(b, ProxyAccess::from_import_system, ns > 0 && stack[0].importlib);
    wire::put_uint(b, ProxyAccess::serial, serial);
    TraceWriter::end_record(r);
    TraceWriter::flush();
  }
  // Given up by the repeat table; released outside the lock (a last reference runs a
  // dealloc, which may run weakref callbacks).
  if (drop[0]) py.Py_DecRef(drop[0]);
  if (drop[1]) py.Py_DecRef(drop[1]);
}

}  // namespace

// The proxy observer's side (proxy_observer.h).
void record_forward(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* res, PyObject* stored,
                    const AccessSite* site) {
  InterpreterScope scope;
  ThreadState& t = ts();
  if (!g_settings.enabled || !in_main_interpreter() || t.inside_tracer || !TraceWriter::usable()) return;
  ++t.inside_tracer;
  PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
  if (!res) py.PyErr_Fetch(&et, &ev, &tb);
  // The error is described as an exception instance, but the indicator is handed back as
  // it was: 3.8-3.11 can hold a not-yet-normalized one (type and message), which is
  // normalized here on copies, for CPython's own exception types only (a user-defined
  // class's __init__ would run once more than untraced).
  PyObject *nt = et, *nv = ev, *ntb = tb;
  bool copies = false;
  if (et && !(ev && (py.PyType_GetFlags(type_of(ev)) & TPFLAGS_BASE_EXC_SUBCLASS)) &&
      !(py.PyType_GetFlags(et) & TPFLAGS_HEAPTYPE)) {
    if (nt) py.Py_IncRef(nt);
    if (nv) py.Py_IncRef(nv);
    if (ntb) py.Py_IncRef(ntb);
    py.PyErr_NormalizeException(&nt, &nv, &ntb);
    copies = true;
  }
  record_proxy_access(kind, proxy, attr, res, stored, nt, nv,
                      kind == ProxyAccess::MODULE_GETATTR ? proxy : nullptr, site);
  if (copies) {
    if (nt) py.Py_DecRef(nt);
    if (nv) py.Py_DecRef(nv);
    if (ntb) py.Py_DecRef(ntb);
  }
  if (!res) py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
}

void instrument_if_proxy(PyObject* obj, const ObjectDescription& described) {
  if (!g_settings.proxies || !(described.flags & ObjectFlags::proxy)) return;
  Ref type(py.PyObject_Type(obj));
  instrument_proxy_class(type.get());
}

void forget_lifetime_proxy_classes() { g_proxy_classes.count = 0; }

}  // namespace imptrace
