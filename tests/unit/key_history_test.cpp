// The one history of each sys.modules key (key_history.h), which why, diff and report tell.
#include <gtest/gtest.h>

#include "key_history.h"
#include "trace_builder.h"
#include "trace_reader.h"
#include "trace_reading.h"

using namespace imptrace::model;
namespace fields = imptrace::fields;

namespace {

namespace T = imptrace::testing;

Process read_back(T::TraceBuilder& b) {
  Process p;
  EXPECT_TRUE(T::parsed(b, p));
  return p;
}

T::ChangeSpec change(const char* key, uint32_t op, const std::optional<T::Obj>& old_object,
                     const std::optional<T::Obj>& new_object, uint64_t t, bool by_import_system) {
  T::ChangeSpec c;
  c.key = key, c.op = op, c.time_ns = t, c.by_import_system = by_import_system;
  c.old_object = old_object, c.new_object = new_object;
  return c;
}

T::ImportSpec traced_import(uint64_t index, const char* name, uint64_t begin, uint64_t dur, uint64_t parent,
                            const T::Obj& object, const char* importer_file, uint32_t line) {
  return T::ImportSpec::bound(index, name, begin, dur, object, T::Loc{importer_file, line, "<module>"}, parent);
}

// An object that is neither a plain module nor a proxy (flags 0), e.g. a module whose
// class was changed.
T::Obj other_object(uint64_t id, const char* type) {
  T::Obj o = T::Obj::proxy(id, type);
  o.flags = 0;
  return o;
}

constexpr uint32_t SET = fields::ModulesChange::SET;

}  // namespace

TEST(KeyHistory, ClassChangeIsPartOfTheEntryTheSameObjectAgainIsNoNews) {
  T::TraceBuilder b;
  T::Obj plain = T::Obj::module(1, "m");
  T::Obj lazy = other_object(1, "importlib.util._LazyModule");
  b.add_modules_change(change("m", SET, std::nullopt, plain, 10, true));
  b.add_modules_change(change("m", SET, plain, plain, 20, false));  // the same object again
  b.add_modules_change(change("m", SET, plain, lazy, 30, false));   // its class changed
  Process p = read_back(b);
  ModulesHistory h(p);
  const KeyHistory* m = h.find("m");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->entries.size(), 1u);
  EXPECT_EQ(m->entries[0].relation, Relation::New);
  EXPECT_EQ(m->entries[0].object->type, "module");
  ASSERT_EQ(m->entries[0].class_changes.size(), 1u);
  EXPECT_EQ(m->entries[0].class_changes[0], &p.modules_changes[2]);
  EXPECT_EQ(m->entries[0].class_changes[0]->new_object.type, "importlib.util._LazyModule");
  EXPECT_TRUE(m->entries[0].reloads.empty());
  EXPECT_EQ(m->current, 0);
}

TEST(KeyHistory, OldObjectNeverSeenArrivingWasThereBeforeTracing) {
  T::TraceBuilder b;
  T::Obj before = T::Obj::proxy(7, "pkg.Wrapper");
  T::Obj after = T::Obj::module(8, "m");
  b.add_modules_change(change("m", SET, before, after, 50, false));
  Process p = read_back(b);
  ModulesHistory h(p);
  const KeyHistory* m = h.find("m");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->entries.size(), 2u);
  EXPECT_TRUE(m->entries[0].before_trace);
  EXPECT_EQ(m->entries[0].time_ns, 0u);
  EXPECT_FALSE(m->entries[0].via_import);  // not a plain module: taken as assigned
  EXPECT_EQ(m->entries[0].test(), nullptr);
  EXPECT_FALSE(m->entries[1].via_import);
  EXPECT_EQ(m->entries[1].time_ns, 50u);
  EXPECT_TRUE(m->has_proxy);
}

TEST(KeyHistory, ImportsDateFromTheirStartAndClearEndsEveryKey) {
  T::TraceBuilder b;
  T::Obj a = T::Obj::module(1, "a");
  b.add_import(traced_import(0, "a", 100, 100, 0, a, "/work/story.py", 1));
  b.add_import(traced_import(1, "alias", 300, 100, 0, a, "/work/story.py", 2));
  b.add_modules_change(change("", fields::ModulesChange::CLEAR, std::nullopt, std::nullopt, 500, false));
  Process p = read_back(b);
  ModulesHistory h(p);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.key(0), "a");
  const KeyEntry& first = h.history(0).entries[0];
  EXPECT_EQ(first.time_ns, 100u);
  EXPECT_EQ(first.import, &p.imports[0]);
  EXPECT_TRUE(first.removed);
  EXPECT_EQ(first.removal, &p.modules_changes[0]);
  const KeyEntry& alias = h.find("alias")->entries[0];
  EXPECT_EQ(alias.relation, Relation::SameAsKey);
  EXPECT_EQ(alias.same_as_key, "a");
  EXPECT_TRUE(alias.removed);
  ASSERT_NE(h.first_key_of(1), nullptr);
  EXPECT_EQ(*h.first_key_of(1), "a");
  EXPECT_EQ(h.first_key_of(2), nullptr);
}

// ---- the rules for re-entries, self-replacement and reloads, on traces as the tracer
// writes them (trace_builder.h), read back by the reader ----------------------------------

namespace {

// An import of `name` binding `object`, made at importer_file:line.
struct Made {
  const char* name;
  T::Obj object;
  const char* importer_file;
  uint32_t line;
};

// Three nested imports as the tracer writes them (when each ends: innermost first): `outer`
// from 100 to 1100 ns, in its body `middle` from 200 to 700, in whose body `inner` from 300
// to 310; read back.
Process nested_imports(const Made& outer, const Made& middle, const Made& inner) {
  T::TraceBuilder b;
  b.add_import(traced_import(2, inner.name, 300, 10, 2, inner.object, inner.importer_file, inner.line));
  b.add_import(traced_import(1, middle.name, 200, 500, 1, middle.object, middle.importer_file, middle.line));
  b.add_import(traced_import(0, outer.name, 100, 1000, 0, outer.object, outer.importer_file, outer.line));
  return read_back(b);
}

T::ChangeSpec reload_store(const char* key, const T::Obj& o, uint64_t t, uint32_t op = SET) {
  T::ChangeSpec c = op == SET ? change(key, op, std::nullopt, o, t, true) : change(key, op, o, std::nullopt, t, true);
  c.stack = {T::Loc{"<frozen importlib._bootstrap>", 626, "_exec"},
             T::Loc{"/usr/lib/python3.11/importlib/__init__.py", 169, "reload"},
             T::Loc{"/work/story.py", 2, "<module>"}};
  return c;
}

}  // namespace

TEST(KeyHistory, ReentryWhileInitialisingIsALookupAndTheOuterImportIsTheImporter) {
  // story.py:1 imports a.b; a.b's body imports a.b.c, whose body imports a.b again (a
  // package __getattr__ calling import_module): that inner import finds a.b initialising.
  T::Obj ab = T::Obj::module(0x10, "a.b", "/site/a/b/__init__.py");
  T::Obj abc = T::Obj::module(0x20, "a.b.c", "/site/a/b/c.py");
  Process p = nested_imports({"a.b", ab, "/work/story.py", 1}, {"a.b.c", abc, "/site/a/b/__init__.py", 4},
                             {"a.b", ab, "/site/a/b/c.py", 32});
  ModulesHistory h(p);
  const KeyHistory* k = h.find("a.b");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->entries.size(), 1u);
  ASSERT_NE(k->entries[0].import, nullptr);
  EXPECT_EQ(k->entries[0].import->importer.file, "/work/story.py");
  EXPECT_EQ(k->entries[0].time_ns, p.imports[0].begin_ns);
  EXPECT_FALSE(h.reentry(0));
  EXPECT_FALSE(h.reentry(1));
  EXPECT_TRUE(h.reentry(2));
}

TEST(KeyHistory, AnImportUnderTheFirstImportOfItsPackageCreatedTheModule) {
  // story.py imports t.cudnn; the import system first imports t, whose body imports
  // t.cudnn: that inner import created the module (the outer one had not yet), so it is
  // the importer and no re-entry (torch.backends.cudnn in Debian's torch).
  T::Obj cudnn = T::Obj::module(0x10, "t.cudnn", "/site/t/cudnn.py");
  T::Obj t = T::Obj::module(0x20, "t", "/site/t/__init__.py");
  Process p = nested_imports({"t.cudnn", cudnn, "/work/story.py", 1}, {"t", t, "/work/story.py", 1},
                             {"t.cudnn", cudnn, "/site/t/jit.py", 6});
  ModulesHistory h(p);
  EXPECT_FALSE(h.reentry(2));
  const KeyHistory* k = h.find("t.cudnn");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->entries.size(), 1u);
  EXPECT_EQ(k->entries[0].import->importer.file, "/site/t/jit.py");
}

TEST(KeyHistory, AModuleReplacingItselfKeepsTheImportThatCreatedIt) {
  T::TraceBuilder b;
  T::Obj module = T::Obj::module(0x10, "m", "/site/m.py");
  T::Obj replacement = T::Obj::proxy(0x20, "m._SelfReplacing", "m");
  T::ChangeSpec c;
  c.key = "m";
  c.old_object = module;
  c.new_object = replacement;
  c.time_ns = 150;
  c.during_import = 1;  // the import of m itself
  c.stack = {T::Loc{"/site/m.py", 27, "<module>"}};
  b.add_modules_change(c);
  b.add_import(traced_import(0, "m", 100, 100, 0, replacement, "/work/story.py", 10));
  Process p = read_back(b);
  ModulesHistory h(p);
  const KeyHistory* k = h.find("m");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->entries.size(), 2u);
  const KeyEntry& first = k->entries[0];
  EXPECT_FALSE(first.before_trace);
  EXPECT_TRUE(first.via_import);
  ASSERT_NE(first.import, nullptr);
  EXPECT_EQ(first.import->importer.file, "/work/story.py");
  EXPECT_EQ(first.time_ns, 100u);
  const KeyEntry& second = k->entries[1];
  EXPECT_FALSE(second.via_import);
  ASSERT_NE(second.during, nullptr);
  EXPECT_EQ(second.during->name, "m");
  EXPECT_EQ(second.import, &p.imports[0]);
}

TEST(KeyHistory, ReloadIsOneEntryOnEveryVersion) {
  for (bool pops_first : {false, true}) {  // 3.8-3.11 see the store; 3.12+ the pop too
    T::TraceBuilder b;
    T::Obj json = T::Obj::module(0x10, "json", "/usr/lib/python3.11/json/__init__.py");
    b.add_import(traced_import(0, "json", 100, 100, 0, json, "/work/story.py", 1));
    if (pops_first) b.add_modules_change(reload_store("json", json, 500, fields::ModulesChange::DELETE));
    b.add_modules_change(reload_store("json", json, 501));
    Process p = read_back(b);
    ModulesHistory h(p);
    const KeyHistory* k = h.find("json");
    ASSERT_NE(k, nullptr);
    ASSERT_EQ(k->entries.size(), 1u) << pops_first;
    EXPECT_FALSE(k->entries[0].removed);
    EXPECT_EQ(k->current, 0);
    ASSERT_EQ(k->entries[0].reloads.size(), 1u);
    const Location* at = outside_importlib(k->entries[0].reloads[0]->stack);
    ASSERT_NE(at, nullptr);
    EXPECT_EQ(at->file, "/work/story.py");
    EXPECT_EQ(at->line, 2u);
  }
}

TEST(KeyHistory, TheSameObjectPutBackByAssignmentIsNoReload) {
  // `m = sys.modules.pop('json'); sys.modules['json'] = m` in user code: two entries.
  T::TraceBuilder b;
  T::Obj json = T::Obj::module(0x10, "json", "/usr/lib/python3.11/json/__init__.py");
  b.add_import(traced_import(0, "json", 100, 100, 0, json, "/work/story.py", 1));
  T::ChangeSpec del = reload_store("json", json, 500, fields::ModulesChange::DELETE);
  T::ChangeSpec set = reload_store("json", json, 501);
  del.by_import_system = set.by_import_system = false;
  b.add_modules_change(del);
  b.add_modules_change(set);
  Process p = read_back(b);
  ModulesHistory h(p);
  const KeyHistory* k = h.find("json");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->entries.size(), 2u);
  EXPECT_TRUE(k->entries[0].removed);
  EXPECT_TRUE(k->entries[0].reloads.empty());
  EXPECT_EQ(k->entries[1].relation, Relation::SameAsEntry);
}

TEST(KeyHistory, LazyLoadersClassChangesAreOneEntryAndNoReload) {
  // LazyLoader as the tracer records it: the assignment, then exec_module's and the first
  // access's __class__ changes, both stores of the same object by the import system.
  T::TraceBuilder b;
  T::Obj plain = T::Obj::module(0x10, "json", "/usr/lib/python3.11/json/__init__.py");
  T::Obj lazy = T::Obj::proxy(0x10, "importlib.util._LazyModule", "json");
  T::ChangeSpec put;
  put.key = "json";
  put.new_object = plain;
  put.time_ns = 10;
  put.stack = {T::Loc{"/work/story.py", 6, "<module>"}};
  b.add_modules_change(put);
  T::ChangeSpec to_lazy = put, to_plain = put;
  to_lazy.old_object = plain;
  to_lazy.new_object = lazy;
  to_lazy.by_import_system = true;
  to_lazy.time_ns = 20;
  to_lazy.stack = {T::Loc{"<frozen importlib.util>", 302, "LazyLoader.exec_module"}, T::Loc{"/work/story.py", 7, "<module>"}};
  to_plain.old_object = lazy;
  to_plain.new_object = plain;
  to_plain.by_import_system = true;
  to_plain.time_ns = 30;
  to_plain.stack = {T::Loc{"/usr/lib/python3.8/importlib/util.py", 228, "__getattribute__"}, T::Loc{"/work/story.py", 8, "<module>"}};
  b.add_modules_change(to_lazy);
  b.add_modules_change(to_plain);
  Process p = read_back(b);
  ModulesHistory h(p);
  const KeyHistory* k = h.find("json");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->entries.size(), 1u);
  const KeyEntry& e = k->entries[0];
  EXPECT_FALSE(e.via_import);
  EXPECT_TRUE(e.reloads.empty());
  ASSERT_EQ(e.class_changes.size(), 2u);
  EXPECT_EQ(e.class_changes[0]->new_object.type, "importlib.util._LazyModule");
  EXPECT_EQ(e.class_changes[1]->new_object.type, "module");
  EXPECT_EQ(outside_importlib(e.class_changes[0]->stack)->line, 7u);
  EXPECT_EQ(outside_importlib(e.class_changes[1]->stack)->line, 8u);
  EXPECT_TRUE(k->has_proxy);
}

TEST(KeyHistory, ALifetimeEndsEveryEntryAndTheNextLifetimesModuleReplacesNothing) {
  T::TraceBuilder b;
  b.add_lifetime_begin(1, 0);
  b.add_import(traced_import(0, "csv", 10, 10, 0, T::Obj::module(1, "csv"), "/work/story.py", 1));
  b.add_lifetime_end(1, 100);
  b.add_lifetime_begin(2, 200);
  b.add_import(traced_import(1, "csv", 210, 10, 0, T::Obj::module(2, "csv"), "/work/story.py", 1));
  b.add_lifetime_end(2, 300);
  Process p = read_back(b);
  ModulesHistory h(p);
  const KeyHistory* k = h.find("csv");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->entries.size(), 2u);
  EXPECT_EQ(k->entries[0].lifetime, 1u);
  EXPECT_TRUE(k->entries[0].finalized);
  EXPECT_FALSE(k->entries[0].removed);
  EXPECT_EQ(k->entries[1].lifetime, 2u);
  // The last lifetime's end is the trace's: its entries are still there.
  EXPECT_FALSE(k->entries[1].finalized);
  EXPECT_EQ(k->current, 1);
  // Each lifetime's first import of a name runs its module: neither is a re-entry.
  EXPECT_FALSE(h.reentry(0));
  EXPECT_FALSE(h.reentry(1));
}
