// How paired processes ended (process_ended_abnormally, exit_status_changed). A bad process
// that died of a signal or left no end record while its good counterpart finished is the
// story itself: whatever it did not import afterwards was never reached, not missing
// (compare_present compares a cut-short process only up to where it stopped). One that
// exited with an error status where its counterpart did not is compared the same way.
#include <algorithm>
#include <map>

#include "commands.h"
#include "diff_compare.h"
#include "failure_reporting.h"

namespace imptrace {
namespace diff {

// Why a process exited with `status`, as far as the trace can tell: after a failed import
// nothing caught (its error is recorded), or with an uncaught exception the interpreter
// printed (3.13+ imports traceback for that, from no Python line; the exception itself
// is not recorded), or for a reason the trace does not hold.
std::string exit_cause(const ProcFacts& pf) {
  const Process& p = *pf.p;
  if (const Import* stopped = failed_import_that_stopped(p))
    return "after the failed import of " + stopped->name.str() + " (" + stopped->error_text() +
           "), which nothing caught";
  if (process_role_class(p) == "pytest main") {
    static const char* const kPytest[] = {"", "tests failed", "interrupted", "internal error", "usage error",
                                          "no tests collected"};
    if (p.end.status > 0 && p.end.status < 6) return std::string("pytest: ") + kPytest[p.end.status];
  }
  uint64_t main_thread = p.imports.empty() ? 0 : p.imports.front().thread;
  for (const Import& im : p.imports)
    if (im.thread == main_thread && im.parent_pos < 0 && im.importer.empty() && im.name == "traceback")
      return "an uncaught exception outside imports: the interpreter imported traceback to print it "
             "(the trace does not record the exception)";
  if (p.end.status == 1)
    return "not after a failed import: an uncaught exception outside imports, or sys.exit(1) "
           "(the trace records no exception outside imports)";
  return "not after a failed import (sys.exit or os._exit chose it)";
}

std::string exit_status_summary(int64_t good_status, int64_t bad_status, const std::string& role,
                                const std::string& bad_cause, const std::string& good_cause) {
  std::string s = "exit status changed: " + std::to_string(good_status) + " -> " + std::to_string(bad_status) +
                  " (" + role + ")";
  if (bad_status != 0) s += "; " + bad_cause;
  else if (good_status != 0) s += "; the good run's: " + good_cause;
  return s;
}

void add_last_program_import(const ProcFacts& bad, Finding& f) {
  // The last import a line of Python began outside any other import (the program's own
  // line, not a module's body).
  for (auto it = bad.p->imports.rbegin(); it != bad.p->imports.rend(); ++it) {
    if (it->importer.empty() || it->parent_pos >= 0 || model::import_in_failure_reporting(*bad.p, *it)) continue;
    f.summary += "; its last import was " + it->name.str();
    Location l = bad.norm->loc(it->importer);
    if (!l.empty()) {
      f.summary += " at " + format_location(l);
      f.where.push_back(l);
    }
    f.test = it->test;
    return;
  }
}

// Killed by SIGTERM after importing all its good counterpart did: stopped from outside
// with nothing left to reach, which explains no difference. Pool.terminate() sends its
// workers a sentinel and then SIGTERMs those still alive, so an idle worker is
// terminated in one run and exits by itself in another, by chance. Info, not error; a
// worker terminated before it got as far as the good one (hung in an import) stays one.
// Terminated with no counterpart at all: a worker that got tasks in this run and none in
// the other (a process that imports nothing leaves no trace), then was SIGTERMed idle.
// Nothing to compare it with, so nothing it did not reach; a crash stays an error.
Severity abnormal_end_severity(const model::ProcessEnd& e, bool has_counterpart, bool reached_all) {
  return model::terminated(e) && (!has_counterpart || reached_all) ? Severity::Info : Severity::Error;
}

std::string abnormal_end_clause(const model::ProcessEnd& e, bool has_counterpart, bool reached_all,
                                const char* counterpart, const char* other_side) {
  if (!model::terminated(e)) return "";
  if (!has_counterpart) return std::string(", with no process of its kind in ") + other_side + " to compare";
  return reached_all ? std::string(" after importing all ") + counterpart + " did" : "";
}

namespace {

// Paired processes that both exited on their own, with different statuses: the failure
// itself (an uncaught RuntimeError exits with 1), not a cause among the imports. Info, so
// that a failing run whose imports match the passing run's is no difference at warning;
// ranked before the other info stories, as what was not reached follows from it.
void compare_exit_status(const ProcFacts& good, const ProcFacts& bad, Findings& out) {
  using How = model::ProcessEnd::How;
  const model::ProcessEnd &ge = good.p->end, &be = bad.p->end;
  auto exited = [](const model::ProcessEnd& e) { return e.how == How::Exit || e.how == How::OsExit; };
  if (!exited(ge) || !exited(be) || ge.status == be.status) return;
  Finding f = new_finding(Kind::ExitStatusChanged, Severity::Info, "", bad.role, static_cast<uint64_t>(bad.index));
  f.summary = exit_status_summary(ge.status, be.status, bad.role, be.status ? exit_cause(bad) : "",
                                  ge.status ? exit_cause(good) : "");
  // Where the bad process got to.
  add_last_program_import(bad, f);
  f.good = model::end_text(ge);
  f.bad = model::end_text(be);
  out.add(std::move(f));
}

}  // namespace

void compare_ends(const ProcFacts* good, const ProcFacts& bad, Findings& out) {
  const model::ProcessEnd& be = bad.p->end;
  if (good) compare_exit_status(*good, bad, out);
  if (!model::ended_abnormally(be)) return;
  if (good && model::ended_abnormally(good->p->end)) {
    // Both cut short the same way is no difference (a pool's workers are SIGTERMed wherever
    // they stand). Two different fatal signals are: a worker that crashed where the other
    // run's was terminated. No end record on one side tells nothing to compare.
    const model::ProcessEnd& ge = good->p->end;
    using How = model::ProcessEnd::How;
    if (!(be.how == How::Signal && ge.how == How::Signal && be.signal != ge.signal)) return;
  }
  const bool reached_all =
      good && model::terminated(be) && reached_all_of(good->mods, [&](std::string_view name) {
        const ModFacts* m = bad.mods.find(name);
        return m && m->ok;
      });
  // Ranked by its kind, first; among several, the earliest process of the bad run first.
  Finding f = new_finding(Kind::ProcessEndedAbnormally, abnormal_end_severity(be, good != nullptr, reached_all), "",
                          bad.role, static_cast<uint64_t>(bad.index));
  f.summary = "process ended abnormally: " + bad.role + " " + model::end_text(be) +
              abnormal_end_clause(be, good != nullptr, reached_all, "its good counterpart", "the good run");
  if (!bad.p->imports.empty()) {
    const Import& last = bad.p->imports.back();
    f.summary += "; its last import was " + last.name.str();
    Location l = bad.norm->loc(last.importer);
    if (!l.empty()) f.where.push_back(l);
    f.test = last.test;
  }
  f.bad = model::end_text(be);
  f.good = good ? model::end_text(good->p->end) : "no such process";
  f.story = "process " + bad.role;
  out.add(std::move(f));
}

namespace {

// The time in `longer` that matches where `shorter` stopped: the end of its import that is
// the same occurrence of the same module as `shorter`'s last finished one. 0 when `longer`
// has no such import (the two went different ways: no common reach to speak of).
uint64_t matching_stop(const model::Process& shorter, const model::Process& longer) {
  const Import* last = nullptr;
  for (const Import& im : shorter.imports)
    if (!last || im.end_ns > last->end_ns) last = &im;
  if (!last) return 0;
  size_t nth = 0;
  for (const Import& im : shorter.imports)
    if (im.name == last->name && im.begin_ns <= last->begin_ns) ++nth;
  for (const Import& im : longer.imports)
    if (im.name == last->name && --nth == 0) return im.end_ns;
  return 0;
}

// `p` as far as time `t`: what finished by then. An import still running then has no
// record, as in a trace cut there.
void cut_at(model::Process& p, uint64_t t) {
  auto after = [t](uint64_t at) { return at > t; };
  p.imports.erase(std::remove_if(p.imports.begin(), p.imports.end(), [&](const Import& im) { return after(im.end_ns); }),
                  p.imports.end());
  for (auto& im : p.imports) {
    int64_t at = im.parent_index ? p.import_position(im.parent_index - 1) : -1;
    im.parent_pos = at >= 0 && p.imports[at].index < im.index ? at : -1;
  }
  auto cut = [&](auto& records) {
    records.erase(std::remove_if(records.begin(), records.end(), [&](const auto& r) { return after(r.time_ns); }),
                  records.end());
  };
  cut(p.modules_changes);
  cut(p.bindings);
  cut(p.proxy_accesses);
  cut(p.sys_paths);
  cut(p.lazy_declared);
  cut(p.lazy_resolved);
  // The end is kept: how the process was cut short (its signal) is compared on its own.
}

}  // namespace

bool cut_to_common_reach(const std::vector<model::Process>& good, const std::vector<model::Process>& bad,
                         std::vector<model::Process>& good_out, std::vector<model::Process>& bad_out,
                         std::vector<std::string>& notes) {
  // Roles held by exactly one process on each side, both cut short.
  std::map<std::string, std::pair<std::vector<size_t>, std::vector<size_t>>> by_role;
  for (size_t i = 0; i < good.size(); ++i)
    if (model::ended_abnormally(good[i].end)) by_role[role_of(good[i])].first.push_back(i);
  for (size_t i = 0; i < bad.size(); ++i)
    if (model::ended_abnormally(bad[i].end)) by_role[role_of(bad[i])].second.push_back(i);
  struct Cut {
    bool in_good;
    size_t index;
    uint64_t at;
  };
  std::vector<Cut> cuts;
  for (const auto& kv : by_role) {
    if (kv.second.first.size() != 1 || kv.second.second.size() != 1) continue;
    const model::Process& g = good[kv.second.first[0]];
    const model::Process& b = bad[kv.second.second[0]];
    if (g.imports.size() == b.imports.size()) continue;
    bool good_longer = g.imports.size() > b.imports.size();
    uint64_t t = good_longer ? matching_stop(b, g) : matching_stop(g, b);
    if (t) cuts.push_back({good_longer, good_longer ? kv.second.first[0] : kv.second.second[0], t});
  }
  if (cuts.empty()) return false;
  good_out = good;
  bad_out = bad;
  for (const Cut& c : cuts) {
    model::Process& p = (c.in_good ? good_out : bad_out)[c.index];
    size_t before = p.imports.size();
    cut_at(p, c.at);
    notes.push_back(p.source_file + ": cut short in both runs; compared up to where the " +
                    (c.in_good ? "bad" : "good") + " run's process stopped (" +
                    std::to_string(before - p.imports.size()) + " later imports of this one left out)");
  }
  return true;
}

}  // namespace diff
}  // namespace imptrace
