#include "code_location.h"

#include <string.h>

#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"

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
// cached code object so that an address keeps meaning the same code (deliberate: at most
// kCodeCache code objects stay alive a while longer).
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
constexpr size_t kCodeCache = 128;
struct CodeCache {
  CodeInfo slots[kCodeCache];
};
CodeCache g_code_cache;

CodeInfo describe_code(PyObject* code) {
  CodeInfo ci;
  Ref fn(getattr_n(code, NAME("co_filename")));
  Ref nm(getattr_n(code, py.minor >= 11 ? NAME("co_qualname") : NAME("co_name")));
  if (!fn || !nm) py.PyErr_Clear();
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

// The cache entry for `code`, or (sub-interpreters) `scratch` filled in.
CodeInfo& code_info(PyObject* code, CodeInfo& scratch) {
  if (!in_main_interpreter()) return scratch = describe_code(code);
  CodeInfo& slot = g_code_cache.slots[(reinterpret_cast<uintptr_t>(code) >> 4) & (kCodeCache - 1)];
  if (slot.code == code && slot.generation == TraceWriter::strings_epoch()) return slot;
  CodeInfo ci = describe_code(code);
  py.Py_IncRef(code);
  PyObject* old = slot.code;
  slot = ci;
  slot.code = code;
  slot.generation = TraceWriter::strings_epoch();
  if (!ci.importlib && line_format() != LineFormat::none) {
    Ref table(getattr_n(code, line_format() == LineFormat::lnotab ? NAME("co_lnotab") : NAME("co_linetable")));
    Ref first(table ? getattr_n(code, NAME("co_firstlineno")) : nullptr);
    if (!first) py.PyErr_Clear();
    line_cursor_init(slot.lines, table.get(), first.get());
  }
  if (old) py.Py_DecRef(old);
  return slot;
}

}  // namespace

int capture_stack(CodeLocation* out, int max, bool skip_importlib, PyObject* start) {
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
        CodeLocation& l = out[n++];
        l.file = ci.file;
        l.function = ci.func;
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

bool capture_importer(CodeLocation* importer, CodeLocation* trigger, PyObject* fromlist_frame) {
  PyObject* f = py.PyEval_GetFrame();  // borrowed
  if (!f) return false;
  py.Py_IncRef(f);
  Ref frame(f);
  CodeLocation* want = importer;
  for (int guard = 0; frame && guard < 256; ++guard) {
    if (frame.get() == fromlist_frame && want == importer) {
      // The `from ... import` whose fromlist importlib is serving: its own frame is the
      // importer, wherever the walk stands (nothing in between was outside importlib).
      return capture_stack(importer, 1, false, fromlist_frame) == 1;
    }
    Ref code(frame_code(frame.get()));
    if (code) {
      CodeInfo scratch;
      CodeInfo& ci = code_info(code.get(), scratch);
      if (!ci.importlib) {
        want->file = ci.file;
        want->function = ci.func;
        int line = frame_line(frame.get(), ci.lines.table ? &ci.lines : nullptr);
        want->line = line > 0 ? static_cast<uint32_t>(line) : 0;
        if (want == trigger) return true;
        if (!ci.getattr_hook) {
          // Code reached from a `from ... import` other than through importlib (a lazy
          // attribute's descriptor, as six.moves has): that line triggered it.
          if (fromlist_frame) capture_stack(trigger, 1, false, fromlist_frame);
          return true;
        }
        want = trigger;  // a package's __getattr__: go on to what asked it
      }
    } else {
      py.PyErr_Clear();
    }
    frame.reset(frame_back(frame.get()));
  }
  return want != importer;
}

bool caller_is_importlib() {
  PyObject* f = py.PyEval_GetFrame();  // borrowed
  if (!f) return false;
  Ref code(frame_code(f));
  if (!code) { py.PyErr_Clear(); return false; }
  CodeInfo scratch;
  return code_info(code.get(), scratch).importlib;
}

CodeLocation function_location(PyObject* fn) {
  CodeLocation l;
  if (!fn) return l;
  Ref code(getattr_n(fn, NAME("__code__")));
  if (!code) { py.PyErr_Clear(); return l; }
  Ref file(getattr_n(code.get(), NAME("co_filename")));
  Ref line(getattr_n(code.get(), NAME("co_firstlineno")));
  Ref name(getattr_n(code.get(), py.minor >= 11 ? NAME("co_qualname") : NAME("co_name")));
  if (!file || !line || !name) py.PyErr_Clear();
  l.file = intern_obj(file.get());
  l.function = intern_obj(name.get());
  if (line) { long v = py.PyLong_AsLong(line.get()); if (v > 0) l.line = static_cast<uint32_t>(v); else py.PyErr_Clear(); }
  return l;
}

void forget_lifetime_code() {
  for (CodeInfo& c : g_code_cache.slots) c = CodeInfo();
}

}  // namespace imptrace
