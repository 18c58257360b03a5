// How paired processes ended (process_ended_abnormally). A bad process that died of a
// signal or left no end record while its good counterpart finished is the story itself:
// whatever it did not import afterwards was never reached, not missing (compare_present
// compares a cut-short process only up to where it stopped).
#include "diff_compare.h"

namespace imptrace {
namespace diff {

void compare_ends(const ProcFacts* good, const ProcFacts& bad, Findings& out) {
  const model::ProcessEnd& be = bad.p->end;
  if (!model::ended_abnormally(be)) return;
  if (good && model::ended_abnormally(good->p->end)) return;  // both cut short: no difference
  // Ranked by its kind, first; among several, the earliest process of the bad run first.
  Finding f = new_finding(Kind::ProcessEndedAbnormally, Severity::Error, "", bad.role,
                          static_cast<uint64_t>(bad.index));
  f.summary = "process ended abnormally: " + bad.role + " " + model::end_text(be);
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

}  // namespace diff
}  // namespace imptrace
