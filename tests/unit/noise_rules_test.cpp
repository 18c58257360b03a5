// The rules that keep normal Python out of the findings and anomalies: what a proxy is
// (proxy_decision.h), import blocking with None, one file seen through two sys.path
// entries, failure reporting (failure_reporting.h), and show's normal-Python counts.
#include <gtest/gtest.h>

#include <sstream>

#include "commands.h"
#include "diff.h"
#include "diff_runs.h"
#include "failure_reporting.h"
#include "proxy_decision.h"

namespace imptrace {
namespace {

using diff::Finding;
using diff::Severity;
using testing::AccessSpec;
using testing::ChangeSpec;
using testing::dump;
using testing::Loc;
using testing::Obj;
using testing::RunBuilder;
using testing::Variation;

std::vector<const Finding*> all_of_kind(const std::vector<Finding>& fs, const std::string& kind) {
  std::vector<const Finding*> out;
  for (const auto& f : fs) {
    if (f.kind == kind) out.push_back(&f);
    for (const auto& r : f.related)
      if (r.kind == kind) out.push_back(&r);
  }
  return out;
}

// One object set under `key` by assignment, in a run of its own.
model::ObjectRef object_under(RunBuilder& r, const std::string& key, const Obj& o) {
  ChangeSpec c;
  c.key = key;
  c.new_object = o;
  c.time_ns = r.t(50);
  c.stack = {Loc{r.ws("app.py"), 3, "<module>"}};
  r.b().add_modules_change(c);
  model::Process p = r.process();
  for (const auto& ch : p.modules_changes)
    if (ch.key == key) return ch.new_object;
  ADD_FAILURE() << "no change for " << key;
  return model::ObjectRef();
}

// ---- what a proxy is ---------------------------------------------------------------------

TEST(ProxyDecision, DeprecatedTypingClassesAreNotProxies) {
  // typing.io on 3.8-3.11: a class whose metaclass overrides __getattribute__ to warn.
  RunBuilder r{Variation()};
  r.b().add_proxy_class("typing._DeprecatedType", Loc(), "typing", false,
                        Loc{"/usr/lib/python3.11/typing.py", 3350, "_DeprecatedType.__getattribute__"});
  model::ObjectRef o = object_under(r, "typing.io", Obj::proxy(r.id(700), "typing._DeprecatedType", "typing.io"));
  EXPECT_FALSE(o.is_proxy());
  EXPECT_FALSE(model::is_import_blocker(o));
}

TEST(ProxyDecision, NoneBlocksAnImportAndIsNoProxy) {
  RunBuilder r{Variation()};
  r.b().add_proxy_class("NoneType", Loc(), "builtins", false);
  model::ObjectRef o = object_under(r, "blocked_mod", Obj::proxy(r.id(701), "NoneType"));
  EXPECT_FALSE(o.is_proxy());
  EXPECT_TRUE(model::is_import_blocker(o));
}

TEST(ProxyDecision, ModuleSubclassOverridingGetattrIsAProxy) {
  RunBuilder r{Variation()};
  Obj lazy = Obj::proxy(r.id(702), "pkg.LazyModule", "lazy");
  lazy.flags |= testing::F::ObjectFlags::module_subclass;
  r.b().add_proxy_class("pkg.LazyModule", Loc{r.site("pkg/__init__.py"), 10, "LazyModule.__getattr__"}, "pkg", true);
  EXPECT_TRUE(object_under(r, "lazy", lazy).is_proxy());
}

TEST(ProxyDecision, PlainClassIsAProxyOnlyWhenAnAccessReachedAModule) {
  for (bool forwarded : {false, true}) {
    RunBuilder r{Variation()};
    Obj shim = Obj::proxy(r.id(703), "compat.Shim", "shim");
    r.b().add_proxy_class("compat.Shim", Loc{r.site("compat.py"), 5, "Shim.__getattr__"}, "compat", false);
    if (forwarded) {
      AccessSpec a;
      a.proxy = shim;
      a.attribute = "dumps";
      a.ok = true;
      a.forwarded_to = Obj::module(r.id(704), "json", "/usr/lib/python3.11/json/__init__.py");
      a.stack = {Loc{r.ws("app.py"), 4, "<module>"}};
      r.b().add_proxy_access(a);
    }
    EXPECT_EQ(object_under(r, "shim", shim).is_proxy(), forwarded);
  }
}

TEST(ProxyDecision, UndescribedCandidateKeepsTheTracersMark) {
  // No ProxyClass record (proxy instrumentation off): nothing to decide with.
  RunBuilder r{Variation()};
  EXPECT_TRUE(object_under(r, "thing", Obj::proxy(r.id(705), "pkg.Thing", "thing")).is_proxy());
}

// ---- import_blocked ----------------------------------------------------------------------

TEST(ImportBlocked, NoneOnlyInBadIsItsOwnWarningNotAnError) {
  RunBuilder g{Variation()}, b{Variation()};
  for (RunBuilder* r : {&g, &b}) r->import("os", "/usr/lib/python3.10/os.py", 1, 5);
  b.b().add_proxy_class("NoneType", Loc(), "builtins", false);
  ChangeSpec c;
  c.key = "blocked_mod";
  c.new_object = Obj::proxy(b.id(800), "NoneType");
  c.time_ns = b.t(40);
  c.stack = {Loc{b.ws("app.py"), 2, "<module>"}};
  b.b().add_modules_change(c);
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  diff::Result r = diff::diff_runs(good, bad);
  auto blocked = all_of_kind(r.findings, "import_blocked");
  ASSERT_EQ(blocked.size(), 1u) << dump(r);
  EXPECT_EQ(blocked[0]->module, "blocked_mod");
  EXPECT_EQ(blocked[0]->severity, Severity::Warning);
  ASSERT_FALSE(blocked[0]->where.empty());
  EXPECT_EQ(blocked[0]->where[0].file, "app.py");
  EXPECT_EQ(r.count(Severity::Error), 0u) << dump(r);
  EXPECT_TRUE(all_of_kind(r.findings, "proxy_in_sys_modules").empty());
}

// ---- origins -----------------------------------------------------------------------------

diff::Result yaml_origins(const std::string& bad_origin, bool package_dir_on_path) {
  Variation v;
  RunBuilder g(v), b(v);
  if (package_dir_on_path) b.b().add_sys_path({v.workspace, v.site, v.site + "/yaml", ""}, 5);
  g.import("yaml", g.site("yaml/__init__.py"), 10, 5);
  b.import("yaml", bad_origin, 10, 5);
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  return diff::diff_runs(good, bad);
}

TEST(Origins, SameFileThroughAPackageDirectoryOnSysPathIsNotAChange) {
  Variation v;
  diff::Result r = yaml_origins(v.site + "/yaml/__init__.py", true);
  EXPECT_TRUE(all_of_kind(r.findings, "origin_changed").empty()) << dump(r);
  // The same file spelled with "." and "//".
  r = yaml_origins(v.site + "/./yaml//__init__.py", false);
  EXPECT_TRUE(all_of_kind(r.findings, "origin_changed").empty()) << dump(r);
}

TEST(Origins, AnotherFileIsAChangeNamingTheEntriesItIsUnder) {
  Variation v;
  diff::Result r = yaml_origins(v.site + "/yaml_fork/__init__.py", true);
  auto changed = all_of_kind(r.findings, "origin_changed");
  ASSERT_EQ(changed.size(), 1u) << dump(r);
  EXPECT_NE(changed[0]->summary.find("yaml_fork/__init__.py under " + v.site), std::string::npos)
      << changed[0]->summary;
  EXPECT_NE(changed[0]->summary.find("(was yaml/__init__.py under " + v.site + ")"), std::string::npos)
      << changed[0]->summary;
}

// ---- failure reporting -------------------------------------------------------------------

TEST(FailureReporting, FramesOfTheRunnersReporting) {
  using model::Location;
  EXPECT_TRUE(model::is_failure_reporting_frame(Location{"/usr/lib/python3/dist-packages/_pytest/_code/code.py", 1, "f"}));
  EXPECT_TRUE(model::is_failure_reporting_frame(Location{"/x/site-packages/_pytest/reports.py", 1, "f"}));
  EXPECT_TRUE(model::is_failure_reporting_frame(Location{"/usr/lib/python3.11/unittest/result.py", 1, "f"}));
  EXPECT_TRUE(model::is_failure_reporting_frame(Location{"/usr/lib/python3.11/traceback.py", 1, "f"}));
  EXPECT_TRUE(model::is_failure_reporting_frame(Location{"/x/_pytest/nodes.py", 1, "Node._repr_failure_py"}));
  EXPECT_FALSE(model::is_failure_reporting_frame(Location{"/x/mypkg/traceback.py", 1, "f"}));
  EXPECT_FALSE(model::is_failure_reporting_frame(Location{"/x/_pytest/python.py", 1, "Module._importtestmodule"}));
  EXPECT_FALSE(model::is_failure_reporting_frame(Location{"/usr/lib/python3.11/inspect.py", 992, "getmodule"}));
}

TEST(FailureReporting, LookupsWhileReportingAreOneInfoEntryBelowTheCauses) {
  auto run = [](bool bad) {
    RunBuilder r{Variation()};
    r.import("os", "/usr/lib/python3.10/os.py", 1, 5);
    if (bad) {
      for (const char* key : {"py.path", "py.io", "py.code"}) {
        AccessSpec a;
        a.proxy = Obj::proxy(r.id(900 + key[3]), "py._vendored_packages.apipkg.ApiModule", key);
        a.attribute = "__file__";
        a.ok = false;
        a.error_type = "AttributeError";
        a.error_message = "__file__";
        a.stack = {Loc{"/usr/lib/python3.10/inspect.py", 992, "getmodule"},
                   Loc{"/usr/lib/python3.10/inspect.py", 900, "getsourcefile"},
                   Loc{r.site("_pytest/_code/code.py"), 700, "FormattedExcinfo.repr_traceback_entry"}};
        a.test = "t.py::test_x";
        r.b().add_proxy_access(a);
      }
    }
    return r.process();
  };
  std::vector<model::Process> good{run(false)}, bad{run(true)};
  diff::Result r = diff::diff_runs(good, bad);
  EXPECT_TRUE(all_of_kind(r.findings, "proxy_forward_failed").empty()) << dump(r);
  auto reporting = all_of_kind(r.findings, "failure_reporting");
  ASSERT_EQ(reporting.size(), 1u) << dump(r);
  EXPECT_EQ(reporting[0]->severity, Severity::Info);
  EXPECT_NE(reporting[0]->summary.find("3 failed lookups"), std::string::npos) << reporting[0]->summary;
  EXPECT_EQ(&r.findings.back(), reporting[0]);
}

// ---- show: normal Python is not an anomaly -----------------------------------------------

model::Import ok_import(uint64_t index, const char* name, uint64_t id, uint64_t begin, uint64_t end) {
  model::Import im;
  im.index = index;
  im.name = name;
  im.ok = true;
  im.object.present = true;
  im.object.flags = 1;
  im.object.id = id;
  im.object.type = "module";
  im.begin_ns = begin;
  im.end_ns = end;
  return im;
}

size_t anomalies_of(const model::Process& p, const std::string& kind) {
  size_t n = 0;
  for (const auto& a : find_anomalies(p)) n += a.kind == kind;
  return n;
}

TEST(ShowAnomalies, DunderProbesAnsweredWithAttributeErrorAreNormal) {
  model::Process p;
  model::ProxyAccess a;
  a.kind = model::ProxyAccessKind::ModuleGetattr;
  a.proxy = ok_import(0, "io", 1, 0, 1).object;
  a.attribute = "__path__";
  a.error_type = "AttributeError";
  a.stack = {model::Location{"/usr/lib/python3.11/tokenize.py", 31, "<module>"}};
  p.proxy_accesses.push_back(a);
  EXPECT_TRUE(is_expected_access_failure(a));
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 0u);
  a.attribute = "heavy";  // a name the program asked for
  p.proxy_accesses.push_back(a);
  EXPECT_FALSE(is_expected_access_failure(a));
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 1u);
  a.attribute = "__path__";
  a.error_type = "RuntimeError";  // a dunder that broke, not a probe's answer
  EXPECT_FALSE(is_expected_access_failure(a));
}

TEST(ShowAnomalies, AnAttributeErrorTheProgramCaughtIsNormal) {
  // hasattr(lazymod, "x") through the module's own __getattr__, on the main thread.
  model::Process p;
  p.imports.push_back(ok_import(0, "lazymod", 1, 0, 10));
  model::ProxyAccess a;
  a.kind = model::ProxyAccessKind::ModuleGetattr;
  a.proxy = p.imports[0].object;
  a.attribute = "x";
  a.error_type = "AttributeError";
  a.error_message = "module 'lazymod' has no attribute 'x'";
  a.thread = p.imports[0].thread;
  a.time_ns = 20;
  a.stack = {model::Location{"/work/main.py", 2, "<module>"}};
  p.proxy_accesses.push_back(a);
  // The program went on: it imported more afterwards.
  p.imports.push_back(ok_import(1, "json", 2, 30, 40));
  EXPECT_TRUE(model::caught_attribute_error(p, p.proxy_accesses[0]));
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 0u);
  // Nothing after it and an exit with 1: it may be what ended the program.
  p.imports.pop_back();
  p.end.how = model::ProcessEnd::How::Exit;
  p.end.status = 1;
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 1u);
  // Nothing after it and an exit with 0: the main thread did not die of it.
  p.end.status = 0;
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 0u);
  // Only a test's failure reporting came next: not caught, for all the trace knows.
  p.end.status = 1;
  model::ProxyAccess report = a;
  report.attribute = "__file__";
  report.time_ns = 50;
  report.stack = {model::Location{"/usr/lib/python3/dist-packages/_pytest/_code/code.py", 900, "repr"}};
  p.proxy_accesses.push_back(report);
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 1u);
  // The import running then failed with this very error: it went out through that import.
  p.proxy_accesses.pop_back();
  model::Import failed = ok_import(1, "pkg", 3, 15, 25);
  failed.ok = false;
  failed.error_type = "AttributeError";
  failed.error_message = a.error_message;
  p.imports.push_back(failed);
  p.imports.push_back(ok_import(2, "json", 2, 30, 40));
  p.proxy_accesses[0].during_import = 2;  // index + 1 of `pkg`
  EXPECT_FALSE(model::caught_attribute_error(p, p.proxy_accesses[0]));
  // Another error than AttributeError is never a hasattr's answer.
  p.proxy_accesses[0].during_import = 0;
  p.proxy_accesses[0].error_type = "ImportError";
  EXPECT_EQ(anomalies_of(p, "proxy_access_failed"), 1u);
}

TEST(ShowAnomalies, ChildBoundWhenItsOuterImportFinishedIsNormal) {
  // scipy.stats imports itself again (scipy's __getattr__) while it initialises: that
  // inner import's binding is missing; the outer one's, at its end, is bound.
  model::Process p;
  p.imports.push_back(ok_import(0, "scipy", 1, 0, 100));
  p.imports.push_back(ok_import(1, "scipy.stats", 2, 10, 90));
  p.imports.push_back(ok_import(2, "scipy.stats", 2, 40, 41));
  model::Binding inner, outer;
  inner.parent = outer.parent = "scipy";
  inner.attribute = outer.attribute = "stats";
  inner.status = model::BindingStatus::Missing;
  inner.time_ns = 41;
  outer.status = model::BindingStatus::Bound;
  outer.time_ns = 90;
  p.bindings = {inner, outer};
  EXPECT_EQ(bound_later(p), (std::vector<bool>{true, false}));
  EXPECT_EQ(anomalies_of(p, "binding_not_bound"), 0u);
  // Never bound afterwards: an anomaly.
  p.bindings = {inner};
  EXPECT_EQ(anomalies_of(p, "binding_not_bound"), 1u);
}

TEST(ShowAnomalies, RepeatImportsThatFoundTheModuleAreCountedApart) {
  model::Process p;
  p.imports.push_back(ok_import(0, "scipy.stats", 2, 10, 90));
  p.imports.push_back(ok_import(1, "scipy.stats", 2, 40, 41));
  p.imports.push_back(ok_import(2, "json", 3, 95, 99));
  p.imports.push_back(ok_import(3, "json", 4, 100, 110));  // another object: imported again
  EXPECT_EQ(repeat_imports(p), (std::vector<bool>{false, true, false, false}));
  std::ostringstream out;
  show_text({p}, out);
  // Counted as `run`, `diff` and `export` count them (every find-and-load), the repeat said apart
  // in the same label and nowhere else.
  EXPECT_NE(out.str().find("imports: 4 (0 failed; 1 found the module already loaded)"), std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("repeat imports"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace imptrace
