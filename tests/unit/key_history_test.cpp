// The one history of each sys.modules key (key_history.h), which why, diff and report tell.
#include <gtest/gtest.h>

#include "key_history.h"

using namespace imptrace::model;

namespace {

ObjectRef module_object(uint64_t id, const char* name) {
  ObjectRef o;
  o.present = true;
  o.flags = 1;
  o.id = id;
  o.type = "module";
  o.name = name;
  return o;
}

ObjectRef other_object(uint64_t id, const char* type, bool proxy) {
  ObjectRef o;
  o.present = true;
  o.flags = proxy ? 4 : 0;
  o.id = id;
  o.type = type;
  return o;
}

ModulesChange set(const char* key, const ObjectRef& old_object, const ObjectRef& new_object, uint64_t t,
                  bool by_import_system) {
  ModulesChange c;
  c.key = key;
  c.op = ChangeOp::Set;
  c.old_object = old_object;
  c.new_object = new_object;
  c.time_ns = t;
  c.by_import_system = by_import_system;
  return c;
}

Import import_of(const char* name, const ObjectRef& object, uint64_t begin, uint64_t end) {
  Import im;
  im.name = name;
  im.ok = true;
  im.object = object;
  im.begin_ns = begin;
  im.end_ns = end;
  return im;
}

}  // namespace

TEST(KeyHistory, ClassChangeIsAnEntryTheSameObjectAgainIsNot) {
  Process p;
  ObjectRef plain = module_object(1, "m");
  ObjectRef lazy = other_object(1, "importlib.util._LazyModule", false);
  p.modules_changes.push_back(set("m", ObjectRef(), plain, 10, true));
  p.modules_changes.push_back(set("m", plain, plain, 20, false));  // the same object again
  p.modules_changes.push_back(set("m", plain, lazy, 30, false));   // its class changed
  ModulesHistory h(p);
  const KeyHistory* m = h.find("m");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->entries.size(), 2u);
  EXPECT_EQ(m->entries[0].relation, Relation::New);
  EXPECT_EQ(m->entries[1].object->type, "importlib.util._LazyModule");
  EXPECT_EQ(m->entries[1].relation, Relation::SameAsEntry);
  EXPECT_EQ(m->entries[1].same_as_entry, 0u);
  EXPECT_EQ(m->entries[1].change, &p.modules_changes[2]);
  EXPECT_EQ(m->current, 1);
}

TEST(KeyHistory, OldObjectNeverSeenArrivingWasThereBeforeTracing) {
  Process p;
  ObjectRef before = other_object(7, "pkg.Wrapper", true);
  ObjectRef after = module_object(8, "m");
  p.modules_changes.push_back(set("m", before, after, 50, false));
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
  Process p;
  ObjectRef a = module_object(1, "a");
  p.imports.push_back(import_of("a", a, 100, 200));
  p.imports.push_back(import_of("alias", a, 300, 400));
  ModulesChange clear;
  clear.op = ChangeOp::Clear;
  clear.time_ns = 500;
  p.modules_changes.push_back(clear);
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
