// Import time as people look at it: the tree's options (--min-ms, --depth, --sort, --top,
// --under, several processes), failed imports handled vs propagated (and how show, diff
// and the one-run report use it).
#include <gtest/gtest.h>

#include <sstream>

#include "commands.h"
#include "diff.h"
#include "import_time.h"
#include "trace_builder.h"
#include "trace_reader.h"
#include "trace_reading.h"

using namespace imptrace;
using namespace imptrace::testing;

namespace {

constexpr uint64_t kMs = 1000000;

ImportSpec imp(uint64_t index, const std::string& name, double begin_ms, double dur_ms, uint64_t parent = 0,
               uint64_t thread = 1) {
  auto s = ImportSpec::make(index, name, static_cast<uint64_t>(begin_ms * kMs),
                            static_cast<uint64_t>(dur_ms * kMs), parent);
  s.thread = thread;
  s.importer = Loc{"/work/app/app.py", static_cast<uint32_t>(index + 1), "<module>"};
  return s;
}

ImportSpec failed(ImportSpec s, const std::string& type, const std::string& msg) {
  s.ok = false;
  s.error_type = type;
  s.error_message = msg;
  return s;
}

// Thread 1:
//   app 10 ms [torch 6 ms [torch.nn 3 ms, torch._C 0.2 ms], json 2.9 ms (self 2.9)]
//   small 0.1 ms
//   copy 1 ms [org.python.core FAILED [org FAILED]]    try/except in copy: handled
//   broken FAILED [missing_dep FAILED]                  broken's body failed; the thread
//   after 1 ms                                          went on after broken
// Thread 2: worker_fail FAILED, nothing after it on thread 2 (thread 1 goes on).
// Thread 3: t3fail FAILED, then an import with no Python importer (the interpreter's own).
model::Process timing_process(int64_t pid = 4242, bool with_failures = true) {
  HeaderSpec h;
  h.pid = pid;
  TraceBuilder b(true, h);
  b.add_sys_path({"/work/app"});
  std::vector<ImportSpec> specs = {
      imp(0, "app", 0, 10),
      imp(1, "torch", 1, 6, 1),
      imp(2, "torch.nn", 2, 3, 2),
      imp(3, "torch._C", 5.5, 0.2, 2),
      imp(4, "json", 7.05, 2.9, 1),
      imp(5, "small", 11, 0.1),
      imp(6, "copy", 12, 1),
  };
  if (with_failures) {
    specs.push_back(failed(imp(7, "org.python.core", 12.1, 0.1, 7), "ModuleNotFoundError", "No module named 'org'"));
    specs.push_back(failed(imp(8, "org", 12.15, 0.02, 8), "ModuleNotFoundError", "No module named 'org'"));
    specs.push_back(failed(imp(9, "broken", 14, 1), "ImportError", "cannot import name 'x'"));
    specs.push_back(failed(imp(10, "missing_dep", 14.1, 0.1, 10), "ModuleNotFoundError", "No module named 'missing_dep'"));
    specs.push_back(imp(11, "after", 16, 1));
    specs.push_back(failed(imp(12, "worker_fail", 15, 0.5, 0, 2), "ImportError", "worker"));
    specs.push_back(failed(imp(13, "t3fail", 30, 0.5, 0, 3), "ModuleNotFoundError", "No module named 't3fail'"));
    ImportSpec tb = imp(14, "traceback", 31, 0.5, 0, 3);
    tb.importer.reset();
    specs.push_back(tb);
  } else {
    specs.push_back(imp(7, "after", 16, 1));
  }
  for (const auto& s : specs) b.add_import(s);
  model::Process p;
  EXPECT_TRUE(parsed(b, p));
  p.source_file = "timing-" + std::to_string(pid) + ".pb";
  return p;
}

std::string tree(const std::vector<model::Process>& procs, const std::vector<std::string>& args) {
  std::vector<std::string> all = args;
  all.insert(all.begin(), "x.pb");
  timing::TreeOptions o = parse_tree_options(parse_args(all, {"--min-ms", "--depth", "--sort", "--top", "--under"}));
  std::ostringstream out;
  tree_text(procs, o, out);
  return out.str();
}

bool has_line(const std::string& s, const std::string& name) {
  // A tree line ends with the module name (or its failure).
  return s.find("  " + name + "\n") != std::string::npos || s.find("  " + name + "  FAILED") != std::string::npos;
}

size_t pos_of(const std::string& s, const std::string& name) {
  size_t p = s.find("  " + name + "\n");
  return p == std::string::npos ? s.find("  " + name + "  FAILED") : p;
}

}  // namespace

TEST(ImportTree, SelfTimeAndThreads) {
  model::Process p = timing_process();
  timing::ImportTree t = timing::build_tree(p);
  ASSERT_EQ(t.threads.size(), 3u);
  EXPECT_EQ(t.threads[0].id, 1u);
  EXPECT_EQ(t.threads[0].roots.size(), 5u);  // app small copy broken after
  EXPECT_EQ(t.self_ns[1], static_cast<uint64_t>(2.8 * kMs));  // torch: 6 - 3 - 0.2
  EXPECT_EQ(t.self_ns[4], static_cast<uint64_t>(2.9 * kMs));
  EXPECT_EQ(t.depth[2], 2u);
}

TEST(ImportFate, HandledAndPropagated) {
  model::Process p = timing_process();
  auto fate = timing::classify_failures(p);
  auto of = [&](const std::string& name) {
    for (size_t i = 0; i < p.imports.size(); ++i)
      if (p.imports[i].name == name) return fate[i];
    ADD_FAILURE() << name;
    return timing::Fate::Ok;
  };
  EXPECT_EQ(of("app"), timing::Fate::Ok);
  // copy.py's try/except: the enclosing import finished OK.
  EXPECT_EQ(of("org.python.core"), timing::Fate::Handled);
  // The parent-package step of that same dotted import shares its fate.
  EXPECT_EQ(of("org"), timing::Fate::Handled);
  // broken's body failed because missing_dep did: that failure stopped something.
  EXPECT_EQ(of("missing_dep"), timing::Fate::Propagated);
  // broken is top-level and its thread imported more afterwards.
  EXPECT_EQ(of("broken"), timing::Fate::Handled);
  // Nothing on thread 2 after it, whatever thread 1 did.
  EXPECT_EQ(of("worker_fail"), timing::Fate::Propagated);
  // An import without a Python importer afterwards is not the program going on.
  EXPECT_EQ(of("t3fail"), timing::Fate::Propagated);
}

TEST(ImportFate, WithoutImportersAnyLaterImportMeansTheThreadWentOn) {
  model::Process p = timing_process();
  for (auto& im : p.imports) im.importer = model::Location();  // as the floor build writes
  auto fate = timing::classify_failures(p);
  EXPECT_EQ(fate[13], timing::Fate::Handled);     // t3fail, then traceback on thread 3
  EXPECT_EQ(fate[12], timing::Fate::Propagated);  // worker_fail: nothing after on thread 2
}

TEST(TreeOptions, DefaultShowsEverythingWithProcessHeader) {
  std::string s = tree({timing_process()}, {});
  EXPECT_NE(s.find("process 4242: python3 app.py  [python 3.11.2 static, 15 imports, timing-4242.pb]"),
            std::string::npos) << s;
  for (const char* n : {"app", "torch", "torch.nn", "torch._C", "json", "small", "org", "after", "traceback"})
    EXPECT_TRUE(has_line(s, n)) << n << "\n" << s;
  EXPECT_NE(s.find("missing_dep  FAILED ModuleNotFoundError: No module named 'missing_dep' (propagated)"),
            std::string::npos) << s;
  EXPECT_NE(s.find("org.python.core  FAILED ModuleNotFoundError: No module named 'org' (handled)"),
            std::string::npos) << s;
  EXPECT_EQ(s.find("imports shown"), std::string::npos) << s;  // nothing cut, no count
}

TEST(TreeOptions, MinMsHidesShortImports) {
  std::string s = tree({timing_process()}, {"--min-ms", "1"});
  for (const char* n : {"app", "torch", "torch.nn", "json", "copy", "broken", "after"})
    EXPECT_TRUE(has_line(s, n)) << n << "\n" << s;
  for (const char* n : {"torch._C", "small", "org.python.core", "missing_dep", "worker_fail"})
    EXPECT_FALSE(has_line(s, n)) << n << "\n" << s;
  EXPECT_NE(s.find("(7 of 12 imports shown)"), std::string::npos) << s;
}

TEST(TreeOptions, DepthLimitsLevels) {
  std::string s = tree({timing_process()}, {"--depth", "1"});
  EXPECT_TRUE(has_line(s, "app"));
  EXPECT_FALSE(has_line(s, "torch")) << s;
  s = tree({timing_process()}, {"--depth=2"});
  EXPECT_TRUE(has_line(s, "torch")) << s;
  EXPECT_TRUE(has_line(s, "json")) << s;
  EXPECT_FALSE(has_line(s, "torch.nn")) << s;
}

TEST(TreeOptions, SortOrdersEachLevel) {
  std::string start = tree({timing_process()}, {});
  std::string cumul = tree({timing_process()}, {"--sort", "cumulative"});
  std::string self = tree({timing_process()}, {"--sort", "self"});
  // torch: cumulative 6, self 2.8; json: cumulative 2.9, self 2.9.
  EXPECT_LT(pos_of(start, "torch"), pos_of(start, "json"));
  EXPECT_LT(pos_of(cumul, "torch"), pos_of(cumul, "json"));
  EXPECT_GT(pos_of(self, "torch"), pos_of(self, "json")) << self;
  // Roots: small (0.1 ms) starts before copy (1 ms) but sorts after it.
  EXPECT_LT(pos_of(start, "small"), pos_of(start, "copy"));
  EXPECT_GT(pos_of(cumul, "small"), pos_of(cumul, "copy")) << cumul;
}

TEST(TreeOptions, TopKeepsTheFirstOfEachLevel) {
  std::string s = tree({timing_process()}, {"--sort", "cumulative", "--top", "1"});
  EXPECT_TRUE(has_line(s, "app"));
  EXPECT_TRUE(has_line(s, "torch"));
  EXPECT_TRUE(has_line(s, "torch.nn"));
  EXPECT_FALSE(has_line(s, "json")) << s;
  EXPECT_FALSE(has_line(s, "torch._C")) << s;
  EXPECT_FALSE(has_line(s, "copy")) << s;
  EXPECT_NE(s.find("... 1 more (2.900 ms)"), std::string::npos) << s;  // json, under app
  EXPECT_NE(s.find("... 4 more ("), std::string::npos) << s;            // the other roots
}

TEST(TreeOptions, UnderKeepsAModulesSubtrees) {
  std::string s = tree({timing_process()}, {"--under", "torch"});
  for (const char* n : {"torch", "torch.nn", "torch._C"}) EXPECT_TRUE(has_line(s, n)) << n << "\n" << s;
  for (const char* n : {"app", "json", "small"}) EXPECT_FALSE(has_line(s, n)) << n << "\n" << s;
  EXPECT_NE(s.find("(6.000 ms in imports of torch)"), std::string::npos) << s;
  EXPECT_NE(s.find("    6.000       2.800  torch\n"), std::string::npos) << s;  // depth 0 now
  s = tree({timing_process()}, {"--under", "torch.nn"});
  EXPECT_TRUE(has_line(s, "torch.nn"));
  EXPECT_FALSE(has_line(s, "torch")) << s;
  s = tree({timing_process()}, {"--under", "tor"});  // a prefix, not a package
  EXPECT_NE(s.find("(no import of tor or its submodules)"), std::string::npos) << s;
}

TEST(TreeOptions, SeveralProcessesEachWithAHeader) {
  std::string s = tree({timing_process(100), timing_process(200, false)}, {"--depth", "1"});
  size_t a = s.find("process 100: python3 app.py  [python 3.11.2 static, 15 imports, timing-100.pb]");
  size_t b = s.find("process 200: python3 app.py  [python 3.11.2 static, 8 imports, timing-200.pb]");
  ASSERT_NE(a, std::string::npos) << s;
  ASSERT_NE(b, std::string::npos) << s;
  EXPECT_LT(a, b);
  EXPECT_FALSE(has_line(s.substr(b), "broken"));
}

TEST(TreeOptions, BadValuesAreUsageErrors) {
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{"--min-ms", "abc"}, {"--min-ms", "-1"}, {"--min-ms", "nan"},
                                             {"--depth", "0"}, {"--depth", "x"}, {"--depth", "-2"},
                                             {"--top", "0"}, {"--top", "1.5"}, {"--sort", "name"},
                                             {"--under", ""}, {"--under", "torch."}, {"--under", "a/b"}}) {
    EXPECT_THROW(tree({timing_process()}, args), UsageError) << args[0] << " " << args[1];
  }
}

TEST(ShowFailures, PropagatedListedHandledCounted) {
  std::ostringstream out;
  show_text({timing_process()}, out);
  std::string s = out.str();
  EXPECT_NE(s.find("imports: 15 (6 failed)"), std::string::npos) << s;
  EXPECT_NE(s.find("failed imports that propagated (the enclosing import, the test or the program stopped): 3"),
            std::string::npos) << s;
  EXPECT_NE(s.find("    missing_dep: ModuleNotFoundError"), std::string::npos) << s;
  EXPECT_NE(s.find("    worker_fail: ImportError: worker"), std::string::npos) << s;
  EXPECT_NE(s.find("failed imports handled by their importer: 3 (org.python.core, org, broken; show --all lists them)"),
            std::string::npos) << s;
  EXPECT_EQ(s.find("    org.python.core: "), std::string::npos) << s;  // counted, not listed
  std::ostringstream all;
  show_text({timing_process()}, all, true);
  EXPECT_NE(all.str().find("    org.python.core: ModuleNotFoundError: No module named 'org'\n"
                           "      imported at app.py:8 in <module>"),
            std::string::npos) << all.str();
}

TEST(DiffFailures, NewlyPropagatingRanksAboveNewlyHandled) {
  std::vector<model::Process> good{timing_process(1, false)}, bad{timing_process(1, true)};
  diff::Result r = diff::diff_runs(good, bad);
  const diff::Finding* prop = nullptr;
  const diff::Finding* hand = nullptr;
  size_t prop_at = 0, hand_at = 0;
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const auto& f = r.findings[i];
    if (f.kind != "import_failed") continue;
    if (f.module == "missing_dep") prop = &f, prop_at = i;
    if (f.module == "org.python.core") hand = &f, hand_at = i;
  }
  std::ostringstream dump;
  diff::write_text(r, dump, false);
  ASSERT_NE(prop, nullptr) << dump.str();
  ASSERT_NE(hand, nullptr) << dump.str();
  EXPECT_LT(prop_at, hand_at) << dump.str();
  EXPECT_EQ(prop->severity, diff::Severity::Warning);  // not imported in good: warning
  EXPECT_EQ(hand->severity, diff::Severity::Info);     // handled: one level lower
  EXPECT_NE(hand->summary.find("(handled by its importer)"), std::string::npos) << hand->summary;
  EXPECT_EQ(prop->summary.find("handled"), std::string::npos) << prop->summary;
}

TEST(RunReport, OnePageWithChartFailuresAndStories) {
  std::vector<model::Process> procs{timing_process()};
  procs[0].argv.push_back("<script>alert(1)</script>");
  std::ostringstream out;
  write_run_html(procs, "traces/", out);
  std::string h = out.str();
  EXPECT_EQ(h.find("<script>alert"), std::string::npos);
  EXPECT_EQ(h.find("http://"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  EXPECT_NE(h.find("<div class=\"flame\" data-src=\"flame-1\">"), std::string::npos);
  // One record per import: name, begin, cumulative, self, fate, importer ('<' as \u003c,
  // so no string can close the data element), test, parent position, marked, error.
  EXPECT_NE(h.find(",3000000,3000000,0,\"app.py:3 in \\u003cmodule>\",\"\",1,0,\"\"]"), std::string::npos) << h;
  EXPECT_NE(h.find("No module named 'missing_dep'\"]"), std::string::npos) << h;
  // Propagated failures in their own table; handled ones apart.
  size_t prop = h.find("<table class=\"propagated\">");
  size_t hand = h.find("<table class=\"handled\">");
  ASSERT_NE(prop, std::string::npos);
  ASSERT_NE(hand, std::string::npos);
  EXPECT_NE(h.substr(prop, hand - prop).find("missing_dep"), std::string::npos);
  EXPECT_EQ(h.substr(prop, hand - prop).find("org.python.core"), std::string::npos);
  EXPECT_NE(h.substr(hand).find("org.python.core"), std::string::npos);
}
