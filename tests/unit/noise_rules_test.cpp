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


// ---- a package's own lazy modules ---------------------------------------------------------
// Debian's pytest: `_pytest/compat.py:22` imports py; py/__init__.py calls apipkg.initpkg,
// which replaces sys.modules['py'] with an ApiModule proxy and puts more under 'py.path',
// ... while py is being imported: the package's design. What stays an anomaly is the same
// proxy under a key outside py's namespace, one put after py's import, or one written by
// another package imported under py.

enum class Write {
  DuringOwnImport,       // exactly, while py is the innermost import
  ByOwnSubmodule,        // exactly, while py._error (under py) is the innermost import
  AfterImport,           // exactly, after py's import finished
  ByOtherPackage,        // exactly, while 'plugin', imported under py, is the innermost import
  SeenAtOwnEnd,          // seen only at py's end boundary (3.11's specialised store)
  SeenAtNextStart,       // seen only at the start of compat's next import (another line)
  SeenAtSameLineStart,   // seen after py ended, but compat's next import stands at py's line
  SeenAtUnrecordedStart, // seen at the start of an import whose record is not in the trace
};

model::Process apipkg_run(const std::string& key, Write w) {
  RunBuilder r{Variation()};
  const std::string compat_py = r.site("_pytest/compat.py");
  const Loc import_py{compat_py, 22, "<module>"};
  const Loc initpkg{r.site("py/_vendored_packages/apipkg/__init__.py"), 64, "initpkg"};
  const Obj py_module = Obj::module(r.id(800), "py", r.site("py/__init__.py"));
  const Obj api = Obj::proxy(r.id(900), "py._vendored_packages.apipkg.ApiModule", "py");
  const Obj path_proxy = Obj::proxy(r.id(901), "py._vendored_packages.apipkg.ApiModule", key);
  auto add_import = [&](uint64_t index, const std::string& name, uint64_t begin, uint64_t dur, uint64_t parent,
                        const Obj& object, const Loc& importer) {
    auto im = testing::ImportSpec::bound(index, name, r.t(begin), dur, object, importer, parent);
    im.origin = object.file;
    r.b().add_import(im);
  };
  // compat #0 [10, 110), py #1 [20, 50) under it; py._error #2 or plugin #2 [24, 27) under py.
  add_import(0, "_pytest.compat", 10, 100, 0, Obj::module(r.id(700), "_pytest.compat", compat_py),
             Loc{r.site("_pytest/python.py"), 3, "<module>"});
  add_import(1, "py", 20, 30, 1, api, import_py);
  if (w == Write::ByOwnSubmodule || w == Write::ByOtherPackage) {
    const std::string name = w == Write::ByOwnSubmodule ? "py._error" : "plugin";
    add_import(2, name, 24, 3, 2, Obj::module(r.id(750), name, r.site(name + ".py")),
               Loc{r.site("py/__init__.py"), 11, "<module>"});
  }
  ChangeSpec own;
  own.key = "py";
  own.old_object = py_module;
  own.new_object = api;
  own.stack = {initpkg, Loc{r.site("py/__init__.py"), 20, "<module>"}};
  own.time_ns = r.t(40);
  own.during_import = 2;
  r.b().add_modules_change(own);
  ChangeSpec c;
  c.key = key;
  c.new_object = path_proxy;
  c.stack = {initpkg};
  c.time_ns = r.t(41);
  c.during_import = 2;
  switch (w) {
    case Write::DuringOwnImport: break;
    case Write::ByOwnSubmodule:
    case Write::ByOtherPackage:
      c.time_ns = r.t(25);
      c.during_import = 3;
      c.stack = {Loc{r.site(w == Write::ByOwnSubmodule ? "py/_error.py" : "plugin.py"), 91, "<module>"}};
      break;
    case Write::AfterImport:
      c.time_ns = r.t(60);
      c.during_import = 1;
      c.stack = {Loc{compat_py, 40, "<module>"}};
      break;
    case Write::SeenAtOwnEnd:
    case Write::SeenAtNextStart:
    case Write::SeenAtSameLineStart:
    case Write::SeenAtUnrecordedStart:
      c.precision = fields::ModulesChange::AT_BOUNDARY;
      c.time_ns = r.t(50) + 1;
      c.during_import = 1;
      c.stack = {w == Write::SeenAtNextStart || w == Write::SeenAtUnrecordedStart ? Loc{compat_py, 23, "<module>"}
                                                                                  : import_py};
      // (A process killed inside that import leaves no record of it.)
      if (w != Write::SeenAtUnrecordedStart)
          add_import(3, "shutil", 52, 2, 1, Obj::module(r.id(760), "shutil", "/usr/lib/python3.11/shutil.py"),
                   w == Write::SeenAtSameLineStart ? import_py : Loc{compat_py, 23, "<module>"});
      break;
  }
  r.b().add_modules_change(c);
  testing::BindingSpec b;
  b.import_index = 4;
  b.parent = "py";
  b.attribute = "_path";
  b.bound_on = api;
  b.child = Obj::module(r.id(810), "py._path", r.site("py/_path/__init__.py"));
  b.status = fields::Binding::ON_PROXY;
  b.time_ns = r.t(70);
  r.b().add_binding(b);
  return r.process();
}

std::string shown(const model::Process& p, bool all = false) {
  std::ostringstream out;
  show_text({p}, out, all);
  return out.str();
}

TEST(ShowAnomalies, LazyModulesAPackageSetsUpUnderItsOwnNamesAreNormal) {
  for (Write w : {Write::DuringOwnImport, Write::ByOwnSubmodule, Write::SeenAtOwnEnd}) {
    model::Process p = apipkg_run("py.path", w);
    EXPECT_TRUE(find_anomalies(p).empty()) << shown(p);
    const std::string text = shown(p);
    EXPECT_NE(text.find("module wrappers and lazy proxies packages put under their own names while imported: 2 "
                        "(py: 2; show --all lists them)"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("children bound on what their package put under its own name: 1"), std::string::npos) << text;
    // --all lists each, with the import that did it.
    const std::string all = shown(p, true);
    EXPECT_NE(all.find("sys.modules['py.path']: py._vendored_packages.apipkg.ApiModule 'py.path' [proxy]"),
              std::string::npos)
        << all;
    EXPECT_NE(all.find(", during the import of py\n"), std::string::npos) << all;
  }
}

TEST(ShowAnomalies, TheSameProxyUnderAForeignKeyIsAnAnomaly) {
  // torch_npu's shape: a key outside the importing package's namespace.
  model::Process p = apipkg_run("npugraph_ex", Write::DuringOwnImport);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
  EXPECT_NE(shown(p).find("proxy under sys.modules['npugraph_ex']"), std::string::npos) << shown(p);
  // A name that only starts like the package's is not in its namespace.
  p = apipkg_run("pyx", Write::DuringOwnImport);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
}

TEST(ShowAnomalies, AProxyPutUnderThePackagesNameAfterItsImportIsAnAnomaly) {
  model::Process p = apipkg_run("py.path", Write::AfterImport);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
  // The replacement of 'py' itself, made during the import, stays the package's design.
  EXPECT_EQ(anomalies_of(p, "sys_modules_replaced"), 0u) << shown(p);
}

TEST(ShowAnomalies, AnotherPackageImportedUnderItWritingIntoItsNamesIsAnAnomaly) {
  model::Process p = apipkg_run("py.path", Write::ByOtherPackage);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
}

TEST(ShowAnomalies, AnInsertionSeenAtABoundaryIsDatedOnlyWhenTheBoundaryIsKnown) {
  // Seen at the start of compat's next import: it was made while compat was innermost.
  model::Process p = apipkg_run("py.path", Write::SeenAtNextStart);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
  // py's end and the next import's start stand at the same line: either could have seen it.
  p = apipkg_run("py.path", Write::SeenAtSameLineStart);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
  // The stack stands at another line than py's importer: not py's end, whatever follows.
  p = apipkg_run("py.path", Write::SeenAtUnrecordedStart);
  EXPECT_EQ(anomalies_of(p, "proxy_in_sys_modules"), 1u) << shown(p);
}

TEST(ShowAnomalies, OwnNamespaceImportNamesTheImportThatOwnedTheWrite) {
  model::Process p = apipkg_run("py.error", Write::ByOwnSubmodule);
  const model::ModulesChange* c = nullptr;
  for (const auto& m : p.modules_changes)
    if (m.key == "py.error") c = &m;
  ASSERT_NE(c, nullptr);
  const model::Import* by = model::own_namespace_import(p, *c);
  ASSERT_NE(by, nullptr);
  EXPECT_EQ(by->name, "py");  // py._error wrote it, into py's namespace, not its own
  EXPECT_TRUE(model::in_namespace("py.error", "py"));
  EXPECT_FALSE(model::in_namespace("pyx.error", "py"));
  EXPECT_FALSE(model::in_namespace("py", "py.error"));
}

TEST(DiffLazyModules, APackagesOwnProxiesOnlyTheBadRunImportedAreInfo) {
  // Only the bad run imports py: that is module_added; its ApiModule under 'py.path' is the
  // package's design (info), not a proxy error ranked above it.
  std::vector<model::Process> good{RunBuilder(Variation()).process()};
  std::vector<model::Process> bad{apipkg_run("py.path", Write::DuringOwnImport)};
  diff::Result r = diff::diff_runs(good, bad);
  auto proxies = all_of_kind(r.findings, "proxy_in_sys_modules");
  ASSERT_FALSE(proxies.empty()) << dump(r);
  for (const Finding* f : proxies) EXPECT_EQ(f->severity, Severity::Info) << dump(r);
  bool told = false;
  for (const Finding* f : proxies) told |= f->summary.find("the import of py put") != std::string::npos;
  EXPECT_TRUE(told) << dump(r);
  // A foreign key stays an error.
  bad = {apipkg_run("npugraph_ex", Write::DuringOwnImport)};
  r = diff::diff_runs(good, bad);
  proxies = all_of_kind(r.findings, "proxy_in_sys_modules");
  ASSERT_FALSE(proxies.empty()) << dump(r);
  EXPECT_EQ(proxies[0]->severity, Severity::Error) << dump(r);
}

}  // namespace
}  // namespace imptrace
