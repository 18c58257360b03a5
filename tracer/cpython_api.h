// The CPython C API as the tracer sees it: resolved at run time from the host process,
// never linked, so one libimptrace.so serves CPython 3.8-3.15, static and shared, release
// and debug builds. This file and cpython_api.cpp are the only places that know anything
// version-specific about CPython; everything else calls through `py`.
//
// Rules that keep one binary valid everywhere:
//  - only exported functions, never macros that read struct fields (Py_TYPE, Py_INCREF,
//    PyFrameObject members): field offsets differ between versions and debug builds. The
//    exceptions are the layouts in `layout` below, each read only for the versions named
//    there and, where a wrong offset could matter, only once a probe on a real object
//    confirmed it;
//  - functions that appeared later (PyFrame_GetBack 3.9, dict watchers 3.12) are optional
//    and have a fallback or a documented loss of precision.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

namespace imptrace {

struct PyObject;  // opaque: we never look inside
typedef ssize_t Py_ssize_t;

typedef PyObject* (*PyCFunctionFast)(PyObject* self, PyObject* const* args, Py_ssize_t nargs);

// Layout of PyMethodDef and PyMemAllocatorEx is part of the stable ABI.
struct PyMethodDef {
  const char* ml_name;
  void* ml_meth;
  int ml_flags;
  const char* ml_doc;
};
constexpr int METH_VARARGS = 0x0001;
constexpr int METH_KEYWORDS = 0x0002;
constexpr int METH_FASTCALL = 0x0080;  // with METH_KEYWORDS: (self, args, nargs, kwnames)
constexpr int METH_O = 0x0008;
constexpr int METH_NOARGS = 0x0004;

struct PyMemAllocatorEx {
  void* ctx;
  void* (*malloc)(void* ctx, size_t size);
  void* (*calloc)(void* ctx, size_t nelem, size_t elsize);
  void* (*realloc)(void* ctx, void* ptr, size_t new_size);
  void (*free)(void* ctx, void* ptr);
};
constexpr int PYMEM_DOMAIN_RAW = 0;

// What Py_NewInterpreterFromConfig (3.12+) returns, by value (the stable layout of
// PyStatus, 3.8-3.13): the tracer's interposer hands it back as it came.
struct PyStatus {
  int type;
  const char* func;
  const char* err_msg;
  int exitcode;
};

typedef int (*Py_AuditHookFunction)(const char* event, PyObject* args, void* user);

// PyDict_WatchEvent values (3.12+).
enum DictWatchEvent {
  DICT_ADDED = 0, DICT_MODIFIED, DICT_DELETED, DICT_CLONED, DICT_CLEARED, DICT_DEALLOCATED
};
typedef int (*DictWatchCallback)(int event, PyObject* dict, PyObject* key, PyObject* new_value);

// Every member has an initialiser, so that `py` is constant-initialised: the library's
// constructor fills it in before main, and a dynamic initialiser running after it (static
// initialisation order is not defined between the two) would put the defaults back.
struct CPythonApi {
  int minor = 0;  // 3.<minor>, from Py_GetVersion (kFirstMinor to kLastMinor once resolved)
  bool shared = false;
  bool debug = false;

  // Needed before Py_Initialize.
  int (*Py_IsInitialized)() = nullptr;
  const char* (*Py_GetVersion)() = nullptr;
  int (*PySys_AddAuditHook)(Py_AuditHookFunction, void*) = nullptr;
  void (*PyMem_GetAllocator)(int, PyMemAllocatorEx*) = nullptr;
  void (*PyMem_SetAllocator)(int, PyMemAllocatorEx*) = nullptr;

  // Objects and errors.
  void (*Py_IncRef)(PyObject*) = nullptr;
  void (*Py_DecRef)(PyObject*) = nullptr;
  PyObject* (*PyObject_Type)(PyObject*) = nullptr;
  PyObject* (*PyObject_GetAttr)(PyObject*, PyObject*) = nullptr;
  PyObject* (*PyObject_GetAttrString)(PyObject*, const char*) = nullptr;
  int (*PyObject_SetAttrString)(PyObject*, const char*, PyObject*) = nullptr;
  PyObject* (*PyObject_GenericGetDict)(PyObject*, void*) = nullptr;
  PyObject* (*PyObject_Str)(PyObject*) = nullptr;
  int64_t (*PyObject_Hash)(PyObject*) = nullptr;  // optional: only probe_str_layout calls it
  PyObject* (*PyObject_CallFunctionObjArgs)(PyObject*, ...) = nullptr;
  PyObject* (*PyObject_Call)(PyObject*, PyObject*, PyObject*) = nullptr;
  // 3.9+ (3.8 has it only as an inline function): a call with the arguments as received.
  PyObject* (*PyObject_Vectorcall)(PyObject*, PyObject* const*, size_t, PyObject*) = nullptr;
  int (*PyType_IsSubtype)(PyObject*, PyObject*) = nullptr;
  unsigned long (*PyType_GetFlags)(PyObject*) = nullptr;
  PyObject* (*PyType_GetDict)(PyObject*) = nullptr;  // 3.12+: new reference (static types' tp_dict is null)
  PyObject* PyModule_Type = nullptr;
  PyObject* PyUnicode_Type = nullptr;
  PyObject* PyType_Type = nullptr;
  PyObject* PyCFunction_Type = nullptr;  // builtin_function_or_method (null if not found)
  PyObject* None = nullptr;  // &_Py_NoneStruct
  // The variable holding CPython's AttributeError type (null if not found).
  PyObject** PyExc_AttributeError = nullptr;
  PyObject* (*PyModule_GetDict)(PyObject*) = nullptr;
  PyObject* (*PyErr_Occurred)() = nullptr;
  void (*PyErr_Fetch)(PyObject**, PyObject**, PyObject**) = nullptr;
  void (*PyErr_Restore)(PyObject*, PyObject*, PyObject*) = nullptr;
  void (*PyErr_NormalizeException)(PyObject**, PyObject**, PyObject**) = nullptr;
  void (*PyErr_Clear)() = nullptr;
  PyObject* (*PyCFunction_NewEx)(PyMethodDef*, PyObject*, PyObject*) = nullptr;
  PyObject* (*PyInstanceMethod_New)(PyObject*) = nullptr;
  PyObject* (*PyTuple_New)(Py_ssize_t) = nullptr;
  PyObject* (*PyTuple_GetItem)(PyObject*, Py_ssize_t) = nullptr;
  int (*PyTuple_SetItem)(PyObject*, Py_ssize_t, PyObject*) = nullptr;
  Py_ssize_t (*PyTuple_Size)(PyObject*) = nullptr;
  PyObject* (*PyWeakref_NewRef)(PyObject*, PyObject*) = nullptr;

  // Strings, numbers, containers.
  const char* (*PyUnicode_AsUTF8AndSize)(PyObject*, Py_ssize_t*) = nullptr;
  PyObject* (*PyUnicode_FromString)(const char*) = nullptr;
  PyObject* (*PyUnicode_InternFromString)(const char*) = nullptr;
  PyObject* (*PyUnicode_FromStringAndSize)(const char*, Py_ssize_t) = nullptr;
  long (*PyLong_AsLong)(PyObject*) = nullptr;
  PyObject* (*PyDict_GetItem)(PyObject*, PyObject*) = nullptr;          // borrowed, no error
  PyObject* (*PyDict_GetItemWithError)(PyObject*, PyObject*) = nullptr; // borrowed
  PyObject* (*PyDict_GetItemString)(PyObject*, const char*) = nullptr;  // borrowed, no error
  int (*PyDict_SetItemString)(PyObject*, const char*, PyObject*) = nullptr;
  int (*PyDict_DelItemString)(PyObject*, const char*) = nullptr;  // only to undo the tracer's own import of atexit
  PyObject* (*PyDict_New)() = nullptr;
  int (*PyDict_Next)(PyObject*, Py_ssize_t*, PyObject**, PyObject**) = nullptr;
  Py_ssize_t (*PyDict_Size)(PyObject*) = nullptr;
  PyObject* (*PyDict_Copy)(PyObject*) = nullptr;
  Py_ssize_t (*PyList_Size)(PyObject*) = nullptr;
  PyObject* (*PyList_GetItem)(PyObject*, Py_ssize_t) = nullptr;
  PyObject* (*PySys_GetObject)(const char*) = nullptr;
  PyObject* (*PyImport_GetModuleDict)() = nullptr;
  PyObject* (*PyImport_ImportModule)(const char*) = nullptr;  // only for atexit (WalkBudget's owed walk)

  // Frames. 3.9+ has accessors; 3.8 reads the same facts through frame attributes.
  PyObject* (*PyEval_GetFrame)() = nullptr;
  PyObject* (*PyEval_GetGlobals)() = nullptr;  // borrowed; makes no frame object
  PyObject* (*PyFrame_GetBack)(PyObject*) = nullptr;  // 3.9+, new reference
  PyObject* (*PyFrame_GetCode)(PyObject*) = nullptr;  // 3.9+, new reference
  int (*PyFrame_GetLineNumber)(PyObject*) = nullptr;
  int (*PyFrame_GetLasti)(PyObject*) = nullptr;  // 3.11+: byte offset of the current instruction
  int (*PyCode_Addr2Line)(PyObject*, int) = nullptr;  // a code object's line at a byte offset
  PyObject* PyCode_Type = nullptr;
  void* (*PyThreadState_GetUnchecked)() = nullptr;  // 3.13; 3.11, 3.12 _PyThreadState_UncheckedGet
  char* (*PyBytes_AsString)(PyObject*) = nullptr;
  Py_ssize_t (*PyBytes_Size)(PyObject*) = nullptr;

  // Interpreters. 3.8 spells PyInterpreterState_Get with a leading underscore.
  void* (*PyInterpreterState_Get)() = nullptr;
  int64_t (*PyInterpreterState_GetID)(void*) = nullptr;
  void* (*PyInterpreterState_Main)() = nullptr;

  // Py_IsFinalizing (3.13+) / _Py_IsFinalizing (3.8-3.12): true once Py_FinalizeEx began.
  int (*Py_IsFinalizing)() = nullptr;
  // Registers a function that Py_FinalizeEx calls once it has finished (each lifetime's
  // registrations are run and dropped by its own finalisation; at most 32 at a time).
  int (*Py_AtExit)(void (*)()) = nullptr;

  // Dict watchers (3.12+): exact attribution of sys.modules writes.
  int (*PyDict_AddWatcher)(DictWatchCallback) = nullptr;
  int (*PyDict_Watch)(int, PyObject*) = nullptr;

  // CPython's MRO lookup, as its slot functions do it (borrowed, no error, no metaclass
  // code run). Exported 3.8-3.15; proxy_observer.h needs it.
  PyObject* (*PyType_Lookup)(PyObject*, PyObject*) = nullptr;
  // Every Python function's own C entry point (exported 3.8-3.12 and 3.15; 3.13 and 3.14
  // keep it internal).
  PyObject* (*PyFunction_Vectorcall)(PyObject*, PyObject* const*, size_t, PyObject*) = nullptr;
  // Sets a function's entry point and clears its version (3.12+), see set_function_vectorcall.
  void (*PyFunction_SetVectorcall)(PyObject*, PyObject* (*)(PyObject*, PyObject* const*, size_t, PyObject*)) = nullptr;

  // PEP 810 (3.15+): the type of the objects a lazy import binds until first use, and the
  // repr that names what one will import.
  PyObject* PyLazyImport_Type = nullptr;
  PyObject* (*PyObject_Repr)(PyObject*) = nullptr;

  bool has_dict_watchers() const { return PyDict_AddWatcher && PyDict_Watch; }
  bool has_lazy_imports() const { return PyLazyImport_Type && PyObject_Repr && has_dict_watchers(); }

  // Where an object's type pointer sits: after ob_refcnt (8), plus two words of
  // Py_TRACE_REFS list links in such debug builds; -1 when neither layout matched None.
  int ob_type_offset = -1;
  // Where a dict's version tag sits (3.8-3.11), -1 until probe_dict_version confirmed it.
  int dict_version_offset = -1;
  // Where a compact ASCII str's characters start (after PyASCIIObject: 48 bytes up to
  // 3.11, which still has wstr, 40 from 3.12), -1 until probe_str_layout confirmed it.
  int ascii_data_offset = -1;
  int str_hash_offset = -1;  // PyASCIIObject.hash, -1 until probe_str_layout checked it
  // Where a frame object keeps f_back, f_code and f_lasti (3.8-3.10), -1 until
  // probe_frame_layout confirmed them on a running frame; f_lasti counts in
  // frame_lasti_unit bytes (3.10: code units of 2).
  int frame_back_offset = -1;
  int frame_code_offset = -1;
  int frame_lasti_offset = -1;
  int frame_lasti_unit = 1;
  // frame_position's route through memory, one for 3.8-3.13 (set once probe_frame_layout
  // confirmed it on a running frame; position_code -1 until then): base is the frame
  // object, or on 3.11-3.13 the interpreter frame it points to at position_deref (f_frame);
  // the code object sits at base + position_code; the 8 bytes at base + position_raw are
  // 3.8-3.10's f_lasti (an int: the low half) or 3.11-3.13's instruction pointer
  // (prev_instr, 3.13's instr_ptr), which sits PyFrame_GetLasti bytes past the code
  // object's instructions (co_code_adaptive, position_delta bytes into the code object).
  //   lasti = (int)(raw - (code & position_code_mask) - position_delta) * position_unit
  int position_code = -1;
  int position_deref = -1;
  int position_raw = 0;
  uintptr_t position_code_mask = 0;  // 0 (3.8-3.10) or all ones (3.11-3.13)
  int position_delta = 0;
  int position_unit = 1;
  // FrameWalk's route through 3.11-3.13's interpreter frames (previous -1 until
  // probe_frame_layout followed a running stack with it and met PyFrame_GetBack's frames
  // at every step): where an interpreter frame keeps previous, owner, its code object, its
  // frame object and its instruction pointer, and where a code object keeps
  // _co_firsttraceable and its instructions (from the object's start).
  struct IFrameLayout {
    int previous = -1, owner = -1, code = -1, frame_object = -1, instr = -1;
    int first_traceable = -1, instructions = -1;  // in the code object
  } iframe;
  bool frame_layout_probed = false;

  // The thread state, for the repeated proxy-access path (running_frame below) and the
  // start of every FrameWalk: one route, probed once (probe_thread_state). The current
  // thread state: read from tstate_current (3.8-3.11, &_PyRuntime.gilstate's
  // tstate_current) once probe_thread_state confirmed it, else asked of
  // PyThreadState_GetUnchecked (above).
  // Where it keeps its running frame: tstate_frame (3.8-3.10 the frame object, 3.11-3.12
  // the _PyCFrame, 3.13 the interpreter frame), then at tstate_frame_deref (3.11-3.12:
  // the _PyCFrame's interpreter frame); -1 until probe_thread_state confirmed it.
  void* const* tstate_current = nullptr;
  int tstate_frame = -1;
  int tstate_frame_deref = -1;
  bool thread_state_probed = false;
};

extern CPythonApi py;

// The CPython versions this tracer knows: 3.<kFirstMinor> to 3.<kLastMinor>.
constexpr int kFirstMinor = 8;
constexpr int kLastMinor = 15;

// What resolve_cpython_api found in the running process.
enum class CPythonSupport {
  absent,   // not a CPython process: the tracer stays inert, no file
  unknown,  // a CPython this tracer does not know (another version, or a part missing):
            // not traced, and its trace says so
  known,    // traced
};
// Looks the API up in the running process. For `unknown`, `why` gets the reason in a few
// words ("this tracer knows CPython 3.8-3.15"); py.shared and py.debug are set from
// `unknown` on.
CPythonSupport resolve_cpython_api(char* why, size_t why_size);

// Where fields sit in CPython's objects, 3.8-3.15 (release and debug builds alike; the
// one difference, Py_TRACE_REFS's two list links in front of every object, is found at
// run time and kept in CPythonApi::ob_type_offset). Offsets marked "from ob_type" count
// from the object's type pointer, wherever the header put it.
namespace layout {
constexpr int kTypeAfterRefcnt = 8;    // PyObject: ob_refcnt, then ob_type
constexpr int kTraceRefsLinks = 16;    // Py_TRACE_REFS: _ob_next, _ob_prev before ob_refcnt
constexpr int kVarSize = 8;            // PyVarObject.ob_size, from ob_type
constexpr int kListItems = 16;         // PyListObject.ob_item, from ob_type
constexpr int kDictVersion = 16;       // PyDictObject.ma_version_tag (3.8-3.11), from ob_type
constexpr int kStrLength = 8;          // PyASCIIObject.length, from ob_type
constexpr int kStrHash = 16;           // PyASCIIObject.hash (-1 until computed), from ob_type
constexpr int kStrState = 24;          // PyASCIIObject.state (a bit field word), from ob_type
constexpr uint32_t kStrCompact = 0x20;  // state.compact
constexpr uint32_t kStrAscii = 0x40;    // state.ascii
constexpr int kAsciiDataWithWstr = 40;  // a compact ASCII str's characters, from ob_type (3.8-3.11)
constexpr int kAsciiData = 32;          // ... 3.12+ (no wstr)
// PyTypeObject words (8 bytes each, counted from the start of a release-build object).
constexpr size_t kTpName = 3;
constexpr size_t kTpDealloc = 6;
constexpr size_t kTpVectorcallOffset = 7;  // where instances keep their C entry point
constexpr size_t kTpAsMapping = 14;
constexpr size_t kTpGetattro = 18;
constexpr size_t kTpDict = 33;
constexpr size_t kTpDescrGet = 34;
constexpr size_t kTpMro = 43;
constexpr size_t kTpGetset = 31;
constexpr size_t kMpAssSubscript = 2;  // PyMappingMethods: mp_length, mp_subscript, mp_ass_subscript
constexpr size_t kGetsetName = 0, kGetsetGet = 1, kGetsetSet = 2;  // PyGetSetDef words
constexpr size_t kTpAsNumber = 12;
constexpr size_t kNbAdd = 0, kNbOr = 15, kNbInplaceOr = 28;  // PyNumberMethods words
// PyCFunctionObject (a builtin function): m_ml, its PyMethodDef, from ob_type (3.8-3.13).
constexpr int kCFunctionMethod = 8;
// PyMethodDescrObject: PyDescr_COMMON (the header, d_type, d_name, d_qualname), then
// d_method, from ob_type (3.8-3.13).
constexpr int kMethodDescrMethod = 32;
// Line tables (3.8-3.10): (unsigned byte increment, signed line increment) pairs.
constexpr size_t kLineTableEntry = 2;      // co_lnotab, 3.10's co_linetable: bytes per pair
constexpr int8_t kLineTable310NoLine = -128;  // 3.10's line increment for "no line" (PEP 626)
// PyFrameObject, whose layout 3.8-3.10 publish (Include/frameobject.h, 3.9-3.10
// Include/cpython/frameobject.h): PyObject_VAR_HEAD, f_back, f_code, f_builtins, f_globals,
// f_locals, f_valuestack, then on 3.8 and 3.9 f_stacktop, f_trace, two chars, f_gen, f_lasti
// (bytes), on 3.10 f_trace, f_stackdepth and two chars (one word), f_gen, f_lasti (code
// units). From ob_type. 3.11+ frame objects point at an internal frame: not read.
constexpr int kFrameBack = 16;
constexpr int kFrameCode = 24;
constexpr int kFrameLasti38 = 96;   // 3.8, 3.9
constexpr int kFrameLasti310 = 88;  // 3.10
constexpr int kCodeUnit310 = 2;     // bytes per 3.10 f_lasti unit (frame.f_lasti doubles it)
// 3.11-3.13 (Include/internal/pycore_frame.h, 3.13 Include/internal/pycore_frame.h and
// Include/cpython/frameobject.h): a frame object is PyObject_HEAD, f_back, f_frame (its
// _PyInterpreterFrame), ... From ob_type. The interpreter frame (no header): 3.11 f_func,
// f_globals, f_builtins, f_locals, f_code, frame_obj, previous, prev_instr; 3.12 f_code,
// previous, f_funcobj, f_globals, f_builtins, f_locals, frame_obj, prev_instr; 3.13 the
// same with f_executable and instr_ptr. 3.14 makes f_executable a tagged reference: not
// read.
constexpr int kFrameInterpreterFrame = 16;
constexpr int kIFrameCode311 = 32, kIFrameFrameObject311 = 40;
constexpr int kIFrameCode312 = 0, kIFrameFrameObject312 = 48;  // 3.12, 3.13
constexpr int kIFrameInstr = 56;                               // 3.11-3.13
// The rest of what walking interpreter frames needs (FrameWalk): previous (above), owner
// (3.11: after stacktop and is_entry; 3.12, 3.13: after stacktop and return_offset), the
// owners (enum _frameowner; 3.11 has no C-stack shim frames), and in the code object
// (Include/cpython/code.h, from ob_type) co_firstlineno, _co_firsttraceable (the index of
// the RESUME instruction: a frame whose instruction pointer is before it has not started,
// _PyFrame_IsIncomplete) and co_code_adaptive, where the instructions start.
constexpr int kIFramePrevious311 = 48, kIFrameOwner311 = 69;
constexpr int kIFramePrevious312 = 8, kIFrameOwner312 = 70;  // 3.12, 3.13
constexpr char kOwnedByThread = 0, kOwnedByGenerator = 1, kOwnedByCStack = 3;
constexpr int kCodeFirstLineno311 = 64, kCodeFirstTraceable311 = 160, kCodeInstructions311 = 176;
constexpr int kCodeFirstLineno312 = 60, kCodeFirstTraceable312 = 168, kCodeInstructions312 = 184;
constexpr int kCodeFirstLineno313 = 60, kCodeFirstTraceable313 = 176, kCodeInstructions313 = 192;
constexpr uint8_t kOpResume311 = 151, kOpResume313 = 149;  // 3.12 kept 3.11's number
// 3.11's co_warmup (a short, from ob_type): -8 for a code object never run, one up at each
// call and loop iteration; at 0 CPython quickens the code in place (_PyCode_Quicken) and
// it stays 0. STORE_SUBSCR's forms: the generic one, and 3.11's quickened ones
// (Lib/opcode.py, _specialized_instructions): STORE_SUBSCR_ADAPTIVE, STORE_SUBSCR_DICT,
// STORE_SUBSCR_LIST_INT.
constexpr int kCodeWarmup311 = 44;
constexpr short kWarmupNeverRun311 = -8;
constexpr uint8_t kOpStoreSubscr = 60;
constexpr uint8_t kOpStoreSubscrAdaptive311 = 168, kOpStoreSubscrDict311 = 169, kOpStoreSubscrListInt311 = 170;
// The thread state's current frame: kTstate* below.
constexpr int kMinCodeBytesOffset = 48, kMaxCodeBytesOffset = 512;  // a code object's header
// PyFunctionObject is about twenty words on every version: a tp_vectorcall_offset past
// this bound means a layout the tracer does not know.
constexpr intptr_t kMaxFunctionVectorcallOffset = 512;
}  // namespace layout

// Type flag bits (stable since 3.0).
constexpr unsigned long TPFLAGS_HEAPTYPE = 1UL << 9;
constexpr unsigned long TPFLAGS_LONG_SUBCLASS = 1UL << 24;
constexpr unsigned long TPFLAGS_LIST_SUBCLASS = 1UL << 25;
constexpr unsigned long TPFLAGS_TUPLE_SUBCLASS = 1UL << 26;
constexpr unsigned long TPFLAGS_UNICODE_SUBCLASS = 1UL << 28;
constexpr unsigned long TPFLAGS_DICT_SUBCLASS = 1UL << 29;
constexpr unsigned long TPFLAGS_BASE_EXC_SUBCLASS = 1UL << 30;
constexpr unsigned long TPFLAGS_TYPE_SUBCLASS = 1UL << 31;

// An object's type, borrowed (the object keeps it alive): read from the object header
// rather than through PyObject_Type, which costs a call, an incref and a decref.
PyObject* type_of_slow(PyObject* o);
inline PyObject* type_of(PyObject* o) {
  if (py.ob_type_offset < 0) return type_of_slow(o);
  return *reinterpret_cast<PyObject* const*>(reinterpret_cast<const char*>(o) + py.ob_type_offset);
}

// An object's reference count: ob_refcnt, the word before ob_type (3.12+ keep the count of
// a mortal object in it whole, as before; an immortal object's, or one with flags in the
// word's high half, reads larger); -1 where the header's layout is not known.
inline Py_ssize_t refcount(PyObject* o) {
  if (py.ob_type_offset < 0) return -1;
  return *reinterpret_cast<const Py_ssize_t*>(reinterpret_cast<const char*>(o) + py.ob_type_offset -
                                              layout::kTypeAfterRefcnt);
}

// 3.8-3.10 keep an instance's attributes in a real dict, which PyObject_GenericGetDict
// hands back as it is: reading that is cheaper than an attribute lookup (a type lookup,
// often a method-cache miss, then the same dict). 3.11+ keep them inline and would build
// a dict when asked for it, so there attributes are looked up.
inline bool instance_attributes_in_dict() { return py.minor < 11; }

// 3.8-3.14 raise the `import` audit event in import.c, just before it looks up
// importlib._bootstrap._find_and_load; 3.15 raises it from that function's own Python code,
// once the lookup has been made. There the tracer takes its place at an earlier event
// (importlib's code is unmarshalled, and sys.path's files opened, before the first import).
inline bool import_audit_inside_importlib() { return py.minor >= 15; }

// 3.10+ keep atexit's callbacks in the interpreter (PyInterpreterState.atexit), so a
// second atexit module object (made when `atexit` is imported again after leaving
// sys.modules) shares them. 3.8 and 3.9 keep them in the module object, and a re-import
// makes a new one that replaces it as the interpreter's exit function: callbacks
// registered on the first are then never run.
inline bool atexit_callbacks_per_interpreter() { return py.minor >= 10; }

// A borrowed dict value or null, for the tracer's own str keys. PyDict_GetItem saves and
// restores the pending exception around every lookup (on 3.12 a thread-local access and
// several calls each time); with an exact str key no user code runs and nothing can
// raise unless the dict holds a key of another type with the same hash, whose __eq__ then
// runs (a program's own doing; such an error is left pending, not asked after on every
// miss). A str subclass key (importlib.import_module accepts one) may run its __eq__: an
// error from it is dropped.
inline PyObject* dict_lookup(PyObject* d, PyObject* key) {
  PyObject* v = py.PyDict_GetItemWithError(d, key);
  if (!v && type_of(key) != py.PyUnicode_Type && py.PyErr_Occurred()) py.PyErr_Clear();
  return v;
}

// A dict's version tag: 3.8-3.11 dicts (ob_refcnt, ob_type, ma_used, ma_version_tag, ...)
// bump it on every insertion, deletion and replacement, so an unchanged tag means an
// unchanged dict. probe_dict_version (GIL held) checks the layout on a fresh dict once;
// dict_version is 0 when it is not known.
void probe_dict_version();
inline uint64_t dict_version(PyObject* d) {
  if (py.dict_version_offset < 0) return 0;
  return *reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(d) + py.dict_version_offset);
}

// A str's UTF-8 text without a call for the common case: an exact str that is compact
// ASCII (PyASCIIObject: ob_refcnt, ob_type, length, hash, state, [wstr]; state bits 5
// `compact` and 6 `ascii` in 3.8-3.15), whose characters are its UTF-8. Anything else, or
// before probe_str_layout (GIL held) has checked the layout on real strings, asks
// PyUnicode_AsUTF8AndSize. Null (no error left set) when `s` is not a str or cannot be
// encoded.
void probe_str_layout();
const char* str_utf8_slow(PyObject* s, Py_ssize_t* n);
inline const char* str_utf8(PyObject* s, Py_ssize_t* n) {
  if (py.ascii_data_offset >= 0 && s && type_of(s) == py.PyUnicode_Type) {
    const char* o = reinterpret_cast<const char*>(s) + py.ob_type_offset;
    uint32_t state = *reinterpret_cast<const uint32_t*>(o + layout::kStrState);
    constexpr uint32_t kCompactAscii = layout::kStrCompact | layout::kStrAscii;
    if ((state & kCompactAscii) == kCompactAscii) {
      *n = *reinterpret_cast<const Py_ssize_t*>(o + layout::kStrLength);
      return reinterpret_cast<const char*>(s) + py.ascii_data_offset;
    }
  }
  return str_utf8_slow(s, n);
}

// An exact str's hash as CPython cached it in the object (PyASCIIObject.hash), without a
// call and without computing it: -1 when it was never computed, when `s` is not an exact
// str, or before probe_str_layout has checked the field.
inline int64_t str_cached_hash(PyObject* s) {
  if (py.str_hash_offset < 0 || type_of(s) != py.PyUnicode_Type) return -1;
  return *reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(s) + py.str_hash_offset);
}

// A list's (or list subclass's) items as an array: PyListObject is PyObject_VAR_HEAD
// then `ob_item`, in every version. Borrowed; valid until the list changes. Null when the
// object header's layout is not known.
inline PyObject* const* list_items(PyObject* list, Py_ssize_t* n) {
  if (py.ob_type_offset < 0) return nullptr;
  const char* o = reinterpret_cast<const char*>(list) + py.ob_type_offset;
  *n = *reinterpret_cast<const Py_ssize_t*>(o + layout::kVarSize);
  return *reinterpret_cast<PyObject* const* const*>(o + layout::kListItems);
}

// Holds a new reference and drops it at scope end.
struct Ref {
  PyObject* o;
  explicit Ref(PyObject* p = nullptr) : o(p) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { if (o) py.Py_DecRef(o); }
  PyObject* get() const { return o; }
  explicit operator bool() const { return o != nullptr; }
  void reset(PyObject* p) { if (o) py.Py_DecRef(o); o = p; }
  PyObject* release() { PyObject* p = o; o = nullptr; return p; }
};

// 3.8-3.11 have no dict watchers. `sys.modules[k] = v` and `del sys.modules[k]` in Python
// code reach dict's mp_ass_subscript slot (through PyObject_SetItem), except where 3.11's
// specialising interpreter has turned a hot STORE_SUBSCR into a direct dict store. This
// swaps that slot for `hook` and returns the original, or null when the type layout is not
// the one expected (then the tracer falls back to comparing at import boundaries).
typedef int (*ObjObjArgProc)(PyObject*, PyObject*, PyObject*);
ObjObjArgProc patch_dict_ass_subscript(ObjObjArgProc hook);

// dict's methods that change a dict in place (pop, popitem, clear, update, setdefault)
// bypass mp_ass_subscript. Each is a method descriptor in dict's type dict pointing at a
// static PyMethodDef; every call through the descriptor (plain, vectorcall, or 3.11's
// specialised CALL) reads that entry's ml_meth when it runs. This swaps the ml_meth of
// dict's method `name` for `hook` when the entry's ml_flags are `flags` (the calling
// convention `hook` has), and returns the original, or null when the descriptor or the
// entry is not the one expected. The descriptor objects and their signatures stay as they
// are: nothing Python can see changes.
void* patch_dict_method(const char* name, int flags, void* hook);

// dict's nb_inplace_or (3.9+: `d |= other`), swapped for `hook`; returns the original or
// null (3.8, or the layout is not the one expected).
typedef PyObject* (*BinaryFunc)(PyObject*, PyObject*);
BinaryFunc patch_dict_inplace_or(BinaryFunc hook);

// 3.11's specialising interpreter turns a STORE_SUBSCR that keeps meeting an exact dict
// into STORE_SUBSCR_DICT, which stores past dict's mp_ass_subscript slot and so past
// patch_dict_ass_subscript's hook. importlib's own `sys.modules[name] = module`
// (_load_unlocked, at every import) becomes such a store after about forty imports; from
// then on each import moved sys.modules' version tag where no hook saw it, and every
// top-level boundary compared the whole dict again (modules_shadow.h). These keep a
// function's STORE_SUBSCR instructions in their generic form, for good. What Python can
// see of the code (co_code, dis without adaptive=True) and what each store does are
// unchanged; only the specialisation of those few instructions is forgone.
struct GenericStores {
  PyObject* code = nullptr;  // held; null when there is nothing (left) to do
  int n = 0;
  uint32_t at[8];            // the code units of its STORE_SUBSCR instructions
};

// Finds the STORE_SUBSCR instructions of `fn`, a Python function whose code CPython has
// not quickened yet: the instructions it runs must then be co_code's bytes exactly (the
// layout check). False on other versions, layouts or states.
bool find_store_subscripts(PyObject* fn, GenericStores* out);

// Once CPython has quickened the code, puts each of those instructions back in its generic
// form (what it holds then must be one of STORE_SUBSCR's forms, else nothing is written).
// True when nothing is left to do.
bool keep_stores_generic(GenericStores& s);

// The runtime's list of C audit hooks (PySys_AddAuditHook) starts at a pointer inside
// _PyRuntime (3.8-3.12 audit_hook_head, 3.13-3.15 audit_hooks.head). Once any hook is in that
// list, CPython builds an argument tuple for every audit event of every interpreter (four
// per import: import, open, marshal.loads, exec), whether or not a hook cares. This finds
// the word holding `entry` (the list's first node) by scanning _PyRuntime, whose size the
// symbol table gives, and returns it only when exactly one word matches; null otherwise
// (then nobody touches the list).
void** find_audit_hook_head(void* entry);

// object's `__class__` setter, the one every `obj.__class__ = T` runs (through object's
// getset descriptor, which points at the static PyGetSetDef in object's tp_getset). This
// swaps its `set` for `hook` and returns the original, or null when the type layout or the
// entry is not the one expected.
typedef int (*SetterFn)(PyObject*, PyObject*, void*);
SetterFn patch_class_setter(SetterFn hook);

// types.ModuleType's tp_dealloc, which every module's deallocation runs (subclasses reach
// it through subtype_dealloc). Swapped for `hook`; returns the original or null.
typedef void (*DestructorFn)(PyObject*);
DestructorFn patch_module_dealloc(DestructorFn hook);

// Where a Python function object keeps its C entry point (PyFunctionObject.vectorcall, at
// PyFunction_Type's tp_vectorcall_offset, layout::kTpVectorcallOffset, 3.8-3.15). Every
// call made from C (PyObject_Vectorcall and the calls built on it, which is how CPython's
// slot functions call a class's __setattr__ or __getattr__) goes through it. Null when `fn` is
// not a plain Python function or the layout is not the one expected.
typedef PyObject* (*VectorcallFn)(PyObject*, PyObject* const*, size_t, PyObject*);
VectorcallFn* function_vectorcall(PyObject* fn);

// Sets the entry point `entry` (from function_vectorcall(fn)) to `value`. 3.12+ also
// clears the function's version (PyFunction_SetVectorcall), so that the specialising
// interpreter, which inlines calls of the version it saw, stops inlining calls of it; from
// then on every call, from C or from Python code, goes through the entry point.
void set_function_vectorcall(PyObject* fn, VectorcallFn* entry, VectorcallFn value);

// Whether a call of a Python function made by Python code goes through the function's
// entry point: 3.8-3.10 call every function through it; 3.12+ inline a call only while the
// entry point is CPython's own. 3.11's CALL inlines any Python function without looking
// at its entry point (checked: a swapped entry point sees no call from Python code).
bool python_calls_reach_function_entry();

// A builtin function (builtin_function_or_method) points at a static PyMethodDef, shared
// by every function object made from it (os.execv and posix.execv are one object; a
// sub-interpreter's posix makes its own from the same entry). Every call reads that
// entry's ml_meth when it runs (3.11's specialised CALL included). This swaps the ml_meth
// of `fn`'s entry for `hook` when the entry is named `name` with ml_flags `flags` (the
// calling convention `hook` has), and returns the original; null when `fn` is not such a
// function, the entry is not the one expected, or it already holds `hook`. The function
// objects, names, docs and signatures stay as they are.
void* patch_builtin_function(PyObject* fn, const char* name, int flags, void* hook);

// Frame walking, one spelling for all versions. Returns new references. 3.8 has no
// PyFrame_GetBack or PyFrame_GetCode: there, as on 3.9 and 3.10, the fields are read from
// the frame object once probe_frame_layout confirmed where they sit.
PyObject* frame_back(PyObject* frame);
PyObject* frame_code(PyObject* frame);

// Checks layout::kFrame* on `frame` (a running frame object, GIL held) against its
// attributes, once per process, on 3.8-3.10, and layout::kIFrame* against PyFrame_GetCode
// and PyFrame_GetLasti on 3.11-3.13, and there layout::kIFramePrevious* and the rest of
// FrameWalk's route by walking the whole stack both ways (this makes a frame object for
// every frame on it, once); sets the CPythonApi::frame_*, position_* or iframe offsets
// when they match. Any pending exception is kept as it was.
void probe_frame_layout(PyObject* frame);

// A running frame's code object (borrowed: the frame holds it) and the byte offset of its
// current instruction (PyFrame_GetLasti's, or frame.f_lasti's). This keys the repeated
// proxy-access path (access_repeats.h), so it takes the cheapest correct way on each
// version: on 3.8-3.10 two loads from the frame object (an attribute lookup of f_code cost
// about 190 instructions on 3.8, and 3.9's and 3.10's PyFrame_GetCode is a call, an incref
// and a decref, and their f_lasti is an attribute); on 3.11-3.13 three loads through the
// frame object's interpreter frame (PyFrame_GetCode, Py_DecRef and PyFrame_GetLasti were
// three calls, about 40 instructions, and three more functions' code in the instruction
// cache of a loop); 3.14+ PyFrame_GetCode and PyFrame_GetLasti. False (nothing set) when
// neither gives them; an error is not left set.
bool frame_position_slow(PyObject* frame, PyObject** code, int* lasti);
inline bool frame_position(PyObject* frame, PyObject** code, int* lasti) {
  PyObject* c;
  int i;
  if (py.position_code >= 0) {
    // One straight route for every version that has one (see CPythonApi::position_code):
    // the repeated path stays one contiguous run of code.
    const char* base = reinterpret_cast<const char*>(frame);
    if (py.position_deref >= 0) base = *reinterpret_cast<const char* const*>(base + py.position_deref);
    c = *reinterpret_cast<PyObject* const*>(base + py.position_code);
    uintptr_t raw;
    memcpy(&raw, base + py.position_raw, sizeof raw);
    uintptr_t start = (reinterpret_cast<uintptr_t>(c) & py.position_code_mask) + py.position_delta;
    i = static_cast<int>(static_cast<uint32_t>(raw - start)) * py.position_unit;
  } else if (py.frame_layout_probed && py.PyFrame_GetLasti && py.PyFrame_GetCode) {
    c = py.PyFrame_GetCode(frame);
    py.Py_DecRef(c);  // the running frame holds it: only its address is used
    i = py.PyFrame_GetLasti(frame);
  } else {
    return frame_position_slow(frame, code, lasti);
  }
  if (!c || i < 0) return false;
  *code = c;
  *lasti = i;
  return true;
}

// The thread state's layout (3.8-3.13), read by running_frame. PyThreadState begins prev,
// next, interp in every version; then 3.8-3.10 keep the frame object (`frame`), 3.11 and
// 3.12 the _PyCFrame (`cframe`, whose `current_frame` is the interpreter frame), 3.13 the
// interpreter frame (`current_frame`) (Include/cpython/pystate.h). _PyRuntime.gilstate's
// tstate_current (3.8-3.11, Include/internal/pycore_runtime.h; 3.8 pycore_pystate.h) is
// followed by autoInterpreterState; 3.12+ keep the current thread state in a thread-local
// of libpython's own, which only its functions reach.
namespace layout {
constexpr int kTstateInterp = 16;
constexpr int kTstateFrame310 = 24;                                  // 3.8-3.10
constexpr int kTstateCFrame311 = 56, kCFrameCurrent311 = 8;          // 3.11
constexpr int kTstateCFrame312 = 56, kCFrameCurrent312 = 0;          // 3.12
constexpr int kTstateCurrentFrame313 = 72;                           // 3.13
constexpr int kRuntimeTstateCurrent38 = 1368, kRuntimeTstateCurrent39 = 568, kRuntimeTstateCurrent311 = 576;
}  // namespace layout

// Checks the thread state's layout (layout::kTstate*, kRuntimeTstateCurrent*) once per
// process, on 3.8-3.13, with the GIL held and a Python frame running: the interpreter must
// be PyInterpreterState_Get's, the frame PyEval_GetFrame's (on 3.11-3.13 the interpreter
// frame behind it, as frame_position reads it; so it needs frame_position's layout), and
// tstate_current must hold the thread state, followed by the interpreter. Any pending
// exception is kept as it was.
void probe_thread_state();

// The running frame as frame_position's route reads it (the frame object on 3.8-3.10, the
// interpreter frame on 3.11-3.13: code at py.position_code, instruction at
// py.position_raw), straight from the current thread state, when that thread state belongs
// to `interp`. Null when it does not, when no Python frame runs, or before
// probe_thread_state confirmed the layout. GIL held. Two reads of CPython's memory and at
// most one call, where PyEval_GetFrame and PyInterpreterState_Get were two calls (each on
// 3.12+ a __tls_get_addr) and, on 3.11+, a frame object made for the caller.
//
// The frame read is the topmost one, which PyEval_GetFrame skips when it is incomplete
// (3.12+: not started, or a C-stack shim): its code or instruction then is not a started
// frame's, so a caller comparing them with a site PyEval_GetFrame gave sees a difference
// and takes its slow path.
// The current thread state (GIL held), once probe_thread_state confirmed the route
// (py.tstate_frame >= 0): never null then, the caller runs Python code.
[[gnu::always_inline]] inline const char* current_thread_state() {
  return static_cast<const char*>(py.tstate_current ? __atomic_load_n(py.tstate_current, __ATOMIC_RELAXED)
                                                   : py.PyThreadState_GetUnchecked());
}
// Its topmost frame as running_frame reads it (null: none), for py.tstate_frame >= 0. 3.11's
// and 3.12's thread states always point at a _PyCFrame (their root one at least).
[[gnu::always_inline]] inline const char* thread_state_frame(const char* ts) {
  const char* f = *reinterpret_cast<const char* const*>(ts + py.tstate_frame);
  if (py.tstate_frame_deref >= 0) f = *reinterpret_cast<const char* const*>(f + py.tstate_frame_deref);
  return f;
}
[[gnu::always_inline]] inline const char* running_frame(void* interp) {
  if (py.tstate_frame < 0) return nullptr;
  const char* ts = current_thread_state();
  if (*reinterpret_cast<void* const*>(ts + layout::kTstateInterp) != interp) return nullptr;
  return thread_state_frame(ts);
}

// The line a frame is at, from a cursor over its code object's line table that is kept
// between calls. PyFrame_GetLineNumber scans the table from its start on every call
// (about 1,200 instructions per import in a short module, and growing with the module:
// 20,000 imports from one 20,000-line file made it quadratic on 3.8-3.10); a module
// importing its imports runs forward through its code, so a kept cursor moves a few
// entries per import instead. The three table formats: co_lnotab (3.8, 3.9),
// co_linetable's first form (3.10), the location table (3.11-3.15, CPython's
// Objects/locations.md). Where the table does not give a line, frame_line falls back to
// CPython.
enum class LineFormat : uint8_t { none, lnotab, linetable_310, locations };
struct LineCursor {
  const uint8_t* table = nullptr;  // the table's bytes; the caller keeps the code alive
  uint32_t len = 0, pos = 0;       // pos: the entry after [start, end)
  uint32_t start = 0, end = 0;     // byte offsets the current entry covers
  int32_t first = 0, computed = 0, line = -1;
  LineFormat format = LineFormat::none;
};
// This interpreter's format (none: frame_line always asks CPython).
LineFormat line_format();
// From the code object's line table (co_lnotab on 3.8 and 3.9, else co_linetable) and
// co_firstlineno (the caller looks them up, with its cached attribute names). False when
// this interpreter's tables are not read here, or the values are not bytes and int (the
// cursor stays unusable).
bool line_cursor_init(LineCursor& c, PyObject* linetable, long firstlineno);

// What the class `type` and its bases hold under `name`, read from each class's own dict
// along its MRO, as a new reference in *found (null: none holds it). False when the MRO
// cannot be read here (the caller uses getattr).
//
// Why not getattr: an attribute lookup runs CPython's type-attribute lookup, which gives
// the class a version tag if it has none. Tags are handed out in order, so a class the
// tracer looks at first (the code type, at the first import; a proxy class such as
// apipkg's AliasModule, which the program itself never looks an attribute up on) makes
// every class tagged after it one more than untraced, and the type-attribute cache's slots
// follow the tags (3.8-3.12: tag XOR the name's address): the program's own lookups then
// collide elsewhere. On a pytest collection the misses on AST node types in its assertion
// rewriting doubled (bench/README.md, "Layouts"). The tracer's reads leave the tags as
// they are untraced (tests/e2e/test_invisible.py).
bool class_lookup(PyObject* type, PyObject* name, PyObject** found);
// `obj.name` for an object with no instance dict of its own to look in first (code, frame
// and function objects' fields): the class's attribute, through its descriptor's __get__
// when it has one. A new reference in *out (null, no error: not there, or the getter
// failed); false as class_lookup.
bool quiet_attribute(PyObject* obj, PyObject* name, PyObject** out);
int frame_line(PyObject* frame, LineCursor* c);
// The same for byte offset `addr` (negative: none) in a code object: the line, or 0 when
// the cursor does not give one.
int cursor_line(LineCursor* c, int addr);

// 3.11-3.13 (py.iframe): CPython's _PyFrame_IsIncomplete. 3.12 and 3.13 push a shim
// frame owned by the C stack at every entry to the interpreter loop (3.12's test below
// would pass it over too: its trampoline code has no RESUME; 3.13's None in f_executable
// has no code at all); a generator's frame counts as started; any other frame whose
// instruction pointer is before its code's RESUME is still in its prologue (a profile
// function's "call" event sees such a frame, and sys._getframe() never shows it).
inline bool iframe_incomplete(const CPythonApi::IFrameLayout& l, const char* f) {
  char owner = f[l.owner];
  if (owner == layout::kOwnedByCStack) return true;
  if (owner == layout::kOwnedByGenerator) return false;
  const char* code = *reinterpret_cast<const char* const*>(f + l.code);
  if (!code || type_of(reinterpret_cast<PyObject*>(const_cast<char*>(code))) != py.PyCode_Type) return true;
  int first = *reinterpret_cast<const int*>(code + l.first_traceable);
  const char* instr = *reinterpret_cast<const char* const*>(f + l.instr);
  return instr < code + l.instructions + 2 * static_cast<intptr_t>(first);  // 2: sizeof(_Py_CODEUNIT)
}
// _PyFrame_GetFirstComplete(f): `f` or the first frame before it that has started.
inline const char* iframe_first_complete(const CPythonApi::IFrameLayout& l, const char* f) {
  while (f && iframe_incomplete(l, f)) f = *reinterpret_cast<const char* const*>(f + l.previous);
  return f;
}

// A walk from a running frame towards the outermost one (GIL held; nothing it passes is
// kept). 3.11-3.13 keep their frames as internal interpreter frames and make a frame
// object only when one is asked for: PyFrame_GetBack made one for every frame it passed
// (importlib's five or so per nested import: an allocation, its deallocation later, and
// the cache misses of both), and these objects lived as long as their frames. There,
// once probe_frame_layout confirmed the layout, the walk follows the interpreter frames'
// `previous` links itself, passing over the frames CPython's own PyFrame_GetBack passes
// over (_PyFrame_GetFirstComplete: C-stack shim frames, frames not yet at their first
// traceable instruction except a generator's), and touches no frame object. 3.8-3.10,
// once the frame object's layout is confirmed, read f_back and f_code from the frame
// objects without a reference: a running frame is kept alive by the one it called, and
// nothing the walk runs ends a frame. Elsewhere it goes through frame_back.
//
// Where probe_thread_state confirmed the thread state's route, a walk from the innermost
// frame starts there (the route running_frame reads), without a call or a frame object.
// The hot parts are inline: a walk runs for every import (capture_importer), and as calls
// they cost tens of instructions per import.
class FrameWalk {
 public:
  // From the innermost frame.
  FrameWalk() {
    if (py.tstate_frame >= 0) {
      const char* f = thread_state_frame(current_thread_state());
      if (py.iframe.previous >= 0) {
        iframe_ = iframe_first_complete(py.iframe, f);
        return;
      }
      if (py.frame_back_offset >= 0) {
        frame_ = reinterpret_cast<PyObject*>(const_cast<char*>(f));
        return;
      }
    }
    start(nullptr);
  }
  // From `point` (a point() of an earlier walk, in this process, whose frame still runs;
  // null: nothing to walk).
  explicit FrameWalk(const void* point) {
    if (point) start(point);
  }
  ~FrameWalk() { if (owned_ && frame_) py.Py_DecRef(frame_); }
  FrameWalk(const FrameWalk&) = delete;
  FrameWalk& operator=(const FrameWalk&) = delete;
  bool done() const { return !frame_ && !iframe_; }
  void next() {
    if (iframe_) {
      iframe_ = iframe_first_complete(py.iframe, *reinterpret_cast<const char* const*>(iframe_ + py.iframe.previous));
    } else if (frame_ && !owned_) {
      frame_ = *reinterpret_cast<PyObject* const*>(reinterpret_cast<const char*>(frame_) + py.frame_back_offset);
    } else {
      next_owned();
    }
  }
  // This frame's code object, borrowed (the frame holds it); null (no error left) when
  // there is none.
  PyObject* code() const {
    if (iframe_) {
      // 3.13's f_executable is not always a code object (the shims' None, which the walk
      // passes over): checked as CPython's own callers of _PyFrame_GetCode assert it.
      PyObject* c = *reinterpret_cast<PyObject* const*>(iframe_ + py.iframe.code);
      return c && type_of(c) == py.PyCode_Type ? c : nullptr;
    }
    if (frame_ && !owned_)
      return *reinterpret_cast<PyObject* const*>(reinterpret_cast<const char*>(frame_) + py.frame_code_offset);
    return code_owned();
  }
  // Its line, from `c` (a cursor over code()'s line table) where it can, as frame_line.
  int line(LineCursor* c) const {
    if (!iframe_) return frame_ ? frame_line(frame_, c) : 0;
    PyObject* co = code();
    if (!co) return 0;
    // PyFrame_GetLasti's offset (prev_instr, 3.13's instr_ptr, past the code's first
    // instruction), negative before it.
    const char* instr = *reinterpret_cast<const char* const*>(iframe_ + py.iframe.instr);
    int addr = static_cast<int>(instr - (reinterpret_cast<const char*>(co) + py.iframe.instructions));
    int line = cursor_line(c, addr);
    return line > 0 ? line : iframe_line_slow(co, addr);
  }
  // Where the walk stands, for FrameWalk(point) and at(): the interpreter frame on
  // 3.11-3.13, else the frame object. Valid while that frame runs.
  const void* point() const { return iframe_ ? static_cast<const void*>(iframe_) : frame_; }
  // Whether this is the frame of `point` (a point(), or null).
  bool at(const void* point) const { return point && point == this->point(); }

 private:
  void start(const void* point);
  void next_owned();
  PyObject* code_owned() const;
  int iframe_line_slow(PyObject* code, int addr) const;

  PyObject* frame_ = nullptr;     // the frame-object walk
  bool owned_ = false;            // frame_ is a reference of the walk's own
  const char* iframe_ = nullptr;  // the interpreter-frame walk
};

}  // namespace imptrace
