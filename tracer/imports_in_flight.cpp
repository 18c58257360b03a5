#include "imports_in_flight.h"

#include <string.h>

#include "thread_state.h"
#include "trace_writer.h"
#include "tracer_memory.h"

namespace imptrace {
namespace {

// A small linear-probing table keyed by string id, holding only the names in flight. An
// entry whose count drops to 0 is removed and the ones after it in its run moved back, so
// that a lookup of a name not in flight stops at the first empty slot: leaving them in
// place filled the table with ended names within a thousand imports, and every such
// lookup then read all of it.
constexpr size_t kInFlightSlots = 1024;
struct InFlightTable {
  uint32_t id[kInFlightSlots];  // 0: empty
  uint32_t count[kInFlightSlots];
  PyObject* inserted[kInFlightSlots];  // InFlight::inserted of the name's import (borrowed)
  // The name as a str, borrowed from the import that made the entry (its caller's frame
  // keeps it alive); dropped at the first end of an import of that name, which may be that
  // one's (main interpreter only).
  PyObject* name[kInFlightSlots];
  uint32_t active[kInFlightSlots];  // the ids in the table, unordered: [0, used)
  size_t used;
  uint32_t strings_epoch;  // the TraceWriter::strings_epoch() its ids belong to
};
InFlightTable g_inflight;

// Ids of an earlier epoch (strings dropped after running out of memory; a fork child's
// new file) name other strings now: the table starts empty, and imports begun before
// leave it alone when they end (their InFlight::name_epoch is the old one).
__attribute__((noinline, cold)) void inflight_reset() {
  tracer_memory::clear_static(&g_inflight, sizeof g_inflight);
  g_inflight.strings_epoch = TraceWriter::strings_epoch();
}
inline void inflight_follow_epoch() {
  if (__builtin_expect(g_inflight.strings_epoch != TraceWriter::strings_epoch(), 0)) inflight_reset();
}

// The slot holding `id`, or (when it is not there) the empty slot where it would go.
size_t inflight_probe(uint32_t id) {
  inflight_follow_epoch();
  size_t j = id & (kInFlightSlots - 1);
  while (g_inflight.id[j] && g_inflight.id[j] != id) j = (j + 1) & (kInFlightSlots - 1);
  return j;
}

__attribute__((noinline)) void inflight_erase(size_t i) {
  InFlightTable& t = g_inflight;
  for (;;) {
    t.id[i] = 0;
    t.count[i] = 0;
    t.inserted[i] = nullptr;
    t.name[i] = nullptr;
    size_t k = i;
    for (;;) {
      k = (k + 1) & (kInFlightSlots - 1);
      if (!t.id[k]) return;
      size_t home = t.id[k] & (kInFlightSlots - 1);
      // The entry at k may fill the hole at i unless its home lies cyclically in (i, k].
      bool stays = i <= k ? (i < home && home <= k) : (i < home || home <= k);
      if (!stays) break;
    }
    t.id[i] = t.id[k];
    t.count[i] = t.count[k];
    t.inserted[i] = t.inserted[k];
    t.name[i] = t.name[k];
    i = k;
  }
}

}  // namespace

void inflight_add(uint32_t id, int delta, PyObject* name) {
  if (!id) return;
  InFlightTable& t = g_inflight;
  size_t j = inflight_probe(id);
  if (!t.id[j]) {
    if (delta < 0) return;
    if (t.used >= kInFlightSlots - 1) return;  // full: not tracked
    t.id[j] = id;
    if (name && in_main_interpreter()) t.name[j] = name;
    t.active[t.used++] = id;
  }
  t.count[j] = static_cast<uint32_t>(static_cast<int>(t.count[j]) + delta);
  if (delta < 0) t.name[j] = nullptr;
  if (!t.count[j]) {
    inflight_erase(j);
    for (size_t a = 0; a < t.used; ++a)
      if (t.active[a] == id) {
        t.active[a] = t.active[--t.used];
        break;
      }
  }
}

bool name_in_flight(uint32_t id, PyObject** inserted) {
  if (!id) return false;
  size_t j = inflight_probe(id);
  if (!g_inflight.id[j]) return false;
  if (g_inflight.inserted[j]) *inserted = g_inflight.inserted[j];
  return true;
}

void inflight_note_inserted(uint32_t id, PyObject* value) {
  if (!id) return;
  size_t j = inflight_probe(id);
  if (g_inflight.id[j]) g_inflight.inserted[j] = value;
}

size_t inflight_count() { return g_inflight.used; }

bool inflight_name_at(size_t active_index, InFlightName* out) {
  uint32_t id = g_inflight.active[active_index];
  size_t j = inflight_probe(id);
  PyObject* name = g_inflight.id[j] == id ? g_inflight.name[j] : nullptr;
  if (!name) return false;
  *out = InFlightName{id, name, g_inflight.inserted[j]};
  return true;
}

void forget_lifetime_in_flight() { inflight_reset(); }

void populate_in_flight() { tracer_memory::populate(&g_inflight, sizeof g_inflight); }

}  // namespace imptrace
