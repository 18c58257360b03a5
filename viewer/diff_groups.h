// Groups of processes of one role (diff.h): the union of their facts, which the
// comparisons read.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "diff_facts.h"

namespace imptrace {
namespace diff {

// Processes with the same role (minus the xdist worker id), compared as one: their
// module-level facts as a union, each entry with the process it was first seen in.
struct Group {
  std::string key;
  std::vector<ProcFacts*> procs;
  // Union over the group, each with a representative. One map entry per module name.
  // A key's history in one process of the group.
  struct KeyRep {
    const ProcFacts* proc = nullptr;
    const KeyHistory* history = nullptr;
    uint64_t sig = 0;
    static KeyRep of(const ProcFacts* f, size_t position) {
      return {f, &f->history->history(position), f->key_sig[position]};
    }
  };
  struct KeyUnion {
    KeyRep first;
    std::vector<KeyRep> more;  // other signatures, rare (xdist workers, subprocesses)
    template <class Fn> void each(Fn&& fn) const {
      fn(first);
      for (const auto& x : more) fn(x);
    }
    bool has(uint64_t sig) const {
      bool found = first.sig == sig;
      for (const auto& x : more) found |= x.sig == sig;
      return found;
    }
  };
  // A group of one process reads its process's tables; larger groups build their union.
  const ProcFacts* solo = nullptr;
  NameTable<KeyUnion> own_keys;
  NameTable<ModFacts> own_mods;
  const NameTable<ModFacts>* mods = nullptr;  // set by build(); first process's order then others'
  std::unordered_map<uint64_t, std::vector<std::pair<const ProcFacts*, const AccessFact*>>> access_sigs;
  std::unordered_map<uint64_t, std::pair<const ProcFacts*, const AccessFact*>> access_by_attr;
  std::unordered_map<std::string, std::pair<const ProcFacts*, std::string>> dup_sigs;
  // The groups of the same run that the other run has no counterpart for (xdist workers
  // against a serial run): where this group's work may have gone.
  std::vector<const Group*> unpaired_siblings;

  static uint64_t child_key(std::string_view parent, std::string_view attr) { return mix(hash_text(parent), hash_text(attr)); }

  // The union's entry for a sys.modules key, or nullptr; `scratch` holds a one-process
  // group's view.
  const KeyUnion* find_key(std::string_view name, KeyUnion& scratch) const {
    if (solo) {
      int64_t at = solo->history->position(name);
      if (at < 0) return nullptr;
      scratch.first = KeyRep::of(solo, static_cast<size_t>(at));
      return &scratch;
    }
    return own_keys.find(name);
  }
  template <class Fn> void each_key(Fn&& fn) const {
    if (solo) {
      KeyUnion k;
      for (size_t i = 0; i < solo->history->size(); ++i) {
        k.first = KeyRep::of(solo, i);
        fn(solo->history->key(i), k);
      }
      return;
    }
    for (size_t i = 0; i < own_keys.size(); ++i) fn(own_keys.key(i), own_keys.value(i));
  }

  // Fills the union (or points at the one process's tables); `procs` set and ordered.
  void build();
  const ModFacts* mod(std::string_view name) const { return mods->find(name); }
  bool ok(std::string_view name) const {
    const ModFacts* m = mod(name);
    return m && m->ok_facts;
  }
  uint64_t pos_of(std::string_view name) const {
    const ModFacts* m = mod(name);
    return m ? m->pos : UINT64_MAX;
  }
};

// The groups of a run's processes, in order of first appearance; within a group by worker
// id, then start time.
std::vector<Group> make_groups(std::vector<ProcFacts>& facts);

}  // namespace diff
}  // namespace imptrace
