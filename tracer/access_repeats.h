// Repeated proxy accesses, counted instead of recorded. A lazy package's attribute read in
// an inner loop goes through its __getattr__ on every iteration; recording each call in
// full (a stack walk and a record) would cost about a microsecond and 60 bytes each,
// without bound. So the full record is kept for what tells the story:
//  - every failed access (the caller never gets here for one);
//  - the first kRecordedInFull accesses of each site: (object, attribute, kind, calling
//    instruction);
//  - the first access of a site after anything about objects under sys.modules changed (a
//    key replaced or removed, any __class__ assignment), after its result changed (a new
//    forwarding target answers with another object; kResultChangesRecorded times per
//    site, then a result that is new at every access is counted too), in another pytest
//    phase, or in a fork child's new file.
// Everything else is a repeat: one increment in a fixed-size table, with no stack walk, no
// record, no lock and no allocation. The counts go out as ProxyAccessSummary records naming
// the serial of the site's latest full record: at most kSummaryInterval after they were
// counted (each thread reads the clock every kRepeatsPerClockRead + 1 repeats), at the next import
// boundary, and at exit, os._exit and exec. A crash loses at most the counts of the last
// interval (a fatal signal's handler writes none: it may have interrupted a count).
//
// The calling instruction is the caller frame's code object and instruction offset
// (frame_position): when the hook runs, the __getattr__ has returned and the current frame
// is the caller's. Two reads on one line are two sites; both read as that line.
//
// The table is touched with the main interpreter's GIL held; sites beyond its size evict
// older ones (whose counts are written first), which then start again with full records.
//
// A loop repeats one site, so each thread remembers the site it last recorded or counted,
// once that site counts its repeats (repeats::Memo), and the hook compares a call with it
// before anything else: a repeat of it is counted inline in the hook, with no hash, no
// probe and no call into this file. The memo holds what a repeat presents (arguments,
// result, the running frame's code object and instruction word) and is valid for one
// epoch, which moves whenever a slot takes another site, an observed function takes
// another kind, or anything else its checks stand for changes: it then misses, never
// matches wrongly; a miss is the probe of count_repeat, as for any other access.
#pragma once

#include <stdint.h>
#include <string.h>

#include "cpython_api.h"
#include "object_identity.h"
#include "process_state.h"
#include "pytest_context.h"
#include "records.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {

// Where one access came from and what it was about. `object`: the proxy, or the module
// whose __getattr__ ran (the function itself when the module left sys.modules). `fn`: the
// observed function that ran (the thread's memo is keyed by it).
struct AccessSite {
  PyObject* object;
  PyObject* attribute;
  PyObject* code;  // compared by address only; the caller's running frame keeps it alive
  int32_t position;
  uint32_t kind;   // a ProxyAccess::Kind
  PyObject* fn;
};

// The repeated path, for a successful access whose function has just returned and that
// missed the thread's memo: true when it was counted (record nothing). Otherwise `site`
// holds its calling instruction for the full record, or a null code when no Python frame
// called it (then no repeat of it is ever counted). `object` and `attribute` are never
// null (the hook's vectorcall arguments and the function itself); `site->fn` is set.
bool count_repeat(uint32_t kind, PyObject* object, PyObject* attribute, PyObject* result, AccessSite* site);

// A successful access at `site` about to be recorded in full, writer lock held. Returns the
// serial its record carries (0: its repeats will not be counted, as for an object the
// trace cannot follow to its death). References the table gives up are handed back in
// `drop` (up to two), to be released once the writer lock is no longer held.
uint64_t note_recorded_access(const AccessSite& site, PyObject* result, uint64_t object_id, PyObject** drop);

// Writes a ProxyAccessSummary for every site with repeats not yet written, writer lock
// held. Reads nothing of CPython's, so it may run at exit after finalisation. Costs one
// comparison when there is nothing to write.
void write_repeat_summaries();

// Something about objects under sys.modules changed: every site's next access is recorded
// in full.
void repeats_objects_changed();

// An observed function's entry was written (a function observed, or observed as another
// kind) or every entry forgotten: no thread's memo names a function by a stale kind.
void repeats_forget_memos();

// os.putenv and os.unsetenv, which every change of the environment from Python code goes
// through (os.environ's included), are watched: repeats_environment_changed is called
// after each. Until then no memo is set (every repeat takes count_repeat's probe, which
// reads PYTEST_CURRENT_TEST's entry itself). A change made from C (setenv in an
// extension) is seen by that probe, not by a memo: the pytest test of a repeat comes from
// pytest, which sets it through os.environ.
void repeats_environment_watched();
// From any interpreter's thread, with its own GIL held.
void repeats_environment_changed();

// The table, visible here so that the hook's check of the memo is inlined into it.
namespace repeats {

constexpr uint32_t kRecordedInFull = 3;
constexpr uint32_t kResultChangesRecorded = 8;
constexpr uint32_t kRepeatsPerClockRead = 64;
constexpr int kSiteBits = 10;
constexpr size_t kSites = size_t(1) << kSiteBits;

// One site. The key's attribute and code are held (a reference each, deliberately kept
// while the site is in the table) so that their addresses keep meaning the same objects;
// the object is not (holding a module or proxy would change when the program frees it):
// its trace identity, checked again whenever a tracked object died, says whether the
// address still is that object. The fields the repeated path reads come first.
struct Site {
  PyObject* object;
  PyObject* attribute;  // owned; null: a free slot
  PyObject* code;       // owned
  int32_t position;
  uint32_t kind;
  PyObject* result;     // the latest recorded result, compared by address only
  uintptr_t test;       // current_test_token() when last recorded
  uint64_t pending;     // repeats counted since the latest summary
  uint32_t objects_epoch;  // Table::objects_epoch when last recorded
  uint32_t deaths;         // identity_deaths() when the object was last checked
  uint32_t generation, strings_epoch;  // the file the serial belongs to
  uint32_t recorded;    // full records made for the site
  uint32_t result_changes;
  bool listed;          // in Table::listed
  uint64_t object_id;
  uint64_t serial;      // of the latest full record
};

struct Table {
  Site sites[kSites];
  uint16_t listed[kSites];  // sites with repeats not yet written (and some written since)
  uint32_t n_listed;
  uint32_t objects_epoch;
  uint32_t memo_epoch;   // Memo::epoch
  bool environment_watched;
  uint64_t next_serial;
  uint64_t last_summary_ns;
};
extern Table g_table;

// How many arguments an observed function takes as `kind` (a ProxyAccess::Kind): a module
// __getattr__(name), a __getattr__(self, name), a __setattr__(self, name, value).
constexpr uint32_t arguments_of_kind(uint32_t kind) {
  return kind == fields::ProxyAccess::MODULE_GETATTR ? 1 : kind == fields::ProxyAccess::GETATTR ? 2 : 3;
}

// The argument count and the keyword names of a vectorcall in one word: nargs << 1 when
// there are none (PY_VECTORCALL_ARGUMENTS_OFFSET, nargsf's top bit, is shifted out), else
// a value no count gives (kwnames is an object's address).
[[gnu::always_inline]] inline size_t call_shape(size_t nargsf, PyObject* kwnames) {
  return (nargsf << 1) | reinterpret_cast<size_t>(kwnames);
}

// The thread's latest site that may count its next repeat, with everything a repeat of it
// presents worked out when it was set, so that the hook compares words and derives
// nothing. Valid while Table::memo_epoch is the one it was set in: the epoch moves
// whenever something the site's checks (countable) depend on may have changed and no
// cheaper comparison below covers it: objects under sys.modules changed, a function was
// observed or forgotten, a slot took another site, the summaries were written (the site
// is no longer listed, and the hook's count does not list it), or Python code changed the
// environment (os.putenv, os.unsetenv: pytest's PYTEST_CURRENT_TEST, the site's test). A
// memo is set only once those two os functions are watched (repeats_environment_watched).
// Zero (no function) matches no call.
struct Memo {
  PyObject* fn;
  uint32_t epoch;          // Table::memo_epoch when set
  uint32_t deaths;         // identity_deaths() when set
  size_t shape;            // call_shape(nargs, no keywords)
  PyObject* arg0;          // args[0]: the attribute (MODULE_GETATTR) or the object
  PyObject* attribute;     // args[attr_index]
  size_t attr_index;       // 0 (MODULE_GETATTR) or 1
  PyObject* result;        // the site's latest recorded result
  bool any_result;         // a SETATTR, or a site whose results change at every access
  uint32_t strings_epoch;  // TraceWriter::strings_epoch(): it moves with a fork child's file too
  PyObject* code;          // the calling instruction: code object, and
  uint32_t raw;            //   the low 32 bits at the running frame's py.position_raw, or
  int32_t position;        //   (no running_frame) frame_position's offset
  int32_t clock;           // repeats until this thread reads the clock (from 0: at the next)
  Site* site;
};
extern thread_local Memo t_memo;

// Whether a site found for this access may count it rather than record it: recorded in
// full often enough, nothing changed about objects since, the same file and pytest phase,
// a result it has seen (a SETATTR has none), the same object under the address.
[[gnu::always_inline]] inline bool countable(Site& e, PyObject* object, PyObject* result) {
  if (e.recorded < kRecordedInFull || e.objects_epoch != g_table.objects_epoch ||
      e.generation != TraceWriter::generation() || e.strings_epoch != TraceWriter::strings_epoch() ||
      e.test != current_test_token())
    return false;
  if (result != e.result && e.kind != fields::ProxyAccess::SETATTR && e.result_changes < kResultChangesRecorded)
    return false;
  uint32_t deaths = identity_deaths();
  if (__builtin_expect(e.deaths != deaths, 0)) {
    // Some tracked object died: is this still the object the site was made for?
    if (identity(object, false) != e.object_id) return false;
    e.deaths = deaths;
  }
  return true;
}

// Every kRepeatsPerClockRead repeats of a thread: the summaries, when kSummaryInterval has
// passed. Out of line: the repeated path stays short.
void clock_read();

// The memo's calling instruction, where running_frame cannot read it (3.14+, or a layout
// probe_thread_state did not confirm): PyEval_GetFrame and frame_position. Out of line.
bool memo_site_matches_slow(const Memo& m);

}  // namespace repeats

// The hook's first check, for a call of `fn` with its arguments as received (`shape`:
// call_shape of its nargsf and kwnames) that returned `result` (not null): true when it
// repeated the thread's memo and was counted. The caller has checked nothing else. What
// forward_observable asks is covered here: a memo is set only where it held, the tracer's
// settings never go back, the interpreter is the thread state's; a writer that broke
// since leaves the counts unwritten.
[[gnu::always_inline]] inline bool count_memo_repeat(PyObject* fn, PyObject* const* args, size_t shape,
                                                     PyObject* result) {
  using namespace repeats;
  Memo& m = t_memo;
  if (fn != m.fn || m.epoch != __atomic_load_n(&g_table.memo_epoch, __ATOMIC_RELAXED) || shape != m.shape)
    return false;
  if (args[0] != m.arg0 || args[m.attr_index] != m.attribute || (result != m.result && !m.any_result)) return false;
  if (t_state.inside_tracer || m.deaths != identity_deaths() || m.strings_epoch != TraceWriter::strings_epoch())
    return false;
  if (const char* f = running_frame(g_main_interpreter.interp)) {
    uint64_t raw;
    memcpy(&raw, f + py.position_raw, sizeof raw);
    if (*reinterpret_cast<PyObject* const*>(f + py.position_code) != m.code || static_cast<uint32_t>(raw) != m.raw)
      return false;
  } else if (!memo_site_matches_slow(m)) {
    return false;
  }
  ++m.site->pending;
  if (__builtin_expect(--m.clock < 0, 0)) clock_read();  // one decrement and a branch on its sign
  return true;
}

}  // namespace imptrace
