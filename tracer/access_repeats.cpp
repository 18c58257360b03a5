#include "access_repeats.h"

#include "object_identity.h"
#include "pytest_context.h"
#include "records.h"
#include "string_interning.h"
#include "trace_writer.h"
#include "wire.h"

namespace imptrace {
namespace {

using fields::ProxyAccess::SETATTR;

constexpr uint32_t kRecordedInFull = 3;
constexpr uint32_t kResultChangesRecorded = 8;
constexpr uint64_t kSummaryInterval = 1000000000;  // ns
constexpr uint32_t kRepeatsPerClockRead = 64;
constexpr int kSiteBits = 10;
constexpr size_t kSites = size_t(1) << kSiteBits;
constexpr size_t kProbes = 8;    // slots a site may sit in, from its home slot on

// One site. The key's attribute and code are held (a reference each, deliberately kept
// while the site is in the table) so that their addresses keep meaning the same objects;
// the object is not (holding a module or proxy would change when the program frees it):
// its trace identity, checked again whenever a tracked object died, says whether the
// address still is that object.
struct Site {
  PyObject* object;
  PyObject* attribute;  // owned; null: a free slot
  PyObject* code;       // owned
  int32_t position;
  uint32_t kind;
  uint64_t object_id;
  PyObject* result;     // the latest recorded result, compared by address only
  uintptr_t test;       // current_test_token() when last recorded
  uint64_t serial;      // of the latest full record
  uint64_t pending;     // repeats counted since the latest summary
  uint32_t recorded;    // full records made for the site
  uint32_t result_changes;
  uint32_t objects_epoch;  // Repeats::objects_epoch when last recorded
  uint32_t deaths;         // identity_deaths() when the object was last checked
  uint32_t generation, strings_epoch;  // the file the serial belongs to
  bool listed;             // in Repeats::listed
};

struct Repeats {
  Site sites[kSites];
  uint16_t listed[kSites];  // sites with repeats not yet written (and some written since)
  uint32_t n_listed;
  uint64_t next_serial;
  uint32_t objects_epoch;
  uint32_t since_clock;  // repeats since the clock was last read
  uint64_t last_summary_ns;
};
Repeats g_repeats;

// One multiplication (Fibonacci hashing, the top bits): this is on the repeated path.
size_t home_slot(const AccessSite& s) {
  uint64_t h = (reinterpret_cast<uintptr_t>(s.code) >> 4) ^ (reinterpret_cast<uintptr_t>(s.attribute) >> 3) ^
               (reinterpret_cast<uintptr_t>(s.object) >> 5);
  h = (h + (static_cast<uint64_t>(static_cast<uint32_t>(s.position)) << 2) + s.kind) * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h >> (64 - kSiteBits));
}

bool same_site(const Site& e, const AccessSite& s) {
  return e.attribute == s.attribute && e.object == s.object && e.code == s.code && e.position == s.position &&
         e.kind == s.kind;
}

// Inlined: this is on the repeated path (a call and its register saves were a fifth of it).
[[gnu::always_inline]] inline Site* find_site(const AccessSite& s) {
  size_t h = home_slot(s);
  for (size_t n = 0; n < kProbes; ++n) {
    Site& e = g_repeats.sites[(h + n) & (kSites - 1)];
    if (!e.attribute) return nullptr;
    if (same_site(e, s)) return &e;
  }
  return nullptr;
}

// The site's serial names a record in the file being written.
bool in_this_file(const Site& e) {
  return e.generation == TraceWriter::generation() && e.strings_epoch == TraceWriter::strings_epoch();
}

// Writer lock held.
void write_summary(Site& e, uint64_t now) {
  if (e.pending && e.serial && in_this_file(e)) {
    auto r = TraceWriter::begin_record(fields::Record::proxy_access_summary);
    auto& b = TraceWriter::buf();
    wire::put_uint(b, fields::ProxyAccessSummary::access, e.serial);
    wire::put_uint(b, fields::ProxyAccessSummary::count, e.pending);
    wire::put_uint(b, fields::ProxyAccessSummary::time_ns, now);
    TraceWriter::end_record(r);
  }
  e.pending = 0;  // counts of another file's record (a fork's parent's) are the parent's
}

}  // namespace

bool count_repeat(uint32_t kind, PyObject* object, PyObject* attribute, PyObject* result, AccessSite* s) {
  PyObject* f = py.PyEval_GetFrame();  // borrowed
  if (!f || !frame_position(f, &s->code, &s->position)) {
    s->code = nullptr;
    return false;
  }
  s->object = object;
  s->attribute = attribute;
  s->kind = kind;
  Site* e = find_site(*s);
  if (!e || e->recorded < kRecordedInFull || e->objects_epoch != g_repeats.objects_epoch || !in_this_file(*e) ||
      e->test != current_test_token())
    return false;
  if (kind != SETATTR && result != e->result && e->result_changes < kResultChangesRecorded) return false;
  uint32_t deaths = identity_deaths();
  if (e->deaths != deaths) {
    // Some tracked object died: is this still the object the site was made for?
    if (identity(object, false) != e->object_id) return false;
    e->deaths = deaths;
  }
  if (!e->pending++ && !e->listed) {
    e->listed = true;
    g_repeats.listed[g_repeats.n_listed++] = static_cast<uint16_t>(e - g_repeats.sites);
  }
  if (++g_repeats.since_clock >= kRepeatsPerClockRead) {
    g_repeats.since_clock = 0;
    uint64_t now = TraceWriter::now_ns();
    if (now - g_repeats.last_summary_ns >= kSummaryInterval) {
      WriterLock lock;
      write_repeat_summaries();
      TraceWriter::flush();
    }
  }
  return true;
}

uint64_t note_recorded_access(const AccessSite& s, PyObject* result, uint64_t object_id, PyObject** drop) {
  if (!tracked_identity(object_id)) return 0;
  Site* e = find_site(s);
  bool fresh = !e;
  if (!e) {
    size_t h = home_slot(s);
    for (size_t n = 0; n < kProbes && !e; ++n)
      if (!g_repeats.sites[(h + n) & (kSites - 1)].attribute) e = &g_repeats.sites[(h + n) & (kSites - 1)];
    if (!e) {
      // All its slots taken: the home slot's site gives way, its counts written first.
      e = &g_repeats.sites[h];
      write_summary(*e, TraceWriter::now_ns());
      drop[0] = e->attribute;
      drop[1] = e->code;
    }
    py.Py_IncRef(s.attribute);
    py.Py_IncRef(s.code);
    e->object = s.object;
    e->attribute = s.attribute;
    e->code = s.code;
    e->position = s.position;
    e->kind = s.kind;
  } else {
    // Its repeats so far belong to the serial it had: written before it changes.
    write_summary(*e, TraceWriter::now_ns());
  }
  if (fresh || e->object_id != object_id || !in_this_file(*e)) {
    e->recorded = 0;
    e->result_changes = 0;
  } else if (e->recorded >= kRecordedInFull && s.kind != SETATTR && result != e->result) {
    ++e->result_changes;
  }
  e->object_id = object_id;
  e->result = result;
  e->test = current_test_token();
  e->serial = ++g_repeats.next_serial;
  if (e->recorded < kRecordedInFull) ++e->recorded;
  e->objects_epoch = g_repeats.objects_epoch;
  e->deaths = identity_deaths();
  e->generation = TraceWriter::generation();
  e->strings_epoch = TraceWriter::strings_epoch();
  return e->serial;
}

void write_repeat_summaries() {
  if (!g_repeats.n_listed) return;
  uint64_t now = TraceWriter::now_ns();
  for (uint32_t i = 0; i < g_repeats.n_listed; ++i) {
    Site& e = g_repeats.sites[g_repeats.listed[i]];
    write_summary(e, now);
    e.listed = false;
  }
  g_repeats.n_listed = 0;
  g_repeats.last_summary_ns = now;
}

void repeats_objects_changed() { ++g_repeats.objects_epoch; }

}  // namespace imptrace
