#include "string_interning.h"

#include <string.h>

#include "hash.h"
#include "trace_writer.h"
#include "tracer_memory.h"

namespace imptrace {
namespace {

// Most strings the tracer interns are the same str objects again and again (a module's
// __name__, its spec's origin, a code object's co_filename): a direct-mapped cache from
// the object to its id skips converting and hashing them. It holds no reference: a slot
// is believed only while the object at that address still carries the hash CPython cached
// in it when the slot was filled. A str CPython has not hashed (a spec's origin, met once
// or twice) is not cached: hashing it here would write into the program's object, and
// measured dearer than interning it again. A reference would keep every slot's str alive,
// and replacing it would write to a str last touched imports ago: on a long run of
// distinct names (a file of 20,000 imports) that decrement was a cache miss per import.
// A different str reusing the address with the same 64-bit hash would need a hash
// collision at that address.
constexpr size_t kStrCache = 4096;
struct StrCacheSlot { PyObject* str; int64_t hash; uint32_t id; uint32_t generation; };

// The binding of `a.b.c` looks up "a.b" in sys.modules and "c" in its dict: keys the
// tracer has as text. Siblings share the parent and names repeat, so a direct-mapped cache
// keeps those str objects instead of building (and hashing) one per lookup. A text is
// kept from its second miss on: the first only notes its hash in the slot, and its str
// is freed by the caller while still warm. Each of a long run of distinct names ("c" of
// 20,000 siblings) would otherwise push a repeating one out, and freeing that one later
// touched memory long gone from the caches.
constexpr size_t kTextStrCache = 1024;
struct TextStrSlot {
  uint64_t hash;       // of the text kept, when str is set
  uint64_t seen_hash;  // of the last text missed here and not kept
  PyObject* str;       // a reference, the slot's own
  uint8_t len;
  char text[47];
};

struct StringCaches {
  StrCacheSlot by_object[kStrCache];
  TextStrSlot by_text[kTextStrCache];
};
StringCaches g_caches;

}  // namespace

uint32_t intern_obj(PyObject* s, bool fill) {
  if (!s) return 0;
  StrCacheSlot* slot = nullptr;
  int64_t h = in_main_interpreter() ? str_cached_hash(s) : -1;
  if (h != -1) {
    slot = &g_caches.by_object[(reinterpret_cast<uintptr_t>(s) >> 4) & (kStrCache - 1)];
    if (slot->str == s && slot->hash == h && slot->generation == TraceWriter::strings_epoch() && slot->id)
      return slot->id;
  }
  Py_ssize_t n = 0;
  const char* p = str_utf8(s, &n);
  uint32_t id = p ? TraceWriter::intern(p, static_cast<size_t>(n)) : 0;
  if (slot && id && fill) *slot = StrCacheSlot{s, h, id, TraceWriter::strings_epoch()};
  return id;
}

bool same_text(PyObject* a, PyObject* b) {
  if (a == b) return true;
  Py_ssize_t na = 0, nb = 0;
  const char* pa = str_utf8(a, &na);
  const char* pb = str_utf8(b, &nb);
  return pa && pb && na == nb && memcmp(pa, pb, static_cast<size_t>(na)) == 0;
}

TextStr text_str(const char* text, size_t n) {
  if (n > sizeof g_caches.by_text[0].text || !in_main_interpreter()) return TextStr();
  uint64_t h = hash_bytes(text, n);
  TextStrSlot& slot = g_caches.by_text[(h >> 1) & (kTextStrCache - 1)];  // bit 0 is always 1
  if (slot.str && slot.hash == h && slot.len == n && memcmp(slot.text, text, n) == 0) return TextStr(slot.str, false);
  PyObject* o = py.PyUnicode_FromStringAndSize(text, static_cast<Py_ssize_t>(n));
  if (!o) { py.PyErr_Clear(); return TextStr(); }
  if (slot.seen_hash != h) {  // first miss: the caller's, freed after its lookup
    slot.seen_hash = h;
    return TextStr(o, true);
  }
  PyObject* old = slot.str;
  slot.hash = h;
  slot.seen_hash = 0;
  slot.str = o;
  slot.len = static_cast<uint8_t>(n);
  memcpy(slot.text, text, n);
  if (old) py.Py_DecRef(old);
  return TextStr(o, false);
}

void forget_lifetime_strings() { tracer_memory::clear_static(&g_caches, sizeof g_caches); }

void populate_string_caches() { tracer_memory::populate(&g_caches, sizeof g_caches); }

}  // namespace imptrace
