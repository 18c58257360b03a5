#include "modules_shadow.h"

#include "code_location.h"
#include "dense_table.h"
#include "imports_in_flight.h"
#include "modules_observer.h"
#include "object_description.h"
#include "object_identity.h"
#include "process_state.h"
#include "proxies.h"
#include "records.h"
#include "string_interning.h"
#include "trace_writer.h"
#include "walk_budget.h"

namespace imptrace {
namespace {

using namespace fields;

// Keys are the keys' string ids in the trace (the import records need them anyway; the
// str cache turns the same str object into its id with no hashing), so the shadow holds
// no key text and finds an entry by indexing: new module names get ids one after
// another, and their entries sit one after another. A key whose text is empty (id 0) is
// not shadowed.
struct ShadowEntry {
  uint32_t key;  // string id
  uint32_t stamp;
  bool live;
  ObjectDescription info;
  PyObject* value;  // identity only; may be dead, never dereferenced
};
struct ShadowEntries {
  ChunkedArray<ShadowEntry> entries;  // never removed, only marked not live
  ChunkedArray<uint32_t> by_id;       // string id -> position in entries + 1; 0: none
  size_t live = 0;
  uint32_t stamp = 0;
  uint32_t epoch = 0;  // the TraceWriter::strings_epoch() its ids belong to
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

struct ModulesShadow {
  ShadowEntries shadow;
  ModulesSnapshot snap;
  bool ready = false;  // made, from a first full comparison that records nothing
  // sys.modules' version tag when the last boundary was done with it: a boundary that
  // finds it unchanged has nothing to compare (most imports' starts: the previous import's
  // end already saw the dict as it is). 0: unknown.
  uint64_t boundary_version = 0;
  // When a top-level boundary's confirming walk may run, and whether one is owed.
  WalkBudget walk_budget;
  bool owed_walk_registered = false;  // the atexit function for an owed walk: one attempt
  // sys.modules' version tag after the last full comparison, carried forward over each
  // change shadow_note_import_system_change was told of; 0 once another change came between.
  uint64_t accounted_version = 0;
  // The tag when a top-level boundary left the shadow agreeing with all of sys.modules
  // (nothing owed); 0 unknown. While the tag is still this, the dict has not changed
  // since, and a top-level import's start (a file of `import x` lines: every import) would
  // only confirm it: it is skipped.
  uint64_t agreed_version = 0;
};
ModulesShadow g_modules_shadow;
ShadowEntries& g_shadow = g_modules_shadow.shadow;
ModulesSnapshot& g_snap = g_modules_shadow.snap;

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
  g_modules_shadow.agreed_version = 0;
}

// A change found at a boundary, recorded with the stack active then.
void record_boundary_change(uint32_t key, uint32_t op, const ObjectDescription* old_value,
                            const ObjectDescription* new_value, bool by_import) {
  CodeLocation stack[kStackDepth];
  int ns = capture_stack(stack, kStackDepth, false);
  emit_modules_change(key, op, old_value, new_value, ModulesChange::AT_BOUNDARY, by_import, stack, ns);
}

// Records and adopts the difference between the shadow and sys.modules for one key.
// Returns the key's entry (null if the table could not take it); entries never move.
// `inserted`: for a key an import of this thread is loading, what the import system put
// under it (InFlight::inserted).
ShadowEntry* shadow_check_key(uint32_t key, PyObject* value, bool initial, bool by_import,
                              const ObjectDescription* known = nullptr, PyObject* inserted = nullptr) {
  ShadowEntry* e = g_shadow.find(key, true);
  if (!e) return nullptr;
  e->stamp = g_shadow.stamp;
  if (e->live && e->value == value) {
    if (known) e->info = *known;
    return e;
  }
  if (e->live) snap_invalidate();
  ObjectDescription ni = known ? *known : describe(value);
  // A new key that an import in progress (on any thread) is loading is the import
  // system's own insertion: its Import record tells it, as on 3.12+, where the watcher
  // never reports it. Recording it made a trace of 8 threads importing side by side
  // carry a change record for most of their imports.
  bool own_insertion = !e->live && (by_import || (!initial && name_in_flight(key, &inserted)));
  // The import system's insertion is not taken into the shadow where it happens (see
  // dict_ass_subscript_hook); when something else is there by now, that is a change from it.
  bool replaced_own = own_insertion && inserted && inserted != value;
  if (!initial && (!own_insertion || replaced_own)) {
    CodeLocation stack[kStackDepth];
    int ns = capture_stack(stack, kStackDepth, false);
    ObjectDescription oi;
    if (replaced_own) oi = describe(inserted);
    emit_modules_change(key, ModulesChange::SET, e->live ? &e->info : replaced_own ? &oi : nullptr,
                        &ni, ModulesChange::AT_BOUNDARY, false, stack, ns);
  }
  if (!e->live) ++g_shadow.live;
  e->live = true;
  e->value = value;
  e->info = ni;
  instrument_if_proxy(value, ni);
  return e;
}

// The snapshot's entries are all in place: checks the ones appended after them. False
// (nothing done that a full comparison would not redo) when the snapshot does not hold.
bool snap_sync_appended() {
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  size_t i = 0;
  for (uint32_t n = g_snap.entries.size(); i < n; ++i) {
    if (!py.PyDict_Next(sys_modules(), &pos, &k, &v)) return false;  // entries gone
    const SnapEntry& e = g_snap.entries[static_cast<uint32_t>(i)];
    if (e.key != k || e.value != v) return false;
  }
  size_t n_str = g_snap.n_str;
  while (py.PyDict_Next(sys_modules(), &pos, &k, &v)) {
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
// `may_defer`: only to confirm that nothing changed unseen (a top-level boundary whose
// size and path keys agreed): the walk may be put off (see WalkBudget).
void shadow_full_sync(bool initial, bool may_defer = false) {
  WalkBudget& budget = g_modules_shadow.walk_budget;
  uint64_t started = 0;
  if (!initial && g_snap.valid) {
    uint64_t version = dict_version(sys_modules());
    if (version && version == g_snap.version) return;
    // Only the import system's own changes since the last comparison, and the boundary
    // checked their names: nothing to confirm, and nothing owed.
    if (may_defer && version && version == g_modules_shadow.accounted_version) return;
    started = TraceWriter::now_ns();
    if (may_defer && !budget.due(started)) {
      budget.skipped();
      return;
    }
    if (snap_sync_appended()) {
      g_snap.version = g_modules_shadow.accounted_version = dict_version(sys_modules());
      budget.walked(started, TraceWriter::now_ns());
      return;
    }
  }
  ++g_shadow.stamp;
  Py_ssize_t pos = 0;
  PyObject *k, *v;
  size_t held = 0;  // the keys the shadow holds, for the snapshot below
  while (py.PyDict_Next(sys_modules(), &pos, &k, &v)) {
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
    record_boundary_change(e.key, ModulesChange::DELETE, &e.info, nullptr, false);
  }
  // The shadow now agrees with every entry: take the snapshot (nothing above changed
  // sys.modules: describing and recording run no code of the program's).
  g_snap.entries.clear();
  g_snap.n_str = held;
  g_snap.valid = true;
  pos = 0;
  while (py.PyDict_Next(sys_modules(), &pos, &k, &v))
    if (!snap_push(k, v)) break;
  g_snap.version = g_snap.valid ? dict_version(sys_modules()) : 0;
  g_modules_shadow.accounted_version = dict_version(sys_modules());
  if (started) budget.walked(started, TraceWriter::now_ns());
}

// Checks one key against sys.modules, where `v` is what it holds there (null: nothing).
// Returns the key's entry when `v` is there (as shadow_check_key), else null.
ShadowEntry* shadow_check_one(uint32_t key, PyObject* v, bool by_import, const ObjectDescription* known,
                              PyObject* inserted = nullptr) {
  if (v) return shadow_check_key(key, v, false, by_import, known, inserted);
  ShadowEntry* e = g_shadow.find(key, false);
  if ((!e || !e->live) && inserted) {
    // The import system's insertion (never taken into the shadow) is gone again, and not
    // through a store the hook saw (that one is recorded exactly and drops `inserted`).
    ObjectDescription oi = describe(inserted);
    record_boundary_change(key, ModulesChange::DELETE, &oi, nullptr, by_import);
    return nullptr;
  }
  if (e && e->live) {
    e->live = false;
    --g_shadow.live;
    snap_invalidate();
    record_boundary_change(key, ModulesChange::DELETE, &e->info, nullptr, by_import);
  }
  return nullptr;
}

// Checks the import's name and (at its end) its parent package against sys.modules.
// Ancestors further up were checked at their own boundaries, and the whole dict is compared
// when its size disagrees with the shadow or at a top-level import.
void shadow_check_path(PyObject* name, uint32_t name_id, const ImportEndView* end) {
  if (!name_id) return;
  if (!end) {
    shadow_check_one(name_id, dict_lookup(sys_modules(), name), false, nullptr);
    return;
  }
  shadow_check_one(name_id, end->ok ? end->value : dict_lookup(sys_modules(), name), true,
                   end->ok ? end->described : nullptr, end->inserted);
  if (!end->submodule) return;
  // The sibling before us found the parent where the shadow has it: nothing to look up.
  ShadowEntry* e = g_shadow.last_parent;
  if (e && e->live && end->parent && e->value == end->parent && e->key == end->parent_id) return;
  e = shadow_check_one(end->parent_id, end->parent, false, nullptr);
  g_shadow.last_parent = e && e->live && e->value == end->parent ? e : nullptr;
}

// Imports in flight (other threads') whose modules sys.modules has and the shadow not yet:
// their own insertions, taken in. Without this, a thread's boundary found sys.modules
// larger than the shadow whenever another thread was loading a module, and compared all
// of it: with 8 threads importing side by side, at almost every boundary.
void shadow_adopt_in_flight() {
  InFlightName n;
  for (size_t a = 0; a < inflight_count(); ++a) {
    if (!inflight_name_at(a, &n)) continue;
    ShadowEntry* e = g_shadow.find(n.id, false);
    if (e && e->live) continue;
    if (PyObject* v = dict_lookup(sys_modules(), n.name)) shadow_check_key(n.id, v, false, true, nullptr, n.inserted);
  }
}

// One import boundary: `end` is null at an import's start.
void shadow_boundary(ThreadState& t, PyObject* name, uint32_t name_id, bool top_level, const ImportEndView* end) {
  if (!g_modules_shadow.ready || g_shadow.epoch != TraceWriter::strings_epoch()) {
    // First boundary, or string ids started again (a fork child's file, or strings
    // dropped after running out of memory): the shadow is made anew, recording nothing.
    g_shadow.clear();
    g_shadow.epoch = TraceWriter::strings_epoch();
    snap_invalidate();
    shadow_full_sync(true);
    g_modules_shadow.ready = true;
    g_modules_shadow.boundary_version = 0;
    name_id = intern_obj(name);
  }
  uint64_t version = dict_version(sys_modules());
  bool described = end && end->ok;
  if (!top_level && !described && version && version == g_modules_shadow.boundary_version) return;
  if (top_level && !end && version && version == g_modules_shadow.agreed_version &&
      !g_modules_shadow.walk_budget.owed())
    return;
  // The import in progress around us has put itself into sys.modules since its own start.
  for (int i = 0; i < t.depth && i < kMaxDepth; ++i) {
    InFlight& f = t.stack[i];
    if (f.noted || f.generation != TraceWriter::generation()) continue;
    uint32_t id = f.name_epoch == TraceWriter::strings_epoch() ? f.name_id : intern_obj(f.name);
    PyObject* v = id ? dict_lookup(sys_modules(), f.name) : nullptr;
    if (v) {
      shadow_check_key(id, v, false, true, nullptr, f.inserted);
      f.noted = true;
    }
  }
  shadow_check_path(name, name_id, end);
  bool size_differs = py.PyDict_Size(sys_modules()) != static_cast<Py_ssize_t>(g_shadow.live);
  if (size_differs && !top_level && inflight_count() > 1) {
    shadow_adopt_in_flight();
    size_differs = py.PyDict_Size(sys_modules()) != static_cast<Py_ssize_t>(g_shadow.live);
  }
  if (top_level || size_differs) shadow_full_sync(false, !size_differs);
  g_modules_shadow.boundary_version = dict_version(sys_modules());
  if (top_level)
    g_modules_shadow.agreed_version = g_modules_shadow.walk_budget.owed() ? 0 : g_modules_shadow.boundary_version;
}

// The comparison the budget put off, made at exit if no boundary made it since: an
// atexit function (registered the first time a comparison is put off) runs it while
// sys.modules is still whole; the audit hook's finalisation event comes after the
// modules are cleared on some versions. The caller holds the writer lock.
void shadow_owed_walk() {
  if (!g_modules_shadow.walk_budget.owed() || !g_modules_shadow.ready || !sys_modules() || !in_main_interpreter() ||
      py.has_dict_watchers() || g_shadow.epoch != TraceWriter::strings_epoch())
    return;
  shadow_full_sync(false);
}

PyObject* owed_walk_at_exit(PyObject*, PyObject*) {
  InterpreterScope scope;
  ThreadState& t = ts();
  if (!t.inside_tracer && g_settings.enabled && TraceWriter::usable() && !finalizing()) {
    ++t.inside_tracer;
    PyObject *et, *ev, *tb;
    py.PyErr_Fetch(&et, &ev, &tb);
    {
      WriterLock lock;
      shadow_owed_walk();
      TraceWriter::flush();
    }
    py.PyErr_Restore(et, ev, tb);
    --t.inside_tracer;
  }
  py.Py_IncRef(py.None);
  return py.None;
}

PyMethodDef g_owed_walk_def = {
    "imptrace_owed_walk", reinterpret_cast<void*>(owed_walk_at_exit), METH_NOARGS,
    "imptrace: compares sys.modules with the tracer's shadow once more at exit"};

}  // namespace

void shadow_adopt(PyObject* key, PyObject* value, bool describe_value) {
  if (!g_modules_shadow.ready || g_shadow.epoch != TraceWriter::strings_epoch()) return;
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
  if (describe_value) {
    e->info = describe(value);
  } else {
    e->info = ObjectDescription();
    e->info.id = identity(value, false);
  }
  e->stamp = g_shadow.stamp;
}

void shadow_note_import_system_change(uint64_t before, uint64_t after) {
  uint64_t& v = g_modules_shadow.accounted_version;
  v = v && before == v ? after : 0;
}

void shadow_register_owed_walk_at_exit() {
  if (g_modules_shadow.owed_walk_registered || !g_modules_shadow.walk_budget.owed() || !in_main_interpreter())
    return;
  // Only an atexit the program already imported: importing it here would stand in for the
  // program's own import (absent from its trace in the runs where a walk was put off,
  // present in `-X importtime`). Without it, a comparison still owed at exit is made at the
  // next boundary if there is one.
  PyObject* m = py.PyDict_GetItemString(sys_modules(), "atexit");  // borrowed
  if (!m) return;
  g_modules_shadow.owed_walk_registered = true;  // one registration per process
  Ref reg(py.PyObject_GetAttrString(m, "register"));
  Ref fn(reg ? py.PyCFunction_NewEx(&g_owed_walk_def, nullptr, nullptr) : nullptr);
  Ref r(fn ? py.PyObject_CallFunctionObjArgs(reg.get(), fn.get(), nullptr) : nullptr);
  if (!r) py.PyErr_Clear();
}

void shadow_at_import_start(ThreadState& t, PyObject* name, uint32_t name_id, bool top_level) {
  shadow_boundary(t, name, name_id, top_level, nullptr);
}

void shadow_at_import_end(ThreadState& t, PyObject* name, uint32_t name_id, bool top_level,
                          const ImportEndView& found) {
  shadow_boundary(t, name, name_id, top_level, &found);
}

void forget_lifetime_shadow() {
  g_shadow.clear();
  g_snap.entries.clear();
  g_snap.n_str = 0;
  g_snap.valid = false;
  g_snap.version = 0;
  g_modules_shadow.ready = false;
  g_modules_shadow.boundary_version = 0;
  g_modules_shadow.walk_budget = WalkBudget();
  g_modules_shadow.owed_walk_registered = false;
  g_modules_shadow.accounted_version = 0;
  g_modules_shadow.agreed_version = 0;
}

}  // namespace imptrace
