#include "access_repeats.h"

#include "string_interning.h"
#include "trace_writer.h"
#include "wire.h"

namespace imptrace {
namespace repeats {

Table g_table;
thread_local Memo t_memo;

}  // namespace repeats

namespace {

using namespace repeats;
using fields::ProxyAccess::SETATTR;

constexpr uint64_t kSummaryInterval = 1000000000;  // ns
constexpr size_t kProbes = 8;    // slots a site may sit in, from its home slot on

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

Site* find_site(const AccessSite& s) {
  size_t h = home_slot(s);
  for (size_t n = 0; n < kProbes; ++n) {
    Site& e = g_table.sites[(h + n) & (kSites - 1)];
    if (!e.attribute) return nullptr;
    if (same_site(e, s)) return &e;
  }
  return nullptr;
}

// The site's serial names a record in the file being written.
bool in_this_file(const Site& e) {
  return e.generation == TraceWriter::generation() && e.strings_epoch == TraceWriter::strings_epoch();
}

// Every memo misses from now on. Atomic: a sub-interpreter with a GIL of its own may change
// the environment (repeats_environment_changed) while the main interpreter's thread bumps
// the epoch too; neither bump may be lost.
void forget_memos() { __atomic_fetch_add(&g_table.memo_epoch, 1, __ATOMIC_RELAXED); }

// The site counts repeats from now on: they are counted with one increment, which lists
// nothing.
void list(Site& e) {
  if (e.listed) return;
  e.listed = true;
  g_table.listed[g_table.n_listed++] = static_cast<uint16_t>(&e - g_table.sites);
}

// This thread's next call of `fn` is compared with site `e` first, once the site counts
// its repeats (listed from then on). Everything countable checks holds right now.
void remember(PyObject* fn, uint32_t kind, Site& e) {
  if (e.recorded < kRecordedInFull || !g_table.environment_watched) return;
  probe_thread_state();
  Memo& m = t_memo;
  list(e);
  bool module = kind == fields::ProxyAccess::MODULE_GETATTR;
  m.epoch = g_table.memo_epoch;
  m.deaths = identity_deaths();
  m.shape = call_shape(arguments_of_kind(kind), nullptr);
  m.arg0 = module ? e.attribute : e.object;
  m.attribute = e.attribute;
  m.attr_index = module ? 0 : 1;
  m.result = e.result;
  m.any_result = kind == SETATTR || e.result_changes >= kResultChangesRecorded;
  m.strings_epoch = TraceWriter::strings_epoch();
  m.code = e.code;
  m.position = e.position;
  // The instruction word frame_position's route reads where this position is, inverted:
  // the low 32 bits of the subtraction there are exact.
  uintptr_t start = (reinterpret_cast<uintptr_t>(e.code) & py.position_code_mask) + py.position_delta;
  m.raw = static_cast<uint32_t>(start + static_cast<uint32_t>(e.position) / static_cast<uint32_t>(py.position_unit));
  m.site = &e;
  m.fn = fn;
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

namespace repeats {

[[gnu::noinline]] void clock_read() {
  t_memo.clock = kRepeatsPerClockRead;
  uint64_t now = TraceWriter::now_ns();
  if (now - g_table.last_summary_ns >= kSummaryInterval) {
    WriterLock lock;
    write_repeat_summaries();
    TraceWriter::flush();
  }
}

[[gnu::noinline]] bool memo_site_matches_slow(const Memo& m) {
  if (!g_main_interpreter.interp || py.PyInterpreterState_Get() != g_main_interpreter.interp) return false;
  PyObject* f = py.PyEval_GetFrame();  // borrowed
  PyObject* code;
  int position;
  return f && frame_position(f, &code, &position) && code == m.code && position == m.position;
}

}  // namespace repeats

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
  if (!e || !countable(*e, object, result)) return false;
  remember(s->fn, kind, *e);
  ++e->pending;
  if (__builtin_expect(--t_memo.clock < 0, 0)) clock_read();
  return true;
}

uint64_t note_recorded_access(const AccessSite& s, PyObject* result, uint64_t object_id, PyObject** drop) {
  if (!tracked_identity(object_id)) return 0;
  Site* e = find_site(s);
  bool fresh = !e;
  if (!e) {
    size_t h = home_slot(s);
    for (size_t n = 0; n < kProbes && !e; ++n)
      if (!g_table.sites[(h + n) & (kSites - 1)].attribute) e = &g_table.sites[(h + n) & (kSites - 1)];
    if (!e) {
      // All its slots taken: the home slot's site gives way, its counts written first.
      e = &g_table.sites[h];
      write_summary(*e, TraceWriter::now_ns());
      drop[0] = e->attribute;
      drop[1] = e->code;
      forget_memos();  // memos naming the slot's former site miss
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
  e->serial = ++g_table.next_serial;
  if (e->recorded < kRecordedInFull) ++e->recorded;
  e->objects_epoch = g_table.objects_epoch;
  e->deaths = identity_deaths();
  e->generation = TraceWriter::generation();
  e->strings_epoch = TraceWriter::strings_epoch();
  remember(s.fn, s.kind, *e);
  return e->serial;
}

void write_repeat_summaries() {
  if (!g_table.n_listed) return;
  uint64_t now = TraceWriter::now_ns();
  for (uint32_t i = 0; i < g_table.n_listed; ++i) {
    Site& e = g_table.sites[g_table.listed[i]];
    write_summary(e, now);
    e.listed = false;
  }
  g_table.n_listed = 0;
  g_table.last_summary_ns = now;
  forget_memos();  // the memos' sites are no longer listed

}

void repeats_objects_changed() {
  ++g_table.objects_epoch;
  forget_memos();
}

void repeats_forget_memos() { forget_memos(); }

void repeats_environment_watched() { g_table.environment_watched = true; }

void repeats_environment_changed() { forget_memos(); }

}  // namespace imptrace
