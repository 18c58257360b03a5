// The comparisons of a good and a bad run, one finding family per file, and what they
// share: where findings go and the phrases they are written in.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "diff_groups.h"

namespace imptrace {
namespace diff {

// Where the comparisons put their findings (ranked and grouped later, diff_rank.cpp).
struct Findings {
  const Options& options;
  std::vector<Finding>& out;
  void add(Finding f) { out.push_back(std::move(f)); }
};

// The fields every finding starts with; the rest (summary, evidence, where) is per kind.
Finding new_finding(Kind kind, Severity severity, std::string module, const std::string& process,
                    uint64_t order);

// Position of the first import of `name` in the process, for ranking (unknown: late).
uint64_t first_pos(const ProcFacts& pf, std::string_view name);

// ---- phrases (diff_text.cpp) ---------------------------------------------------------------
std::string object_kind(const ObjectRef& o);                       // "module", "pkg.Lazy", "nothing"
std::string describe(const ObjectRef& o, const std::string& origin);  // "module 'a' (a/__init__.py)"
std::string format_duration(uint64_t ns);                          // "12.3 ms"
// sys.modules[key] held only what its package's import put there by design
// (model::own_namespace_import: `sys.modules[__name__] = _automodule(...)` in
// pygments.lexers, torch.backends.cudnn; apipkg's proxies under 'py', 'py.path' set up from
// py/__init__.py), after nothing or the module the key's import created: that import, else
// nullptr. With nothing under the key in the good run, the package is simply one only the
// bad run imported (module_added).
const model::Import* set_up_by_own_import(const model::Process& p, const KeyHistory& h);
// "pygments.lexers replaced itself under its own name while it was imported", "the import
// of py put py.path there, in its own namespace".
std::string own_design_text(const model::Import& by, std::string_view key);

std::string history_text(const std::vector<EntryText>& h);         // "1. ...; then 2. ..."
// A loader's repr without its address ("<...SourceFileLoader object at 0x?>"; diff_modules.cpp).
std::string normalize_loader(const std::string& loader);
// " at F:L", or where the change was seen only at the next import boundary
// ", seen at the next import, at F:L" ("" for an unknown place).
std::string place_text(const Location& at, bool precise);

// ---- the comparisons of a group pair (role = the bad group's key) --------------------------
// diff_identity.cpp: what sat under a key (sys_modules_replaced, proxy_in_sys_modules);
// module objects not one per file and name (duplicate_module).
void compare_key_histories(const Group& good, const Group& bad, Findings& out);
// One interpreter lifetime's part of a key's history that is its import's module and then
// only aliases that import made of its own name (3.13's collections/abc.py puts
// _collections_abc there): no replacement, the standard library's design.
bool plain_or_own_aliases(const KeyHistory& h, std::string_view key, const LifetimePart& part);
void compare_duplicates(const Group& good, const Group& bad, Findings& out);
// diff_bindings.cpp: children bound on the wrong object (binding_on_proxy,
// binding_mismatch); failed lookups through a proxy (proxy_forward_failed).
void compare_child_bindings(const Group& good, const Group& bad, Findings& out);
void compare_accesses(const Group& good, const Group& bad, Findings& out);
// The same successful accesses, counted a different number of times where the tracer
// counted repeats (proxy_access_repeats, info only).
void compare_access_repeats(const Group& good, const Group& bad, Findings& out);
// diff_modules.cpp: import_failed; module_added, module_missing; origin_changed,
// loader_changed, import_slower.
void compare_failed(const Group& good, const Group& bad, Findings& out);
void compare_present(const Group& good, const Group& bad, Findings& out);
void compare_common(const Group& good, const Group& bad, Findings& out);
// Paired groups run by different Python versions (the header's version number): what the
// standard library of each did for itself is one story, kVersionStory, under one
// python_version_changed finding (diff.cpp), not the user's code (diff_modules.cpp).
extern const char* const kVersionStory;
std::string python_version_of(const Process& p);  // "3.12.1"
bool python_versions_differ(const Group& good, const Group& bad);
// The python_version_changed finding for the (good, bad) version pairs seen (a warning when
// a feature version differs, info for another patch release), ranked first as it frames the
// rest; `roles`: the processes it was seen in (one names the finding's process).
Finding python_version_finding(const std::vector<std::pair<std::string, std::string>>& versions,
                               const std::vector<std::string>& roles, const char* good_run, const char* bad_run);
// One info part of that story: what the standard library of one version did that the
// other's did not (`what`: "imported only by the good run's standard library", ...).
Finding version_part(Kind kind, const std::vector<std::string>& names, const std::string& what,
                     const std::string& good_version, const std::string& bad_version, const std::string& role);
// A file of the interpreter's own standard library (under lib/pythonX.Y/, not its
// site-packages or dist-packages), or "built-in", "frozen", "<frozen ...>".
bool stdlib_file(std::string_view file);
// A module the standard library imported for itself: its file is the interpreter's and so
// is the code that imported it (or the interpreter did, from no Python line). Another
// Python version imports another set of these; the user's own `import x` is not one.
bool stdlib_import(const Import& im);
// The import whose failure nothing caught, after which `p` exited with an error status
// (the last such on the main thread), or nullptr (diff_modules.cpp).
const Import* failed_import_that_stopped(const Process& p);
// exit() or os._exit() with a status other than 0 (a chosen ending, not an abnormal one).
bool exited_with_error(const model::ProcessEnd& e);
// diff_ends.cpp: a bad process that ended abnormally while its good one (or nullptr: none)
// did not (process_ended_abnormally); paired processes that exited with different
// statuses (exit_status_changed).
void compare_ends(const ProcFacts* good, const ProcFacts& bad, Findings& out);
// What both diffs say of an exit status change and of an abnormal end (the many-run diff
// tells the same rules over its runs, diff_many.cpp):
// why a process exited with its status, as far as the trace can tell;
std::string exit_cause(const ProcFacts& pf);
// "exit status changed: G -> B (role); <why>", with the good side's cause when only it failed;
std::string exit_status_summary(int64_t good_status, int64_t bad_status, const std::string& role,
                                const std::string& bad_cause, const std::string& good_cause);
// "; its last import was M at F:L" for the last import a line of the program began outside
// any other import (not the failure's report), its place added to `f.where`, its test to `f.test`;
void add_last_program_import(const ProcFacts& bad, Finding& f);
// a process that ended abnormally: killed by SIGTERM with nothing of its counterparts left
// unreached (`reached_all`), or with no counterpart at all, is info (stopped from outside,
// explaining no difference); anything else is an error. The clause the summary gets for it.
Severity abnormal_end_severity(const model::ProcessEnd& e, bool has_counterpart, bool reached_all);
std::string abnormal_end_clause(const model::ProcessEnd& e, bool has_counterpart, bool reached_all,
                                const char* counterpart, const char* other_side);
// Whether a stopped process imported every module `good` imported fine: `imported_ok(name)`
// says whether it did.
template <class ImportedOk>
bool reached_all_of(const NameTable<ModFacts>& good, ImportedOk&& imported_ok) {
  for (size_t i = 0; i < good.size(); ++i)
    if (good.value(i).ok && !imported_ok(good.key(i))) return false;
  return true;
}
// How far into `good` a process that stopped short got: the latest position in `good` of a
// module `reached(name)` says the stopped process imported (UINT64_MAX: it did not stop
// short); and the imports that enclosed that one in `good`, which were still running when
// it stopped (an import's record is written when it ends, so they have none). What `good`
// imported beyond that was not reached there, not missing.
struct Reach {
  uint64_t pos = UINT64_MAX;
  std::unordered_set<std::string_view> unfinished;
  bool unreached(std::string_view name, uint64_t at) const { return at > pos || unfinished.count(name); }
};
template <class Reached>
Reach reach_in(const NameTable<ModFacts>& good, Reached&& reached) {
  Reach r;
  r.pos = 0;
  const ModFacts* last = nullptr;
  for (size_t i = 0; i < good.size(); ++i) {
    const ModFacts& o = good.value(i);
    if (o.ok_facts && o.pos >= r.pos && reached(good.key(i))) {
      r.pos = o.pos;
      last = &o;
    }
  }
  if (!last) return r;
  const Process& gp = *last->ok_facts->ok_process->p;
  for (int64_t at = last->ok_facts->first_ok->parent_pos; at >= 0 && static_cast<size_t>(at) < gp.imports.size();
       at = gp.imports[static_cast<size_t>(at)].parent_pos)
    r.unfinished.insert(gp.imports[static_cast<size_t>(at)].name.str());
  return r;
}
// Whether a process stopped short of where its counterpart went: it ended abnormally,
// stopped at a failed import nothing caught, or exited with an error status where its
// counterpart did not (`counterpart_failed`: one of the counterpart's role exited so too).
bool stopped_short(const Process& p, bool counterpart_failed);
// A module the stopped process imported that counts as a point it reached: not one the
// failure's report imported (3.13's own `import traceback` to print an uncaught exception).
bool reached_point(const Process& p, const ModFacts& m);
// The one info entry for what the good side imported beyond where the bad side stopped:
// "not reached: N module(s) <good_side> imported after the point where <stopped> ended
// abnormally, ...", listing them.
Finding unreached_finding(const std::vector<std::string>& names, const std::string& role, const char* good_side,
                          const char* stopped);
// Processes of one role (one in each run) that were both cut short (a signal or no end
// record: multiprocessing.Pool.terminate() SIGTERMs its workers wherever they are) stopped
// at different points by chance. The one that got further is cut, in `good` or `bad`, to
// where the other stopped: past that nothing is known of the other side. One line per
// process cut goes to `notes`. False when nothing is to be cut (`*_out` untouched), else
// `good_out` and `bad_out` are the runs with the cuts made.
bool cut_to_common_reach(const std::vector<model::Process>& good, const std::vector<model::Process>& bad,
                         std::vector<model::Process>& good_out, std::vector<model::Process>& bad_out,
                         std::vector<std::string>& notes);
// A paired process's first divergence and import_order_changed (diff_order.cpp).
void compare_order(const ProcFacts& good, const ProcFacts& bad, PairInfo& pair, Findings& out);

// Ranks findings and groups each story under its primary (diff_rank.cpp).
void rank_and_group(std::vector<Finding>& findings);
// A story's primary with its `related` set: its severity becomes the worst part's, its
// test the first known, and its summary gets one clause per related kind.
void tell_story(Finding& primary);
// The clauses tell_story appends to the primary's summary.
std::string story_tail(const Finding& primary);

}  // namespace diff
}  // namespace imptrace
