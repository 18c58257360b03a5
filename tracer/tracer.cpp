// libimptrace.so: what runs inside the traced process.
//
// How it gets control without linking libpython or changing the program:
//  1. The constructor (before main, before Py_Initialize) looks for the CPython API in the
//     process; if there is none, it returns and the library is inert.
//  2. It registers an audit hook (allowed before Py_Initialize). The first `import` audit
//     event fires inside import.c just before it looks up
//     importlib._bootstrap._find_and_load by attribute; the hook replaces that function in
//     the module dict with a C callable (no Python frame, so tracebacks are unchanged), so
//     the very same import, and every later `import`, `__import__`, C PyImport_* and
//     importlib.import_module call, goes through find_and_load_hook below.
//  3. sys.modules writes are seen by a dict watcher (3.12+) or found by comparing a
//     shadow copy at import boundaries (3.8-3.11; see ModulesShadow).
//  4. Proxy forwarding (PEP 562 module __getattr__, the __getattr__/__setattr__ of proxy
//     classes found under sys.modules keys) is observed at those functions' C entry
//     points (proxy_observer.h). No object Python code can reach is replaced.
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpython_api.h"
#include "dense_table.h"
#include "hash.h"
#include "tracer_memory.h"
#include "open_table.h"
#include "proxy_observer.h"
#include "records.h"
#include "self_timing.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

using namespace fields;
using TW = TraceWriter;

bool g_enabled = false;
// Set by the audit hook's last event (when it is listed); Py_IsFinalizing says the same
// earlier. From then on CPython itself empties sys.modules (values set to None, keys
// deleted), which is teardown, not the program's doing.
bool g_finalizing = false;
bool finalizing() { return g_finalizing || py.Py_IsFinalizing(); }
bool g_proxies = true;  // IMPTRACE_PROXIES=0 turns proxy instrumentation off
bool g_native_stacks = false;  // IMPTRACE_NATIVE_STACKS=1
PyObject* g_sysmodules = nullptr;  // main interpreter's sys.modules (borrowed; lives forever)
void* g_main_interp = nullptr;
uint64_t g_next_index = 0;

// ---- per-thread import stack ---------------------------------------------------------
struct InFlight {
  uint64_t index;
  PyObject* name;     // borrowed: the caller's frame keeps the argument alive
  uint32_t name_id;    // its string id when it began (the in-flight table's key)
  uint32_t name_epoch; // TW::strings_epoch() then: name_id is its id while that holds
  uint32_t generation;
  bool noted;         // its sys.modules insertion is already in the shadow
  // 3.8-3.11: what the import system put into sys.modules under the name (a reference,
  // dropped at the import's end). The shadow learns it at the next boundary, not at the
  // store; held so that, if it is replaced before then, the replaced object can still be
  // described (and its address not reused meanwhile).
  PyObject* inserted;
};
constexpr int kMaxDepth = 512;
struct ThreadState {
  InFlight stack[kMaxDepth];
  int depth = 0;
  uint64_t tid = 0;
  bool main_thread = false;  // tid == pid, known with tid (both reset in a fork child)
  int busy = 0;  // >0 while the tracer itself calls into Python from a hook
  // The import system's pop-and-reinsert of a module (3.12+ watcher): the pop is held here
  // and dropped when the same object comes back under the same key.
  PyObject* pending_pop_key = nullptr;
  PyObject* pending_pop_value = nullptr;
  // While importlib's _handle_fromlist runs for `from pkg import a, b` (or __import__ with
  // a fromlist): the frame that asked (a reference held for the call) and the import depth
  // then. An import begun directly from there has that frame as its importer, so the stack
  // is not walked back through importlib's frames (3.11+ makes a frame object for each).
  PyObject* fromlist_frame = nullptr;
  int fromlist_depth = -1;
};
thread_local ThreadState t_state;

ThreadState& ts() {
  ThreadState& t = t_state;
  if (!t.tid) {
    t.tid = static_cast<uint64_t>(syscall(SYS_gettid));
    t.main_thread = t.tid == static_cast<uint64_t>(getpid());  // getpid is a system call
  }
  return t;
}

// Which interpreter this thread is running is asked once per hook entry (MainScope), not
// at every string or attribute lookup below it.
thread_local int t_main = -1;
bool in_main_interpreter() {
  if (t_main >= 0) return t_main != 0;
  return g_main_interp && py.PyInterpreterState_Get() == g_main_interp;
}
struct MainScope {
  int saved;
  MainScope() : saved(t_main) { t_main = g_main_interp && py.PyInterpreterState_Get() == g_main_interp; }
  ~MainScope() { t_main = saved; }
  MainScope(const MainScope&) = delete;
  MainScope& operator=(const MainScope&) = delete;
};

const InFlight* innermost(ThreadState& t) {
  if (t.depth <= 0 || t.depth > kMaxDepth) return nullptr;
  const InFlight* f = &t.stack[t.depth - 1];
  return f->generation == TW::generation() ? f : nullptr;
}

// ---- small string helpers -------------------------------------------------------------

// Most strings the tracer interns are the same str objects again and again (a module's
// __name__, its spec's origin, a code object's co_filename). A direct-mapped cache from the
// str object to its id skips converting and hashing them. It holds a reference to each
// cached str so that a cached address can never be reused by a different string
// (deliberate: at most kStrCache small strings stay alive). Main interpreter only: objects
// must not cross interpreters.
constexpr size_t kStrCache = 4096;
struct StrCacheSlot { PyObject* str; uint32_t id; uint32_t generation; };
StrCacheSlot g_str_cache[kStrCache];
bool in_main_interpreter();

// `fill`: false for walks over many strings seen once each (all of sys.modules' keys),
// which would only push out the strings that repeat, and incref and decref both.
uint32_t intern_obj(PyObject* s, bool fill = true) {
  if (!s) return 0;
  bool cacheable = in_main_interpreter();
  StrCacheSlot* slot = nullptr;
  if (cacheable) {
    slot = &g_str_cache[(reinterpret_cast<uintptr_t>(s) >> 4) & (kStrCache - 1)];
    if (slot->str == s && slot->generation == TW::strings_epoch() && slot->id) return slot->id;
  }
  Py_ssize_t n = 0;
  const char* p = str_utf8(s, &n);
  uint32_t id = p ? TW::intern(p, static_cast<size_t>(n)) : 0;
  if (slot && id && fill) {
    py.Py_IncRef(s);
    PyObject* old = slot->str;
    *slot = StrCacheSlot{s, id, TW::strings_epoch()};
    if (old) py.Py_DecRef(old);
  }
  return id;
}

bool same_text(PyObject* a, PyObject* b) {
  if (a == b) return true;
  Py_ssize_t na = 0, nb = 0;
  const char* pa = str_utf8(a, &na);
  const char* pb = str_utf8(b, &nb);
  return pa && pb && na == nb && memcmp(pa, pb, static_cast<size_t>(na)) == 0;
}

bool is_importlib_file(const char* f) {
  return strncmp(f, "<frozen importlib", 17) == 0 || strstr(f, "/importlib/") != nullptr;
}

// getenv scans the whole environment, and the tracer asks for PYTEST_CURRENT_TEST at every
// import. The answer is kept with what reveals a change under glibc: setenv/putenv of an
// existing name replace its entry pointer, adding or removing a name changes the array
// or its length (the old terminator slot or the last entry), clearenv nulls the array.
extern "C" char** environ;
struct EnvWatch {
  const char* name;
  size_t name_len;
  char** array = nullptr;
  size_t len = 0;
  long index = -1;            // of the entry found, -1 when absent
  const char* entry = nullptr;
  bool valid = false;

  bool unchanged() const {
    if (!valid || environ != array || !array) return false;
    if (array[len] != nullptr || (len && array[len - 1] == nullptr)) return false;
    return index < 0 || array[index] == entry;
  }
  // The value (after '='), or null.
  const char* get() {
    if (unchanged()) return entry ? entry + name_len + 1 : nullptr;
    array = environ;
    len = 0;
    index = -1;
    entry = nullptr;
    for (char** e = array; e && *e; ++e, ++len)
      if (index < 0 && strncmp(*e, name, name_len) == 0 && (*e)[name_len] == '=') {
        index = static_cast<long>(len);
        entry = *e;
      }
    valid = array != nullptr;
    return entry ? entry + name_len + 1 : nullptr;
  }
};

// pytest sets PYTEST_CURRENT_TEST to "<node id> (setup|call|teardown)"; the trace keeps
// the node id, whose string id is kept until the variable or the file changes.
EnvWatch g_current_test_env{"PYTEST_CURRENT_TEST", 19};
uint32_t g_current_test_id = 0, g_current_test_generation = 0;
const char* g_current_test_entry = nullptr;

uint32_t current_test() {
  const char* t = g_current_test_env.get();
  if (!t) return 0;
  if (g_current_test_entry == g_current_test_env.entry && g_current_test_generation == TW::strings_epoch() &&
      g_current_test_id)
    return g_current_test_id;
  size_t n = strlen(t);
  if (n > 2 && t[n - 1] == ')') {
    const char* open = static_cast<const char*>(memrchr(t, '(', n));
    if (open && open > t && open[-1] == ' ') n = static_cast<size_t>(open - t) - 1;
  }
  g_current_test_id = TW::intern(t, n);
  g_current_test_entry = g_current_test_env.entry;
  g_current_test_generation = TW::strings_epoch();
  return g_current_test_id;
}

// ---- str objects for text -------------------------------------------------------------
// The binding of `a.b.c` looks up "a.b" in sys.modules and "c" in its dict: keys the
// tracer has as text. PyDict_GetItemString would build (and hash) a new str every time;
// siblings share the parent and names repeat, so a direct-mapped cache keeps the str
// objects (a reference each, deliberately kept while cached). Main interpreter only; null
// when the text does not fit a slot (callers fall back).
struct TextStrSlot {
  uint64_t hash;
  PyObject* str;
  uint8_t len;
  char text[55];
};
constexpr size_t kTextStrCache = 1024;
TextStrSlot g_text_strs[kTextStrCache];

TextStrSlot* text_str(const char* text, size_t n) {
  if (n > sizeof g_text_strs[0].text || !in_main_interpreter()) return nullptr;
  uint64_t h = hash_bytes(text, n);
  TextStrSlot& slot = g_text_strs[h & (kTextStrCache - 1)];
  if (slot.str && slot.hash == h && slot.len == n && memcmp(slot.text, text, n) == 0) return &slot;
  PyObject* o = py.PyUnicode_FromStringAndSize(text, static_cast<Py_ssize_t>(n));
  if (!o) { py.PyErr_Clear(); return nullptr; }
  PyObject* old = slot.str;
  slot.hash = h;
  slot.str = o;
  slot.len = static_cast<uint8_t>(n);
  memcpy(slot.text, text, n);
  if (old) py.Py_DecRef(old);
  return &slot;
}

PyObject* dict_get_text(PyObject* d, TextStrSlot* slot, const char* text) {  // borrowed
  return slot ? dict_lookup(d, slot->str) : py.PyDict_GetItemString(d, text);
}

// ---- attribute names ------------------------------------------------------------------
// PyObject_GetAttrString and PyDict_GetItemString build and hash a new str on every call;
// on the per-import path that was a large part of the tracer's cost. Each call site with
// a name keeps that name's str in a static of its own (one per expansion of NAME), made
// once, interned (lookups hit the cached hash and compare by identity). Main interpreter
// only: sub-interpreters use the String variants, since an object must not cross
// interpreters.
struct Name { const char* text; PyObject* obj; };
bool in_main_interpreter();
inline PyObject* name_obj(Name& n) {
  if (!in_main_interpreter()) return nullptr;
  if (!n.obj) {
    n.obj = py.PyUnicode_InternFromString(n.text);  // deliberate: kept for the process lifetime
    if (!n.obj) py.PyErr_Clear();
  }
  return n.obj;
}
#define NAME(lit) ([]() -> Name& { static Name n{lit, nullptr}; return n; }())

PyObject* getattr_n(PyObject* o, Name& name) {  // new reference
  PyObject* n = name_obj(name);
  return n ? py.PyObject_GetAttr(o, n) : py.PyObject_GetAttrString(o, name.text);
}

PyObject* dict_get_n(PyObject* d, Name& name) {  // borrowed, no error
  PyObject* n = name_obj(name);
  return n ? dict_lookup(d, n) : py.PyDict_GetItemString(d, name.text);
}

// ---- locations ----------------------------------------------------------------------
struct Loc { uint32_t file = 0, line = 0, func = 0; bool importlib = false; };

// Walks the Python stack from the current frame. With skip_importlib, importlib's own
// frames are passed over so the first entry is the code that asked for the import.
// What a code object says about where it is: file and function ids, and whether it is
// importlib's own. Code objects repeat (every frame of importlib, a package's __init__
// importing its children one after another), so a small cache keyed by the code object
// skips two attribute lookups and a path scan per frame. It holds a reference to each
// cached code object so that an address keeps meaning the same code (deliberate: at most
// kCodeCache code objects stay alive a while longer).
struct CodeInfo {
  PyObject* code = nullptr;
  uint32_t file = 0, func = 0, generation = 0;
  bool importlib = false;
  LineCursor lines;  // usable only in a cached entry (which keeps the code alive)
};
constexpr size_t kCodeCache = 128;
CodeInfo g_code_cache[kCodeCache];

CodeInfo describe_code(PyObject* code) {
  CodeInfo ci;
  Ref fn(getattr_n(code, NAME("co_filename")));
  Ref nm(getattr_n(code, py.minor >= 11 ? NAME("co_qualname") : NAME("co_name")));
  if (!fn || !nm) py.PyErr_Clear();
  Py_ssize_t fl = 0;
  const char* file = str_utf8(fn.get(), &fl);
  ci.importlib = file && is_importlib_file(file);
  ci.file = intern_obj(fn.get());
  ci.func = intern_obj(nm.get());
  return ci;
}

// The cache entry for `code`, or (sub-interpreters) `scratch` filled in.
CodeInfo& code_info(PyObject* code, CodeInfo& scratch) {
  if (!in_main_interpreter()) return scratch = describe_code(code);
  CodeInfo& slot = g_code_cache[(reinterpret_cast<uintptr_t>(code) >> 4) & (kCodeCache - 1)];
  if (slot.code == code && slot.generation == TW::strings_epoch()) return slot;
  CodeInfo ci = describe_code(code);
  py.Py_IncRef(code);
  PyObject* old = slot.code;
  slot = ci;
  slot.code = code;
  slot.generation = TW::strings_epoch();
  if (!ci.importlib && py.PyFrame_GetLasti) {
    Ref table(getattr_n(code, NAME("co_linetable")));
    Ref first(table ? getattr_n(code, NAME("co_firstlineno")) : nullptr);
    if (!first) py.PyErr_Clear();
    line_cursor_init(slot.lines, table.get(), first.get());
  }
  if (old) py.Py_DecRef(old);
  return slot;
}

int capture_stack(Loc* out, int max, bool skip_importlib, PyObject* start = nullptr) {
  int n = 0;
  PyObject* f = start ? start : py.PyEval_GetFrame();  // borrowed
  if (!f) return 0;
  py.Py_IncRef(f);
  Ref frame(f);
  for (int guard = 0; frame && n < max && guard < 256; ++guard) {
    Ref code(frame_code(frame.get()));
    if (code) {
      CodeInfo scratch;
      CodeInfo& ci = code_info(code.get(), scratch);
      if (!(skip_importlib && ci.importlib)) {
        Loc& l = out[n++];
        l.file = ci.file;
        l.func = ci.func;
        int line = frame_line(frame.get(), ci.lines.table ? &ci.lines : nullptr);
        l.line = line > 0 ? static_cast<uint32_t>(line) : 0;
        l.importlib = ci.importlib;
        if (n == max) break;  // 3.11+ makes a frame object for every frame it is asked about
      }
    } else {
      py.PyErr_Clear();
    }
    frame.reset(frame_back(frame.get()));
  }
  return n;
}

void put_loc(wire::ByteBuf& b, uint32_t field, const Loc& l) {
  if (!l.file && !l.func) return;
  auto m = wire::begin_message(b, field);
  wire::put_uint(b, Location::file, l.file);
  wire::put_uint(b, Location::line, l.line);
  wire::put_uint(b, Location::function, l.func);
  wire::end_message(b, m);
}

bool in_main_interpreter();

// ---- identity ------------------------------------------------------------------------
// An address alone is not an identity: a module that dies (a failed import, a replaced
// proxy) frees its address for the next object. Objects the story is about (modules and
// proxies) are watched for their death, which bumps a generation for that address; the
// token is generation << 48 | address (user-space addresses fit in 48 bits on x86_64 and
// AArch64). Plain modules are watched by types.ModuleType's dealloc (patched at
// installation: nothing to allocate per module); anything else gets a weak reference
// whose callback does the same. The table is touched only with the main interpreter's GIL
// held, and neither path takes the writer lock (they can run inside our own Py_DecRef).
struct IdentitySlot {  // 16 bytes: the table is touched for every import
  uintptr_t addr;
  uint16_t generation;   // only its low 14 bits reach the token
  uint16_t by_weakref;   // the live tracked object is watched by a weak reference (owned
                         // by its entry in the deaths table), not by dealloc
  uint32_t serial;       // the live tracked object's id; 0 when none
};
uint32_t g_next_serial = 0;  // 4 billion tracked objects before it would wrap
// Ids of objects the tracer cannot watch die (no weakref support, or not worth a weakref)
// are their address, marked so they can never equal a serial.
constexpr uint64_t kAddressId = 1ull << 62;
struct IdentityTraits {
  static uint64_t hash(const IdentitySlot& s) { return hash_address(s.addr); }
};
DenseTable<IdentitySlot, IdentityTraits> g_ident;

IdentitySlot* identity_slot(uintptr_t addr, bool create) {
  uint64_t h = hash_address(addr);
  uint32_t pos = g_ident.find(h, [addr](const IdentitySlot& s) { return s.addr == addr; });
  if (pos != g_ident.kNone) return &g_ident.at(pos);
  if (!create) return nullptr;
  IdentitySlot* s = g_ident.insert(h);
  if (s) s->addr = addr;
  return s;
}

// weakref -> address, for the callback (which is handed the dead weakref only).
struct DeathSlot { PyObject* weakref; uintptr_t addr; };
DeathSlot* g_deaths = nullptr;
size_t g_deaths_cap = 0, g_deaths_used = 0;
constexpr uintptr_t kTombstone = 1;

bool deaths_put(PyObject* w, uintptr_t addr) {
  // Tombstones (weakrefs whose object died) are dropped when the table grows.
  if (table_full(g_deaths_used + 1, g_deaths_cap) &&
      !grow_table(g_deaths, g_deaths_cap, 256,
                  [](const DeathSlot& d) -> uint64_t {
                    return d.addr == kTombstone || !d.weakref ? 0 : hash_address(reinterpret_cast<uintptr_t>(d.weakref));
                  },
                  &g_deaths_used))
    return false;
  size_t j = hash_address(reinterpret_cast<uintptr_t>(w)) & (g_deaths_cap - 1);
  while (g_deaths[j].weakref) j = (j + 1) & (g_deaths_cap - 1);
  g_deaths[j] = DeathSlot{w, addr};
  ++g_deaths_used;
  return true;
}

PyObject* object_died(PyObject*, PyObject* weakref) {
  if (g_deaths_cap) {
    size_t j = hash_address(reinterpret_cast<uintptr_t>(weakref)) & (g_deaths_cap - 1);
    while (g_deaths[j].weakref) {
      if (g_deaths[j].weakref == weakref && g_deaths[j].addr != kTombstone) {
        // The callback runs before the object's memory is freed, so the slot is still
        // the dead object's: no other object can have been tracked at its address yet.
        IdentitySlot* s = identity_slot(g_deaths[j].addr, false);
        g_deaths[j].addr = kTombstone;
        if (s && s->by_weakref) {
          ++s->generation;
          s->serial = 0;
          s->by_weakref = 0;
        }
        py.Py_DecRef(weakref);
        break;
      }
      j = (j + 1) & (g_deaths_cap - 1);
    }
  }
  py.Py_IncRef(py.None);
  return py.None;
}
PyMethodDef g_object_died_def = {"_imptrace_object_died", reinterpret_cast<void*>(object_died), METH_O,
                                 "imptrace: an object it identified died"};
PyObject* g_object_died = nullptr;  // one callback for all weakrefs (deliberately kept)

DestructorFn g_orig_module_dealloc = nullptr;

// Every module's deallocation, in every interpreter. Only the main interpreter's objects
// are in the table; a slot that has a weak reference is left to its callback. Once
// finalisation has begun nothing is recorded any more, and the interpreter is not asked
// about (its thread state may be on its way out).
void module_dealloc_hook(PyObject* m) {
  if (g_ident.size() && !finalizing() && in_main_interpreter()) {
    IdentitySlot* s = identity_slot(reinterpret_cast<uintptr_t>(m), false);
    if (s && s->serial && !s->by_weakref) {
      ++s->generation;
      s->serial = 0;
    }
  }
  g_orig_module_dealloc(m);
}

// Tracked objects (modules and proxies: what the identity story is about) get a dense
// serial number, 1 or 2 bytes in the trace instead of an address's 7; it changes when the
// object dies. Others get their address (plus a generation).
uint64_t identity(PyObject* o, bool track) {
  auto addr = reinterpret_cast<uintptr_t>(o);
  IdentitySlot* s = nullptr;
  if (track && in_main_interpreter()) {
    s = identity_slot(addr, true);
    // No serial: nothing tracked lives here (a death clears it, and the weak reference).
    if (s && !s->serial) {
      if (g_orig_module_dealloc && type_of(o) == py.PyModule_Type) {
        s->serial = ++g_next_serial;  // module_dealloc_hook sees it die
      } else {
        if (!g_object_died) g_object_died = py.PyCFunction_NewEx(&g_object_died_def, nullptr, nullptr);
        PyObject* w = g_object_died ? py.PyWeakref_NewRef(o, g_object_died) : nullptr;
        if (!w) py.PyErr_Clear();  // no weakref support: the address is all there is
        if (w && !deaths_put(w, addr)) { py.Py_DecRef(w); w = nullptr; }
        if (w) {
          s->by_weakref = 1;
          s->serial = ++g_next_serial;
        }
      }
    }
  } else if (g_ident.size()) {
    s = identity_slot(addr, false);
  }
  // A live serial at this address means this very object is the tracked one.
  if (s && s->serial) return s->serial;
  return kAddressId | (static_cast<uint64_t>(s ? s->generation & 0x3fff : 0) << 48) | addr;
}

// ---- objects ------------------------------------------------------------------------
struct ObjInfo {
  uint64_t id = 0;
  uint32_t type = 0, flags = 0, name = 0, file = 0;
};

// The instance dict of any object, read without running user code (no __getattr__,
// no properties): modules through PyModule_GetDict, others through the generic slot.
PyObject* instance_dict(PyObject* o, bool is_module) {  // new reference or null
  if (is_module) {
    PyObject* d = py.PyModule_GetDict(o);
    if (d) py.Py_IncRef(d);
    return d;
  }
  PyObject* d = py.PyObject_GenericGetDict(o, nullptr);
  if (!d) { py.PyErr_Clear(); return nullptr; }
  if (!(py.PyType_GetFlags(type_of(d)) & TPFLAGS_DICT_SUBCLASS)) { py.Py_DecRef(d); return nullptr; }
  return d;
}

// "pkg.mod.QualName" for classes, "module" for plain modules.
uint32_t type_name_uncached(PyObject* type);

// Types live long and repeat (loader classes, proxy classes): cached like strings, holding
// a reference so that the address keeps meaning the same type.
constexpr size_t kTypeCache = 256;
struct TypeCacheSlot { PyObject* type; uint32_t id; uint32_t generation; };
TypeCacheSlot g_type_cache[kTypeCache];

uint32_t type_name(PyObject* type) {
  if (!in_main_interpreter()) return type_name_uncached(type);
  TypeCacheSlot& slot = g_type_cache[(reinterpret_cast<uintptr_t>(type) >> 4) & (kTypeCache - 1)];
  if (slot.type == type && slot.generation == TW::strings_epoch() && slot.id) return slot.id;
  uint32_t id = type_name_uncached(type);
  if (id) {
    py.Py_IncRef(type);
    PyObject* old = slot.type;
    slot = TypeCacheSlot{type, id, TW::strings_epoch()};
    if (old) py.Py_DecRef(old);
  }
  return id;
}

uint32_t type_name_uncached(PyObject* type) {
  if (type == py.PyModule_Type) return TW::intern("module");
  Ref qn(getattr_n(type, NAME("__qualname__")));
  Ref mod(getattr_n(type, NAME("__module__")));
  if (!qn || !mod) py.PyErr_Clear();
  Py_ssize_t nq = 0, nm = 0;
  const char* q = str_utf8(qn.get(), &nq);
  const char* m = str_utf8(mod.get(), &nm);
  if (!q) return TW::intern("?");
  if (!m || (nm == 8 && memcmp(m, "builtins", 8) == 0)) return TW::intern(q, static_cast<size_t>(nq));
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%.*s.%.*s", static_cast<int>(nm), m, static_cast<int>(nq), q);
  return TW::intern(buf, n > 0 ? static_cast<size_t>(n) < sizeof buf ? n : sizeof buf - 1 : 0);
}

// A class overrides attribute access when its __getattr__/__getattribute__/__setattr__ is
// not what types.ModuleType has.
bool overrides(PyObject* type, Name& attr) {
  Ref mine(getattr_n(type, attr));
  if (!mine) { py.PyErr_Clear(); return false; }
  Ref base(getattr_n(py.PyModule_Type, attr));
  if (!base) { py.PyErr_Clear(); return true; }
  return mine.get() != base.get();
}

void instrument_proxy_class(PyObject* type);

// `as_type`: describe the object as if its class were already this one (a __class__
// assignment seen just before it happens). `dict_out`, when given, receives the instance
// dict the description was read from (callers that read more of it do not look it up
// again).
ObjInfo describe(PyObject* o, PyObject* as_type = nullptr, Ref* dict_out = nullptr) {
  ObjInfo i;
  if (!o) return i;
  PyObject* type = as_type ? as_type : type_of(o);
  bool is_module = false;
  if (type == py.PyModule_Type) {
    i.flags = ObjectFlags::plain_module;
    is_module = true;
  } else {
    if (py.PyType_IsSubtype(type, py.PyModule_Type)) {
      i.flags = ObjectFlags::module_subclass;
      is_module = true;
      if (overrides(type, NAME("__getattr__")) || overrides(type, NAME("__getattribute__")) ||
          overrides(type, NAME("__setattr__")))
        i.flags |= ObjectFlags::proxy;
    } else {
      i.flags = ObjectFlags::proxy;
    }
  }
  // A plain module's type is not written (the flag says it): not looked up either.
  if (!(i.flags & ObjectFlags::plain_module)) i.type = type_name(type);
  // Modules and proxies are what the identity story is about; other objects (attribute
  // values handed out by proxies) keep a plain address.
  i.id = identity(o, is_module || (i.flags & ObjectFlags::proxy));
  Ref d(instance_dict(o, is_module));
  if (d) {
    i.name = intern_obj(dict_get_n(d.get(), NAME("__name__")));
    i.file = intern_obj(dict_get_n(d.get(), NAME("__file__")));
  }
  if (dict_out) dict_out->reset(d.release());
  return i;
}

void put_obj(wire::ByteBuf& b, uint32_t field, const ObjInfo& i) {
  if (!i.id) return;
  auto m = wire::begin_message(b, field);
  wire::put_uint(b, ObjectRef::id, i.id);
  // A plain module's type is "module": the flag says it (readers fill the name in).
  if (!(i.flags & ObjectFlags::plain_module)) wire::put_uint(b, ObjectRef::type, i.type);
  wire::put_uint(b, ObjectRef::flags, i.flags);
  wire::put_uint(b, ObjectRef::name, i.name);
  wire::put_uint(b, ObjectRef::file, i.file);
  wire::end_message(b, m);
}

// Exception type and message of a fetched error; str() of builtin exceptions only runs
// CPython's own code.
void describe_error(PyObject* et, PyObject* ev, uint32_t* type, uint32_t* msg) {
  *type = et ? type_name(et) : 0;
  *msg = 0;
  if (!ev) return;
  Ref s(py.PyObject_Str(ev));
  if (!s) { py.PyErr_Clear(); return; }
  *msg = intern_obj(s.get());
}

// ---- sys.modules changes --------------------------------------------------------------
constexpr int kStackDepth = 8;

void emit_modules_change(uint32_t key, uint32_t op, const ObjInfo* old_, const ObjInfo* new_,
                         uint32_t precision, bool by_import, const Loc* stack, int nstack) {
  ThreadState& t = ts();
  const InFlight* in = innermost(t);
  auto r = TW::begin_record(Record::modules_change);
  auto& b = TW::buf();
  wire::put_uint(b, ModulesChange::key, key);
  wire::put_uint(b, ModulesChange::op, op);
  if (old_) put_obj(b, ModulesChange::old_, *old_);
  if (new_) put_obj(b, ModulesChange::new_, *new_);
  for (int i = 0; i < nstack; ++i) put_loc(b, ModulesChange::stack, stack[i]);
  wire::put_uint(b, ModulesChange::time_ns, TW::now_ns());
  wire::put_uint(b, ModulesChange::thread, t.tid);
  wire::put_uint(b, ModulesChange::test, current_test());
  wire::put_uint(b, ModulesChange::precision, precision);
  wire::put_uint(b, ModulesChange::during_import, in ? in->index + 1 : 0);
  wire::put_bool(b, ModulesChange::by_import_system, by_import);
  TW::end_record(r);
}

void maybe_instrument(PyObject* obj, const ObjInfo& info) {
  if (!g_proxies || !(info.flags & ObjectFlags::proxy)) return;
  Ref type(py.PyObject_Type(obj));
  instrument_proxy_class(type.get());
}

// 3.8-3.11 have no way to watch a dict, so the tracer keeps a shadow of sys.modules (key
// -> the object and its description) and compares at import boundaries. A full
// comparison is O(len(sys.modules)); it runs when the size disagrees with the shadow and
// at every top-level import boundary, and the keys on the import path are checked at every
// boundary. Changes are therefore found no later than the next such boundary, and carry
// the stack active then (precision AT_BOUNDARY).
//
// Keys are the keys' string ids in the trace (the import records need them anyway; the
// str cache turns the same str object into its id with no hashing), so the shadow holds
// no key text and finds an entry by indexing: new module names get ids one after
// another, and their entries sit one after another. A key whose text is empty (id 0) is
// not shadowed.
struct ShadowEntry {
  uint32_t key;  // string id
  uint32_t stamp;
  bool live;
  ObjInfo info;
  PyObject* value;  // identity only; may be dead, never dereferenced
};
struct ModulesShadow {
  ChunkedArray<ShadowEntry> entries;  // never removed, only marked not live
  ChunkedArray<uint32_t> by_id;       // string id -> position in entries + 1; 0: none
  size_t live = 0;
  uint32_t stamp = 0;
  uint32_t epoch = 0;  // the TW::strings_epoch() its ids belong to
  // The entry the last check of a parent package found (siblings share it).
  ShadowEntry* last_parent = nullptr;

  ShadowEntry* find(uint32_t id, bool create) {
    if (!id) return nullptr;
    while (by_id.size() <= id)
      if (!by_id.push()) return nullptr;
    uint32_t& pos = by_id[id];
    if (pos) return &entries[pos - 1];
    if (!create) return nullptr;
    ShadowEntry* e = entries.push();
    if (!e) return nullptr;
    e->key = id;
    pos = entries.size();
    return e;
  }
  // Forgets every entry (string ids started again); the chunks are kept and refilled.
  void clear() {
    entries.clear();
    by_id.clear();
    live = 0;
    last_parent = nullptr;
  }
};
ModulesShadow g_shadow;

// A full comparison walks all of sys.modules, and pytest makes one at both ends of every
// test module's import (hundreds of entries each). Two shortcuts keep that cheap:
// - the dict's version tag: unchanged since the last full comparison, nothing to do;
// - the entries as (key, value) pointers in iteration order at that comparison: when they
//   are all still there, in place, and the shadow has not changed or dropped an existing
//   key since, only the entries appended after them need a look (iteration order is
//   insertion order: a deletion, a pop-and-reinsert or a replacement shows as a mismatch,
//   and then the full comparison runs).
struct SnapEntry { PyObject* key; PyObject* value; };  // identity only: never dereferenced
struct ModulesSnapshot {
  ChunkedArray<SnapEntry> entries;
  size_t n_str = 0;      // entries with a str key (the ones the shadow holds)
  bool valid = false;
  uint64_t version = 0;  // sys.modules' tag after the last comparison; 0 unknown
};
ModulesSnapshot g_snap;

bool snap_push(PyObject* k, PyObject* v) {
  SnapEntry* e = g_snap.entries.push();
  if (!e) { g_snap.valid = false; return false; }
  *e = SnapEntry{k, v};
  return true;
}

// The shadow changed or dropped a key it had: the snapshot no longer vouches for it.
void snap_invalidate() {
  g_snap.valid = false;
  g_snap.version = 0;
}

bool g_shadow_ready = false;

// Adopts key -> value into the shadow without recording (the change was recorded exactly
// where it happened, or is the import system's own insertion).
void shadow_adopt(PyObject* key, PyObject* value, bool describe_value) {
  if (!g_shadow_ready || g_shadow.epoch != TW::strings_epoch()) return;
  ShadowEntry* e = g_shadow.find(intern_obj(key), value != nullptr);
  if (!e) return;
  if (!value) {
    if (e->live) { e->live = false; --g_shadow.live; snap_invalidate(); }
    return;
  }
  if (e->live && e->value == value) return;
  if (e->live) snap_invalidate();
  if (!e->live) ++g_shadow.live;
  e->live = true;
  e->value = value;
  // The import system's insertion of the module it is loading is described later, from
  // the import record; until then the shadow knows its identity only.
  if (describe_value) {
    e->info = describe(value);
  } else {
    e->info = ObjInfo();
    e->info.id = identity(value, false);
  }
  e->stamp = g_shadow.stamp;
}

bool name_in_flight(uint32_t id, PyObject** inserted);

// Records and adopts the difference between the shadow and sys.modules for one key.
// Returns the key's entry (null if the table could not take it); entries never move.
// `inserted`: for a key an import of this thread is loading, what the import system put
// under it (InFlight::inserted).
ShadowEntry* shadow_check_key(uint32_t key, PyObject* value, bool initial, bool by_import,
                              const ObjInfo* known = nullptr, PyObject* inserted = nullptr) {
  ShadowEntry* e = g_shadow.find(key, true);
  if (!e) return nullptr;
  e->stamp = g_shadow.stamp;
  if (e->live && e->value == value) {
    if (known) e->info = *known;
    return e;
  }
  if (e->live) snap_invalidate();
  ObjInfo ni = known ? *known : describe(value);
  // A new key that an import in progress (on any thread) is loading is the import
  // system's own insertion: its Import record tells it, as on 3.12+, where the watcher
  // never reports it. Recording it made a trace of 8 threads importing side by side
  // carry a change record for most of their imports.
  bool own_insertion = !e->live && (by_import || (!initial && name_in_flight(key, &inserted)));
  // The import system's insertion is not taken into the shadow where it happens (see
  // dict_ass_subscript_hook); when something else is there by now, that is a change from it.
  bool replaced_own = own_insertion && inserted && inserted != value;
  if (!initial && (!own_insertion || replaced_own)) {
    Loc stack[kStackDepth];
    int ns = capture_stack(stack, kStackDepth, false);
    ObjInfo oi;
    if (replaced_own) oi = describe(inserted);
    emit_modules_change(key, ModulesChange::SET, e->live ? &e->info : replaced_own ? &oi : nullptr,
                        &ni, ModulesChange::AT_BOUNDARY, false, stack, ns);
  }
  if (!e->live) ++g_shadow.live;
  e->live = true;
  e->value = value;
  e->info = ni;
  maybe_instrument(value, ni);
  return e;
}

// The snapshot's entries are all in place: checks the ones appended after them. False
// (nothing done that a full comparison would not redo) when the snapshot does not hold.
bool snap_sync_appended() {
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  size_t i = 0;
  for (uint32_t n = g_snap.entries.size(); i < n; ++i) {
    if (!py.PyDict_Next(g_sysmodules, &pos, &k, &v)) return false;  // entries gone
    const SnapEntry& e = g_snap.entries[static_cast<uint32_t>(i)];
    if (e.key != k || e.value != v) return false;
  }
  size_t n_str = g_snap.n_str;
  while (py.PyDict_Next(g_sysmodules, &pos, &k, &v)) {
    uint32_t id = intern_obj(k, false);
    if (id) {
      shadow_check_key(id, v, false, false, nullptr);
      ++n_str;
    }
    if (!snap_push(k, v)) return false;
    if (id) ++g_snap.n_str;
  }
  // A key the shadow gained since (an import's own insertion) and the dict lost again
  // (through a method or a specialised store) is still live in the shadow: only the full
  // comparison finds it.
  return g_snap.valid && g_shadow.live == n_str;
}

// The whole of sys.modules against the shadow, with the shortcuts of ModulesSnapshot.
void shadow_full_sync(bool initial) {
  if (!initial && g_snap.valid) {
    uint64_t version = dict_version(g_sysmodules);
    if (version && version == g_snap.version) return;
    if (snap_sync_appended()) {
      g_snap.version = dict_version(g_sysmodules);
      return;
    }
  }
  ++g_shadow.stamp;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  size_t held = 0;  // the keys the shadow holds, for the snapshot below
  while (py.PyDict_Next(g_sysmodules, &pos, &k, &v)) {
    uint32_t id = intern_obj(k, false);
    if (!id) continue;  // a non-str key (import never uses it) or ''
    shadow_check_key(id, v, initial, false);
    ++held;
  }
  for (uint32_t i = 0; i < g_shadow.entries.size(); ++i) {
    ShadowEntry& e = g_shadow.entries[i];
    if (!e.live || e.stamp == g_shadow.stamp) continue;
    e.live = false;
    --g_shadow.live;
    if (initial) continue;
    Loc stack[kStackDepth];
    int ns = capture_stack(stack, kStackDepth, false);
    emit_modules_change(e.key, ModulesChange::DELETE, &e.info, nullptr, ModulesChange::AT_BOUNDARY, false, stack,
                        ns);
  }
  // The shadow now agrees with every entry: take the snapshot (nothing above changed
  // sys.modules: describing and recording run no code of the program's).
  g_snap.entries.clear();
  g_snap.n_str = held;
  g_snap.valid = true;
  pos = 0;
  while (py.PyDict_Next(g_sysmodules, &pos, &k, &v))
    if (!snap_push(k, v)) break;
  g_snap.version = g_snap.valid ? dict_version(g_sysmodules) : 0;
}

// Checks `name` (a str object) and its parent package against sys.modules. Ancestors
// further up were checked at their own boundaries, and the whole dict is compared when its
// size disagrees with the shadow or at a top-level import.
// Returns the key's entry when `v` is there (as shadow_check_key), else null.
ShadowEntry* shadow_check_one(uint32_t key, PyObject* v, bool by_import, const ObjInfo* known,
                              PyObject* inserted = nullptr) {
  if (v) return shadow_check_key(key, v, false, by_import, known, inserted);
  ShadowEntry* e = g_shadow.find(key, false);
  if ((!e || !e->live) && inserted) {
    // The import system's insertion (never taken into the shadow) is gone again, and not
    // through a store the hook saw (that one is recorded exactly and drops `inserted`).
    Loc stack[kStackDepth];
    int ns = capture_stack(stack, kStackDepth, false);
    ObjInfo oi = describe(inserted);
    emit_modules_change(key, ModulesChange::DELETE, &oi, nullptr, ModulesChange::AT_BOUNDARY, by_import, stack,
                        ns);
    return nullptr;
  }
  if (e && e->live) {
    e->live = false;
    --g_shadow.live;
    snap_invalidate();
    Loc stack[kStackDepth];
    int ns = capture_stack(stack, kStackDepth, false);
    emit_modules_change(key, ModulesChange::DELETE, &e->info, nullptr, ModulesChange::AT_BOUNDARY, by_import,
                        stack, ns);
  }
  return nullptr;
}

// At an import's end, `parent` is sys.modules[parent of name] as record_binding found it
// (null: not a submodule, or nothing there), so the lookup is not made twice.
struct ParentLookup {
  const char* text = nullptr;
  size_t len = 0;
  uint32_t id = 0;  // its string id
  PyObject* obj = nullptr;
};

// `name_id`: the import's name; `value`: sys.modules[name_obj] when the caller has just
// looked it up.
void shadow_check_path(PyObject* name_obj, uint32_t name_id, bool by_import, const ObjInfo* known,
                       const ParentLookup* parent, PyObject* const* value, PyObject* inserted) {
  if (!name_id) return;
  shadow_check_one(name_id, value ? *value : dict_lookup(g_sysmodules, name_obj), by_import, known, inserted);
  if (!parent || !parent->text) return;
  // The sibling before us found the parent where the shadow has it: nothing to look up.
  ShadowEntry* e = g_shadow.last_parent;
  if (e && e->live && parent->obj && e->value == parent->obj && e->key == parent->id) return;
  e = shadow_check_one(parent->id, parent->obj, false, nullptr);
  g_shadow.last_parent = e && e->live && e->value == parent->obj ? e : nullptr;
}

// Names of imports in progress on any thread (their sys.modules entries are the import
// system's, not news): a small linear-probing table keyed by string id, holding only the
// names in flight. An entry whose count drops to 0 is removed and the ones after it in
// its run moved back, so that a lookup of a name not in flight stops at the first empty
// slot: leaving them in place filled the table with ended names within a thousand
// imports, and every such lookup then read all of it.
constexpr size_t kInFlightSlots = 1024;
uint32_t g_inflight_id[kInFlightSlots];  // 0: empty
uint32_t g_inflight_count[kInFlightSlots];
PyObject* g_inflight_inserted[kInFlightSlots];  // InFlight::inserted of the name's import (borrowed)
// The name as a str, borrowed from the import that made the entry (its caller's frame
// keeps it alive); dropped at the first end of an import of that name, which may be that
// one's (main interpreter only).
PyObject* g_inflight_name[kInFlightSlots];
uint32_t g_inflight_active[kInFlightSlots];  // the ids in the table, unordered: [0, used)
size_t g_inflight_used = 0;
uint32_t g_inflight_epoch = 0;  // the TW::strings_epoch() its ids belong to

// Ids of an earlier epoch (strings dropped after running out of memory; a fork child's
// new file) name other strings now: the table starts empty, and imports begun before
// leave it alone when they end (their InFlight::name_epoch is the old one).
__attribute__((noinline, cold)) void inflight_reset() {
  memset(g_inflight_name, 0, sizeof g_inflight_name);
  memset(g_inflight_count, 0, sizeof g_inflight_count);
  memset(g_inflight_id, 0, sizeof g_inflight_id);
  memset(g_inflight_inserted, 0, sizeof g_inflight_inserted);
  g_inflight_used = 0;
  g_inflight_epoch = TW::strings_epoch();
}
inline void inflight_follow_epoch() {
  if (__builtin_expect(g_inflight_epoch != TW::strings_epoch(), 0)) inflight_reset();
}

// The slot holding `id`, or (when it is not there) the empty slot where it would go.
size_t inflight_probe(uint32_t id) {
  inflight_follow_epoch();
  size_t j = id & (kInFlightSlots - 1);
  while (g_inflight_id[j] && g_inflight_id[j] != id) j = (j + 1) & (kInFlightSlots - 1);
  return j;
}

__attribute__((noinline)) void inflight_erase(size_t i) {
  for (;;) {
    g_inflight_id[i] = 0;
    g_inflight_count[i] = 0;
    g_inflight_inserted[i] = nullptr;
    g_inflight_name[i] = nullptr;
    size_t k = i;
    for (;;) {
      k = (k + 1) & (kInFlightSlots - 1);
      if (!g_inflight_id[k]) return;
      size_t home = g_inflight_id[k] & (kInFlightSlots - 1);
      // The entry at k may fill the hole at i unless its home lies cyclically in (i, k].
      bool stays = i <= k ? (i < home && home <= k) : (i < home || home <= k);
      if (!stays) break;
    }
    g_inflight_id[i] = g_inflight_id[k];
    g_inflight_count[i] = g_inflight_count[k];
    g_inflight_inserted[i] = g_inflight_inserted[k];
    g_inflight_name[i] = g_inflight_name[k];
    i = k;
  }
}

// `id`: the name's string id, 0 for a name that is not text; `name`: the name, kept
// (main interpreter) for boundaries that look other threads' imports up.
inline void inflight_add(uint32_t id, int delta, PyObject* name = nullptr) {
  if (!id) return;
  size_t j = inflight_probe(id);
  if (!g_inflight_id[j]) {
    if (delta < 0) return;
    if (g_inflight_used >= kInFlightSlots - 1) return;  // full: not tracked
    g_inflight_id[j] = id;
    if (name && in_main_interpreter()) g_inflight_name[j] = name;
    g_inflight_active[g_inflight_used++] = id;
  }
  g_inflight_count[j] = static_cast<uint32_t>(static_cast<int>(g_inflight_count[j]) + delta);
  if (delta < 0) g_inflight_name[j] = nullptr;
  if (!g_inflight_count[j]) {
    inflight_erase(j);
    for (size_t a = 0; a < g_inflight_used; ++a)
      if (g_inflight_active[a] == id) {
        g_inflight_active[a] = g_inflight_active[--g_inflight_used];
        break;
      }
  }
}
// `inserted` receives what the import system put under the name, when that is known.
bool name_in_flight(uint32_t id, PyObject** inserted) {
  if (!id) return false;
  size_t j = inflight_probe(id);
  if (!g_inflight_id[j]) return false;
  if (g_inflight_inserted[j]) *inserted = g_inflight_inserted[j];
  return true;
}
// What the import system put under a name in flight (InFlight::inserted; null: forget it).
void inflight_note_inserted(uint32_t id, PyObject* value) {
  if (!id) return;
  size_t j = inflight_probe(id);
  if (g_inflight_id[j]) g_inflight_inserted[j] = value;
}

// Imports in flight (other threads') whose modules sys.modules has and the shadow not yet:
// their own insertions, taken in. Without this, a thread's boundary found sys.modules
// larger than the shadow whenever another thread was loading a module, and compared all
// of it: with 8 threads importing side by side, at almost every boundary.
void shadow_adopt_in_flight() {
  for (size_t a = 0; a < g_inflight_used; ++a) {
    uint32_t id = g_inflight_active[a];
    size_t j = inflight_probe(id);
    PyObject* name = g_inflight_id[j] == id ? g_inflight_name[j] : nullptr;
    if (!name) continue;
    ShadowEntry* e = g_shadow.find(id, false);
    if (e && e->live) continue;
    if (PyObject* v = dict_lookup(g_sysmodules, name)) shadow_check_key(id, v, false, true, nullptr, g_inflight_inserted[j]);
  }
}

// One import boundary (3.8-3.11): the caller holds the writer lock.
// sys.modules' version tag when the last boundary was done with it: a boundary that finds
// it unchanged has nothing to compare (most imports' starts: the previous import's end
// already saw the dict as it is). 0: unknown.
uint64_t g_boundary_version = 0;

// `name_id`: the string id of `name` (the import's).
void shadow_boundary(ThreadState& t, PyObject* name, uint32_t name_id, bool import_end, bool top_level,
                     const ObjInfo* known = nullptr, const ParentLookup* parent = nullptr,
                     PyObject* const* value = nullptr, PyObject* inserted = nullptr) {
  if (!g_shadow_ready || g_shadow.epoch != TW::strings_epoch()) {
    // First boundary, or string ids started again (a fork child's file, or strings
    // dropped after running out of memory): the shadow is made anew, recording nothing.
    g_shadow.clear();
    g_shadow.epoch = TW::strings_epoch();
    snap_invalidate();
    shadow_full_sync(true);
    g_shadow_ready = true;
    g_boundary_version = 0;
    if (name) name_id = intern_obj(name);
  }
  uint64_t version = dict_version(g_sysmodules);
  if (!top_level && !known && version && version == g_boundary_version) return;
  // The import in progress around us has put itself into sys.modules since its own start.
  for (int i = 0; i < t.depth && i < kMaxDepth; ++i) {
    InFlight& f = t.stack[i];
    if (f.noted || f.generation != TW::generation()) continue;
    uint32_t id = f.name_epoch == TW::strings_epoch() ? f.name_id : intern_obj(f.name);
    PyObject* v = id ? dict_lookup(g_sysmodules, f.name) : nullptr;
    if (v) {
      shadow_check_key(id, v, false, true, nullptr, f.inserted);
      f.noted = true;
    }
  }
  if (name) shadow_check_path(name, name_id, import_end, known, parent, value, inserted);
  bool size_differs = py.PyDict_Size(g_sysmodules) != static_cast<Py_ssize_t>(g_shadow.live);
  if (size_differs && !top_level && g_inflight_used > 1) {
    shadow_adopt_in_flight();
    size_differs = py.PyDict_Size(g_sysmodules) != static_cast<Py_ssize_t>(g_shadow.live);
  }
  if (top_level || size_differs) shadow_full_sync(false);
  g_boundary_version = dict_version(g_sysmodules);
}

// ---- sys.modules[k] = v / del sys.modules[k] (3.8-3.11) --------------------------------
ObjObjArgProc g_orig_ass_subscript = nullptr;

int dict_ass_subscript_hook(PyObject* mp, PyObject* key, PyObject* value) {
  if (mp != g_sysmodules || !g_enabled || finalizing()) return g_orig_ass_subscript(mp, key, value);
  MainScope scope;
  ThreadState& t = ts();
  if (t.busy || !TW::usable()) return g_orig_ass_subscript(mp, key, value);
  PyObject* old = py.PyDict_GetItem(mp, key);
  InFlight* in = t.depth > 0 && t.depth <= kMaxDepth ? &t.stack[t.depth - 1] : nullptr;
  if (value && !old && in && (!in->inserted || in->inserted == value) && in->generation == TW::generation() &&
      same_text(key, in->name)) {
    // The import system inserting the module it loads, or putting it back after popping
    // it (to move it to the end): nothing to record (its Import record tells it, as on
    // 3.12+), and the shadow takes it from sys.modules at the next boundary. Here it is
    // only noted, with a reference.
    int rc = g_orig_ass_subscript(mp, key, value);
    if (rc == 0 && !in->inserted) {
      py.Py_IncRef(value);
      in->inserted = value;
      if (in->name_epoch == TW::strings_epoch()) inflight_note_inserted(in->name_id, value);
    }
    return rc;
  }
  if (old) py.Py_IncRef(old);  // described after the store, so kept alive until then
  int rc = g_orig_ass_subscript(mp, key, value);
  if (rc == 0 && old != value) {
    ++t.busy;
    PyObject *et, *ev, *tb;
    py.PyErr_Fetch(&et, &ev, &tb);
    {
      WriterLock lock;
      InFlight* cur = in && in->generation == TW::generation() ? in : nullptr;  // as innermost(t)
      bool key_is_import = cur && same_text(key, cur->name);
      if (value && !old && key_is_import) {
        shadow_adopt(key, value, false);  // the import system inserting the module it loads
      } else {
        Loc stack[kStackDepth];
        int ns = capture_stack(stack, kStackDepth, false);
        ObjInfo oi = describe(old), ni = describe(value);
        bool by_import = ns > 0 && stack[0].importlib;
        emit_modules_change(intern_obj(key), value ? ModulesChange::SET : ModulesChange::DELETE,
                            old ? &oi : nullptr, value ? &ni : nullptr, ModulesChange::EXACT,
                            by_import, stack, ns);
        shadow_adopt(key, value, true);
        if (value) maybe_instrument(value, ni);
        if (!value && cur && old == cur->inserted) {
          // The import's own insertion, deleted where it was seen: recorded here, so the
          // boundary must not report it again. `old` still holds a reference.
          if (cur->name_epoch == TW::strings_epoch()) inflight_note_inserted(cur->name_id, nullptr);
          py.Py_DecRef(cur->inserted);
          cur->inserted = nullptr;
        }
        TW::flush();
      }
    }
    py.PyErr_Restore(et, ev, tb);
    --t.busy;
  }
  if (old) py.Py_DecRef(old);
  return rc;
}

// ---- dict watcher (3.12+) -------------------------------------------------------------
int modules_watcher(int event, PyObject* dict, PyObject* key, PyObject* new_value) {
  if (!g_enabled || dict != g_sysmodules || finalizing()) return 0;
  ThreadState& t = ts();
  if (t.busy) return 0;
  // Two of the three events of every import are the import system's own: inserting the
  // module it loads, and re-inserting it after its pop. Told apart by identity alone, they
  // return before any locking or error juggling.
  if (event == DICT_ADDED && key) {
    if (t.pending_pop_key == key && t.pending_pop_value == new_value) {
      py.Py_DecRef(t.pending_pop_key);
      t.pending_pop_key = nullptr;
      t.pending_pop_value = nullptr;
      return 0;
    }
    const InFlight* in = innermost(t);
    if (!t.pending_pop_key && in && in->name == key) return 0;
  } else if (event == DICT_DELETED && key && !t.pending_pop_key) {
    // The pop half of the import system's pop-and-reinsert (3.12+ _load_unlocked): held
    // until the re-insert, as below, without the slow path's locking.
    const InFlight* in = innermost(t);
    if (in && in->name == key && !py.PyErr_Occurred()) {
      if (PyObject* old = dict_lookup(dict, key)) {
        py.Py_IncRef(key);
        t.pending_pop_key = key;
        t.pending_pop_value = old;
        return 0;
      }
    }
  }
  MainScope scope;
  ++t.busy;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  {
    WriterLock lock;
    const InFlight* in = innermost(t);
    bool key_is_import = in && key && same_text(key, in->name);
    auto flush_pending = [&]() {
      if (!t.pending_pop_key) return;
      // A pop that was not followed by a re-insert: the import system removed the entry
      // (a failed import), or a pop by someone else.
      PyObject* k = t.pending_pop_key;
      ObjInfo oi;
      oi.id = identity(t.pending_pop_value, false);
      emit_modules_change(intern_obj(k), ModulesChange::DELETE, &oi, nullptr, ModulesChange::EXACT,
                          true, nullptr, 0);
      py.Py_DecRef(k);
      t.pending_pop_key = nullptr;
      t.pending_pop_value = nullptr;
    };
    if (event == DICT_ADDED && t.pending_pop_key && same_text(key, t.pending_pop_key) &&
        new_value == t.pending_pop_value) {
      py.Py_DecRef(t.pending_pop_key);  // the import system's pop-and-reinsert: no news
      t.pending_pop_key = nullptr;
      t.pending_pop_value = nullptr;
    } else {
      flush_pending();
      PyObject* old = key ? py.PyDict_GetItem(dict, key) : nullptr;
      if (event == DICT_ADDED && key_is_import) {
        // The import system's own insertion of the module it is loading: the Import
        // record says it; only later replacements are news.
      } else if (event == DICT_DELETED && key_is_import && old) {
        py.Py_IncRef(key);
        t.pending_pop_key = key;
        t.pending_pop_value = old;
      } else if (event == DICT_ADDED || event == DICT_MODIFIED) {
        if (old != new_value) {
          Loc stack[kStackDepth];
          int ns = capture_stack(stack, kStackDepth, false);
          ObjInfo oi = describe(old), ni = describe(new_value);
          bool by_import = ns > 0 && stack[0].importlib;
          emit_modules_change(intern_obj(key), ModulesChange::SET, old ? &oi : nullptr, &ni,
                              ModulesChange::EXACT, by_import, stack, ns);
          maybe_instrument(new_value, ni);
        }
      } else if (event == DICT_DELETED) {
        Loc stack[kStackDepth];
        int ns = capture_stack(stack, kStackDepth, false);
        ObjInfo oi = describe(old);
        bool by_import = ns > 0 && stack[0].importlib;
        emit_modules_change(intern_obj(key), ModulesChange::DELETE, old ? &oi : nullptr, nullptr,
                            ModulesChange::EXACT, by_import, stack, ns);
      } else if (event == DICT_CLEARED || event == DICT_DEALLOCATED) {
        emit_modules_change(TW::intern("*"), ModulesChange::CLEAR, nullptr, nullptr,
                            ModulesChange::EXACT, false, nullptr, 0);
      }
    }
    TW::flush();
  }
  py.PyErr_Restore(et, ev, tb);
  --t.busy;
  return 0;
}

// ---- proxies ------------------------------------------------------------------------
constexpr int kMaxProxyClasses = 256;
PyObject* g_proxy_classes[kMaxProxyClasses];
int g_n_proxy_classes = 0;

// Where a function is defined: its code's file and first line.
Loc function_location(PyObject* fn) {
  Loc l;
  if (!fn) return l;
  Ref code(getattr_n(fn, NAME("__code__")));
  if (!code) { py.PyErr_Clear(); return l; }
  Ref file(getattr_n(code.get(), NAME("co_filename")));
  Ref line(getattr_n(code.get(), NAME("co_firstlineno")));
  Ref name(getattr_n(code.get(), py.minor >= 11 ? NAME("co_qualname") : NAME("co_name")));
  if (!file || !line || !name) py.PyErr_Clear();
  l.file = intern_obj(file.get());
  l.func = intern_obj(name.get());
  if (line) { long v = py.PyLong_AsLong(line.get()); if (v > 0) l.line = static_cast<uint32_t>(v); else py.PyErr_Clear(); }
  return l;
}

// A Python function found on the class (through its MRO) under attr, or null.
PyObject* python_function_attr(PyObject* type, Name& attr) {
  PyObject* f = getattr_n(type, attr);
  if (!f) { py.PyErr_Clear(); return nullptr; }
  PyObject* code = getattr_n(f, NAME("__code__"));
  if (!code) { py.PyErr_Clear(); py.Py_DecRef(f); return nullptr; }
  py.Py_DecRef(code);
  return f;
}

void instrument_proxy_class(PyObject* type) {
  for (int i = 0; i < g_n_proxy_classes; ++i)
    if (g_proxy_classes[i] == type) return;
  if (g_n_proxy_classes >= kMaxProxyClasses) return;
  py.Py_IncRef(type);  // deliberate: an instrumented class is remembered for the process
  g_proxy_classes[g_n_proxy_classes++] = type;

  Ref ga(python_function_attr(type, NAME("__getattr__")));
  Ref gab(python_function_attr(type, NAME("__getattribute__")));
  Ref sa(python_function_attr(type, NAME("__setattr__")));
  auto r = TW::begin_record(Record::proxy_class);
  auto& b = TW::buf();
  wire::put_uint(b, ProxyClass::type, type_name(type));
  put_loc(b, ProxyClass::getattr_at, function_location(ga.get()));
  put_loc(b, ProxyClass::getattribute_at, function_location(gab.get()));
  put_loc(b, ProxyClass::setattr_at, function_location(sa.get()));
  wire::put_bool(b, ProxyClass::module_subclass, py.PyType_IsSubtype(type, py.PyModule_Type) != 0);
  Ref mod(getattr_n(type, NAME("__module__")));
  if (!mod) py.PyErr_Clear();
  wire::put_uint(b, ProxyClass::defined_in, intern_obj(mod.get()));
  TW::end_record(r);

  // Its forwarding is observed at its functions' C entry points: nothing on the class
  // changes.
  observe_proxy_class(type, ga.get() != nullptr, sa.get() != nullptr);
}

// The module a failed or successful forward went to: AttributeError.obj (3.10+), else a
// module the proxy holds in its own dict.
ObjInfo forwarded_target(PyObject* proxy, PyObject* ev) {
  if (ev && py.minor >= 10) {
    Ref o(getattr_n(ev, NAME("obj")));
    if (!o) py.PyErr_Clear();
    if (o && o.get() != py.None && o.get() != proxy) return describe(o.get());
  }
  Ref d(py.PyObject_GenericGetDict(proxy, nullptr));
  if (!d) { py.PyErr_Clear(); return ObjInfo(); }
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  while (py.PyDict_Next(d.get(), &pos, &k, &v)) {
    Ref t(py.PyObject_Type(v));
    if (v != proxy && py.PyType_IsSubtype(t.get(), py.PyModule_Type)) return describe(v);
  }
  return ObjInfo();
}

void record_proxy_access(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* res,
                         PyObject* et, PyObject* ev, PyObject* module_for_record) {
  ThreadState& t = ts();
  WriterLock lock;
  Loc stack[kStackDepth];
  int ns = capture_stack(stack, kStackDepth, false);
  const InFlight* in = innermost(t);
  auto r = TW::begin_record(Record::proxy_access);
  auto& b = TW::buf();
  put_obj(b, ProxyAccess::proxy, describe(module_for_record ? module_for_record : proxy));
  wire::put_uint(b, ProxyAccess::attribute, intern_obj(attr));
  wire::put_uint(b, ProxyAccess::kind, kind);
  wire::put_bool(b, ProxyAccess::ok, res != nullptr);
  if (res && kind != ProxyAccess::SETATTR) put_obj(b, ProxyAccess::result, describe(res));
  if (!res) {
    uint32_t ty, msg;
    describe_error(et, ev, &ty, &msg);
    wire::put_uint(b, ProxyAccess::error_type, ty);
    wire::put_uint(b, ProxyAccess::error_message, msg);
  }
  if (kind != ProxyAccess::MODULE_GETATTR) put_obj(b, ProxyAccess::forwarded_to, forwarded_target(proxy, ev));
  for (int i = 0; i < ns; ++i) put_loc(b, ProxyAccess::stack, stack[i]);
  wire::put_uint(b, ProxyAccess::time_ns, TW::now_ns());
  wire::put_uint(b, ProxyAccess::thread, t.tid);
  wire::put_uint(b, ProxyAccess::test, current_test());
  wire::put_uint(b, ProxyAccess::during_import, in ? in->index + 1 : 0);
  wire::put_bool(b, ProxyAccess::from_import_system, ns > 0 && stack[0].importlib);
  TW::end_record(r);
  TW::flush();
}

}  // namespace

// The proxy observer's side (proxy_observer.h).
bool forward_observable() {
  return g_enabled && g_proxies && TW::usable() && !ts().busy && g_main_interp &&
         py.PyInterpreterState_Get() == g_main_interp;
}

void record_forward(uint32_t kind, PyObject* proxy, PyObject* attr, PyObject* res) {
  MainScope scope;
  ThreadState& t = ts();
  if (!g_enabled || !t_main || t.busy || !TW::usable()) return;
  ++t.busy;
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
  record_proxy_access(kind, proxy, attr, res, nt, nv, kind == ProxyAccess::MODULE_GETATTR ? proxy : nullptr);
  if (copies) {
    if (nt) py.Py_DecRef(nt);
    if (nv) py.Py_DecRef(nv);
    if (ntb) py.Py_DecRef(ntb);
  }
  if (!res) py.PyErr_Restore(et, ev, tb);
  --t.busy;
}

namespace {

// ---- __class__ assignment -----------------------------------------------------------
// `obj.__class__ = T`, seen before it happens. For an object under its own name in
// sys.modules (LazyLoader turning a module into _LazyModule and back, a module making
// itself a ModuleType subclass), that is a change of what sits under the name, recorded
// exactly, as a new entry for the same object.
void class_assignment(PyObject* obj, PyObject* new_type) {
  if (!g_sysmodules || !in_main_interpreter() || finalizing()) return;
  if (!py.PyType_IsSubtype(type_of(obj), py.PyModule_Type)) return;
  PyObject* d = py.PyModule_GetDict(obj);
  PyObject* name = d ? dict_get_n(d, NAME("__name__")) : nullptr;
  if (!name || py.PyDict_GetItem(g_sysmodules, name) != obj) { py.PyErr_Clear(); return; }
  WriterLock lock;
  ObjInfo oi = describe(obj), ni = describe(obj, new_type);
  Loc stack[kStackDepth];
  int ns = capture_stack(stack, kStackDepth, false);
  emit_modules_change(intern_obj(name), ModulesChange::SET, &oi, &ni, ModulesChange::EXACT,
                      ns > 0 && stack[0].importlib, stack, ns);
  TW::flush();
}

// Runs class_assignment with the program's pending exception (if any) put aside.
void note_class_assignment(PyObject* obj, PyObject* new_type) {
  ThreadState& t = ts();
  if (!g_enabled || t.busy || !TW::usable() || !obj || !new_type) return;
  MainScope scope;
  ++t.busy;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  class_assignment(obj, new_type);
  py.PyErr_Restore(et, ev, tb);
  --t.busy;
}

// object's __class__ setter, swapped for this (patch_class_setter) at installation.
SetterFn g_orig_class_setter = nullptr;
int class_setter_hook(PyObject* self, PyObject* value, void* closure) {
  note_class_assignment(self, value);
  return g_orig_class_setter(self, value, closure);
}

// ---- exec ----------------------------------------------------------------------------
// Before the process image is replaced, the file gives back its reserve (the new image
// starts its own trace). os.execv and os.execve are the only ways Python code execs (every
// os.exec* variant ends in one of them), so os's and posix's two functions are wrapped
// once os has been imported; the wrappers are C functions (no frame, unchanged
// tracebacks) that call the original with the same arguments.
void before_exec() {
  WriterLock lock;
  TW::flush();
  TW::finish();
}

PyObject* exec_wrapper(PyObject* orig, PyObject* args, PyObject* kwargs) {
  before_exec();
  return py.PyObject_Call(orig, args, kwargs);
}

PyMethodDef g_execv_def = {"execv", reinterpret_cast<void*>(exec_wrapper), METH_VARARGS | METH_KEYWORDS,
                           "imptrace: gives back the trace's reserve, then runs os.execv"};
PyMethodDef g_execve_def = {"execve", reinterpret_cast<void*>(exec_wrapper), METH_VARARGS | METH_KEYWORDS,
                            "imptrace: gives back the trace's reserve, then runs os.execve"};
bool g_exec_wrapped = false;

// Replaces `name` in os's and posix's dicts (the same builtin in both) by one wrapper.
bool wrap_exec_function(PyObject* os_dict, PyObject* posix_dict, Name& name, PyMethodDef* def) {
  PyObject* orig = dict_get_n(os_dict, name);
  if (!orig || !py.PyCFunction_Type || type_of(orig) != py.PyCFunction_Type) return false;
  Ref wrapper(py.PyCFunction_NewEx(def, orig, nullptr));
  if (!wrapper || py.PyDict_SetItemString(os_dict, name.text, wrapper.get()) < 0) { py.PyErr_Clear(); return false; }
  if (posix_dict && dict_get_n(posix_dict, name) == orig &&
      py.PyDict_SetItemString(posix_dict, name.text, wrapper.get()) < 0)
    py.PyErr_Clear();
  return true;
}

// ---- the audit hook's place in the runtime's list ---------------------------------------
// The audit hook is how the tracer gets control at the first import of each interpreter.
// Once the main interpreter is set up it has nothing left to do there, but while it is in
// the runtime's list CPython builds an argument tuple for every audit event, four per
// import (about 1.5 % of a start-up that imports thousands of small modules). So it steps
// out of the list, and back in when it is needed again:
//  - a module that creates sub-interpreters is imported (their first import must reach
//    the hook to be traced);
//  - os's exec functions could not be wrapped.
// __class__ assignments are seen by object's __class__ setter instead (patched at
// installation; if that fails, the hook stays). IMPTRACE_AUDIT_HOOK=1 keeps it in for the
// whole run: for sub-interpreters created by C code (an embedding application) without
// any of those modules. The node is never freed while out of the list (24 bytes).
void* g_hook_entry = nullptr;    // our node in the list (allocated at registration)
void** g_audit_head = nullptr;   // the word in _PyRuntime that points at the list
bool g_audit_out = false;        // stepped out
bool g_keep_audit_hook = false;  // IMPTRACE_AUDIT_HOOK=1

void audit_hook_step_out() {
  if (g_keep_audit_hook || g_audit_out || !g_orig_class_setter) return;
  if (!g_audit_head) g_audit_head = find_audit_hook_head(g_hook_entry);
  // Only while our node is the head (nothing registered before us) and alone in moving.
  if (!g_audit_head || *g_audit_head != g_hook_entry) return;
  __atomic_store_n(g_audit_head, *static_cast<void**>(g_hook_entry), __ATOMIC_RELEASE);
  g_audit_out = true;
}

void audit_hook_step_in() {
  if (!g_audit_out) return;
  // Back at the head, in front of whatever was registered meanwhile (GIL held).
  *static_cast<void**>(g_hook_entry) = *g_audit_head;
  __atomic_store_n(g_audit_head, g_hook_entry, __ATOMIC_RELEASE);
  g_audit_out = false;
}

// After a successful import in the main interpreter: the modules the hook's presence
// depends on.
void after_main_import(PyObject* name, PyObject* module) {
  Py_ssize_t n = 0;
  const char* s = str_utf8(name, &n);
  if (!s || n < 2 || n > 18 || (s[0] != '_' && s[0] != 'o')) return;
  if (n == 2 && s[1] == 's' && !g_exec_wrapped) {
    PyObject* os_dict = type_of(module) == py.PyModule_Type ? py.PyModule_GetDict(module) : nullptr;
    PyObject* posix = dict_get_n(g_sysmodules, NAME("posix"));
    PyObject* posix_dict = posix && type_of(posix) == py.PyModule_Type ? py.PyModule_GetDict(posix) : nullptr;
    g_exec_wrapped = os_dict && wrap_exec_function(os_dict, posix_dict, NAME("execv"), &g_execv_def) &&
                     wrap_exec_function(os_dict, posix_dict, NAME("execve"), &g_execve_def);
    if (!g_exec_wrapped) audit_hook_step_in();
    return;
  }
  static const char* const creators[] = {"_testcapi", "_testinternalcapi", "_xxsubinterpreters", "_interpreters"};
  for (const char* c : creators) {
    if (strlen(c) == static_cast<size_t>(n) && memcmp(c, s, static_cast<size_t>(n)) == 0) {
      audit_hook_step_in();
      return;
    }
  }
}

// ---- the import hook ----------------------------------------------------------------
// Calls importlib's function with the arguments our fast-call entry received (`kwnames`:
// the names of the last arguments, passed by keyword): as they are (3.9+), else up to
// three positional arguments through CPython's small-stack call (no tuple) and anything
// more with a tuple and a dict.
PyObject* call_original(PyObject* orig, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames = nullptr) {
  if (py.PyObject_Vectorcall) return py.PyObject_Vectorcall(orig, args, static_cast<size_t>(nargs), kwnames);
  Py_ssize_t nkw = kwnames ? py.PyTuple_Size(kwnames) : 0;
  if (nkw == 0) {
    if (nargs == 2) return py.PyObject_CallFunctionObjArgs(orig, args[0], args[1], nullptr);
    if (nargs == 1) return py.PyObject_CallFunctionObjArgs(orig, args[0], nullptr);
    if (nargs == 3) return py.PyObject_CallFunctionObjArgs(orig, args[0], args[1], args[2], nullptr);
  }
  Ref tuple(py.PyTuple_New(nargs));
  if (!tuple) return nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    py.Py_IncRef(args[i]);
    py.PyTuple_SetItem(tuple.get(), i, args[i]);
  }
  Ref kwargs(nkw ? py.PyDict_New() : nullptr);
  if (nkw && !kwargs) return nullptr;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    Py_ssize_t n = 0;
    const char* key = str_utf8(py.PyTuple_GetItem(kwnames, i), &n);
    if (!key || py.PyDict_SetItemString(kwargs.get(), key, args[nargs + i]) < 0) return nullptr;
  }
  return py.PyObject_Call(orig, tuple.get(), kwargs.get());
}

// importlib._bootstrap._handle_fromlist, replaced like _find_and_load: notes the frame
// that asked for the fromlist, then runs the original.
PyObject* handle_fromlist_hook(PyObject* orig, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  ThreadState& t = ts();
  PyObject* saved_frame = t.fromlist_frame;
  int saved_depth = t.fromlist_depth;
  PyObject* f = g_enabled && !t.busy ? py.PyEval_GetFrame() : nullptr;  // borrowed
  if (f) py.Py_IncRef(f);
  t.fromlist_frame = f;
  t.fromlist_depth = f ? t.depth : -1;
  PyObject* res = call_original(orig, args, nargs, kwnames);
  t.fromlist_frame = saved_frame;
  t.fromlist_depth = saved_depth;
  if (f) py.Py_DecRef(f);  // the frame is still running: never the last reference
  return res;
}

PyMethodDef g_handle_fromlist_def = {
    "_handle_fromlist", reinterpret_cast<void*>(handle_fromlist_hook), METH_FASTCALL | METH_KEYWORDS,
    "imptrace: notes who asked, then runs importlib's _handle_fromlist"};

PyObject* g_modulespec_type = nullptr;  // importlib's ModuleSpec (main interpreter)

// An attribute of a module spec, read without running user code: importlib's own
// ModuleSpec keeps these as plain instance attributes, so on 3.11+ a normal lookup is safe
// (and unlike asking for its __dict__, does not make it materialise one); any other spec
// class, and every spec on 3.8-3.10, is read through its instance dict.
PyObject* spec_attr(PyObject* spec, bool plain_spec, PyObject* spec_dict, Name& name) {
  if (plain_spec) {
    PyObject* v = getattr_n(spec, name);
    if (!v) py.PyErr_Clear();
    return v;
  }
  PyObject* v = spec_dict ? dict_get_n(spec_dict, name) : nullptr;
  if (v) py.Py_IncRef(v);
  return v;
}

// `d`: the module's instance dict, `file` the id of its __file__ (as describe read them).
uint32_t record_spec(wire::ByteBuf& b, PyObject* d, uint32_t name_id, uint32_t file) {
  if (!d) return 0;
  PyObject* spec = dict_get_n(d, NAME("__spec__"));
  uint32_t origin = 0;
  if (spec && spec != py.None) {
    bool plain = g_modulespec_type && type_of(spec) == g_modulespec_type && in_main_interpreter() &&
                 !instance_attributes_in_dict();
    Ref sd(plain ? nullptr : py.PyObject_GenericGetDict(spec, nullptr));
    if (!plain && !sd) py.PyErr_Clear();
    if (plain || sd) {
      Ref sname(spec_attr(spec, plain, sd.get(), NAME("name")));
      uint32_t spec_name = intern_obj(sname.get());
      if (spec_name != name_id) wire::put_uint(b, Import::spec_name, spec_name);
      Ref sorigin(spec_attr(spec, plain, sd.get(), NAME("origin")));
      origin = intern_obj(sorigin.get());
      wire::put_uint(b, Import::origin, origin);
      Ref loader(spec_attr(spec, plain, sd.get(), NAME("loader")));
      if (loader && loader.get() != py.None) {
        // A loader may be a class (BuiltinImporter, FrozenImporter) or an instance.
        PyObject* lt = type_of(loader.get());
        bool is_class = py.PyType_IsSubtype(lt, py.PyType_Type) != 0;
        wire::put_uint(b, Import::loader, type_name(is_class ? loader.get() : lt));
      }
      Ref locs(spec_attr(spec, plain, sd.get(), NAME("submodule_search_locations")));
      if (locs && (py.PyType_GetFlags(type_of(locs.get())) & TPFLAGS_LIST_SUBCLASS)) {
        Py_ssize_t n = py.PyList_Size(locs.get());
        for (Py_ssize_t i = 0; i < n && i < 64; ++i)
          wire::put_uint(b, Import::search_locations, intern_obj(py.PyList_GetItem(locs.get(), i)));
      }
    }
  }
  if (file != origin) wire::put_uint(b, Import::file, file);
  return file ? file : origin;
}

// `now`: what sys.modules holds under the name (null: nothing); `child`: what the Import
// record just said the import produced (`now` when there is one). The Binding record
// leaves the child (and the time and test, which are the import's) out when they agree.
// `outer`: the import in progress around this one on this thread, if any: usually the
// parent package, whose __init__ imports its children, and then its name is the parent's
// name as a str already.
void record_binding(PyObject* name, uint64_t index, PyObject* now, PyObject* child, const InFlight* outer,
                    char* parent, size_t parent_cap, ParentLookup* out) {
  Py_ssize_t n = 0;
  const char* s = str_utf8(name, &n);
  if (!s) return;
  const char* dot = static_cast<const char*>(memrchr(s, '.', static_cast<size_t>(n)));
  if (!dot) return;
  size_t pl = static_cast<size_t>(dot - s);
  if (pl >= parent_cap) return;
  memcpy(parent, s, pl);
  parent[pl] = 0;
  PyObject* parent_name = nullptr;  // a str of the parent's name, if one is at hand
  if (outer && type_of(outer->name) == py.PyUnicode_Type) {  // a subclass's __eq__ could run code
    Py_ssize_t on = 0;
    const char* os = str_utf8(outer->name, &on);
    if (os && static_cast<size_t>(on) == pl && memcmp(os, s, pl) == 0) parent_name = outer->name;
  }
  TextStrSlot* parent_str = parent_name ? nullptr : text_str(parent, pl);
  PyObject* parent_obj = parent_name ? dict_lookup(g_sysmodules, parent_name) : dict_get_text(g_sysmodules, parent_str, parent);
  out->text = parent;
  out->len = pl;
  // The id now: the text cache's str may be replaced (and freed) by the next text_str.
  out->id = parent_name ? intern_obj(parent_name) : parent_str ? intern_obj(parent_str->str) : TW::intern(parent, pl);
  out->obj = parent_obj;
  if (!parent_obj) return;
  // parent and attribute are the import's name split at its last dot: left out. The
  // parent module's own name and file are left out when it is the plain module named
  // `parent` (its import record has them); then they are not looked up either.
  Ref d;
  ObjInfo pi;
  if (type_of(parent_obj) == py.PyModule_Type) {
    PyObject* pd = py.PyModule_GetDict(parent_obj);
    Py_ssize_t nn = 0;
    const char* pname = pd ? str_utf8(dict_get_n(pd, NAME("__name__")), &nn) : nullptr;
    if (pname && static_cast<size_t>(nn) == pl && memcmp(pname, parent, pl) == 0) {
      pi.id = identity(parent_obj, true);
      pi.flags = ObjectFlags::plain_module | ObjectFlags::elided_name_file;
      py.Py_IncRef(pd);
      d.reset(pd);
    }
  }
  if (!pi.id) pi = describe(parent_obj, nullptr, &d);  // not such a module: all of it
  const char* attr = dot + 1;
  PyObject* val = d ? dict_get_text(d.get(), text_str(attr, static_cast<size_t>(n) - pl - 1), attr) : nullptr;
  uint32_t status = !val ? Binding::MISSING : val != child ? Binding::MISMATCH
                  : (pi.flags & ObjectFlags::proxy) ? Binding::ON_PROXY : Binding::BOUND;
  auto r = TW::begin_record(Record::binding);
  auto& b = TW::buf();
  wire::put_uint(b, Binding::import_index, index);
  put_obj(b, Binding::bound_on, pi);
  if (child && child != now) put_obj(b, Binding::child, describe(child));
  wire::put_uint(b, Binding::status, status);
  if (val && val != child) put_obj(b, Binding::attribute_value, describe(val));
  TW::end_record(r);
}

uint64_t g_syspath_seen = 0;     // signature (list, size, items) of the last sys.path written
PyObject* g_sys_dict = nullptr;  // main interpreter's sys.__dict__ (borrowed from sys, which lives on)

void record_sys_path_if_changed() {
  // sys.path is read at every import: in the main interpreter straight from sys's dict with
  // a cached key (PySys_GetObject builds a new str for its name on each call).
  // 3.8-3.11: while sys's dict keeps its version tag, sys.path is the object found last.
  static PyObject* last_path = nullptr;  // borrowed from sys's dict, while its tag holds
  static uint64_t last_sys_version = 0;
  PyObject* path = nullptr;
  if (g_sys_dict && in_main_interpreter()) {
    uint64_t v = dict_version(g_sys_dict);
    if (v && v == last_sys_version) {
      path = last_path;
    } else {
      path = dict_get_n(g_sys_dict, NAME("path"));
      last_path = path;
      last_sys_version = v;
    }
  } else {
    path = py.PySys_GetObject("path");  // borrowed
  }
  if (!path) return;
  if (!(py.PyType_GetFlags(type_of(path)) & TPFLAGS_LIST_SUBCLASS)) return;
  Py_ssize_t n = 0;
  PyObject* const* items = list_items(path, &n);
  if (!items) n = py.PyList_Size(path);
  uint64_t sig = reinterpret_cast<uintptr_t>(path) * 31 + static_cast<uint64_t>(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    sig = sig * 1000003 + reinterpret_cast<uintptr_t>(items ? items[i] : py.PyList_GetItem(path, i));
  if (sig == g_syspath_seen) return;
  g_syspath_seen = sig;
  auto r = TW::begin_record(Record::sys_path);
  auto& b = TW::buf();
  for (Py_ssize_t i = 0; i < n; ++i) {
    uint32_t id = intern_obj(py.PyList_GetItem(path, i));
    // An empty entry ('' = the working directory) must keep its place in the list.
    wire::put_tag(b, SysPath::entries, wire::VARINT);
    wire::put_varint(b, id);
  }
  wire::put_uint(b, SysPath::time_ns, TW::now_ns());
  TW::end_record(r);
}

// Native stacks use glibc's backtrace(): it unwinds with the libgcc_s that glibc dlopens
// privately (RTLD_LOCAL), so nothing of it joins the host's symbol scope - unlike linking
// libunwind, whose exported _Unwind_* would take over every C++ exception of the host.
constexpr int kNativeDepth = 48;
// dladdr walks the loader's tables for every address; the same return addresses (the
// interpreter's own call chain) come back at every import, so what it said is kept per
// address (direct-mapped, string ids valid for one file generation).
struct NativePc {
  void* pc;
  uint32_t generation, object, symbol;
  uintptr_t offset;
  bool ours;  // a frame of this library: left out
};
constexpr size_t kNativePcs = 4096;
NativePc* g_native_pcs = nullptr;  // allocated on first use (only with native stacks on)

const NativePc* native_pc(void* pc) {
  if (!g_native_pcs) {
    g_native_pcs = static_cast<NativePc*>(calloc(kNativePcs, sizeof(NativePc)));
    if (!g_native_pcs) return nullptr;
  }
  NativePc& e = g_native_pcs[(reinterpret_cast<uintptr_t>(pc) >> 2) & (kNativePcs - 1)];
  if (e.pc == pc && e.generation == TW::strings_epoch()) return &e;
  static Dl_info self;
  static bool self_known = dladdr(reinterpret_cast<void*>(&native_pc), &self) != 0;
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname) return nullptr;
  e.pc = pc;
  e.generation = TW::strings_epoch();
  e.ours = self_known && info.dli_fbase == self.dli_fbase;
  e.object = TW::intern(info.dli_fname);
  e.offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase);
  e.symbol = info.dli_sname ? TW::intern(info.dli_sname) : 0;
  return &e;
}

void put_native_stack(wire::ByteBuf& b, void* const* frames, int n) {
  for (int i = 0; i < n; ++i) {
    // A return address points after the call; -1 keeps it inside the calling function.
    const NativePc* e = native_pc(static_cast<char*>(frames[i]) - 1);
    if (!e || e->ours) continue;
    auto m = wire::begin_message(b, Import::native_stack);
    wire::put_uint(b, NativeFrame::object, e->object);
    wire::put_uint(b, NativeFrame::offset, e->offset);
    wire::put_uint(b, NativeFrame::symbol, e->symbol);
    wire::end_message(b, m);
  }
}

// An Import record's first fields, which every build writes (the floor build below, too).
inline TW::RecordMark begin_import_record(wire::ByteBuf& b, uint64_t index, uint64_t parent, const ThreadState& t,
                                          uint64_t begin, uint64_t end, uint32_t name_id, bool ok) {
  auto r = TW::begin_record(Record::import);
  wire::put_uint(b, Import::index, index);
  wire::put_uint(b, Import::parent, parent);
  if (!t.main_thread) wire::put_uint(b, Import::thread, t.tid);
  wire::put_uint(b, Import::begin_ns, begin);
  wire::put_uint(b, Import::duration_ns, end - begin);
  wire::put_uint(b, Import::name, name_id);
  wire::put_bool(b, Import::ok, ok);
  return r;
}

#ifdef IMPTRACE_FLOOR
// A measurement build (`cmake -DIMPTRACE_FLOOR=ON`, never a build to ship): the import
// hook records only what any import tracer writing as things happen must - each import's
// name, nesting, times, outcome and the identity of the module it produced - and nothing
// of what imptrace is for (importer, spec, bindings, sys.modules history, sys.path,
// proxies). The benchmark runs it as the "floor" contender: what the interposition, the
// clock, interning a name, tracking one identity and one durable record per import cost
// by themselves on the machine at hand, against which the full recorder's cost is read.
// Its traces are valid traces (the viewer shows them) with those parts empty.
PyObject* floor_find_and_load(PyObject* orig, PyObject* const* args, Py_ssize_t nargs) {
  MainScope scope;
  ThreadState& t = ts();
  if (!g_enabled || t.busy || !TW::usable() || nargs < 1 || t.depth >= kMaxDepth)
    return call_original(orig, args, nargs);
  PyObject* name = args[0];
  uint64_t index = __atomic_fetch_add(&g_next_index, 1, __ATOMIC_RELAXED);
  const InFlight* outer = innermost(t);
  uint64_t parent = outer ? outer->index + 1 : 0;
  uint64_t begin = TW::now_ns();
  t.stack[t.depth++] = InFlight{index, name, 0, 0, TW::generation(), false, nullptr};
  PyObject* res = call_original(orig, args, nargs);
  uint64_t end = TW::now_ns();
  --t.depth;
  if (t.stack[t.depth].generation != TW::generation() || !TW::usable()) return res;
  ++t.busy;
  PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
  if (!res) py.PyErr_Fetch(&et, &ev, &tb);  // identity() may make a weak reference
  {
    WriterLock lock;
    auto& b = TW::buf();
    uint32_t name_id = intern_obj(name);
    PyObject* m = res && t_main && g_sysmodules ? dict_lookup(g_sysmodules, name) : nullptr;
    if (!m) m = res;
    ObjInfo obj;
    if (m && type_of(m) == py.PyModule_Type) {
      obj.id = identity(m, true);
      obj.flags = ObjectFlags::plain_module | ObjectFlags::elided_name_file;
    } else if (m) {
      obj = describe(m);
    }
    auto r = begin_import_record(b, index, parent, t, begin, end, name_id, res != nullptr);
    put_obj(b, Import::object, obj);
    TW::end_record(r);
    TW::flush();
  }
  if (!res) py.PyErr_Restore(et, ev, tb);
  --t.busy;
  return res;
}
#endif

PyObject* find_and_load_hook(PyObject* orig, PyObject* const* args, Py_ssize_t nargs) {
#ifdef IMPTRACE_FLOOR
  return floor_find_and_load(orig, args, nargs);
#endif
  MainScope scope;
  ThreadState& t = ts();
  if (!g_enabled || t.busy || !TW::usable() || nargs < 1 || t.depth >= kMaxDepth)
    return call_original(orig, args, nargs);
  SELF_TIMING_START();
  PyObject* name = args[0];
  bool main_interp = t_main != 0;
  bool shadowing = main_interp && !py.has_dict_watchers() && g_sysmodules && !finalizing();
  uint64_t index = __atomic_fetch_add(&g_next_index, 1, __ATOMIC_RELAXED);
  const InFlight* outer = innermost(t);
  uint64_t parent = outer ? outer->index + 1 : 0;
  Loc importer;
  uint32_t begin_name_id = 0;  // the in-flight table's key for this import
  uint32_t begin_epoch = 0;    // ... and the strings epoch it belongs to
  {
    ++t.busy;
    WriterLock lock;
    begin_name_id = intern_obj(name);
    begin_epoch = TW::strings_epoch();
    capture_stack(&importer, 1, true, t.fromlist_depth == t.depth ? t.fromlist_frame : nullptr);
    if (shadowing) shadow_boundary(t, name, begin_name_id, false, t.depth == 0);
    inflight_add(begin_name_id, +1, name);
    record_sys_path_if_changed();
    SELF_TIMING_MARK(0, "begin: stack, shadow, path");
    // No flush here: what this boundary produced goes out with the import's own record
    // (or an inner one's), one commit per import.
    --t.busy;
  }
  void* native[kNativeDepth];
  int nnative = g_native_stacks ? backtrace(native, kNativeDepth) : 0;
  uint64_t begin = TW::now_ns();
  t.stack[t.depth++] = InFlight{index, name, begin_name_id, begin_epoch, TW::generation(), false, nullptr};

  SELF_TIMING_MARK(1, "begin: clock, unlock");
  SELF_TIMING_PAUSE();
  PyObject* res = call_original(orig, args, nargs);
  SELF_TIMING_RESUME();

  uint64_t end = TW::now_ns();
  --t.depth;
  InFlight self = t.stack[t.depth];
  // Begun before a fork, ended in the child: the parent's file has it, not ours.
  if (self.generation != TW::generation() || !TW::usable()) {
    if (self.generation == TW::generation()) {  // else: begun before a fork, see above
      WriterLock lock;
      if (self.name_epoch == TW::strings_epoch()) {
        if (self.inserted) inflight_note_inserted(self.name_id, nullptr);
        inflight_add(self.name_id, -1);
      }
    }
    if (self.inserted) py.Py_DecRef(self.inserted);
    SELF_TIMING_FINISH();
    return res;
  }

  ++t.busy;
  PyObject *et = nullptr, *ev = nullptr, *tb = nullptr;
  if (!res) {
    py.PyErr_Fetch(&et, &ev, &tb);
    py.PyErr_NormalizeException(&et, &ev, &tb);
  }
  {
    WriterLock lock;
    bool same_epoch = self.name_epoch == TW::strings_epoch();
    if (same_epoch) inflight_add(self.name_id, -1);
    // Ids taken at the start are another file's strings after a reset: not written.
    if (!same_epoch) importer = Loc();
    auto& b = TW::buf();
    uint32_t name_id = same_epoch ? self.name_id : intern_obj(name);
    uint32_t test = current_test();
    uint32_t err_type = 0, err_msg = 0;
    ObjInfo obj;
    PyObject* under = nullptr;      // the module: what sys.modules holds, else what came back
    PyObject* in_modules = nullptr;  // what sys.modules holds under the name
    Ref under_dict;
    if (res) {
      in_modules = g_sysmodules && main_interp ? dict_lookup(g_sysmodules, name) : nullptr;
      under = in_modules ? in_modules : res;
      obj = describe(under, nullptr, &under_dict);
    } else {
      describe_error(et, ev, &err_type, &err_msg);
    }
    SELF_TIMING_MARK(2, "end: name, module");
    auto r = begin_import_record(b, index, parent, t, begin, end, name_id, res != nullptr);
    wire::put_uint(b, Import::error_type, err_type);
    wire::put_uint(b, Import::error_message, err_msg);
    if (res) {
      // In an Import, the object's own __name__ and __file__ are left out when they are the
      // import's name and file (the common case); readers fill them back in.
      ObjInfo slim = obj;
      uint32_t file_id = record_spec(b, under_dict.get(), name_id, obj.file);
      if (slim.name == name_id && slim.file == file_id && slim.name) {
        slim.name = slim.file = 0;
        slim.flags |= ObjectFlags::elided_name_file;
      }
      put_obj(b, Import::object, slim);
    }
    put_loc(b, Import::importer, importer);
    wire::put_uint(b, Import::test, test);
    if (!main_interp) {
      int64_t id = py.PyInterpreterState_GetID(py.PyInterpreterState_Get());
      wire::put_uint(b, Import::interpreter, static_cast<uint64_t>(id));
    }
    if (nnative > 0) put_native_stack(b, native, nnative);
    TW::end_record(r);
    SELF_TIMING_MARK(3, "end: spec, import record");
    if (main_interp && g_sysmodules) {
      char parent_text[1024];
      ParentLookup parent;
      if (res) record_binding(name, index, in_modules, under, innermost(t), parent_text, sizeof parent_text, &parent);
      SELF_TIMING_MARK(4, "end: binding");
      if (shadowing)
        shadow_boundary(t, name, name_id, true, t.depth == 0, res ? &obj : nullptr, &parent,
                        res ? &in_modules : nullptr, self.inserted);
      SELF_TIMING_MARK(5, "end: shadow");
      if (res && g_proxies) {
        maybe_instrument(under, obj);
        observe_module(under);
      }
      if (res) after_main_import(name, under);
      // Top-level imports are where a program's phases change (pytest collecting test
      // modules in an xdist worker that has just set PYTEST_XDIST_WORKER): re-read the
      // allow-listed environment there, not at every import.
      if (t.depth == 0) TW::record_env_changes();
    }
    if (self.inserted && same_epoch) inflight_note_inserted(self.name_id, nullptr);
    SELF_TIMING_MARK(6, "end: proxies, env");
    TW::flush();
    SELF_TIMING_MARK(7, "end: commit to file");
  }
  // Outside the lock, with no error pending: this may be the last reference.
  if (self.inserted) py.Py_DecRef(self.inserted);
  if (!res) py.PyErr_Restore(et, ev, tb);
  --t.busy;
  SELF_TIMING_FINISH();
  return res;
}

PyMethodDef g_find_and_load_def = {
    "_find_and_load", reinterpret_cast<void*>(find_and_load_hook), METH_FASTCALL,
    "imptrace: records the import, then runs importlib's _find_and_load"};

// ---- installation -------------------------------------------------------------------
#ifdef IMPTRACE_FLOOR
constexpr bool kFloor = true;
#else
constexpr bool kFloor = false;
#endif
// Interpreters are told apart by id, never by address: a new sub-interpreter usually
// gets the memory of one that was destroyed. Ids are never reused.
int64_t* g_installed = nullptr;
size_t g_n_installed = 0, g_cap_installed = 0;
bool g_main_installed = false;

bool installed_in(int64_t id) {
  if (id == 0) return g_main_installed;
  for (size_t i = g_n_installed; i > 0; --i)  // newest first: the common hit
    if (g_installed[i - 1] == id) return true;
  return false;
}

void remember_installed(int64_t id) {
  if (id == 0) { g_main_installed = true; return; }
  if (g_n_installed == g_cap_installed) {
    size_t cap = g_cap_installed ? g_cap_installed * 2 : 16;
    auto* n = static_cast<int64_t*>(realloc(g_installed, cap * sizeof(int64_t)));
    if (!n) return;
    g_installed = n;
    g_cap_installed = cap;
  }
  g_installed[g_n_installed++] = id;
}

void install_in_current_interpreter() {
  void* interp = py.PyInterpreterState_Get();
  int64_t id = py.PyInterpreterState_GetID(interp);
  if (id < 0) { py.PyErr_Clear(); return; }
  if (installed_in(id)) return;
  PyObject* modules = py.PyImport_GetModuleDict();
  if (!modules) return;
  PyObject* bootstrap = dict_get_n(modules, NAME("_frozen_importlib"));
  if (!bootstrap) return;  // too early: try again at the next event
  PyObject* d = py.PyModule_GetDict(bootstrap);
  PyObject* orig = d ? dict_get_n(d, NAME("_find_and_load")) : nullptr;
  if (!orig) { py.PyErr_Clear(); return; }
  Ref hook(py.PyCFunction_NewEx(&g_find_and_load_def, orig, nullptr));
  if (!hook || py.PyDict_SetItemString(d, "_find_and_load", hook.get()) < 0) {
    py.PyErr_Clear();
    return;
  }
  // Optional: without it, importers are found by walking the stack. (The floor build
  // records no importers, nor the history of sys.modules below.)
  if (PyObject* fromlist = kFloor ? nullptr : dict_get_n(d, NAME("_handle_fromlist"))) {
    Ref fl_hook(py.PyCFunction_NewEx(&g_handle_fromlist_def, fromlist, nullptr));
    if (!fl_hook || py.PyDict_SetItemString(d, "_handle_fromlist", fl_hook.get()) < 0) py.PyErr_Clear();
  }
  remember_installed(id);
  if (interp == py.PyInterpreterState_Main()) {
    g_main_interp = interp;
    g_modulespec_type = py.PyDict_GetItemString(d, "ModuleSpec");
    PyObject* sys_module = py.PyDict_GetItemString(modules, "sys");
    if (sys_module) g_sys_dict = py.PyModule_GetDict(sys_module);
    if (g_modulespec_type) py.Py_IncRef(g_modulespec_type);  // deliberate: process lifetime
    g_sysmodules = modules;
    py.Py_IncRef(modules);  // deliberate: we compare against it for the process lifetime
    probe_dict_version();
    probe_str_layout();
    if (!g_orig_class_setter) g_orig_class_setter = patch_class_setter(class_setter_hook);
    if (!g_orig_module_dealloc) g_orig_module_dealloc = patch_module_dealloc(module_dealloc_hook);
    audit_hook_step_out();
    if (kFloor) {
      // nothing: the floor build keeps no history of sys.modules
    } else if (py.has_dict_watchers()) {
      int id = py.PyDict_AddWatcher(modules_watcher);
      if (id < 0 || py.PyDict_Watch(id, modules) < 0) py.PyErr_Clear();
    } else if (!g_orig_ass_subscript) {
      g_orig_ass_subscript = patch_dict_ass_subscript(dict_ass_subscript_hook);
    }
  }
}

// The audit hook entry was allocated with the raw allocator in force before
// Py_Initialize; -X dev / PYTHONMALLOC=debug install a different one later and would
// abort freeing it ("bad ID"). So the entry is allocated with plain malloc (recorded
// below) and, when the hooks are about to be freed, the raw allocator is wrapped for the
// moment it takes to hand exactly that pointer back to free().
PyMemAllocatorEx g_raw_before;  // the allocator to forward to

void* rec_malloc(void*, size_t n) { void* p = malloc(n); if (!g_hook_entry) g_hook_entry = p; return p; }
void* rec_calloc(void*, size_t a, size_t b) { return calloc(a, b); }
void* rec_realloc(void*, void* p, size_t n) { return realloc(p, n); }
void rec_free(void*, void* p) { free(p); }

void* fwd_malloc(void*, size_t n) { return g_raw_before.malloc(g_raw_before.ctx, n); }
void* fwd_calloc(void*, size_t a, size_t b) { return g_raw_before.calloc(g_raw_before.ctx, a, b); }
void* fwd_realloc(void*, void* p, size_t n) { return g_raw_before.realloc(g_raw_before.ctx, p, n); }
void fwd_free(void*, void* p) {
  if (p && p == g_hook_entry) {
    free(p);
    g_hook_entry = nullptr;
    py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &g_raw_before);  // done: step out of the way
    return;
  }
  g_raw_before.free(g_raw_before.ctx, p);
}

int audit_hook(const char* event, PyObject* args, void*) {
  if (event[0] == 'o' && event[1] == 's' && strcmp(event, "os.exec") == 0) {
    if (!g_exec_wrapped) before_exec();
    return 0;
  }
  if (event[0] == 'o' && strcmp(event, "object.__setattr__") == 0) {
    if (g_orig_class_setter) return 0;  // the setter hook records it
    if (py.PyTuple_Size(args) != 3) { py.PyErr_Clear(); return 0; }
    PyObject* attr = py.PyTuple_GetItem(args, 1);
    Py_ssize_t n = 0;
    const char* a = str_utf8(attr, &n);
    if (a && n == 9 && memcmp(a, "__class__", 9) == 0)
      note_class_assignment(py.PyTuple_GetItem(args, 0), py.PyTuple_GetItem(args, 2));
    py.PyErr_Clear();
    return 0;
  }
  if (event[0] == 'i' && strcmp(event, "import") == 0) {
    ThreadState& t = ts();
    if (!g_enabled || t.busy) return 0;
    ++t.busy;
    PyObject *et, *ev, *tb;
    py.PyErr_Fetch(&et, &ev, &tb);
    install_in_current_interpreter();
    py.PyErr_Restore(et, ev, tb);
    --t.busy;
  } else if (event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0) {
    g_finalizing = true;
    {
      WriterLock lock;
      TW::flush();
    }
    if (g_hook_entry) {
      py.PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &g_raw_before);
      PyMemAllocatorEx filter = {nullptr, fwd_malloc, fwd_calloc, fwd_realloc, fwd_free};
      py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &filter);
    }
  }
  return 0;
}

// In a fork child the forking thread is the main thread, with a new id. (The in-flight
// table, keyed by the parent file's string ids, empties itself at its next use: the fork
// moved the strings epoch; see inflight_follow_epoch.)
void forget_thread_id_in_child() { t_state.tid = 0; }

bool env_true(const char* name) {
  const char* v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

}  // namespace
}  // namespace imptrace

using namespace imptrace;

__attribute__((constructor)) static void imptrace_start() {
  // Setuid/secure-execution processes: the loader already drops LD_PRELOAD there, but a
  // library reached another way must not write files on behalf of a privileged process.
  if (getauxval(AT_SECURE)) return;
  if (env_true("IMPTRACE_DISABLE")) return;
  if (!resolve_cpython_api()) return;
  if (py.Py_IsInitialized()) return;  // loaded late (dlopen into a running interpreter)
  const char* p = getenv("IMPTRACE_PROXIES");
  g_proxies = !(p && strcmp(p, "0") == 0);
  g_native_stacks = env_true("IMPTRACE_NATIVE_STACKS");
  g_keep_audit_hook = env_true("IMPTRACE_AUDIT_HOOK");
  if (g_native_stacks) {
    void* warm[4];
    backtrace(warm, 4);  // loads libgcc_s now, not inside the first import
  }
  TraceWriter::init();
  pthread_atfork(nullptr, nullptr, forget_thread_id_in_child);

  PyMemAllocatorEx before;
  py.PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &before);
  PyMemAllocatorEx recording = {nullptr, rec_malloc, rec_calloc, rec_realloc, rec_free};
  py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &recording);
  int rc = py.PySys_AddAuditHook(audit_hook, nullptr);
  py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &before);
  if (rc != 0) return;
  g_enabled = true;
}
