// The comparisons of a good and a bad run, one finding family per file, and what they
// share: where findings go and the phrases they are written in.
#pragma once

#include <string>
#include <string_view>
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
// sys.modules[key] held only its module and then what the module put there itself while it
// was imported, by a line of its own file (`sys.modules[__name__] = _automodule(...)` in
// pygments.lexers, torch.backends.cudnn): the module's design. With nothing under the key
// in the good run, the module is simply one only the bad run imported (module_added).
bool replaced_itself(const KeyHistory& h, std::string_view key);

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
