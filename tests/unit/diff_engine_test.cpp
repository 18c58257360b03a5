// imptrace diff: alignment, ranking, grouping, noise floor and output shapes, on
// hand-built traces (diff_runs.h).
#include <gtest/gtest.h>

#include <sstream>

#include "diff.h"
#include "diff_runs.h"
#include "json_check.h"

namespace imptrace {
namespace {

using diff::Finding;
using diff::Severity;
using testing::dump;
using testing::npugraph_run;
using testing::RunBuilder;
using testing::Variation;

Variation other_machine() {
  Variation v;
  v.pid = 77777;
  v.id_base = 0x5500aa000000ull;
  v.site = "/usr/local/lib/python3.10/dist-packages";
  v.workspace = "/home/ci/build-42/torchair";
  v.t0 = 987654;
  v.scale = 1;
  v.threads_swapped = true;
  return v;
}

const Finding* find_kind(const std::vector<Finding>& fs, const std::string& kind) {
  for (const auto& f : fs) {
    if (f.kind == kind) return &f;
    for (const auto& r : f.related)
      if (r.kind == kind) return &r;
  }
  return nullptr;
}

TEST(DiffEngine, NpugraphExReplacementIsFirstAndGrouped) {
  std::vector<model::Process> good{npugraph_run(false, Variation())};
  std::vector<model::Process> bad{npugraph_run(true, other_machine())};
  diff::Result r = diff::diff_runs(good, bad);
  std::string text = dump(r);
  ASSERT_FALSE(r.findings.empty()) << text;
  EXPECT_EQ(r.exit_status(), 1);

  const Finding& top = r.findings[0];
  EXPECT_EQ(top.kind, "sys_modules_replaced") << text;
  EXPECT_EQ(top.module, "npugraph_ex");
  EXPECT_EQ(top.severity, Severity::Error);
  ASSERT_FALSE(top.where.empty());
  EXPECT_EQ(top.where[0].file, "torch_npu/dynamo/__init__.py");
  EXPECT_EQ(top.where[0].line, 131u);
  EXPECT_NE(top.summary.find("sys.modules['npugraph_ex']"), std::string::npos) << top.summary;
  EXPECT_NE(top.summary.find("torch_npu/dynamo/__init__.py:131"), std::string::npos) << top.summary;
  EXPECT_NE(top.summary.find("_LazyNpuGraphEx"), std::string::npos);

  // One story: the binding on the old object and the failed lookup are related entries,
  // not findings of their own.
  bool binding = false, lookup = false, proxy = false;
  for (const auto& rel : top.related) {
    if (rel.kind == "binding_mismatch") {
      binding = true;
      EXPECT_EQ(rel.module, "npugraph_ex.npu_fx_compiler");
      EXPECT_NE(rel.summary.find("later replaced"), std::string::npos) << rel.summary;
    }
    if (rel.kind == "proxy_forward_failed") {
      lookup = true;
      EXPECT_EQ(rel.tests.size(), 3u);
      EXPECT_NE(rel.test.find("stream_test.py::StreamTest::"), std::string::npos);
      ASSERT_FALSE(rel.where.empty());
      EXPECT_EQ(rel.where[0].file, "npugraph_ex/tests/smoke/stream_test.py");
      EXPECT_EQ(rel.where[0].function, "StreamTest.setUp");
      EXPECT_NE(rel.summary.find("torch_npu.dynamo.npugraph_ex"), std::string::npos);
    }
    if (rel.kind == "proxy_in_sys_modules") proxy = true;
  }
  EXPECT_TRUE(binding) << text;
  EXPECT_TRUE(lookup) << text;
  EXPECT_TRUE(proxy) << text;
  for (size_t i = 1; i < r.findings.size(); ++i) {
    EXPECT_NE(r.findings[i].kind, "proxy_forward_failed") << text;
    EXPECT_NE(r.findings[i].kind, "binding_mismatch") << text;
  }
  EXPECT_FALSE(top.test.empty());
}

TEST(DiffEngine, SameBuildTwiceIsClean) {
  // Different pid, addresses, install prefix, workspace/cwd, times, thread interleaving.
  for (bool bad : {false, true}) {
    std::vector<model::Process> a{npugraph_run(bad, Variation())};
    Variation v = other_machine();
    v.scale = 3;
    std::vector<model::Process> b{npugraph_run(bad, v)};
    diff::Result r = diff::diff_runs(a, b);
    EXPECT_EQ(r.exit_status(), 0) << dump(r);
    EXPECT_EQ(r.count(Severity::Warning), 0u) << dump(r);
  }
}

// A pytest-xdist worker process of one run (its own pid and object addresses).
Variation xdist_worker(const std::string& id, int64_t pid) {
  Variation v;
  v.pid = pid;
  v.xdist_worker = id;
  v.id_base += pid << 20;
  return v;
}

TEST(DiffEngine, XdistWorkersWithShuffledTestsAreClean) {
  auto worker = [](const std::string& id, int64_t pid, bool extra) {
    RunBuilder r(xdist_worker(id, pid));
    r.import("os", "/usr/lib/python3.10/os.py", 1, 5);
    if (extra) r.import("test_other", r.ws("tests/test_other.py"), 10, 5, 0, 1, "tests/test_other.py::test_a");
    return r.process();
  };
  // Run 1: gw0 got test_other; run 2: gw1 got it.
  std::vector<model::Process> a{worker("gw0", 10, true), worker("gw1", 11, false)};
  std::vector<model::Process> b{worker("gw1", 21, true), worker("gw0", 20, false)};
  diff::Result r = diff::diff_runs(a, b);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  ASSERT_EQ(r.pairs.size(), 2u);
  for (const auto& p : r.pairs) {
    EXPECT_GE(p.good, 0);
    EXPECT_GE(p.bad, 0);
    EXPECT_EQ(r.good.processes[p.good].role, r.bad.processes[p.bad].role);
  }
}

// Anomalous bindings of one parent are one finding, items in import order; equal import
// indexes (the same import in two xdist workers) go by attribute name. The order must not
// depend on hash order, on the order processes are given in, or on record order: whichever
// binding comes first is the one the finding quotes (module, test).
TEST(DiffEngine, BindingTiesAreOrderedByAttributeWhateverTheInputOrder) {
  auto worker = [](const std::string& id, int64_t pid, int first, int last) {
    RunBuilder r(xdist_worker(id, pid));
    r.import("os", "/usr/lib/python3.10/os.py", 1, 5);
    model::Process p = r.process();
    for (int i = last; i >= first; --i) {  // recorded in reverse name order
      model::Binding b;
      b.import_index = 7;
      b.parent = "pkg";
      b.attribute = (i < 10 ? "c0" : "c") + std::to_string(i);
      b.status = model::BindingStatus::Missing;
      b.test = "tests/test_pkg.py::test_" + std::to_string(i);
      p.bindings.push_back(b);
    }
    return p;
  };
  std::vector<model::Process> good{worker("gw0", 10, 0, -1), worker("gw1", 11, 0, -1)};
  std::string first_text;
  for (bool swap : {false, true}) {
    // gw1 has the first names; either way round in the input.
    std::vector<model::Process> bad{worker("gw0", 20, 12, 29), worker("gw1", 21, 0, 14)};
    if (swap) std::swap(bad[0], bad[1]);
    diff::Result r = diff::diff_runs(good, bad);
    const Finding* f = find_kind(r.findings, "binding_mismatch");
    ASSERT_NE(f, nullptr) << dump(r);
    EXPECT_EQ(f->module, "pkg");
    EXPECT_EQ(f->test, "tests/test_pkg.py::test_0");
    EXPECT_EQ(f->bad,
              "status missing, bound_on unknown: c00, c01, c02, c03, c04, c05, c06, c07, c08, c09, "
              "c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, ... (10 more)");
    if (swap) EXPECT_EQ(dump(r), first_text);
    else first_text = dump(r);
  }
}

// The start both runs of a test share: os at tick 1, then json at tick 10, from the
// standard library in `stdlib`.
void imports_os_and_json(RunBuilder& r, const std::string& stdlib) {
  r.import("os", stdlib + "/os.py", 1, 5);
  r.import("json", stdlib + "/json/__init__.py", 10, 5);
}

TEST(DiffEngine, ExtraImportIsModuleAdded) {
  Variation v;
  RunBuilder g(v), b(other_machine());
  for (RunBuilder* r : {&g, &b}) imports_os_and_json(*r, "/usr/lib/python3.10");
  b.import("extra_mod", b.site("extra_mod.py"), 20, 5);
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  diff::Result r = diff::diff_runs(good, bad);
  EXPECT_EQ(r.exit_status(), 1);
  const Finding* f = find_kind(r.findings, "module_added");
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->module, "extra_mod");
  EXPECT_EQ(f->severity, Severity::Warning);
  // The first divergence of the sequence is at the extra import.
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_TRUE(r.pairs[0].divergence.diverges);
  EXPECT_EQ(r.pairs[0].divergence.bad_name, "extra_mod");
  EXPECT_EQ(r.pairs[0].divergence.good_pos, 2u);

  // And the other way round: module_missing.
  diff::Result back = diff::diff_runs(bad, good);
  EXPECT_NE(find_kind(back.findings, "module_missing"), nullptr) << dump(back);
}

TEST(DiffEngine, SwappedSysModulesEntryIsFound) {
  Variation v;
  RunBuilder g(v), b(other_machine());
  for (RunBuilder* r : {&g, &b}) {
    imports_os_and_json(*r, "/usr/lib/python3.10");
    r->import("simplejson", r->site("simplejson/__init__.py"), 20, 5);
    r->flush();
  }
  // bad: somebody does sys.modules['json'] = simplejson.
  testing::ChangeSpec c;
  c.key = "json";
  c.old_object = testing::Obj::module(b.id(2), "json", "/usr/lib/python3.10/json/__init__.py");
  c.new_object = testing::Obj::module(b.id(3), "simplejson", b.site("simplejson/__init__.py"));
  c.time_ns = b.t(40);
  c.stack = {testing::Loc{b.site("compat/shim.py"), 7, "<module>"}};
  b.b().add_modules_change(c);
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "sys_modules_replaced") << dump(r);
  EXPECT_EQ(r.findings[0].module, "json");
  ASSERT_FALSE(r.findings[0].where.empty());
  EXPECT_EQ(r.findings[0].where[0].file, "compat/shim.py");
  EXPECT_NE(r.findings[0].summary.find("same object as under 'simplejson'"), std::string::npos)
      << r.findings[0].summary << "\n" << r.findings[0].bad;
  EXPECT_EQ(r.exit_status(), 1);
}

TEST(DiffEngine, ReloadIsItsOwnFindingNotAReplacement) {
  Variation v;
  RunBuilder g(v), b(other_machine());
  for (RunBuilder* r : {&g, &b}) {
    imports_os_and_json(*r, "/usr/lib/python3.12");
    r->flush();
  }
  // bad: importlib.reload(json) as 3.12 records it, its pop then its store of the same object.
  for (uint32_t op : {fields::ModulesChange::DELETE, fields::ModulesChange::SET}) {
    testing::ChangeSpec c;
    c.key = "json";
    c.op = op;
    testing::Obj json = testing::Obj::module(b.id(2), "json", "/usr/lib/python3.12/json/__init__.py");
    if (op == fields::ModulesChange::SET) c.new_object = json;
    else c.old_object = json;
    c.by_import_system = true;
    c.time_ns = b.t(40) + (op == fields::ModulesChange::SET ? 1 : 0);
    c.stack = {testing::Loc{"<frozen importlib._bootstrap>", 870, "_exec"},
               testing::Loc{"/usr/lib/python3.12/importlib/__init__.py", 131, "reload"},
               testing::Loc{b.ws("conftest.py"), 9, "<module>"}};
    b.b().add_modules_change(c);
  }
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "module_reloaded") << dump(r);
  EXPECT_EQ(r.findings[0].severity, Severity::Warning);
  ASSERT_FALSE(r.findings[0].where.empty());
  EXPECT_EQ(r.findings[0].where[0].file, "conftest.py");
  EXPECT_EQ(r.findings[0].where[0].line, 9u);
  EXPECT_EQ(find_kind(r.findings, "sys_modules_replaced"), nullptr) << dump(r);
  EXPECT_EQ(r.exit_status(), 1);
  // The same reload in both runs is no difference.
  std::vector<model::Process> bad2{b.process()};
  EXPECT_EQ(find_kind(diff::diff_runs(bad2, bad).findings, "module_reloaded"), nullptr);
}

// An embedding host that initialises Python `lifetimes` times (0: a run whose trace marks
// no lifetime, as a plain `python` writes it), each lifetime importing the same modules as
// new objects and binding the child on its package. `replace_in`: in that lifetime, code
// assigns another module to sys.modules['csv'] after the import.
model::Process host_run(const Variation& v, int lifetimes, int replace_in = 0) {
  Variation hv = v;
  hv.argv = {"/opt/host/bin/embedder"};
  RunBuilder r(hv);
  for (int life = 1; life <= (lifetimes ? lifetimes : 1); ++life) {
    uint64_t t0 = (life - 1) * 1000;
    if (lifetimes) r.b().add_lifetime_begin(life, r.t(t0));
    r.import("csv", "/usr/lib/python3.12/csv.py", t0 + 10, 5);
    uint64_t pkg_index = r.next_index();
    testing::Obj pkg = r.import("emb_pkg", r.ws("emb_pkg/__init__.py"), t0 + 20, 30);
    uint64_t child_index = r.next_index();
    testing::Obj child = r.import("emb_pkg.child", r.ws("emb_pkg/child.py"), t0 + 25, 5, pkg_index + 1);
    r.flush();
    testing::BindingSpec bind;
    bind.import_index = child_index;
    bind.parent = "emb_pkg";
    bind.attribute = "child";
    bind.bound_on = pkg;
    bind.child = child;
    bind.attribute_value = child;
    bind.time_ns = r.t(t0 + 31);
    r.b().add_binding(bind);
    if (life == replace_in) {
      testing::ChangeSpec c;
      c.key = "csv";
      c.old_object = testing::Obj::module(r.id(pkg_index), "csv", "/usr/lib/python3.12/csv.py");
      c.new_object = testing::Obj::module(r.id(900 + life), "fastcsv", r.site("fastcsv.py"));
      c.time_ns = r.t(t0 + 60);
      c.stack = {testing::Loc{r.ws("host_init.py"), 3, "<module>"}};
      r.b().add_modules_change(c);
    }
    if (lifetimes) r.b().add_lifetime_end(life, r.t(t0 + 900));
  }
  return r.process();
}

TEST(DiffEngine, ReinitialisingHostsCompareLifetimeWithLifetime) {
  // Three lifetimes against two, against one, against a trace with no lifetimes: each
  // lifetime's modules are new objects, not replacements; nothing differs.
  for (int good_n : {0, 1, 2, 3}) {
    std::vector<model::Process> good{host_run(Variation(), good_n)}, bad{host_run(other_machine(), 3)};
    diff::Result r = diff::diff_runs(good, bad);
    EXPECT_EQ(r.exit_status(), 0) << good_n << "\n" << dump(r);
    for (const auto& f : r.findings) EXPECT_NE(f.severity, Severity::Error) << good_n << "\n" << dump(r);
    EXPECT_EQ(find_kind(r.findings, "sys_modules_replaced"), nullptr) << good_n << "\n" << dump(r);
    EXPECT_EQ(find_kind(r.findings, "duplicate_module"), nullptr) << good_n << "\n" << dump(r);
    EXPECT_EQ(find_kind(r.findings, "binding_mismatch"), nullptr) << good_n << "\n" << dump(r);
  }
  // A real replacement inside the second lifetime is still an error, told within that
  // lifetime: the module the assignment replaced, not the previous lifetime's.
  std::vector<model::Process> good{host_run(Variation(), 2)}, bad{host_run(other_machine(), 3, 2)};
  diff::Result r = diff::diff_runs(good, bad);
  const Finding* f = find_kind(r.findings, "sys_modules_replaced");
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->module, "csv");
  EXPECT_EQ(f->severity, Severity::Error);
  EXPECT_NE(f->summary.find("replaced: module 'csv'"), std::string::npos) << f->summary;
  EXPECT_NE(f->summary.find("-> module 'fastcsv'"), std::string::npos) << f->summary;
  ASSERT_FALSE(f->where.empty());
  EXPECT_EQ(f->where[0].file, "host_init.py");
  EXPECT_EQ(r.exit_status(), 1);
  // The same replacement in each run's second lifetime is no difference.
  std::vector<model::Process> good2{host_run(Variation(), 2, 2)};
  EXPECT_EQ(find_kind(diff::diff_runs(good2, bad).findings, "sys_modules_replaced"), nullptr);
}

TEST(DiffEngine, FailedImportIsFoundAndRankedAboveAdded) {
  RunBuilder g{Variation()}, b{other_machine()};
  for (RunBuilder* r : {&g, &b}) {
    r->import("os", "/usr/lib/python3.10/os.py", 1, 5);
    r->failed_import("optional_dep", 5, "ModuleNotFoundError", "No module named 'optional_dep'");
  }
  g.import("yaml", g.site("yaml/__init__.py"), 20, 5);
  b.import("newthing", b.site("newthing.py"), 15, 5);
  b.failed_import("yaml", 20, "ImportError", "cannot import name 'CLoader'");
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "import_failed") << dump(r);
  EXPECT_EQ(r.findings[0].module, "yaml");
  EXPECT_EQ(r.findings[0].severity, Severity::Error);
  // The failure both runs share is not a finding; yaml is not "missing" (it failed).
  for (const auto& f : r.findings) {
    EXPECT_NE(f.module, "optional_dep") << dump(r);
    EXPECT_FALSE(f.kind == "module_missing" && f.module == "yaml") << dump(r);
  }
  EXPECT_NE(find_kind(r.findings, "module_added"), nullptr);
}

TEST(DiffEngine, TimingThreshold) {
  auto run = [](uint64_t small_ns, uint64_t big_ns, int64_t pid) {
    Variation v;
    v.pid = pid;
    RunBuilder r(v);
    r.import("small", "/usr/lib/python3.10/small.py", 1, small_ns);
    r.import("big", "/usr/lib/python3.10/big.py", 100000000, big_ns);
    return r.process();
  };
  // Defaults 3x and +50 ms. small: 10 ms -> 40 ms (4x but +30 ms): nothing.
  // big: 30 ms -> 120 ms: import_slower.
  std::vector<model::Process> good{run(10000000, 30000000, 1)}, bad{run(40000000, 120000000, 2)};
  diff::Result r = diff::diff_runs(good, bad);
  const Finding* f = find_kind(r.findings, "import_slower");
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->module, "big");
  for (const auto& x : r.findings) EXPECT_NE(x.module, "small") << dump(r);
  // Timing alone is info: the diff stays green unless asked (--fail-on-slower).
  EXPECT_EQ(f->severity, diff::Severity::Info);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  diff::Options o;
  o.slower_is_warning = true;
  const auto strict = diff::diff_runs(good, bad, o);
  const Finding* w = find_kind(strict.findings, "import_slower");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->severity, diff::Severity::Warning);
  EXPECT_EQ(strict.exit_status(), 1);
  // A higher threshold on the command line silences it.
  o.slower_ratio = 5;
  EXPECT_EQ(diff::diff_runs(good, bad, o).exit_status(), 0);
  EXPECT_EQ(find_kind(diff::diff_runs(good, bad, o).findings, "import_slower"), nullptr);
  // A lower one finds small too.
  o.slower_ratio = 2;
  o.slower_min_ns = 5000000;
  const auto low = diff::diff_runs(good, bad, o);
  size_t slower = 0;
  for (const auto& x : low.findings) slower += x.kind == "import_slower";
  EXPECT_EQ(slower, 2u);
}

TEST(DiffEngine, RolesIgnorePrefixesAndPairByWorker) {
  model::Process a = npugraph_run(false, Variation());
  model::Process b = npugraph_run(false, other_machine());
  EXPECT_EQ(diff::role_of(a), diff::role_of(b));
}

TEST(DiffOutput, JsonShape) {
  std::vector<model::Process> good{npugraph_run(false, Variation())};
  std::vector<model::Process> bad{npugraph_run(true, other_machine())};
  diff::Result r = diff::diff_runs(good, bad);
  std::ostringstream s;
  diff::write_json(r, s);
  testing::Json j = testing::Json::parse(s.str());
  EXPECT_EQ(j["schema"].str, "imptrace.diff/1");
  ASSERT_TRUE(j.has("good"));
  ASSERT_TRUE(j.has("bad"));
  EXPECT_EQ(j["good"].kind, testing::Json::Object);
  const auto& fs = j["findings"];
  ASSERT_GT(fs.size(), 0u);
  for (const char* k : {"kind", "severity", "module", "summary", "good", "bad", "where", "test"})
    EXPECT_TRUE(fs[0].has(k)) << k;
  EXPECT_EQ(fs[0]["kind"].str, "sys_modules_replaced");
  EXPECT_EQ(fs[0]["severity"].str, "error");
  EXPECT_EQ(fs[0]["where"][0]["file"].str, "torch_npu/dynamo/__init__.py");
  EXPECT_TRUE(fs[0]["where"][0].has("line"));
  EXPECT_TRUE(fs[0]["where"][0].has("function"));
  EXPECT_GT(fs[0]["related"].size(), 0u);
}

TEST(DiffOutput, MarkdownIsCappedAndTextIsPlain) {
  // Thousands of findings: every module's origin changed.
  RunBuilder g{Variation()}, b{other_machine()};
  for (int i = 0; i < 3000; ++i) {
    std::string name = "pkg_" + std::to_string(i) + "_with_a_rather_long_module_name_for_size";
    g.import(name, g.site("old/" + name + ".py"), 10 + i, 1);
    b.import(name, b.site("new/" + name + ".py"), 10 + i, 1);
  }
  std::vector<model::Process> good{g.process()}, bad{b.process()};
  diff::Result r = diff::diff_runs(good, bad);
  EXPECT_GE(r.findings.size(), 3000u);
  std::ostringstream md;
  diff::write_markdown(r, md);
  EXPECT_LT(md.str().size(), 60u * 1024u);
  EXPECT_NE(md.str().find("Truncated"), std::string::npos);
  EXPECT_NE(md.str().find("| # | severity | kind | module | summary |"), std::string::npos);
  EXPECT_NE(md.str().find("<details>"), std::string::npos);

  std::string text = dump(r);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST(DiffOutput, MarkdownHeadsAStorysRelatedFindingsOnce) {
  // The npugraph_ex story: a replaced key with several related findings.
  std::vector<model::Process> good{npugraph_run(false, Variation())}, bad{npugraph_run(true, other_machine())};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  ASSERT_GT(r.findings[0].related.size(), 1u) << dump(r);
  size_t with_related = 0;
  for (const auto& f : r.findings) with_related += !f.related.empty();
  std::ostringstream md;
  diff::write_markdown(r, md);
  const std::string m = md.str();
  size_t headings = 0;
  for (size_t at = m.find("related"); at != std::string::npos; at = m.find("related", at + 1))
    headings += (at == 0 || m[at - 1] == '\n');
  EXPECT_EQ(headings, with_related) << m;
}

TEST(DiffOutput, HtmlIsSelfContainedAndEscaped) {
  std::vector<model::Process> good{npugraph_run(false, Variation())};
  Variation v = other_machine();
  std::vector<model::Process> bad{npugraph_run(true, v)};
  bad[0].argv.push_back("<script>alert(1)</script>");
  diff::Result r = diff::diff_runs(good, bad);
  std::ostringstream s;
  diff::write_html(r, good, bad, s);
  std::string h = s.str();
  EXPECT_EQ(h.find("<script>alert"), std::string::npos);
  EXPECT_EQ(h.find("http://"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  EXPECT_NE(h.find("Why: sys.modules['npugraph_ex']"), std::string::npos);
  EXPECT_NE(h.find("_LazyNpuGraphEx"), std::string::npos);
}

}  // namespace
}  // namespace imptrace

namespace imptrace {
namespace {

TEST(DiffEngine, ProbesThroughProxiesAreInfoAndSingleRunsPair) {
  auto run = [](bool bad, const testing::Variation& v, const std::string& script) {
    testing::RunBuilder r(v);
    r.import("os", "/usr/lib/python3.10/os.py", 1, 5);
    r.flush();
    if (bad) {
      testing::AccessSpec a;
      a.proxy = testing::Obj::proxy(r.id(500), "py._vendored_packages.apipkg.ApiModule", "py.path");
      a.attribute = "__file__";
      a.ok = false;
      a.error_type = "AttributeError";
      a.error_message = "__file__";
      a.stack = {testing::Loc{"/usr/lib/python3.10/inspect.py", 992, "getmodule"}};
      r.b().add_proxy_access(a);
    }
    model::Process p = r.process();
    p.argv = {"python3", script};
    return p;
  };
  testing::Variation v2;
  v2.pid = 99;
  // Different script locations (two checkouts): still one pair, no process_added.
  std::vector<model::Process> good{run(false, testing::Variation(), "/src/a/check.py")};
  std::vector<model::Process> bad{run(true, v2, "/tmp/other/place/check.py")};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_GE(r.pairs[0].good, 0);
  EXPECT_GE(r.pairs[0].bad, 0);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  const Finding* f = find_kind(r.findings, "proxy_forward_failed");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::Info);
}

}  // namespace
}  // namespace imptrace

namespace imptrace {
namespace {

// The same successful access through a proxy, repeated 10 times in one run and 100,000 in
// the other (the tracer counted the repeats): one info finding, nothing louder; the same
// counts on both sides: nothing.
TEST(DiffEngine, RepeatCountsAloneAreInfo) {
  auto run = [](uint64_t repeats) {
    testing::RunBuilder r((testing::Variation()));
    r.import("lazy_pkg", "/src/lazy_pkg.py", 1, 5);
    r.flush();
    testing::AccessSpec a;
    a.proxy = testing::Obj::proxy(r.id(500), "lazy_pkg.Forwarding", "lazy_pkg");
    a.attribute = "value";
    a.stack = {testing::Loc{"/src/loop.py", 8, "reads"}};
    a.serial = 1;
    r.b().add_proxy_access(a);
    r.b().add_proxy_access_summary(1, repeats);
    return r.process();
  };
  std::vector<model::Process> few{run(9)}, many{run(99999)}, many_again{run(99999)};
  diff::Result r = diff::diff_runs(few, many);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  for (const auto& f : r.findings) EXPECT_EQ(f.severity, Severity::Info) << dump(r);
  const Finding* f = find_kind(r.findings, "proxy_access_repeats");
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_NE(f->summary.find("ran 10 times in the good run and 100000 times in the bad"), std::string::npos)
      << f->summary;
  EXPECT_EQ(find_kind(diff::diff_runs(many, many_again).findings, "proxy_access_repeats"), nullptr);
}

}  // namespace
}  // namespace imptrace
