// Ranking (diff.h): stories with a warning or an error before info-only ones; findings sorted by kind, severity, how many tests show them, where the
// module was first imported; findings about one sys.modules key grouped into one story.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "diff_compare.h"

namespace imptrace {
namespace diff {

// Groups findings into stories and ranks them.
void rank_and_group(std::vector<Finding>& fs) {
  auto better = [](const Finding& a, const Finding& b) {
    // Kinds are declared in ranking order.
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.tests.size() != b.tests.size()) return a.tests.size() > b.tests.size();
    if (a.order != b.order) return a.order < b.order;
    if (a.module != b.module) return a.module < b.module;
    return a.summary < b.summary;
  };
  std::stable_sort(fs.begin(), fs.end(), better);
  std::vector<Finding> out;
  std::unordered_map<std::string, size_t> primary_of;  // story -> index in out
  for (auto& f : fs) {
    if (!f.story.empty()) {
      std::string key = f.process + "\n" + f.story;
      auto it = primary_of.find(key);
      if (it != primary_of.end()) {
        out[it->second].related.push_back(std::move(f));
        continue;
      }
      primary_of[key] = out.size();
    }
    out.push_back(std::move(f));
  }
  for (auto& f : out) tell_story(f);
  // A story that is only info (a probe that failed as probes do, a timing, an order) is
  // not a cause: it never ranks above one with a warning or an error, whatever its kind.
  // Under PEP 810 lazy mode, proxies' probes fail in new places while the one real
  // failure is an import_failed further down the kind order.
  std::stable_partition(out.begin(), out.end(),
                        [](const Finding& f) { return f.severity != Severity::Info; });
  fs = std::move(out);
}

void tell_story(Finding& f) {
  if (f.related.empty()) return;
  // A story's severity is its worst part, so an error story is never ranked as a warning.
  for (const auto& r : f.related) {
    if (r.severity > f.severity) f.severity = r.severity;
    if (f.test.empty() && !r.test.empty()) f.test = r.test;
  }
  f.summary += story_tail(f);
}

std::string story_tail(const Finding& f) {
  std::string tail;
  // The story in one line: the first clause of each kind, then how many more.
  std::set<Kind> told;
  size_t untold = 0;
  for (const auto& r : f.related) {
    if (r.kind == Kind::ProxyInSysModules && f.kind == Kind::SysModulesReplaced) continue;
    if (!r.brief.empty() && told.insert(r.kind).second) tail += "; " + r.brief;
    else ++untold;
  }
  if (untold) tail += "; +" + std::to_string(untold) + " more related";
  return tail;
}

}  // namespace diff
}  // namespace imptrace
