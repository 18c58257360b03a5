#include "string_interning.h"

#include <string.h>

#include "hash.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

// Most strings the tracer interns are the same str objects again and again (a module's
// __name__, its spec's origin, a code object's co_filename): a direct-mapped cache from
// the object to its id skips converting and hashing them.
constexpr size_t kStrCache = 4096;
struct StrCacheSlot { PyObject* str; uint32_t id; uint32_t generation; };

// The binding of `a.b.c` looks up "a.b" in sys.modules and "c" in its dict: keys the
// tracer has as text. Siblings share the parent and names repeat, so a direct-mapped cache
// keeps those str objects instead of building (and hashing) one per lookup.
constexpr size_t kTextStrCache = 1024;

struct StringCaches {
  StrCacheSlot by_object[kStrCache];
  TextStrSlot by_text[kTextStrCache];
};
StringCaches g_caches;

}  // namespace

uint32_t intern_obj(PyObject* s, bool fill) {
  if (!s) return 0;
  bool cacheable = in_main_interpreter();
  StrCacheSlot* slot = nullptr;
  if (cacheable) {
    slot = &g_caches.by_object[(reinterpret_cast<uintptr_t>(s) >> 4) & (kStrCache - 1)];
    if (slot->str == s && slot->generation == TraceWriter::strings_epoch() && slot->id) return slot->id;
  }
  Py_ssize_t n = 0;
  const char* p = str_utf8(s, &n);
  uint32_t id = p ? TraceWriter::intern(p, static_cast<size_t>(n)) : 0;
  if (slot && id && fill) {
    py.Py_IncRef(s);
    PyObject* old = slot->str;
    *slot = StrCacheSlot{s, id, TraceWriter::strings_epoch()};
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

TextStrSlot* text_str(const char* text, size_t n) {
  if (n > sizeof g_caches.by_text[0].text || !in_main_interpreter()) return nullptr;
  uint64_t h = hash_bytes(text, n);
  TextStrSlot& slot = g_caches.by_text[(h >> 1) & (kTextStrCache - 1)];  // bit 0 is always 1
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

void forget_lifetime_strings() { memset(&g_caches, 0, sizeof g_caches); }

}  // namespace imptrace
