#include "code_location.h"

#include <string.h>

#include "hash.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"
#include "tracer_memory.h"

namespace imptrace {
namespace {

// Every frame of importlib's bootstrap is "<frozen importlib._bootstrap>" or
// "<frozen importlib._bootstrap_external>"; a source importlib (python -X frozen_modules=off,
// or a build without frozen modules) lives in a directory of that name.
constexpr char kFrozenImportlib[] = "<frozen importlib";
constexpr char kImportlibDir[] = "/importlib/";

bool is_importlib_file(const char* f) {
  return strncmp(f, kFrozenImportlib, sizeof kFrozenImportlib - 1) == 0 || strstr(f, kImportlibDir) != nullptr;
}

// What a code object says about where it is: file and function ids, and whether it is
// importlib's own. Code objects repeat (every frame of importlib, a package's __init__
// importing its children one after another), so a small cache keyed by the code object
// skips two attribute lookups and a path scan per frame. It holds a reference to each
// cached code object so that an address keeps meaning the same code; a finished module's
// body is let go at the end of its import (release_code_if_unused), other code objects
// stay alive until evicted (at most kCodeCache of them).
struct CodeInfo {
  PyObject* code = nullptr;
  uint32_t file = 0, func = 0, generation = 0;
  bool importlib = false;
  // A __getattr__ (the last part of its qualified name, so lazy_loader's
  // `attach.<locals>.__getattr__` counts; a class's __getattr__ does too, as it must on
  // 3.8-3.10, whose code objects have no qualified name).
  bool getattr_hook = false;
  LineCursor lines;  // usable only in a cached entry (which keeps the code alive)
};
// Set-associative, 4 ways, the set chosen by a hash of the address. Every import asks about
// four code objects or so (importlib's frames, the importer's, the caller of the
// sys.modules store). Direct-mapped by the address's low bits, entries that shared a slot
// evicted each other (on the 5,000-module tree under Debian's 3.11, two lookups in five
// missed), and each miss cost the description again plus the importer's line cursor,
// rescanned from the start of its line table: thousands of instructions per import,
// depending on where the interpreter happened to allocate its code objects. A miss
// replaces the set's ways in turn. The ways' keys sit together (half a cache line), so a
// lookup reads one line of keys and then the one entry it found.
constexpr size_t kCodeWays = 4;
constexpr size_t kCodeSets = 64;
constexpr size_t kCodeCache = kCodeWays * kCodeSets;
struct CodeSetKeys {
  PyObject* code[kCodeWays];  // slots' code objects, copied here for the lookup
};
// An entry's storage with no initialiser of its own: with CodeInfo's default member
// values, 256 entries made the compiler initialise the cache with code run at load, in
// every process the library is preloaded into (16 KiB of stores and four page faults per
// spawn of /bin/true). Zero-initialised instead, as static storage is: an entry is read
// only once its key matched, after code_info filled it.
union CodeSlot {
  CodeInfo info;
  CodeSlot() {}
};
// Aligned so that each entry (64 bytes on the 64-bit targets) is one cache line, not two.
struct alignas(64) CodeCache {
  CodeSetKeys keys[kCodeSets];
  uint8_t next_victim[kCodeSets];
  CodeSlot slots[kCodeSets][kCodeWays];
};
CodeCache g_code_cache;

PyObject* code_function_name(PyObject* code) {  // new reference or null
  return field_n(code, py.minor >= 11 ? NAME("co_qualname") : NAME("co_name"));
}

long firstlineno(PyObject* code) {
  Ref v(field_n(code, NAME("co_firstlineno")));
  long line = v ? py.PyLong_AsLong(v.get()) : -1;
  if (line < 0) py.PyErr_Clear();
  return line;
}

CodeInfo describe_code(PyObject* code) {
  CodeInfo ci;
  Ref fn(field_n(code, NAME("co_filename")));
  Ref nm(code_function_name(code));
  Py_ssize_t fl = 0;
  const char* file = str_utf8(fn.get(), &fl);
  ci.importlib = file && is_importlib_file(file);
  Py_ssize_t nl = 0;
  const char* name = str_utf8(nm.get(), &nl);
  constexpr char kGetattr[] = "__getattr__";
  constexpr Py_ssize_t kGetattrLen = sizeof kGetattr - 1;
  ci.getattr_hook = name && nl >= kGetattrLen && memcmp(name + nl - kGetattrLen, kGetattr, kGetattrLen) == 0 &&
                    (nl == kGetattrLen || name[nl - kGetattrLen - 1] == '.');
  ci.file = intern_obj(fn.get());
  ci.func = intern_obj(nm.get());
  return ci;
}

size_t code_set(PyObject* code) { return (hash_address(reinterpret_cast<uintptr_t>(code)) >> 32) & (kCodeSets - 1); }

// The cache entry for `code`, or (sub-interpreters) `scratch` filled in.
CodeInfo& code_info(PyObject* code, CodeInfo& scratch) {
  if (!in_main_interpreter()) return scratch = describe_code(code);
  size_t set = code_set(code);
  CodeSetKeys& keys = g_code_cache.keys[set];
  for (size_t w = 0; w < kCodeWays; ++w) {
    if (keys.code[w] != code) continue;
    CodeInfo& hit = g_code_cache.slots[set][w].info;
    if (hit.generation == TraceWriter::strings_epoch()) return hit;
  }
  size_t way = 0;
  while (way < kCodeWays && keys.code[way] != code) ++way;  // a stale entry for this code
  if (way == kCodeWays) {
    way = 0;
    while (way < kCodeWays && keys.code[way]) ++way;  // a way released at an import's end
  }
  if (way == kCodeWays) {
    way = g_code_cache.next_victim[set];
    g_code_cache.next_victim[set] = static_cast<uint8_t>((way + 1) % kCodeWays);
  }
  CodeInfo& slot = g_code_cache.slots[set][way].info;
  CodeInfo ci = describe_code(code);
  py.Py_IncRef(code);
  PyObject* old = slot.code;
  slot = ci;
  slot.code = code;
  keys.code[way] = code;
  slot.generation = TraceWriter::strings_epoch();
  if (!ci.importlib && line_format() != LineFormat::none) {
    Ref table(field_n(code, line_format() == LineFormat::lnotab ? NAME("co_lnotab") : NAME("co_linetable")));
    if (table) line_cursor_init(slot.lines, table.get(), firstlineno(code));
  }
  if (old) py.Py_DecRef(old);
  return slot;
}

}  // namespace

namespace {

// Where the walk stands, as a CodeLocation.
void locate(const FrameWalk& w, CodeInfo& ci, CodeLocation* out) {
  out->file = ci.file;
  out->function = ci.func;
  int line = w.line(ci.lines.table ? &ci.lines : nullptr);
  out->line = line > 0 ? static_cast<uint32_t>(line) : 0;
  out->importlib = ci.importlib;
}

}  // namespace

namespace {

int capture_walk(FrameWalk& w, CodeLocation* out, int max, bool skip_importlib) {
  int n = 0;
  CodeInfo scratch;  // (sub-interpreters) out of the loop: it is zeroed where declared
  for (int guard = 0; !w.done() && n < max && guard < 256; ++guard) {
    if (PyObject* code = w.code()) {  // borrowed
      CodeInfo& ci = code_info(code, scratch);
      if (!(skip_importlib && ci.importlib)) {
        locate(w, ci, &out[n++]);
        if (n == max) break;  // 3.14+ makes a frame object for every frame it is asked about
      }
    }
    w.next();
  }
  return n;
}

}  // namespace

int capture_stack(CodeLocation* out, int max, bool skip_importlib) {
  FrameWalk w;
  return capture_walk(w, out, max, skip_importlib);
}

bool capture_importer(CodeLocation* importer, CodeLocation* trigger, const void* fromlist_frame,
                      PyObject** importer_code) {
  FrameWalk w;
  CodeLocation* want = importer;
  CodeInfo scratch;  // (sub-interpreters) out of the loop: it is zeroed where declared
  for (int guard = 0; !w.done() && guard < 256; ++guard, w.next()) {
    PyObject* code = w.code();  // borrowed
    if (!code) continue;
    CodeInfo& ci = code_info(code, scratch);
    if (want == importer && fromlist_frame && w.at(fromlist_frame)) {
      // The `from ... import` whose fromlist importlib is serving: its own frame is the
      // importer, wherever the walk stands (nothing in between was outside importlib).
      locate(w, ci, importer);
      if (importer_code && !ci.importlib) *importer_code = code;
      return true;
    }
    if (ci.importlib) continue;
    locate(w, ci, want);
    if (want == importer && importer_code) *importer_code = code;
    if (want == trigger) return true;
    if (!ci.getattr_hook) {
      // Code reached from a `from ... import` other than through importlib (a lazy
      // attribute's descriptor, as six.moves has): that line triggered it.
      if (fromlist_frame) {
        FrameWalk from(fromlist_frame);
        capture_walk(from, trigger, 1, false);
      }
      return true;
    }
    want = trigger;  // a package's __getattr__: go on to what asked it
  }
  return want != importer;
}

PyObject* release_code_if_unused(PyObject* code) {
  if (!in_main_interpreter()) return nullptr;
  // Only a pointer the cache holds is read: the code's own reference keeps it valid.
  size_t set = code_set(code);
  CodeSetKeys& keys = g_code_cache.keys[set];
  for (size_t w = 0; w < kCodeWays; ++w) {
    if (keys.code[w] != code) continue;
    if (refcount(code) != 1) return nullptr;
    CodeInfo& slot = g_code_cache.slots[set][w].info;
    keys.code[w] = nullptr;
    slot.code = nullptr;
    slot.generation = 0;
    slot.lines = LineCursor();
    return code;
  }
  return nullptr;
}

bool caller_is_importlib() {
  FrameWalk w;
  PyObject* code = w.code();  // borrowed
  if (!code) return false;
  CodeInfo scratch;
  return code_info(code, scratch).importlib;
}

CodeLocation function_location(PyObject* fn) {
  CodeLocation l;
  if (!fn) return l;
  Ref code(field_n(fn, NAME("__code__")));
  if (!code) return l;
  Ref file(field_n(code.get(), NAME("co_filename")));
  Ref name(code_function_name(code.get()));
  long line = firstlineno(code.get());
  l.file = intern_obj(file.get());
  l.function = intern_obj(name.get());
  if (line > 0) l.line = static_cast<uint32_t>(line);
  return l;
}

void forget_lifetime_code() {
  // Back to static storage's zeros, which the cache starts from (see CodeSlot).
  tracer_memory::clear_static(&g_code_cache, sizeof g_code_cache);
}

void populate_code_cache() { tracer_memory::populate(&g_code_cache, sizeof g_code_cache); }

}  // namespace imptrace
