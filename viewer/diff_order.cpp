// Order findings: where a paired process's main-thread import sequence first differs
// (the pair's divergence) and the first module both import in a different order
// (import_order_changed).
#include "diff_compare.h"

namespace imptrace {
namespace diff {

// First divergence of the main-thread import sequences, and an order finding.
void compare_order(const ProcFacts& g, const ProcFacts& b, PairInfo& pair, Findings& out) {
  Divergence& d = pair.divergence;
  const auto& gs = g.main_seq;
  const auto& bs = b.main_seq;
  auto gname = [&](size_t i) -> const std::string& { return g.p->imports[gs[i]].name; };
  auto bname = [&](size_t i) -> const std::string& { return b.p->imports[bs[i]].name; };
  d.good_total = gs.size();
  d.bad_total = bs.size();
  size_t k = 0;
  while (k < gs.size() && k < bs.size() && gname(k) == bname(k)) ++k;
  if (k == gs.size() && k == bs.size()) return;
  d.diverges = true;
  d.good_pos = d.bad_pos = k;
  d.good_name = k < gs.size() ? gname(k) : "";
  d.bad_name = k < bs.size() ? bname(k) : "";
  const size_t context = out.options.context;
  size_t from = k > context ? k - context : 0;
  auto ctx = [&](const ProcFacts& f, const std::vector<uint32_t>& seq, std::vector<std::string>& lines) {
    for (size_t i = from; i < seq.size() && i <= k + context; ++i) {
      const Import& im = f.p->imports[seq[i]];
      std::string s = (i == k ? "> " : "  ") + std::to_string(i) + " " + im.name;
      if (!im.ok) s += " (failed: " + im.error_text() + ")";
      lines.push_back(s);
    }
  };
  ctx(g, gs, d.good_context);
  ctx(b, bs, d.bad_context);

  // Order of the modules both import: compare the filtered sequences. Names are
  // positions in each process's module table; `other` maps one side's to the other's.
  auto on_main = [](const ProcFacts& f) {
    std::vector<bool> on(f.mods.size(), false);
    for (uint32_t i : f.main_seq) on[f.mod_of[i]] = true;
    return on;
  };
  const std::vector<bool> g_main = on_main(g), b_main = on_main(b);
  auto filtered = [](const ProcFacts& f, const ProcFacts& other, const std::vector<bool>& other_main) {
    std::vector<const std::string*> out;
    std::vector<bool> seen(f.mods.size(), false);
    for (uint32_t i : f.main_seq) {
      uint32_t m = f.mod_of[i];
      if (seen[m]) continue;
      seen[m] = true;
      const ModFacts* o = other.mods.find(f.mods.key(m));
      if (o && other_main[o - other.mods.values().data()]) out.push_back(&f.p->imports[i].name.str());
    }
    return out;
  };
  std::vector<const std::string*> fg = filtered(g, b, b_main), fb = filtered(b, g, g_main);
  for (size_t i = 0; i < fg.size() && i < fb.size(); ++i) {
    if (*fg[i] == *fb[i]) continue;
    Finding f = new_finding(Kind::ImportOrderChanged, Severity::Info, *fb[i], pair.role, first_pos(b, *fb[i]));
    f.summary = "import order changed: the bad run imports " + *fb[i] + " where the good run imports " +
                *fg[i] + " (position " + std::to_string(i) + " among modules both import)";
    f.good = *fg[i];
    f.bad = *fb[i];
    // Two Python versions whose standard libraries import their own modules in another
    // order: part of the version's story (diff.cpp), not the program's.
    const ModFacts *gm = g.mods.find(*fg[i]), *bm = b.mods.find(*fb[i]);
    const std::string gv = python_version_of(*g.p), bv = python_version_of(*b.p);
    if (!gv.empty() && !bv.empty() && gv != bv && gm && bm && gm->first_ok && bm->first_ok &&
        stdlib_import(*gm->first_ok) && stdlib_import(*bm->first_ok)) {
      f.story = kVersionStory;
      f.brief = "the standard library imports its own modules in another order";
    }
    out.add(std::move(f));
    break;
  }
}

}  // namespace diff
}  // namespace imptrace
