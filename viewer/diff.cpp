// `imptrace diff`'s engine entry: facts per process, groups per role, groups paired across
// the runs (then their processes), each pair compared, findings ranked. See diff.h for the
// rules. Linear in the size of the traces (hash tables keyed by module name), apart from
// sorting.
#include "diff.h"

#include <algorithm>
#include <map>

#include "diff_compare.h"
#include "enum_names.h"

namespace imptrace {
namespace diff {

const char* severity_name(Severity s) {
  static constexpr const char* kNames[] = {"info", "warning", "error"};
  return name_of<Severity::Error>(kNames, s, "info");
}

const char* kind_name(Kind k) {
  static constexpr const char* kNames[] = {
      "python_version_changed", "process_ended_abnormally", "exit_status_changed", "sys_modules_replaced",
      "proxy_in_sys_modules", "binding_on_proxy", "binding_mismatch", "proxy_forward_failed", "import_blocked",
      "import_failed", "module_reloaded", "duplicate_module", "process_missing", "process_added", "module_missing",
      "module_added",
      "loader_changed", "origin_changed", "import_order_changed", "import_slower", "proxy_access_repeats",
      "failure_reporting"};
  return name_of<Kind::FailureReporting>(kNames, k, "unknown");
}

int Result::exit_status() const { return count(Severity::Warning) ? 1 : 0; }

size_t Result::count(Severity at_least) const {
  size_t n = 0;
  for (const auto& f : findings) {
    if (f.severity >= at_least) ++n;
    for (const auto& r : f.related)
      if (r.severity >= at_least) ++n;
  }
  return n;
}

std::string role_of(const Process& p) {
  std::string w = worker_of(p);
  return group_of(p) + (w.empty() ? "" : " [xdist " + w + "]");
}

namespace {

// Facts of every process of one run, and the run's summary.
std::vector<ProcFacts> facts_of_run(const std::vector<Process>& ps, RunSummary& sum) {
  std::vector<ProcFacts> fs(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    fs[i].p = &ps[i];
    fs[i].index = static_cast<int>(i);
    build_facts(fs[i]);
    sum.processes.push_back({ps[i].pid, fs[i].role, ps[i].argv, ps[i].imports.size(), ps[i].python_version, ps[i].end});
    sum.imports += ps[i].imports.size();
    if (std::find(sum.paths.begin(), sum.paths.end(), ps[i].source_file) == sum.paths.end())
      sum.paths.push_back(ps[i].source_file);
  }
  return fs;
}

}  // namespace

std::string process_role_class(const Process& p) {
  if (!worker_of(p).empty()) return "xdist worker";
  auto is_pytest = [](const std::string& a) {
    std::string b = basename_of(a);
    return b == "pytest" || b == "py.test" || b.compare(0, 7, "pytest-") == 0;
  };
  const auto& argv = p.argv;
  if (!argv.empty() && is_pytest(argv[0])) return "pytest main";
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "-m") return i + 1 < argv.size() && (argv[i + 1] == "pytest" || argv[i + 1] == "py.test")
                                   ? "pytest main" : "";
    if (argv[i].empty() || argv[i][0] != '-') return is_pytest(argv[i]) ? "pytest main" : "";
  }
  return "";
}

namespace {

std::string role_class(const Group& g) { return process_role_class(*g.procs.front()->p); }

// For each bad group, the good group it is paired with, or -1: by key; then leftovers by
// the role they play (pytest's main process with pytest's main process whatever its options,
// -n 2 or serial; xdist workers with xdist workers); then by program and script; then by
// program alone.
std::vector<int> pair_groups(const std::vector<Group>& good, const std::vector<Group>& bad) {
  std::vector<int> match_of_bad(bad.size(), -1);
  std::vector<bool> good_used(good.size(), false);
  for (size_t i = 0; i < bad.size(); ++i)
    for (size_t j = 0; j < good.size(); ++j)
      if (!good_used[j] && good[j].key == bad[i].key) {
        match_of_bad[i] = static_cast<int>(j);
        good_used[j] = true;
        break;
      }
  for (size_t i = 0; i < bad.size(); ++i) {
    std::string role = role_class(bad[i]);
    if (match_of_bad[i] >= 0 || role.empty()) continue;
    for (size_t j = 0; j < good.size(); ++j)
      if (!good_used[j] && role_class(good[j]) == role) {
        match_of_bad[i] = static_cast<int>(j);
        good_used[j] = true;
        break;
      }
  }
  auto program = [](const Group& g) { return g.key.substr(0, g.key.find(' ')); };
  auto script = [](const Group& g) {
    const auto& argv = g.procs.front()->p->argv;
    for (size_t i = 1; i < argv.size(); ++i)
      if (!argv[i].empty() && argv[i][0] != '-') return basename_of(argv[i]);
    return std::string();
  };
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < bad.size(); ++i) {
      if (match_of_bad[i] >= 0) continue;
      for (size_t j = 0; j < good.size(); ++j)
        if (!good_used[j] && program(good[j]) == program(bad[i]) &&
            (pass == 1 || script(good[j]) == script(bad[i]))) {
          match_of_bad[i] = static_cast<int>(j);
          good_used[j] = true;
          break;
        }
    }
  return match_of_bad;
}

// A group only one run has: one finding, and its processes unpaired.
void unpaired_group(const Group& g, bool in_bad, Result& r, Findings& out) {
  Finding f;
  f.kind = in_bad ? Kind::ProcessAdded : Kind::ProcessMissing;
  f.severity = Severity::Warning;
  f.process = g.key;
  f.summary = std::string(in_bad ? "process only in the bad run: " : "process only in the good run: ") + g.key;
  if (role_class(g) == "xdist worker") {
    // One run used pytest-xdist and the other did not: a layout, not a cause. What the
    // workers did is compared through the runs' pooled stories (diff_runs).
    f.severity = Severity::Info;
    f.summary = std::string("xdist workers only in the ") + (in_bad ? "bad" : "good") +
                " run (the runs' process layouts differ; their stories are compared pooled): " + g.key;
  }
  std::string count = std::to_string(g.procs.size()) + " process(es)";
  f.bad = in_bad ? count : "none";
  f.good = in_bad ? "none" : count;
  out.add(std::move(f));
  for (const ProcFacts* p : g.procs) {
    r.pairs.push_back({p->role, in_bad ? -1 : p->index, in_bad ? p->index : -1, {}});
    if (in_bad) compare_ends(nullptr, *p, out);
  }
}

// Pairs the processes of two paired groups (by worker id, then in order) and compares the
// import order of each pair.
void pair_processes(const Group& good, const Group& bad, Result& r, Findings& out) {
  std::vector<bool> used(good.procs.size(), false);
  for (const ProcFacts* bp : bad.procs) {
    int found = -1;
    for (size_t j = 0; j < good.procs.size() && found < 0; ++j)
      if (!used[j] && good.procs[j]->worker == bp->worker) found = static_cast<int>(j);
    for (size_t j = 0; j < good.procs.size() && found < 0; ++j)
      if (!used[j]) found = static_cast<int>(j);
    PairInfo pi;
    pi.role = bp->role;
    pi.bad = bp->index;
    if (found >= 0) {
      used[found] = true;
      pi.good = good.procs[found]->index;
      compare_order(*good.procs[found], *bp, pi, out);
      compare_ends(good.procs[found], *bp, out);
    } else {
      compare_ends(nullptr, *bp, out);
    }
    r.pairs.push_back(std::move(pi));
  }
  for (size_t j = 0; j < good.procs.size(); ++j)
    if (!used[j]) r.pairs.push_back({good.procs[j]->role, good.procs[j]->index, -1, {}});
}

// Where the runs' process layouts differ (serial against pytest -n 2, a child only one run
// spawned), what happened in a process with no counterpart is still compared: every
// process of a run pooled into one group, against the other run's pool. A key replaced,
// a proxy, a child bound on the wrong object or a failing proxy access that some bad
// process has and no good process has is found there. Only what the pairs did not find
// already is kept.
void compare_pooled(std::vector<ProcFacts>& good, std::vector<ProcFacts>& bad, Findings& out) {
  if (good.empty() || bad.empty()) return;
  Group pool_good, pool_bad;  // built in place: a Group points into itself once built
  pool_good.key = pool_bad.key = "all processes";
  for (auto& f : good) pool_good.procs.push_back(&f);
  for (auto& f : bad) pool_bad.procs.push_back(&f);
  pool_good.build();
  pool_bad.build();
  std::vector<Finding> pooled;
  Findings to{out.options, pooled};
  compare_key_histories(pool_good, pool_bad, to);
  compare_child_bindings(pool_good, pool_bad, to);
  compare_accesses(pool_good, pool_bad, to);
  for (auto& f : pooled) {
    bool known = false;
    for (const auto& k : out.out) known |= k.kind == f.kind && k.module == f.module;
    if (!known) out.add(std::move(f));
  }
}

// Each finding about a module whose import native code entered names that code: the
// first such import in the bad run, else in the good run.
void attach_native_callers(const std::vector<Process>& good, const std::vector<Process>& bad,
                           std::vector<Finding>& findings) {
  std::map<std::string, const model::NativeCaller*> first;
  for (const auto* run : {&bad, &good})  // the bad run's first, kept over the good run's
    for (const Process& p : *run)
      for (const model::Import& im : p.imports)
        if (!im.native_caller.empty()) first.emplace(im.name.str(), &im.native_caller);
  for (Finding& f : findings) {
    auto it = f.module.empty() ? first.end() : first.find(f.module);
    if (it != first.end()) f.native_caller = *it->second;
  }
}

// Paired processes run by different Python versions: one finding that says so, ranked
// first as it frames the rest (a warning when the feature version differs, info for
// another patch release), whose parts are what each version's standard library did for
// itself (diff_modules.cpp, kVersionStory).
void version_story(const std::vector<Group>& good, const std::vector<Group>& bad, const std::vector<int>& match_of_bad,
                   std::vector<Finding>& findings) {
  std::vector<std::pair<std::string, std::string>> versions;  // (good, bad), each pair once
  std::vector<std::string> roles;
  for (size_t i = 0; i < bad.size(); ++i) {
    if (match_of_bad[i] < 0 || !python_versions_differ(good[match_of_bad[i]], bad[i])) continue;
    std::pair<std::string, std::string> v{python_version_of(*good[match_of_bad[i]].procs.front()->p),
                                          python_version_of(*bad[i].procs.front()->p)};
    if (std::find(versions.begin(), versions.end(), v) == versions.end()) versions.push_back(v);
    roles.push_back(bad[i].key);
  }
  if (versions.empty()) return;
  Finding f = python_version_finding(versions, roles, "the good run", "the bad run");
  for (auto it = findings.begin(); it != findings.end();) {
    if (it->story == kVersionStory) {
      it->story.clear();
      f.related.push_back(std::move(*it));
      it = findings.erase(it);
    } else {
      ++it;
    }
  }
  std::stable_sort(f.related.begin(), f.related.end(),
                   [](const Finding& a, const Finding& b) { return a.kind < b.kind; });
  findings.push_back(std::move(f));
}

}  // namespace

Finding python_version_finding(const std::vector<std::pair<std::string, std::string>>& versions,
                               const std::vector<std::string>& roles, const char* good_run, const char* bad_run) {
  auto feature = [](const std::string& v) { return v.substr(0, v.find('.', v.find('.') + 1)); };
  Finding f;
  f.kind = Kind::PythonVersionChanged;
  f.severity = Severity::Info;
  for (const auto& v : versions) {
    if (feature(v.first) != feature(v.second)) f.severity = Severity::Warning;
    f.good += (f.good.empty() ? "Python " : ", Python ") + v.first;
    f.bad += (f.bad.empty() ? "Python " : ", Python ") + v.second;
  }
  if (roles.size() == 1) f.process = roles[0];
  f.summary = "the runs used different Pythons: " + f.good + " in " + good_run + ", " + f.bad + " in " + bad_run +
              "; what their standard libraries do differently is told here, not as your code's";
  return f;
}

namespace {
Result diff_runs_as_read(const std::vector<Process>& good, const std::vector<Process>& bad, const Options& opts);
}  // namespace

// Processes cut short in both runs first meet at a common reach (diff_ends.cpp).
Result diff_runs(const std::vector<Process>& good, const std::vector<Process>& bad,
                 const Options& opts) {
  std::vector<Process> good_cut, bad_cut;
  std::vector<std::string> notes;
  if (cut_to_common_reach(good, bad, good_cut, bad_cut, notes)) {
    Result r = diff_runs_as_read(good_cut, bad_cut, opts);
    r.input_warnings.insert(r.input_warnings.end(), notes.begin(), notes.end());
    return r;
  }
  return diff_runs_as_read(good, bad, opts);
}

namespace {

Result diff_runs_as_read(const std::vector<Process>& good, const std::vector<Process>& bad,
                         const Options& opts) {
  Result r;
  r.options = opts;
  std::vector<ProcFacts> good_facts = facts_of_run(good, r.good);
  std::vector<ProcFacts> bad_facts = facts_of_run(bad, r.bad);
  std::vector<Group> good_groups = make_groups(good_facts), bad_groups = make_groups(bad_facts);
  std::vector<int> match_of_bad = pair_groups(good_groups, bad_groups);

  Findings out{r.options, r.findings};
  {
    std::vector<bool> paired(good_groups.size(), false);
    for (int m : match_of_bad)
      if (m >= 0) paired[m] = true;
    std::vector<const Group*> good_unpaired, bad_unpaired;
    for (size_t j = 0; j < good_groups.size(); ++j)
      if (!paired[j]) good_unpaired.push_back(&good_groups[j]);
    for (size_t i = 0; i < bad_groups.size(); ++i)
      if (match_of_bad[i] < 0) bad_unpaired.push_back(&bad_groups[i]);
    for (auto& grp : good_groups) grp.unpaired_siblings = good_unpaired;
    for (auto& grp : bad_groups) grp.unpaired_siblings = bad_unpaired;
  }
  std::vector<bool> good_paired(good_groups.size(), false);
  for (size_t i = 0; i < bad_groups.size(); ++i) {
    if (match_of_bad[i] < 0) {
      unpaired_group(bad_groups[i], true, r, out);
      continue;
    }
    const Group& g = good_groups[match_of_bad[i]];
    good_paired[match_of_bad[i]] = true;
    for (auto compare : {compare_key_histories, compare_duplicates, compare_child_bindings,
                         compare_accesses, compare_access_repeats, compare_failed, compare_present,
                         compare_common})
      compare(g, bad_groups[i], out);
    pair_processes(g, bad_groups[i], r, out);
  }
  bool layouts_differ = false;
  for (int m : match_of_bad) layouts_differ |= m < 0;
  for (size_t j = 0; j < good_groups.size(); ++j)
    if (!good_paired[j]) {
      unpaired_group(good_groups[j], false, r, out);
      layouts_differ = true;
    }
  if (layouts_differ) compare_pooled(good_facts, bad_facts, out);

  version_story(good_groups, bad_groups, match_of_bad, r.findings);
  attach_native_callers(good, bad, r.findings);
  rank_and_group(r.findings);
  return r;
}

}  // namespace

}  // namespace diff
}  // namespace imptrace
