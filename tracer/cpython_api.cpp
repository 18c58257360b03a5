#include "cpython_api.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <initializer_list>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace imptrace {

CPythonApi py;

namespace {
void* g_runtime = nullptr;  // &_PyRuntime (3.8-3.11), for probe_thread_state
}  // namespace

namespace {

template <typename T>
bool need(T& slot, const char* name) {
  slot = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
  return slot != nullptr;
}
template <typename T>
void want(T& slot, const char* name) {
  slot = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
}

// "3.11.7 (main, ...)" -> 11; -1 for anything that is not "3.<n>".
int parse_minor(const char* v) {
  if (!v || v[0] != '3' || v[1] != '.' || v[2] < '0' || v[2] > '9') return -1;
  return atoi(v + 2);
}

// need() that keeps the first symbol the process lacks: the reason a CPython is not traced.
struct Missing {
  const char* name = nullptr;
  template <typename T>
  bool need(T& slot, const char* symbol) {
    if (imptrace::need(slot, symbol)) return true;
    if (!name) name = symbol;
    return false;
  }
};

}  // namespace

CPythonSupport resolve_cpython_api(char* why, size_t why_size) {
  if (why_size) why[0] = 0;
  if (!need(py.Py_IsInitialized, "Py_IsInitialized") || !need(py.Py_GetVersion, "Py_GetVersion"))
    // Not a CPython process after all: the constructor asks only when a loaded object's
    // hash table may hold the name (loaded_symbols.h), so this failed lookup is rare.
    return CPythonSupport::absent;
  // Shared vs static: is the API defined in the executable itself or in a libpython?
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(py.Py_IsInitialized), &info) && info.dli_fname) {
    const char* base = strrchr(info.dli_fname, '/');  // the file's name, not its directory's
    py.shared = strstr(base ? base + 1 : info.dli_fname, "libpython") != nullptr;
  }
  // Debug builds (Py_DEBUG) and only they export the reference-count debugging hook.
  py.debug = dlsym(RTLD_DEFAULT, "_Py_NegativeRefcount") != nullptr;
  // Anything but 3.8-3.15 is refused: the facts this tracer relies on (audit hooks from
  // 3.8, _find_and_load by attribute lookup, the object layouts in `layout`) are checked
  // only there. A newer CPython may have changed any of them.
  py.minor = parse_minor(py.Py_GetVersion());
  if (py.minor < kFirstMinor || py.minor > kLastMinor) {
    snprintf(why, why_size, "this tracer knows CPython 3.%d-3.%d", kFirstMinor, kLastMinor);
    return CPythonSupport::unknown;
  }

  Missing m;
  bool ok = true;
  ok &= m.need(py.PySys_AddAuditHook, "PySys_AddAuditHook");
  ok &= m.need(py.PyMem_GetAllocator, "PyMem_GetAllocator");
  ok &= m.need(py.PyMem_SetAllocator, "PyMem_SetAllocator");
  ok &= m.need(py.Py_IncRef, "Py_IncRef");
  ok &= m.need(py.Py_DecRef, "Py_DecRef");
  ok &= m.need(py.PyObject_Type, "PyObject_Type");
  ok &= m.need(py.PyObject_GetAttr, "PyObject_GetAttr");
  ok &= m.need(py.PyObject_GetAttrString, "PyObject_GetAttrString");
  ok &= m.need(py.PyObject_SetAttrString, "PyObject_SetAttrString");
  ok &= m.need(py.PyObject_GenericGetDict, "PyObject_GenericGetDict");
  ok &= m.need(py.PyObject_Str, "PyObject_Str");
  ok &= m.need(py.PyObject_CallFunctionObjArgs, "PyObject_CallFunctionObjArgs");
  ok &= m.need(py.PyObject_Call, "PyObject_Call");
  ok &= m.need(py.PyType_IsSubtype, "PyType_IsSubtype");
  ok &= m.need(py.PyType_GetFlags, "PyType_GetFlags");
  ok &= m.need(py.PyModule_Type, "PyModule_Type");
  ok &= m.need(py.PyUnicode_Type, "PyUnicode_Type");
  ok &= m.need(py.PyType_Type, "PyType_Type");
  ok &= m.need(py.PyModule_GetDict, "PyModule_GetDict");
  ok &= m.need(py.PyErr_Occurred, "PyErr_Occurred");
  ok &= m.need(py.PyErr_Fetch, "PyErr_Fetch");
  ok &= m.need(py.PyErr_Restore, "PyErr_Restore");
  ok &= m.need(py.PyErr_NormalizeException, "PyErr_NormalizeException");
  ok &= m.need(py.PyErr_Clear, "PyErr_Clear");
  ok &= m.need(py.PyCFunction_NewEx, "PyCFunction_NewEx");
  ok &= m.need(py.PyInstanceMethod_New, "PyInstanceMethod_New");
  ok &= m.need(py.PyTuple_New, "PyTuple_New");
  ok &= m.need(py.PyTuple_GetItem, "PyTuple_GetItem");
  ok &= m.need(py.PyTuple_SetItem, "PyTuple_SetItem");
  ok &= m.need(py.PyTuple_Size, "PyTuple_Size");
  ok &= m.need(py.PyWeakref_NewRef, "PyWeakref_NewRef");
  ok &= m.need(py.PyUnicode_AsUTF8AndSize, "PyUnicode_AsUTF8AndSize");
  ok &= m.need(py.PyUnicode_FromString, "PyUnicode_FromString");
  ok &= m.need(py.PyUnicode_InternFromString, "PyUnicode_InternFromString");
  ok &= m.need(py.PyUnicode_FromStringAndSize, "PyUnicode_FromStringAndSize");
  ok &= m.need(py.PyLong_AsLong, "PyLong_AsLong");
  ok &= m.need(py.PyDict_GetItem, "PyDict_GetItem");
  ok &= m.need(py.PyDict_GetItemWithError, "PyDict_GetItemWithError");
  ok &= m.need(py.PyDict_GetItemString, "PyDict_GetItemString");
  ok &= m.need(py.PyDict_SetItemString, "PyDict_SetItemString");
  want(py.PyDict_DelItemString, "PyDict_DelItemString");
  ok &= m.need(py.PyDict_New, "PyDict_New");
  ok &= m.need(py.PyDict_Next, "PyDict_Next");
  ok &= m.need(py.PyDict_Size, "PyDict_Size");
  ok &= m.need(py.PyDict_Copy, "PyDict_Copy");
  ok &= m.need(py.PyList_Size, "PyList_Size");
  ok &= m.need(py.PyList_GetItem, "PyList_GetItem");
  ok &= m.need(py.PySys_GetObject, "PySys_GetObject");
  ok &= m.need(py.PyImport_GetModuleDict, "PyImport_GetModuleDict");
  want(py.PyImport_ImportModule, "PyImport_ImportModule");
  ok &= m.need(py.PyEval_GetFrame, "PyEval_GetFrame");
  ok &= m.need(py.PyFrame_GetLineNumber, "PyFrame_GetLineNumber");
  ok &= m.need(py.PyInterpreterState_GetID, "PyInterpreterState_GetID");
  ok &= m.need(py.PyInterpreterState_Main, "PyInterpreterState_Main");
  if (!need(py.PyInterpreterState_Get, "PyInterpreterState_Get"))  // 3.9+
    ok &= m.need(py.PyInterpreterState_Get, "_PyInterpreterState_Get");  // 3.8
  ok &= m.need(py.None, "_Py_NoneStruct");
  if (!need(py.Py_IsFinalizing, "Py_IsFinalizing")) ok &= m.need(py.Py_IsFinalizing, "_Py_IsFinalizing");
  if (!ok) {
    snprintf(why, why_size, "it lacks %s", m.name);
    return CPythonSupport::unknown;
  }
  want(py.PyFrame_GetBack, "PyFrame_GetBack");
  want(py.PyObject_Hash, "PyObject_Hash");
  want(py.Py_AtExit, "Py_AtExit");
  if (py.minor >= 11) want(py.PyFrame_GetLasti, "PyFrame_GetLasti");
  want(py.PyBytes_AsString, "PyBytes_AsString");
  want(py.PyBytes_Size, "PyBytes_Size");
  want(py.PyFrame_GetCode, "PyFrame_GetCode");
  want(py.PyCode_Addr2Line, "PyCode_Addr2Line");
  want(py.PyCode_Type, "PyCode_Type");
  if (py.minor >= 12) want(py.PyType_GetDict, "PyType_GetDict");
  if (!need(py.PyThreadState_GetUnchecked, "PyThreadState_GetUnchecked"))
    want(py.PyThreadState_GetUnchecked, "_PyThreadState_UncheckedGet");
  if (py.minor <= 11) want(g_runtime, "_PyRuntime");  // here, not under the GIL: dlsym takes the loader's lock
  want(py.PyEval_GetGlobals, "PyEval_GetGlobals");
  want(py.PyCFunction_Type, "PyCFunction_Type");
  if (py.minor < 10) want(py.PyExc_AttributeError, "PyExc_AttributeError");
  want(py.PyObject_Vectorcall, "PyObject_Vectorcall");
  want(py.PyType_Lookup, "_PyType_Lookup");
  want(py.PyFunction_Vectorcall, "_PyFunction_Vectorcall");
  if (py.minor >= 12) want(py.PyFunction_SetVectorcall, "PyFunction_SetVectorcall");
  if (py.minor >= 12) {
    want(py.PyDict_AddWatcher, "PyDict_AddWatcher");
    want(py.PyDict_Watch, "PyDict_Watch");
  }
  if (py.minor >= 15) {
    want(py.PyLazyImport_Type, "PyLazyImport_Type");
    want(py.PyObject_Repr, "PyObject_Repr");
  }

  // The object header layout, told by None's type pointer (Py_TYPE is part of the stable
  // ABI; only Py_TRACE_REFS builds put two list links in front of it).
  if (void* none_type = dlsym(RTLD_DEFAULT, "_PyNone_Type")) {
    for (int off : {layout::kTypeAfterRefcnt, layout::kTraceRefsLinks + layout::kTypeAfterRefcnt}) {
      if (*reinterpret_cast<void* const*>(reinterpret_cast<const char*>(py.None) + off) == none_type) {
        py.ob_type_offset = off;
        break;
      }
    }
  }

  return CPythonSupport::known;
}

namespace {
// A static type's slot table word `index` (PyTypeObject after PyObject_VAR_HEAD and
// tp_name), for the layout whose tp_name is `name`: builds with Py_TRACE_REFS put two more
// words in front of the header. Null when neither layout matches.
void** type_word(const char* symbol, const char* name, size_t index) {
  char* type = static_cast<char*>(dlsym(RTLD_DEFAULT, symbol));
  if (!type) return nullptr;
  for (size_t head : {size_t(0), size_t(layout::kTraceRefsLinks)}) {
    const char* const* tp_name = reinterpret_cast<const char* const*>(type + head + layout::kTpName * sizeof(void*));
    if (*tp_name && strcmp(*tp_name, name) == 0) return reinterpret_cast<void**>(type + head + index * sizeof(void*));
  }
  return nullptr;
}

// Makes the page holding `slot` writable (static types live in .data, which a hardened
// build may have made read-only after relocation) and stores `value` there.
bool store_slot(void** slot, void* value) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = reinterpret_cast<uintptr_t>(slot) & ~static_cast<uintptr_t>(page - 1);
  size_t len = reinterpret_cast<uintptr_t>(slot + 1) - start > static_cast<uintptr_t>(page)
                   ? 2 * static_cast<size_t>(page) : static_cast<size_t>(page);
  if (mprotect(reinterpret_cast<void*>(start), len, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  return true;
}
}  // namespace

void** find_audit_hook_head(void* entry) {
  if (!entry) return nullptr;
  void* runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
  Dl_info info;
  void* extra = nullptr;
  if (!runtime || !dladdr1(runtime, &info, &extra, RTLD_DL_SYMENT)) return nullptr;
  auto* sym = static_cast<const ElfW(Sym)*>(extra);
  if (!sym ||
      sym->st_size < sizeof(void*) || sym->st_size > (64u << 20))
    return nullptr;
  void** words = static_cast<void**>(runtime);
  void** found = nullptr;
  for (size_t i = 0; i < sym->st_size / sizeof(void*); ++i) {
    if (words[i] != entry) continue;
    if (found) return nullptr;  // twice: not sure which one is the head
    found = &words[i];
  }
  return found;
}

bool class_lookup(PyObject* type, PyObject* name, PyObject** found) {
  *found = nullptr;
  if (py.ob_type_offset < 0 || !type || !name || !py.PyTuple_Size || !py.PyTuple_GetItem) return false;
  // The type object's words count from its start, which precedes ob_type by one word (two
  // more under Py_TRACE_REFS): ob_type_offset tells which.
  auto word = [](PyObject* t, size_t index) {
    const char* start = reinterpret_cast<const char*>(t) + py.ob_type_offset - layout::kTypeAfterRefcnt;
    return *reinterpret_cast<PyObject* const*>(start + index * sizeof(void*));
  };
  // A class (a caller may hold whatever a program assigned, such as a __class__ value
  // CPython is about to refuse), whose MRO is made (a class not yet readied has none).
  if (!(py.PyType_GetFlags(type_of(type)) & TPFLAGS_TYPE_SUBCLASS)) return false;
  PyObject* mro = word(type, layout::kTpMro);
  if (!mro || !(py.PyType_GetFlags(type_of(mro)) & TPFLAGS_TUPLE_SUBCLASS)) return false;
  // Held, as CPython's own MRO walk holds it: a lookup may run a key's __eq__, which may
  // assign __bases__ and so free the tuple.
  py.Py_IncRef(mro);
  bool readable = true;
  Py_ssize_t n = py.PyTuple_Size(mro);
  for (Py_ssize_t i = 0; i < n && readable && !*found; ++i) {
    PyObject* t = py.PyTuple_GetItem(mro, i);
    PyObject* dict = t ? word(t, layout::kTpDict) : nullptr;  // borrowed; null for 3.12+'s static types
    bool owned = false;
    if (t && !dict && py.PyType_GetDict) {
      dict = py.PyType_GetDict(t);
      owned = true;
    }
    if (!dict) {
      py.PyErr_Clear();
      readable = false;
      break;
    }
    PyObject* v = py.PyDict_GetItemWithError(dict, name);
    if (v) {
      py.Py_IncRef(v);
      *found = v;
    } else if (py.PyErr_Occurred()) {  // a key's __eq__ raised: not a lookup to trust
      py.PyErr_Clear();
      readable = false;
    }
    if (owned) py.Py_DecRef(dict);
  }
  py.Py_DecRef(mro);
  if (!readable && *found) {
    py.Py_DecRef(*found);
    *found = nullptr;
  }
  return readable;
}

bool quiet_attribute(PyObject* obj, PyObject* name, PyObject** out) {
  *out = nullptr;
  PyObject* type = type_of(obj);
  // Only for classes whose attribute access is the generic one, which is what this reads.
  static void* generic_getattr = dlsym(RTLD_DEFAULT, "PyObject_GenericGetAttr");
  const char* type_start = reinterpret_cast<const char*>(type) + py.ob_type_offset - layout::kTypeAfterRefcnt;
  if (py.ob_type_offset < 0 || !generic_getattr ||
      *reinterpret_cast<void* const*>(type_start + layout::kTpGetattro * sizeof(void*)) != generic_getattr)
    return false;
  PyObject* descr = nullptr;
  if (!class_lookup(type, name, &descr)) return false;
  if (!descr) return true;
  using DescrGet = PyObject* (*)(PyObject*, PyObject*, PyObject*);
  const char* start = reinterpret_cast<const char*>(type_of(descr)) + py.ob_type_offset - layout::kTypeAfterRefcnt;
  auto get = *reinterpret_cast<DescrGet const*>(start + layout::kTpDescrGet * sizeof(void*));
  if (!get) {
    *out = descr;
    return true;
  }
  *out = get(descr, obj, type);
  py.Py_DecRef(descr);
  if (!*out) py.PyErr_Clear();
  return true;
}

SetterFn patch_class_setter(SetterFn hook) {
  // object's first tp_getset entry is {"__class__", object_get_class, object_set_class,
  // doc, closure} (stable 3.8-3.15).
  void** getset = type_word("PyBaseObject_Type", "object", layout::kTpGetset);
  if (!getset || !*getset) return nullptr;
  void** def = static_cast<void**>(*getset);
  const char* name = static_cast<const char*>(def[layout::kGetsetName]);
  if (!name || strcmp(name, "__class__") != 0 || !def[layout::kGetsetGet] || !def[layout::kGetsetSet]) return nullptr;
  auto orig = reinterpret_cast<SetterFn>(def[layout::kGetsetSet]);
  if (!store_slot(&def[layout::kGetsetSet], reinterpret_cast<void*>(hook))) return nullptr;
  return orig;
}

DestructorFn patch_module_dealloc(DestructorFn hook) {
  void** slot = type_word("PyModule_Type", "module", layout::kTpDealloc);
  if (!slot || !*slot) return nullptr;
  auto orig = reinterpret_cast<DestructorFn>(*slot);
  if (!store_slot(slot, reinterpret_cast<void*>(hook))) return nullptr;
  return orig;
}

namespace {
// A plain Python function (PyFunction_Type itself, no subclass: it has none).
bool is_python_function(PyObject* fn) {
  static void* function_type = dlsym(RTLD_DEFAULT, "PyFunction_Type");
  return fn && function_type && type_of(fn) == function_type;
}
}  // namespace

VectorcallFn* function_vectorcall(PyObject* fn) {
  static void** offset_word = type_word("PyFunction_Type", "function", layout::kTpVectorcallOffset);
  if (!offset_word || !is_python_function(fn)) return nullptr;
  // A pointer-aligned field inside the function object's first few hundred bytes, else
  // the type is not laid out as expected and nothing is touched.
  auto offset = reinterpret_cast<intptr_t>(*offset_word);
  if (offset <= 0 || offset > layout::kMaxFunctionVectorcallOffset || offset % 8) return nullptr;
  return reinterpret_cast<VectorcallFn*>(reinterpret_cast<char*>(fn) + offset);
}

void set_function_vectorcall(PyObject* fn, VectorcallFn* entry, VectorcallFn value) {
  if (py.PyFunction_SetVectorcall) {
    py.PyFunction_SetVectorcall(fn, value);
  } else {
    __atomic_store_n(entry, value, __ATOMIC_RELEASE);
  }
}

bool python_calls_reach_function_entry() { return py.minor != 11; }

void* patch_builtin_function(PyObject* fn, const char* name, int flags, void* hook) {
  if (!fn || !py.PyCFunction_Type || py.ob_type_offset < 0 || type_of(fn) != py.PyCFunction_Type) return nullptr;
  const char* f = reinterpret_cast<const char*>(fn) + py.ob_type_offset;
  PyMethodDef* def = *reinterpret_cast<PyMethodDef* const*>(f + layout::kCFunctionMethod);
  if (!def || !def->ml_name || strcmp(def->ml_name, name) != 0 || def->ml_flags != flags || !def->ml_meth ||
      def->ml_meth == hook)
    return nullptr;
  void* orig = def->ml_meth;
  if (!store_slot(&def->ml_meth, hook)) return nullptr;
  return orig;
}

ObjObjArgProc patch_dict_ass_subscript(ObjObjArgProc hook) {
  if (py.minor > 11) return nullptr;
  void** as_mapping = type_word("PyDict_Type", "dict", layout::kTpAsMapping);
  if (!as_mapping || !*as_mapping) return nullptr;
  void** slot = static_cast<void**>(*as_mapping) + layout::kMpAssSubscript;
  auto orig = reinterpret_cast<ObjObjArgProc>(*slot);
  if (!orig || !store_slot(slot, reinterpret_cast<void*>(hook))) return nullptr;
  return orig;
}

void* patch_dict_method(const char* name, int flags, void* hook) {
  if (py.minor > 11 || py.ob_type_offset < 0) return nullptr;
  auto* dict_type = static_cast<PyObject*>(dlsym(RTLD_DEFAULT, "PyDict_Type"));
  auto* descr_type = static_cast<PyObject*>(dlsym(RTLD_DEFAULT, "PyMethodDescr_Type"));
  if (!dict_type || !descr_type) return nullptr;
  // A type attribute that is a method descriptor comes back as itself; dict's type dict
  // keeps it alive after the reference is dropped.
  Ref descr(py.PyObject_GetAttrString(dict_type, name));
  if (!descr) { py.PyErr_Clear(); return nullptr; }
  if (type_of(descr.get()) != descr_type) return nullptr;
  const char* d = reinterpret_cast<const char*>(descr.get()) + py.ob_type_offset;
  PyMethodDef* def = *reinterpret_cast<PyMethodDef* const*>(d + layout::kMethodDescrMethod);
  if (!def || !def->ml_name || strcmp(def->ml_name, name) != 0 || def->ml_flags != flags || !def->ml_meth)
    return nullptr;
  void* orig = def->ml_meth;
  if (!store_slot(&def->ml_meth, hook)) return nullptr;
  return orig;
}

BinaryFunc patch_dict_inplace_or(BinaryFunc hook) {
  if (py.minor < 9 || py.minor > 11) return nullptr;
  void** as_number = type_word("PyDict_Type", "dict", layout::kTpAsNumber);
  if (!as_number || !*as_number) return nullptr;
  void** slots = static_cast<void**>(*as_number);
  // dict defines nb_or and nb_inplace_or and no arithmetic: a table that does not read so
  // is not the one expected.
  if (slots[layout::kNbAdd] || !slots[layout::kNbOr] || !slots[layout::kNbInplaceOr]) return nullptr;
  auto orig = reinterpret_cast<BinaryFunc>(slots[layout::kNbInplaceOr]);
  if (!store_slot(&slots[layout::kNbInplaceOr], reinterpret_cast<void*>(hook))) return nullptr;
  return orig;
}

void probe_dict_version() {
  if (py.minor > 11 || py.ob_type_offset < 0 || py.dict_version_offset >= 0) return;
  PyObject* d = py.PyDict_New();
  if (!d) { py.PyErr_Clear(); return; }
  int off = py.ob_type_offset + layout::kDictVersion;
  auto tag = [&]() { return *reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(d) + off); };
  uint64_t before = tag();
  bool ok = py.PyDict_SetItemString(d, "a", py.None) == 0;
  uint64_t after_set = tag();
  ok = ok && py.PyDict_SetItemString(d, "a", d) == 0;
  uint64_t after_replace = tag();
  if (!ok) py.PyErr_Clear();
  // Replacing the value with the dict itself makes a cycle: clear before letting go.
  py.PyDict_SetItemString(d, "a", py.None);
  py.Py_DecRef(d);
  if (ok && after_set != before && after_replace != after_set && after_set != 0)
    py.dict_version_offset = off;
}

const char* str_utf8_slow(PyObject* s, Py_ssize_t* n) {
  if (!s || !(py.PyType_GetFlags(type_of(s)) & TPFLAGS_UNICODE_SUBCLASS)) return nullptr;
  const char* p = py.PyUnicode_AsUTF8AndSize(s, n);
  if (!p) py.PyErr_Clear();  // lone surrogates: treated as absent rather than raising
  return p;
}

void probe_str_layout() {
  if (py.ob_type_offset < 0 || py.ascii_data_offset >= 0 || py.minor < kFirstMinor || py.minor > kLastMinor) return;
  int offset = py.ob_type_offset + (py.minor >= 12 ? layout::kAsciiData : layout::kAsciiDataWithWstr);
  static const char kAsciiProbe[] = "imptrace layout probe";
  constexpr Py_ssize_t kAsciiProbeLength = sizeof kAsciiProbe - 1;
  PyObject* ascii = py.PyUnicode_FromString(kAsciiProbe);
  PyObject* latin = py.PyUnicode_FromString("caf\xc3\xa9");  // "café": compact, not ASCII
  bool ok = ascii && latin;
  if (ok) {
    const char* a = reinterpret_cast<const char*>(ascii) + py.ob_type_offset;
    const char* l = reinterpret_cast<const char*>(latin) + py.ob_type_offset;
    uint32_t sa = *reinterpret_cast<const uint32_t*>(a + layout::kStrState);
    uint32_t sl = *reinterpret_cast<const uint32_t*>(l + layout::kStrState);
    constexpr uint32_t kBits = layout::kStrCompact | layout::kStrAscii;
    Py_ssize_t n = 0;
    const char* api = py.PyUnicode_AsUTF8AndSize(ascii, &n);
    ok = (sa & kBits) == kBits && (sl & kBits) == layout::kStrCompact &&
         *reinterpret_cast<const Py_ssize_t*>(a + layout::kStrLength) == kAsciiProbeLength && n == kAsciiProbeLength &&
         *reinterpret_cast<const Py_ssize_t*>(l + layout::kStrLength) == 4 &&  // "café": 4 characters
         api == reinterpret_cast<const char*>(ascii) + offset &&
         memcmp(api, kAsciiProbe, kAsciiProbeLength) == 0;
  }
  // The hash field: -1 in a new str, then what PyObject_Hash returned and cached there.
  int hash_offset = py.ob_type_offset + layout::kStrHash;
  bool hash_ok = false;
  if (ok && py.PyObject_Hash) {
    const int64_t* field = reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(latin) + hash_offset);
    bool unset = *field == -1;
    int64_t h = py.PyObject_Hash(latin);
    hash_ok = unset && h != -1 && *field == h;
  }
  if (!ok || !hash_ok) py.PyErr_Clear();
  if (ascii) py.Py_DecRef(ascii);
  if (latin) py.Py_DecRef(latin);
  if (ok) py.ascii_data_offset = offset;
  if (ok && hash_ok) py.str_hash_offset = hash_offset;
}

PyObject* type_of_slow(PyObject* o) {
  PyObject* t = py.PyObject_Type(o);
  if (t) py.Py_DecRef(t);  // still alive: o holds it
  return t;
}

namespace {

// _PyFrame_GetFirstComplete(f->previous): the frame PyFrame_GetBack would make an object
// for, counting the C-stack frames passed over in `shims` (probe_interpreter_walk).
const char* iframe_back_counting(const CPythonApi::IFrameLayout& l, const char* f, int* shims) {
  f = *reinterpret_cast<const char* const*>(f + l.previous);
  while (f && iframe_incomplete(l, f)) {
    if (f[l.owner] == layout::kOwnedByCStack) ++*shims;
    f = *reinterpret_cast<const char* const*>(f + l.previous);
  }
  return f;
}

// obj.name for the layout probes below, as quiet_attribute reads it (no type-attribute
// lookup), else through getattr. New reference or null, no error. The names are CPython's
// own attribute names, interned already: InternFromString finds them.
PyObject* probe_attribute(PyObject* obj, const char* name) {
  PyObject* n = py.PyUnicode_InternFromString(name);
  PyObject* v = nullptr;
  if (!n || !quiet_attribute(obj, n, &v)) v = py.PyObject_GetAttrString(obj, name);
  if (n) py.Py_DecRef(n);
  if (!v) py.PyErr_Clear();
  return v;
}

// Whether `v` is where `code` (a code object) has its first RESUME, in code units, as the
// public co_code shows it (without 3.12's instrumentation or the adaptive forms): what
// CPython's init_code stores in _co_firsttraceable.
bool is_first_traceable(PyObject* code, int v) {
  if (!py.PyBytes_AsString || !py.PyBytes_Size) return false;
  PyObject* b = probe_attribute(code, "co_code");
  if (!b) return false;
  const char* bytes = py.PyBytes_AsString(b);
  Py_ssize_t n = bytes ? py.PyBytes_Size(b) : 0;
  uint8_t resume = py.minor >= 13 ? layout::kOpResume313 : layout::kOpResume311;
  bool ok = v >= 0 && 2 * static_cast<Py_ssize_t>(v) < n && static_cast<uint8_t>(bytes[2 * v]) == resume;
  for (int i = 0; ok && i < v; ++i) ok = static_cast<uint8_t>(bytes[2 * i]) != resume;
  py.Py_DecRef(b);
  return ok;
}

// 3.11-3.13: FrameWalk's route, checked on the whole running stack from `frame` (whose
// interpreter frame `ifr` probe_interpreter_frame has just confirmed): at every step,
// the interpreter frame the route reaches must be the one behind PyFrame_GetBack's frame
// object (that object's f_frame, and its own frame_obj the object), with the code object
// PyFrame_GetCode gives, co_firstlineno where the code object is expected to keep it,
// _co_firsttraceable at its RESUME, the owner one a running frame has, and the stack's
// end at the same place; on 3.12 and 3.13 the walk must have passed over the shim frame
// that every entry to the interpreter loop pushes. Any mismatch leaves the route unset
// (FrameWalk then goes through PyFrame_GetBack).
void probe_interpreter_walk(PyObject* frame, const char* ifr) {
  if (!py.PyFrame_GetBack || !py.PyCode_Type || !py.PyCode_Addr2Line) return;
  bool v311 = py.minor == 11;
  CPythonApi::IFrameLayout l;
  l.previous = v311 ? layout::kIFramePrevious311 : layout::kIFramePrevious312;
  l.owner = v311 ? layout::kIFrameOwner311 : layout::kIFrameOwner312;
  l.code = py.position_code;
  l.frame_object = v311 ? layout::kIFrameFrameObject311 : layout::kIFrameFrameObject312;
  l.instr = layout::kIFrameInstr;
  int firstlineno = py.ob_type_offset + (v311 ? layout::kCodeFirstLineno311
                                        : py.minor == 12 ? layout::kCodeFirstLineno312 : layout::kCodeFirstLineno313);
  l.first_traceable = py.ob_type_offset + (v311 ? layout::kCodeFirstTraceable311
                                           : py.minor == 12 ? layout::kCodeFirstTraceable312
                                                            : layout::kCodeFirstTraceable313);
  l.instructions = py.ob_type_offset + (v311 ? layout::kCodeInstructions311
                                        : py.minor == 12 ? layout::kCodeInstructions312 : layout::kCodeInstructions313);
  if (l.instructions != py.position_delta) return;
  PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
  py.PyErr_Fetch(&et, &ev, &tb);
  py.Py_IncRef(frame);
  PyObject* fo = frame;
  int shims = 0;
  bool ok = true;
  for (int guard = 0; ok && guard < 4096; ++guard) {
    const char* fo_ifr = *reinterpret_cast<const char* const*>(reinterpret_cast<const char*>(fo) + py.position_deref);
    ok = fo_ifr == ifr && *reinterpret_cast<PyObject* const*>(ifr + l.frame_object) == fo &&
         (ifr[l.owner] == layout::kOwnedByThread || ifr[l.owner] == layout::kOwnedByGenerator) &&
         !iframe_incomplete(l, ifr);
    PyObject* code = ok ? py.PyFrame_GetCode(fo) : nullptr;
    if (code) {
      py.Py_DecRef(code);  // the running frame holds it
      PyObject* line = probe_attribute(code, "co_firstlineno");
      long first = line ? py.PyLong_AsLong(line) : -1;
      if (line) py.Py_DecRef(line);
      const char* c = reinterpret_cast<const char*>(code);
      ok = *reinterpret_cast<PyObject* const*>(ifr + l.code) == code && first > 0 &&
           *reinterpret_cast<const int*>(c + firstlineno) == first &&
           is_first_traceable(code, *reinterpret_cast<const int*>(c + l.first_traceable));
    } else {
      ok = false;
    }
    if (!ok) break;
    PyObject* back = py.PyFrame_GetBack(fo);  // makes the frame object, once per frame
    const char* mine = iframe_back_counting(l, ifr, &shims);
    py.Py_DecRef(fo);
    fo = back;
    ifr = mine;
    if (!back || !mine) {
      ok = !back && !mine;
      break;
    }
  }
  if (fo) py.Py_DecRef(fo);
  py.PyErr_Clear();
  py.PyErr_Restore(et, ev, tb);
  if (!ok || (py.minor >= 12 && shims == 0)) return;
  py.iframe = l;
}

// 3.11-3.13: the interpreter frame behind a running frame object, checked against the
// accessors. The frame's own back pointer (frame_obj) must lead to the frame object, the
// code object must be PyFrame_GetCode's, and the instruction pointer must sit
// PyFrame_GetLasti bytes past a plausible start of the code's instructions: a layout
// other than the one expected fails at least one of these.
void probe_interpreter_frame(PyObject* frame) {
  if (!py.PyFrame_GetCode || !py.PyFrame_GetLasti) return;
  int iframe = py.ob_type_offset + layout::kFrameInterpreterFrame;
  int code = py.minor == 11 ? layout::kIFrameCode311 : layout::kIFrameCode312;
  int frame_obj = py.minor == 11 ? layout::kIFrameFrameObject311 : layout::kIFrameFrameObject312;
  const char* f = reinterpret_cast<const char*>(frame);
  const char* ifr = *reinterpret_cast<const char* const*>(f + iframe);
  if (!ifr || *reinterpret_cast<PyObject* const*>(ifr + frame_obj) != frame) return;
  PyObject* c = py.PyFrame_GetCode(frame);
  if (!c) { py.PyErr_Clear(); return; }
  py.Py_DecRef(c);  // the running frame holds it
  int lasti = py.PyFrame_GetLasti(frame);
  if (*reinterpret_cast<PyObject* const*>(ifr + code) != c || lasti < 0) return;
  const char* instr = *reinterpret_cast<const char* const*>(ifr + layout::kIFrameInstr);
  intptr_t start = instr - reinterpret_cast<const char*>(c) - lasti;
  if (start < layout::kMinCodeBytesOffset || start > layout::kMaxCodeBytesOffset || start % 2) return;
  py.position_deref = iframe;
  py.position_raw = layout::kIFrameInstr;
  py.position_code_mask = ~uintptr_t(0);
  py.position_delta = static_cast<int>(start);
  py.position_unit = 1;
  py.position_code = code;  // last: frame_position takes it as saying the others are set
  probe_interpreter_walk(frame, ifr);
}

}  // namespace

namespace {
short* code_warmup_311(PyObject* code) {
  return reinterpret_cast<short*>(reinterpret_cast<char*>(code) + py.ob_type_offset + layout::kCodeWarmup311);
}
uint8_t* code_instructions_311(PyObject* code) {
  return reinterpret_cast<uint8_t*>(code) + py.ob_type_offset + layout::kCodeInstructions311;
}
}  // namespace

bool find_store_subscripts(PyObject* fn, GenericStores* out) {
  *out = GenericStores();
  if (py.minor != 11 || py.ob_type_offset < 0 || !py.PyCode_Type || !py.PyBytes_AsString || !py.PyBytes_Size ||
      !is_python_function(fn))
    return false;  // (a plain function: reading its __code__ runs no code of the program's)
  Ref code(probe_attribute(fn, "__code__"));
  if (!code || type_of(code.get()) != py.PyCode_Type) return false;
  // Never quickened: CPython's instructions are still co_code's bytes.
  short warmup = *code_warmup_311(code.get());
  if (warmup >= 0 || warmup < layout::kWarmupNeverRun311) return false;
  Ref bytes(probe_attribute(code.get(), "co_code"));
  const char* b = bytes ? py.PyBytes_AsString(bytes.get()) : nullptr;
  if (!b) { py.PyErr_Clear(); return false; }
  Py_ssize_t n = py.PyBytes_Size(bytes.get());
  Py_ssize_t units = *reinterpret_cast<const Py_ssize_t*>(reinterpret_cast<const char*>(code.get()) +
                                                          py.ob_type_offset + layout::kVarSize);
  if (n <= 0 || n != 2 * units || memcmp(code_instructions_311(code.get()), b, static_cast<size_t>(n)) != 0) return false;
  for (Py_ssize_t i = 0; i < units; ++i) {
    if (static_cast<uint8_t>(b[2 * i]) != layout::kOpStoreSubscr) continue;
    if (out->n == static_cast<int>(sizeof out->at / sizeof out->at[0])) return false;
    out->at[out->n++] = static_cast<uint32_t>(i);
  }
  if (!out->n) return false;
  out->code = code.release();
  return true;
}

bool keep_stores_generic(GenericStores& s) {
  if (!s.code) return true;
  if (*code_warmup_311(s.code) != 0) return false;  // not quickened yet
  uint8_t* ins = code_instructions_311(s.code);
  bool known = true;
  for (int i = 0; i < s.n; ++i) {
    uint8_t op = ins[2 * s.at[i]];
    known &= op == layout::kOpStoreSubscr || op == layout::kOpStoreSubscrAdaptive311 ||
             op == layout::kOpStoreSubscrDict311 || op == layout::kOpStoreSubscrListInt311;
  }
  // The generic instruction skips the cache entry that follows, as the quickened ones do.
  if (known)
    for (int i = 0; i < s.n; ++i) ins[2 * s.at[i]] = layout::kOpStoreSubscr;
  py.Py_DecRef(s.code);
  s.code = nullptr;
  return true;
}

void probe_frame_layout(PyObject* frame) {
  if (py.frame_layout_probed || !frame) return;
  py.frame_layout_probed = true;
  static void* frame_type = dlsym(RTLD_DEFAULT, "PyFrame_Type");
  if (py.ob_type_offset < 0 || !frame_type || type_of(frame) != frame_type) return;
  if (py.minor >= 11 && py.minor <= 13) {
    probe_interpreter_frame(frame);
    return;
  }
  if (py.minor < 8 || py.minor > 10) return;
  int back = py.ob_type_offset + layout::kFrameBack;
  int code = py.ob_type_offset + layout::kFrameCode;
  int lasti = py.ob_type_offset + (py.minor == 10 ? layout::kFrameLasti310 : layout::kFrameLasti38);
  int unit = py.minor == 10 ? layout::kCodeUnit310 : 1;
  const char* f = reinterpret_cast<const char*>(frame);
  PyObject* s_back = *reinterpret_cast<PyObject* const*>(f + back);
  PyObject* s_code = *reinterpret_cast<PyObject* const*>(f + code);
  long s_lasti = *reinterpret_cast<const int*>(f + lasti);
  PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
  py.PyErr_Fetch(&et, &ev, &tb);
  PyObject* a_back = probe_attribute(frame, "f_back");
  PyObject* a_code = probe_attribute(frame, "f_code");
  PyObject* a_lasti = probe_attribute(frame, "f_lasti");
  long l = a_lasti ? py.PyLong_AsLong(a_lasti) : -1;
  // The outermost frame's f_back is null, which the attribute gives as None.
  bool ok = a_back && a_code && a_lasti && a_code == s_code && a_back == (s_back ? s_back : py.None) && l >= 0 &&
            l == s_lasti * unit;
  if (a_back) py.Py_DecRef(a_back);
  if (a_code) py.Py_DecRef(a_code);
  if (a_lasti) py.Py_DecRef(a_lasti);
  py.PyErr_Clear();
  py.PyErr_Restore(et, ev, tb);
  if (!ok) return;
  py.frame_back_offset = back;
  py.frame_lasti_offset = lasti;
  py.frame_lasti_unit = unit;
  py.frame_code_offset = code;
  py.position_raw = lasti;  // f_lasti, then f_lineno: the 8 bytes are the frame's
  py.position_unit = unit;
  py.position_code = code;  // last: frame_position takes it as saying the others are set
}

void probe_thread_state() {
  if (py.thread_state_probed) return;
  py.thread_state_probed = true;
  if (py.minor < 8 || py.minor > 13 || !py.PyThreadState_GetUnchecked || py.position_code < 0) return;
  PyObject* frame = py.PyEval_GetFrame();  // borrowed
  void* interp = py.PyInterpreterState_Get();
  const char* ts = static_cast<const char*>(py.PyThreadState_GetUnchecked());
  if (!frame || !interp || !ts || *reinterpret_cast<void* const*>(ts + layout::kTstateInterp) != interp) return;
  // What frame_position reads for the running frame: the frame object, or (3.11-3.13) the
  // interpreter frame it points to.
  const char* expected = reinterpret_cast<const char*>(frame);
  if (py.position_deref >= 0) expected = *reinterpret_cast<const char* const*>(expected + py.position_deref);
  int at = py.minor <= 10 ? layout::kTstateFrame310
         : py.minor == 11 ? layout::kTstateCFrame311
         : py.minor == 12 ? layout::kTstateCFrame312
                          : layout::kTstateCurrentFrame313;
  int deref = py.minor == 11 ? layout::kCFrameCurrent311 : py.minor == 12 ? layout::kCFrameCurrent312 : -1;
  const char* f = *reinterpret_cast<const char* const*>(ts + at);
  if (deref >= 0 && f) f = *reinterpret_cast<const char* const*>(f + deref);
  // FrameWalk passes over what PyEval_GetFrame passes over (3.12+: an incomplete topmost
  // frame); running_frame's callers compare what they read, so either way the route is
  // the one checked.
  if (f && f != expected && py.iframe.previous >= 0) f = iframe_first_complete(py.iframe, f);
  if (!f || f != expected) return;
  // 3.8-3.11: the thread state without a call, where the runtime keeps it.
  if (py.minor <= 11) {
    void* runtime = g_runtime;
    int off = py.minor == 8 ? layout::kRuntimeTstateCurrent38
            : py.minor <= 10 ? layout::kRuntimeTstateCurrent39 : layout::kRuntimeTstateCurrent311;
    void* const* w = runtime ? reinterpret_cast<void* const*>(static_cast<char*>(runtime) + off) : nullptr;
    if (w && w[0] == ts && w[1] == interp) py.tstate_current = w;
  }
  py.tstate_frame_deref = deref;
  py.tstate_frame = at;  // last: running_frame takes it as saying the others are set
}

PyObject* frame_back(PyObject* frame) {
  probe_frame_layout(frame);
  if (py.frame_back_offset >= 0) {
    PyObject* b = *reinterpret_cast<PyObject* const*>(reinterpret_cast<const char*>(frame) + py.frame_back_offset);
    if (b) py.Py_IncRef(b);
    return b;
  }
  if (py.PyFrame_GetBack) return py.PyFrame_GetBack(frame);
  PyObject* b = py.PyObject_GetAttrString(frame, "f_back");
  if (!b) { py.PyErr_Clear(); return nullptr; }
  if (b == py.None) { py.Py_DecRef(b); return nullptr; }  // outermost frame
  return b;
}

PyObject* frame_code(PyObject* frame) {
  probe_frame_layout(frame);
  if (py.frame_code_offset >= 0) {
    PyObject* c = *reinterpret_cast<PyObject* const*>(reinterpret_cast<const char*>(frame) + py.frame_code_offset);
    if (c) py.Py_IncRef(c);
    return c;
  }
  if (py.PyFrame_GetCode) return py.PyFrame_GetCode(frame);
  PyObject* c = py.PyObject_GetAttrString(frame, "f_code");
  if (!c) py.PyErr_Clear();
  return c;
}

LineFormat line_format() {
  if (py.minor >= 11 && py.minor <= kLastMinor) return py.PyFrame_GetLasti ? LineFormat::locations : LineFormat::none;
  if (py.minor == 10) return LineFormat::linetable_310;
  if (py.minor == 8 || py.minor == 9) return LineFormat::lnotab;
  return LineFormat::none;
}

bool line_cursor_init(LineCursor& c, PyObject* table, long line) {
  c = LineCursor();
  LineFormat format = line_format();
  if (format == LineFormat::none || !py.PyBytes_AsString || !py.PyBytes_Size || !table || line < 0) return false;
  const char* bytes = py.PyBytes_AsString(table);
  Py_ssize_t n = bytes ? py.PyBytes_Size(table) : -1;
  if (!bytes || line < 0 || n < 0 || n > 0x7fffffff) { py.PyErr_Clear(); return false; }
  c.table = reinterpret_cast<const uint8_t*>(bytes);  // the code object keeps it alive
  c.len = static_cast<uint32_t>(n);
  c.first = c.computed = static_cast<int32_t>(line);
  c.format = format;
  return true;
}

namespace {

// Location-table entry: first byte 1CCCCLLL (C: kind, L: length - 1 in 2-byte code units),
// then kind-specific bytes. Kinds 13 (no columns) and 14 (long) start with a signed varint
// line delta; 10-12 are one-line forms with delta kind - 10; 15 has no line; 0-9 keep the
// line. Varints come in 6-bit chunks, bit 6 = more.
constexpr int kLocShortForms = 9;      // 0-9: the line does not change
constexpr int kLocOneLine0 = 10;       // 10-12: one line, delta kind - 10
constexpr int kLocOneLine2 = 12;
constexpr int kLocNoColumns = 13;      // a varint line delta, no columns
constexpr int kLocLong = 14;           // a varint line delta, then more varints
constexpr int kLocNone = 15;           // no line
constexpr uint8_t kLocEntryStart = 128;
constexpr uint8_t kVarintMore = 64;    // location-table varints: 6 bits a byte, bit 6 = more
constexpr uint8_t kVarintBits = 63;

bool advance_line(LineCursor& c) {
  if (c.pos >= c.len) return false;
  uint8_t head = c.table[c.pos];
  int kind = (head >> 3) & 15;
  uint32_t p = c.pos + 1;
  int32_t delta = 0;
  if (kind == kLocNoColumns || kind == kLocLong) {
    uint32_t u = 0;
    int shift = 0;
    uint8_t b = kVarintMore;
    while ((b & kVarintMore) && p < c.len && shift < 30) {
      b = c.table[p++];
      u |= static_cast<uint32_t>(b & kVarintBits) << shift;
      shift += 6;
    }
    delta = (u & 1) ? -static_cast<int32_t>(u >> 1) : static_cast<int32_t>(u >> 1);
  } else if (kind >= kLocOneLine0 && kind <= kLocOneLine2) {
    delta = kind - kLocOneLine0;
  }
  c.computed += delta;
  c.line = kind == kLocNone ? -1 : c.computed;
  c.start = c.end;
  c.end += ((head & 7u) + 1) * 2;
  // Next entry: fixed sizes for the fixed forms (short: 1 column byte, one-line: 2, none:
  // 0), checked against the entry-start bit; varint forms are scanned.
  uint32_t next = kind <= kLocShortForms ? c.pos + 2
                : kind <= kLocOneLine2  ? c.pos + 3
                : kind == kLocNone      ? c.pos + 1
                                        : c.len + 1;
  if (next < c.len ? (c.table[next] & kLocEntryStart) : next == c.len) {
    c.pos = next;
  } else {
    do ++c.pos; while (c.pos < c.len && !(c.table[c.pos] & kLocEntryStart));
  }
  return true;
}

// 3.10's co_linetable: (bytes covered: unsigned, line delta: signed, -128 = no line)
// pairs; a delta too large for a byte is spread over entries that cover nothing.
bool advance_line_310(LineCursor& c) {
  if (c.pos + layout::kLineTableEntry > c.len) return false;
  int8_t delta = static_cast<int8_t>(c.table[c.pos + 1]);
  bool no_line = delta == layout::kLineTable310NoLine;
  c.start = c.end;
  c.end += c.table[c.pos];
  if (!no_line) c.computed += delta;
  c.line = no_line ? -1 : c.computed;
  c.pos += layout::kLineTableEntry;
  return true;
}

// The start of the instruction the frame is at, in bytes. 3.8-3.10 have no accessor: the
// frame object's f_lasti is read where probe_frame_layout confirmed it, else the attribute
// frame.f_lasti, that offset (3.10 converts its code-unit index).
int frame_lasti(PyObject* frame) {
  if (py.PyFrame_GetLasti) return py.PyFrame_GetLasti(frame);
  probe_frame_layout(frame);
  if (py.frame_lasti_offset >= 0) {
    int i = *reinterpret_cast<const int*>(reinterpret_cast<const char*>(frame) + py.frame_lasti_offset);
    return i < 0 ? -1 : i * py.frame_lasti_unit;
  }
  static PyObject* name = nullptr;  // deliberate: kept for the process lifetime
  if (!name && !(name = py.PyUnicode_InternFromString("f_lasti"))) { py.PyErr_Clear(); return -1; }
  PyObject* v = py.PyObject_GetAttr(frame, name);
  long lasti = v ? py.PyLong_AsLong(v) : -1;
  if (v) py.Py_DecRef(v);
  if (lasti < 0 || lasti > 0x7fffffff) { py.PyErr_Clear(); return -1; }
  return static_cast<int>(lasti);
}

// co_lnotab (3.8, 3.9): (address increment: unsigned, line increment: signed) pairs; an
// instruction's line is co_firstlineno plus the line increments of every pair whose
// address, summed from the start, is at or before it (PyCode_Addr2Line). The cursor has
// applied the pairs before `pos`, the last of them at address `end`.
int lnotab_line(LineCursor& c, uint32_t a) {
  if (a < c.end) {  // a pair past the instruction is applied (a loop, a new call): restart
    c.pos = c.end = 0;
    c.computed = c.first;
  }
  while (c.pos + layout::kLineTableEntry <= c.len) {
    uint32_t next = c.end + c.table[c.pos];
    if (next > a) break;
    c.end = next;
    c.computed += static_cast<int8_t>(c.table[c.pos + 1]);
    c.pos += layout::kLineTableEntry;
  }
  return c.computed;
}

}  // namespace

bool frame_position_slow(PyObject* frame, PyObject** code, int* lasti) {
  if (!py.frame_layout_probed) {
    probe_frame_layout(frame);
    return frame_position(frame, code, lasti);  // now with a layout, or the accessors
  }
  PyObject* c = frame_code(frame);
  if (!c) return false;
  py.Py_DecRef(c);  // the running frame holds it: only its address is used
  int i = frame_lasti(frame);
  if (i < 0) return false;
  *code = c;
  *lasti = i;
  return true;
}

int cursor_line(LineCursor* c, int addr) {
  if (!c || !c->table || addr < 0) return 0;
  uint32_t a = static_cast<uint32_t>(addr);
  if (c->format == LineFormat::lnotab) {
    int line = lnotab_line(*c, a);
    return line > 0 ? line : 0;
  }
  if (a < c->start || c->end == 0) {  // behind the cursor (a loop, a new call): restart
    c->pos = c->start = c->end = 0;
    c->computed = c->first;
    c->line = -1;
  }
  bool found = true;
  if (c->format == LineFormat::linetable_310) {
    while (c->end <= a && (found = advance_line_310(*c))) {}
  } else {
    // 3.11 writes an entry per instruction (3.12+ merge the instructions of one position),
    // nearly all of them of the fixed-size forms (short: 2 bytes, the line unchanged;
    // one-line: 3 bytes, a delta of 0-2): passed over here as advance_line would, a few
    // instructions each instead of its general decoding.
    while (c->end <= a && c->pos < c->len) {
      uint8_t head = c->table[c->pos];
      int kind = (head >> 3) & 15;
      uint32_t size = kind <= kLocShortForms ? 2 : kind <= kLocOneLine2 ? 3 : 0;
      if (!size || c->pos + size >= c->len || !(c->table[c->pos + size] & kLocEntryStart)) break;
      c->computed += kind <= kLocShortForms ? 0 : kind - kLocOneLine0;
      c->line = c->computed;
      c->start = c->end;
      c->end += ((head & 7u) + 1) * 2;
      c->pos += size;
    }
    while (c->end <= a && (found = advance_line(*c))) {}
  }
  return found && c->line > 0 ? c->line : 0;
}

int frame_line(PyObject* frame, LineCursor* c) {
  if (c && c->table) {
    int line = cursor_line(c, frame_lasti(frame));
    if (line > 0) return line;
  }
  return py.PyFrame_GetLineNumber(frame);
}

void FrameWalk::start(const void* point) {
  PyObject* f = static_cast<PyObject*>(const_cast<void*>(point));
  if (!f) {
    f = py.PyEval_GetFrame();  // borrowed
    if (!f) return;
    probe_frame_layout(f);
    probe_thread_state();  // the next walks start from the thread state
    if (py.iframe.previous >= 0) {
      iframe_ = *reinterpret_cast<const char* const*>(reinterpret_cast<const char*>(f) + py.position_deref);
      return;
    }
  } else if (py.iframe.previous >= 0) {
    iframe_ = static_cast<const char*>(point);  // an interpreter frame (point())
    return;
  }
  frame_ = f;
  if (py.frame_back_offset >= 0) return;
  py.Py_IncRef(f);
  owned_ = true;
}

void FrameWalk::next_owned() {
  if (!frame_) return;
  PyObject* back = frame_back(frame_);
  py.Py_DecRef(frame_);
  frame_ = back;
}

PyObject* FrameWalk::code_owned() const {
  if (!frame_) return nullptr;
  PyObject* c = frame_code(frame_);
  if (!c) {
    py.PyErr_Clear();
    return nullptr;
  }
  py.Py_DecRef(c);  // the running frame holds it
  return c;
}

// Where the cursor gives no line, what PyFrame_GetLineNumber gives: the frame object's
// f_lineno while a trace function set it, else PyCode_Addr2Line at that offset
// (co_firstlineno for a negative one).
int FrameWalk::iframe_line_slow(PyObject* code, int addr) const {
  PyObject* fo = *reinterpret_cast<PyObject* const*>(iframe_ + py.iframe.frame_object);
  if (fo) return py.PyFrame_GetLineNumber(fo);
  return py.PyCode_Addr2Line(code, addr);
}

}  // namespace imptrace
