// Command output on the scenario trace: the contract's JSON shapes (export, why), the
// chrome export, and that show/tree say what matters.
#include <gtest/gtest.h>

#include <sstream>

#include "commands.h"
#include "json_check.h"
#include "scenario.h"
#include "trace_reader.h"
#include "trace_reading.h"

using namespace imptrace;
using namespace imptrace::testing;

namespace {
std::vector<model::Process> scenario_processes() {
  TraceBuilder b;
  build_npugraph_scenario(b);
  model::Process p;
  EXPECT_TRUE(parsed(b, p));
  p.source_file = "scenario.pb";
  std::vector<model::Process> procs;
  procs.push_back(std::move(p));
  return procs;
}
// `del sys.modules[key]` at time_ns, `old_object` in it.
ChangeSpec deletion(const char* key, const Obj& old_object, uint64_t time_ns) {
  ChangeSpec del;
  del.key = key;
  del.op = F::ModulesChange::DELETE;
  del.old_object = old_object;
  del.time_ns = time_ns;
  return del;
}
void expect_location(const Json& loc, const std::string& file, double line) {
  ASSERT_EQ(loc.kind, Json::Object);
  EXPECT_EQ(loc["file"].str, file);
  EXPECT_EQ(loc["line"].num, line);
  EXPECT_EQ(loc["function"].kind, Json::String);
}
}  // namespace

TEST(Export, JsonContractShape) {
  std::ostringstream out;
  export_json(scenario_processes(), out);
  Json j = Json::parse(out.str());
  EXPECT_EQ(j["schema"].str, "imptrace.export/1");
  ASSERT_EQ(j["processes"].size(), 1u);
  const Json& p = j["processes"][0];
  for (const char* k : {"pid", "ppid", "argv", "executable", "python", "imports"})
    EXPECT_TRUE(p.has(k)) << k;
  EXPECT_EQ(p["pid"].num, 4242);
  EXPECT_EQ(p["argv"][1].str, "app.py");
  const Json& imports = p["imports"];
  ASSERT_EQ(imports.size(), 5u);
  for (const auto& im : imports.items)
    for (const char* k : {"name", "begin_ns", "end_ns", "thread", "parent_import", "ok", "error",
                          "object", "origin", "loader", "importer"})
      EXPECT_TRUE(im.has(k)) << k;
  EXPECT_EQ(imports[0]["name"].str, "torch_npu");
  EXPECT_TRUE(imports[0]["parent_import"].is_null());
  EXPECT_EQ(imports[2]["parent_import"].num, 1);
  EXPECT_EQ(imports[2]["end_ns"].num, 3500);
  EXPECT_TRUE(imports[0]["error"].is_null());
  EXPECT_EQ(imports[3]["ok"].b, false);
  EXPECT_EQ(imports[3]["error"].str, "ModuleNotFoundError: No module named 'torch_npu._missing'");
  EXPECT_TRUE(imports[3]["object"].is_null());
  const Json& obj = imports[2]["object"];
  EXPECT_EQ(obj["id"].str, "obj:200");
  EXPECT_EQ(obj["type"].str, "module");
  EXPECT_TRUE(obj["is_module"].b);
  // Locations are relative to their sys.path entry.
  expect_location(imports[0]["importer"], "test_smoke.py", 3);
  expect_location(imports[2]["importer"], "torch_npu/dynamo/__init__.py", 12);
  // Extra sections.
  ASSERT_EQ(p["modules_changes"].size(), 2u);
  EXPECT_EQ(p["modules_changes"][1]["new"]["id"].str, "obj:400");
  expect_location(p["modules_changes"][1]["stack"][0], "torch_npu/utils/_dynamo.py", 42);
  EXPECT_EQ(p["modules_changes"][1]["during_import"].num, 0);
  EXPECT_EQ(p["bindings"][0]["status"].str, "on_proxy");
  EXPECT_EQ(p["proxy_accesses"][0]["outcome"].str.rfind("AttributeError: ", 0), 0u);
}

TEST(Export, ChromeTraceEvents) {
  std::ostringstream out;
  export_chrome(scenario_processes(), out);
  Json j = Json::parse(out.str());
  const Json& events = j["traceEvents"];
  size_t complete = 0, instant = 0;
  for (const auto& e : events.items) {
    EXPECT_TRUE(e.has("ph"));
    EXPECT_TRUE(e.has("pid"));
    if (e["ph"].str == "X") {
      ++complete;
      EXPECT_TRUE(e.has("ts") && e.has("dur") && e.has("tid") && e.has("name"));
    }
    if (e["ph"].str == "i") ++instant;
  }
  EXPECT_EQ(complete, 5u);
  EXPECT_EQ(instant, 3u);  // 2 sys.modules changes + 1 proxy access
}

TEST(Why, JsonContractShape) {
  std::ostringstream out;
  why_json(build_why(scenario_processes(), "npugraph_ex"), out);
  Json j = Json::parse(out.str());
  EXPECT_EQ(j["schema"].str, "imptrace.why/1");
  EXPECT_EQ(j["module"].str, "npugraph_ex");

  const Json& entries = j["entries"];
  ASSERT_EQ(entries.size(), 2u) << out.str();
  for (const auto& e : entries.items)
    for (const char* k : {"object", "type", "is_module", "origin", "via", "set_by", "replaced_by", "process"})
      EXPECT_TRUE(e.has(k)) << k;
  EXPECT_EQ(entries[0]["object"].str, "obj:200");
  EXPECT_EQ(entries[0]["via"].str, "import");
  EXPECT_TRUE(entries[0]["is_module"].b);
  EXPECT_EQ(entries[0]["origin"].str, "/x/site-packages/npugraph_ex/__init__.py");
  EXPECT_EQ(entries[0]["replaced_by"].str, "obj:400");
  EXPECT_EQ(entries[0]["process"].num, 4242);
  EXPECT_EQ(entries[1]["object"].str, "obj:400");
  EXPECT_EQ(entries[1]["type"].str, "torch_npu.dynamo._LazyNpuGraphEx");
  EXPECT_FALSE(entries[1]["is_module"].b);
  EXPECT_EQ(entries[1]["via"].str, "assignment");
  expect_location(entries[1]["set_by"], "torch_npu/utils/_dynamo.py", 42);
  EXPECT_TRUE(entries[1]["replaced_by"].is_null());

  const Json& children = j["children"];
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(children[0]["name"].str, "npu_fx_compiler");
  EXPECT_EQ(children[0]["module"].str, "npugraph_ex.npu_fx_compiler");
  EXPECT_EQ(children[0]["bound_on"].str, "obj:400");
  EXPECT_EQ(children[0]["status"].str, "on_proxy");

  const Json& accesses = j["proxy_accesses"];
  ASSERT_EQ(accesses.size(), 1u);
  EXPECT_EQ(accesses[0]["object"].str, "obj:400");
  EXPECT_EQ(accesses[0]["attribute"].str, "npu_fx_compiler");
  EXPECT_EQ(accesses[0]["outcome"].str,
            "AttributeError: module 'torch_npu.dynamo.npugraph_ex' has no attribute 'npu_fx_compiler'");
  EXPECT_EQ(accesses[0]["forwarded_to"].str, "torch_npu.dynamo.npugraph_ex");
  expect_location(accesses[0]["where"], "test_smoke.py", 12);
  EXPECT_EQ(accesses[0]["test"].str, kTestId);
}

TEST(Why, ForwardedToModuleCountsAndUnknownModuleIsEmpty) {
  auto procs = scenario_processes();
  WhyReport r = build_why(procs, "torch_npu.dynamo.npugraph_ex");
  EXPECT_TRUE(r.entries.empty());
  EXPECT_EQ(r.proxy_accesses.size(), 1u);  // forwarded to a module of that name
  WhyReport none = build_why(procs, "no.such.module");
  std::ostringstream out;
  why_text(none, out);
  EXPECT_NE(out.str().find("Nothing recorded"), std::string::npos);
  std::ostringstream js;
  why_json(none, js);
  Json j = Json::parse(js.str());
  EXPECT_EQ(j["entries"].size(), 0u);
}

TEST(Why, DeletionAndSelfReplacement) {
  TraceBuilder b;
  ChangeSpec ins;
  ins.key = "m";
  ins.new_object = Obj::module(0x1, "m");
  ins.by_import_system = true;
  ins.time_ns = 10;
  b.add_modules_change(ins);
  ChangeSpec self;  // sys.modules[__name__] = obj, during the import of m
  self.key = "m";
  self.old_object = Obj::module(0x1, "m");
  self.new_object = Obj::proxy(0x2, "m.Wrapper");
  self.time_ns = 20;
  self.stack = {Loc{"/other/m.py", 9, "<module>"}};
  b.add_modules_change(self);
  auto im = ImportSpec::make(0, "m", 5, 30);
  im.object = Obj::proxy(0x2, "m.Wrapper");
  im.origin = "/other/m.py";
  b.add_import(im);
  b.add_modules_change(deletion("m", Obj::proxy(0x2, "m.Wrapper"), 50));
  model::Process p;
  ASSERT_TRUE(parsed(b, p));
  WhyReport r = build_why({p}, "m");
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries[0].replaced_by.id, 0x2u);
  EXPECT_FALSE(r.entries[1].via_import);
  EXPECT_EQ(r.entries[1].set_by.file, "/other/m.py");  // under no sys.path entry: unchanged
  EXPECT_TRUE(r.entries[1].removed);
  std::ostringstream out;
  why_text(r, out);
  EXPECT_NE(out.str().find("replaced by m.Wrapper"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("removed from sys.modules"), std::string::npos) << out.str();
}

// An import made by a package's __getattr__ (`from concurrent.futures import
// ThreadPoolExecutor`): why and export name the __getattr__ as the importer and the user's
// line as what triggered it.
TEST(Why, ImportByPackageGetattrNamesTheTrigger) {
  TraceBuilder b;
  b.add_import(ImportSpec::bound(0, "concurrent.futures", 1, 100, Obj::module(0x1, "concurrent.futures"),
                                 Loc{"/work/story.py", 1, "<module>"}));
  auto inner = ImportSpec::bound(1, "concurrent.futures.thread", 200, 50, Obj::module(0x2, "concurrent.futures.thread"),
                                 Loc{"/usr/lib/python3.11/concurrent/futures/__init__.py", 49, "__getattr__"});
  inner.trigger = Loc{"/work/story.py", 1, "<module>"};
  b.add_import(inner);
  model::Process p;
  ASSERT_TRUE(parsed(b, p));
  ASSERT_EQ(p.imports.size(), 2u);
  EXPECT_TRUE(p.imports[0].trigger.empty());
  EXPECT_EQ(p.imports[1].trigger.file, "/work/story.py");
  EXPECT_EQ(p.imports[1].trigger.line, 1u);

  WhyReport r = build_why({p}, "concurrent.futures.thread");
  ASSERT_EQ(r.imports.size(), 1u);
  EXPECT_EQ(r.imports[0].trigger.line, 1u);
  std::ostringstream text;
  why_text(r, text);
  EXPECT_NE(text.str().find("__init__.py:49 in __getattr__, triggered at /work/story.py:1"), std::string::npos)
      << text.str();
  std::ostringstream wj;
  why_json(r, wj);
  Json j = Json::parse(wj.str());
  expect_location(j["imports"][0]["trigger"], "/work/story.py", 1);
  EXPECT_EQ(j["imports"][0]["importer"]["function"].str, "__getattr__");
  expect_location(j["entries"][0]["triggered_at"], "/work/story.py", 1);

  std::ostringstream ej;
  std::vector<model::Process> procs;
  procs.push_back(p);
  export_json(procs, ej);
  Json e = Json::parse(ej.str());
  const Json& imports = e["processes"][0]["imports"];
  EXPECT_TRUE(imports[0]["trigger"].is_null());
  expect_location(imports[1]["trigger"], "/work/story.py", 1);
  EXPECT_EQ(imports[1]["importer"]["function"].str, "__getattr__");
}

// A removal seen only at the next import boundary says so in why's JSON and text.
TEST(Why, RemovalSeenAtBoundarySaysSo) {
  TraceBuilder b;
  b.add_import(ImportSpec::bound(0, "json", 1, 10, Obj::module(0x1, "json"), Loc{"/work/story.py", 1, "<module>"}));
  ChangeSpec del = deletion("json", Obj::module(0x1, "json"), 50);
  del.precision = F::ModulesChange::AT_BOUNDARY;
  del.stack = {Loc{"/work/story.py", 5, "<module>"}};
  b.add_modules_change(del);
  model::Process p;
  ASSERT_TRUE(parsed(b, p));
  WhyReport r = build_why({p}, "json");
  ASSERT_EQ(r.entries.size(), 1u);
  std::ostringstream wj;
  why_json(r, wj);
  Json j = Json::parse(wj.str());
  EXPECT_EQ(j["entries"][0]["precision"].str, "at_boundary");
  EXPECT_TRUE(j["entries"][0]["removed"].b);
  std::ostringstream text;
  why_text(r, text);
  EXPECT_NE(text.str().find("removed from sys.modules, seen at the next import, at /work/story.py:5"),
            std::string::npos) << text.str();
  EXPECT_NE(text.str().find("put there by the import system at /work/story.py:1"), std::string::npos)
      << text.str();
}

// show's anomaly for a replacement seen only at the next import says so.
TEST(Show, ReplacementSeenAtBoundarySaysSo) {
  TraceBuilder b;
  ChangeSpec set;
  set.key = "json";
  set.old_object = Obj::module(0x1, "json");
  set.new_object = Obj::module(0x2, "json");
  set.precision = F::ModulesChange::AT_BOUNDARY;
  set.stack = {Loc{"/work/story.py", 5, "<module>"}};
  b.add_modules_change(set);
  ChangeSpec exact = set;
  exact.key = "csv";
  exact.precision = F::ModulesChange::EXACT;
  b.add_modules_change(exact);
  model::Process p;
  ASSERT_TRUE(parsed(b, p));
  std::vector<Anomaly> a = find_anomalies(p);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NE(a[0].text.find("-> module 'json' (obj:2), seen at the next import"), std::string::npos) << a[0].text;
  EXPECT_EQ(a[1].text.find("seen at the next import"), std::string::npos) << a[1].text;
}

TEST(Show, MentionsFailuresAndAnomalies) {
  std::ostringstream out;
  show_text(scenario_processes(), out);
  const std::string s = out.str();
  for (const char* needle : {"process 4242", "imports: 5 (1 failed)", "torch_npu._missing",
                             "sys.modules['npugraph_ex'] replaced by non-import code",
                             "torch_npu/utils/_dynamo.py:42", "proxy under sys.modules['npugraph_ex']",
                             "not bound on its parent: on_proxy", "failed: AttributeError",
                             "test_smoke.py:12", "dict watcher unavailable"})
    EXPECT_NE(s.find(needle), std::string::npos) << needle << "\n" << s;
}

TEST(Tree, NestsAndMarksFailures) {
  std::ostringstream out;
  tree_text(scenario_processes(), out);
  const std::string s = out.str();
  EXPECT_NE(s.find("  torch_npu\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    torch_npu.dynamo\n"), std::string::npos) << s;
  EXPECT_NE(s.find("      npugraph_ex\n"), std::string::npos) << s;
  EXPECT_NE(s.find("torch_npu._missing  FAILED ModuleNotFoundError"), std::string::npos) << s;
  // torch_npu: 9 us cumulative, minus children 3 + 0.1 us = 5.9 us self.
  EXPECT_NE(s.find("0.009       0.006  torch_npu\n"), std::string::npos) << s;
}
