// Grouping of processes by role (diff.h) and the union of a group's facts.
#include "diff_groups.h"

#include <algorithm>

namespace imptrace {
namespace diff {

void Group::build() {
  mods = &own_mods;
  if (procs.size() == 1) {
    solo = procs.front();
    mods = &solo->mods;
  }
  for (const ProcFacts* f : procs) {
    if (!solo) {
      own_keys.reserve(own_keys.size() + f->history->size());
      own_mods.reserve(own_mods.size() + f->mods.size());
      for (size_t i = 0; i < f->history->size(); ++i) {
        KeyRep rep = KeyRep::of(f, i);
        KeyUnion& gk = *own_keys.emplace(f->history->key(i)).first;
        if (!gk.first.proc) gk.first = rep;
        else if (!gk.has(rep.sig)) gk.more.push_back(rep);
      }
      for (size_t i = 0; i < f->mods.size(); ++i) {
        const ModFacts& m = f->mods.value(i);
        auto ins = own_mods.emplace(f->mods.key(i));
        ModFacts& gm = *ins.first;
        if (ins.second) gm.pos = m.pos;
        if (m.ok) {
          if (!gm.ok_facts) {
            gm.ok_process = f;
            gm.ok_facts = &m;
          }
          gm.min_self = std::min(gm.min_self, m.self_ns);
        }
        for (const auto& x : m.failed) {
          bool seen = false;
          for (const auto& y : gm.failed) seen |= y.second->error_type == x.second->error_type;
          if (!seen) gm.failed.push_back(x);
        }
      }
    }
    for (const auto& af : f->accesses) {
      access_sigs[af.sig].emplace_back(f, &af);
      access_by_attr.emplace(child_key(af.story, af.a->attribute), std::make_pair(f, &af));
    }
    for (const auto& d : f->duplicates) dup_sigs.emplace(d.first, std::make_pair(f, d.second));
  }
}

std::vector<Group> make_groups(std::vector<ProcFacts>& fs) {
  std::vector<Group> groups;
  std::unordered_map<std::string, size_t> idx;
  for (auto& f : fs) {
    auto it = idx.find(f.group);
    if (it == idx.end()) {
      idx[f.group] = groups.size();
      groups.emplace_back();
      groups.back().key = f.group;
      it = idx.find(f.group);
    }
    groups[it->second].procs.push_back(&f);
  }
  for (auto& g : groups) {
    std::stable_sort(g.procs.begin(), g.procs.end(), [](const ProcFacts* a, const ProcFacts* b) {
      if (a->worker != b->worker) return a->worker < b->worker;
      return a->p->start_time_unix_ns < b->p->start_time_unix_ns;
    });
    g.build();
  }
  return groups;
}

}  // namespace diff
}  // namespace imptrace
