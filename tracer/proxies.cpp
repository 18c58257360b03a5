#include "proxies.h"

#include "code_location.h"
#include "object_description.h"
#include "process_state.h"
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

PyObject* proxy_getattr_hook(PyObject* orig, PyObject* const* args, Py_ssize_t nargs);
PyObject* proxy_setattr_hook(PyObject* orig, PyObject* const* args, Py_ssize_t nargs);
PyObject* module_getattr_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyMethodDef g_proxy_getattr_def = {"__getattr__", reinterpret_cast<void*>(proxy_getattr_hook),
                                   METH_FASTCALL, "imptrace: records, then calls the class's own __getattr__"};
PyMethodDef g_proxy_setattr_def = {"__setattr__", reinterpret_cast<void*>(proxy_setattr_hook),
                                   METH_FASTCALL, "imptrace: records, then calls the class's own __setattr__"};
PyMethodDef g_module_getattr_def = {"__getattr__", reinterpret_cast<void*>(module_getattr_hook),
                                    METH_FASTCALL, "imptrace: records, then calls the module's own __getattr__"};

// A Python function found on the class (through its MRO) under attr, or null.
PyObject* python_function_attr(PyObject* type, Name& attr) {
  PyObject* f = getattr_n(type, attr);
  if (!f) { py.PyErr_Clear(); return nullptr; }
  PyObject* code = getattr_n(f, NAME("__code__"));
  if (!code) { py.PyErr_Clear(); py.Py_DecRef(f); return nullptr; }
  py.Py_DecRef(code);
  return f;
}

bool wrap_class_method(PyObject* type, Name& attr, PyMethodDef* def) {
  Ref orig(python_function_attr(type, attr));
  if (!orig) return false;
  Ref fn(py.PyCFunction_NewEx(def, orig.get(), nullptr));
  if (!fn) { py.PyErr_Clear(); return false; }
  // instancemethod binds like a Python function, so the C hook receives (instance, ...).
  Ref im(py.PyInstanceMethod_New(fn.get()));
  if (!im || py.PyObject_SetAttrString(type, attr.text, im.get()) < 0) { py.PyErr_Clear(); return false; }
  return true;
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

  ++ts().inside_tracer;  // setting a class attribute raises an audit event and may run metaclass code
  if (ga) wrap_class_method(type, NAME("__getattr__"), &g_proxy_getattr_def);
  if (sa) wrap_class_method(type, NAME("__setattr__"), &g_proxy_setattr_def);
  --ts().inside_tracer;
}

// The module a failed or successful forward went to: AttributeError.obj (3.10+), else a
// module the proxy holds in its own dict.
ObjectDescription forwarded_target(PyObject* proxy, PyObject* ev) {
  if (ev && py.minor >= 10) {
    Ref o(getattr_n(ev, NAME("obj")));
    if (!o) py.PyErr_Clear();
    if (o && o.get() != py.None && o.get() != proxy) return describe(o.get());
  }
  Ref d(py.PyObject_GenericGetDict(proxy, nullptr));
  if (!d) { py.PyErr_Clear(); return ObjectDescription(); }
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (py.PyDict_Next(d.get(), &pos, &k, &v)) {
    Ref t(py.PyObject_Type(v));
    if (v != proxy && py.PyType_IsSubtype(t.get(), py.PyModule_Type)) return describe(v);
  }
  return ObjectDescription();
}

void record_proxy_access(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* res,
                         PyObject* et, PyObject* ev, PyObject* module_for_record) {
  ThreadState& t = ts();
  WriterLock lock;
  CodeLocation stack[kStackDepth];
  int ns = capture_stack(stack, kStackDepth, false);
  const InFlight* in = innermost(t);
  auto r = TraceWriter::begin_record(Record::proxy_access);
  auto& b = TraceWriter::buf();
  put_object(b, ProxyAccess::proxy, describe(module_for_record ? module_for_record : proxy));
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
  if (kind != ProxyAccess::MODULE_GETATTR) put_object(b, ProxyAccess::forwarded_to, forwarded_target(proxy, ev));
  for (int i = 0; i < ns; ++i) put_location(b, ProxyAccess::stack, stack[i]);
  wire::put_uint(b, ProxyAccess::time_ns, TraceWriter::now_ns());
  wire::put_uint(b, ProxyAccess::thread, t.tid);
  wire::put_uint(b, ProxyAccess::test, current_test());
  wire::put_uint(b, ProxyAccess::during_import, in ? in->index + 1 : 0);
  wire::put_bool(b, ProxyAccess::from_import_system, ns > 0 && stack[0].importlib);
  TraceWriter::end_record(r);
  TraceWriter::flush();
}

// Runs the original, then records. The error, if any, is handed back untouched.
PyObject* call_and_record(uint32_t kind, PyObject* orig, PyObject* proxy, PyObject* attr,
                          PyObject* a, PyObject* b2, PyObject* c, PyObject* module_for_record) {
  PyObject* res = py.PyObject_CallFunctionObjArgs(orig, a, b2, c, nullptr);
  InterpreterScope scope;
  ThreadState& t = ts();
  if (!g_settings.enabled || t.inside_tracer || !TraceWriter::usable()) return res;
  ++t.inside_tracer;
  PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
  if (!res) {
    py.PyErr_Fetch(&et, &ev, &tb);
    py.PyErr_NormalizeException(&et, &ev, &tb);
  }
  record_proxy_access(kind, proxy, attr, res, et, ev, module_for_record);
  if (!res) py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
  return res;
}

PyObject* proxy_getattr_hook(PyObject* orig, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) return py.PyObject_Call(orig, nullptr, nullptr);
  return call_and_record(ProxyAccess::GETATTR, orig, args[0], args[1], args[0], args[1], nullptr, nullptr);
}

PyObject* proxy_setattr_hook(PyObject* orig, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) return py.PyObject_Call(orig, nullptr, nullptr);
  return call_and_record(ProxyAccess::SETATTR, orig, args[0], args[1], args[0], args[1], args[2], nullptr);
}

// PEP 562: m_self is (the module's own __getattr__, the module's name). The name is taken
// when the hook is installed: the function's globals are not always the module's (Debian's
// lazy_loader.attach returns a __getattr__ defined in lazy_loader itself). Holding the
// name, not the module, keeps the module free of a reference cycle through its own dict.
PyObject* module_getattr_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* orig = py.PyTuple_GetItem(self, 0);
  PyObject* modname = py.PyTuple_GetItem(self, 1);
  if (!orig || !modname) return nullptr;
  if (nargs != 1) return py.PyObject_Call(orig, nullptr, nullptr);
  PyObject* sys_modules = g_main_interpreter.sys_modules;
  PyObject* module = sys_modules ? py.PyDict_GetItem(sys_modules, modname) : nullptr;
  return call_and_record(ProxyAccess::MODULE_GETATTR, orig, module ? module : orig, args[0], args[0],
                         nullptr, nullptr, module);
}

}  // namespace

void instrument_if_proxy(PyObject* obj, const ObjectDescription& described) {
  if (!g_settings.proxies || !(described.flags & ObjectFlags::proxy)) return;
  Ref type(py.PyObject_Type(obj));
  instrument_proxy_class(type.get());
}

void instrument_module_getattr(PyObject* module) {
  PyObject* t = type_of(module);
  if (t != py.PyModule_Type && !py.PyType_IsSubtype(t, py.PyModule_Type)) return;
  PyObject* d = py.PyModule_GetDict(module);
  if (!d) { py.PyErr_Clear(); return; }
  PyObject* ga = dict_get_n(d, NAME("__getattr__"));
  if (!ga) return;
  PyObject* name = dict_get_n(d, NAME("__name__"));
  if (!name) return;
  Ref code(getattr_n(ga, NAME("__code__")));
  if (!code) { py.PyErr_Clear(); return; }  // not a Python function (maybe already ours)
  Ref self(py.PyTuple_New(2));
  if (!self) { py.PyErr_Clear(); return; }
  py.Py_IncRef(ga);
  py.PyTuple_SetItem(self.get(), 0, ga);
  py.Py_IncRef(name);
  py.PyTuple_SetItem(self.get(), 1, name);
  Ref fn(py.PyCFunction_NewEx(&g_module_getattr_def, self.get(), nullptr));
  if (!fn || py.PyDict_SetItemString(d, "__getattr__", fn.get()) < 0) py.PyErr_Clear();
}

}  // namespace imptrace
