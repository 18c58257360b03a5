// Identity findings: what sat under a sys.modules key (sys_modules_replaced,
// proxy_in_sys_modules, import_blocked, module_reloaded) and module objects that are not one per file and name
// (duplicate_module).
#include <algorithm>

#include "commands.h"
#include "diff_compare.h"
#include "proxy_decision.h"

namespace imptrace {
namespace diff {

namespace {

// A finding about sys.modules[key] in one process role: the fields every identity finding
// sets alike, the key's history in both runs among them.
Finding key_finding(Kind kind, const std::string& key, const std::vector<EntryText>& bh,
                    const std::vector<EntryText>* gh, const ProcFacts& pf, const std::string& role) {
  Finding f;
  f.kind = kind;
  f.module = key;
  f.story = key;
  f.process = role;
  f.order = first_pos(pf, key);
  f.good = gh ? history_text(*gh) : "nothing under this key";
  f.bad = history_text(bh);
  return f;
}

// Where the entry that makes the finding came from: the writer's stack, else where it was
// set, and the test running then.
void place_at(Finding& f, const EntryText& e) {
  f.where = e.stack;
  if (f.where.empty() && !e.set_by.empty()) f.where.push_back(e.set_by);
  f.test = e.test;
}

// `sys.modules[key] = None`: the documented way to make `import key` raise ImportError.
// Its own story, not an identity error: only in bad, it can explain an import_failed.
void blocked_finding(const std::string& key, const EntryText& e, const std::vector<EntryText>& bh,
                     const std::vector<EntryText>* gh, const ProcFacts& pf, const std::string& role,
                     Findings& out) {
  Finding f = key_finding(Kind::ImportBlocked, key, bh, gh, pf, role);
  f.severity = Severity::Warning;
  f.summary = "sys.modules['" + key + "'] = None blocks `import " + key + "` (ImportError)";
  if (!e.set_by.empty()) f.summary += ", set" + place_text(e.set_by, e.precise);
  place_at(f, e);
  out.add(std::move(f));
}

// `explained`: a module_reloaded finding already tells the difference when the entries
// themselves match.
void replaced_finding(const std::string& key, const std::vector<EntryText>& bh,
                      const std::vector<EntryText>* gh, const ProcFacts& pf, const std::string& role,
                      Findings& out, bool explained = false) {
  Finding f = key_finding(Kind::SysModulesReplaced, key, bh, gh, pf, role);
  // The first entry of bad that differs from good: that is the change.
  size_t i = 0;
  if (gh) {
    while (i < bh.size() && i < gh->size() && bh[i].via_import == (*gh)[i].via_import &&
           object_kind(bh[i].obj) == object_kind((*gh)[i].obj) &&
           bh[i].obj.is_proxy() == (*gh)[i].obj.is_proxy() && bh[i].relation == (*gh)[i].relation)
      ++i;
  }
  const std::string k = "sys.modules['" + key + "']";
  if (i < bh.size() && model::is_import_blocker(bh[i].obj)) {
    blocked_finding(key, bh[i], bh, gh, pf, role, out);
    return;
  }
  if (explained && gh && i == bh.size() && i == gh->size()) return;
  if (i < bh.size()) {
    const EntryText& e = bh[i];
    f.severity = Severity::Error;
    place_at(f, e);
    if (i > 0) {
      const EntryText& old = bh[i - 1];
      f.summary = k + " replaced: " + describe(old.obj, old.origin) + " -> " +
                  describe(e.obj, e.origin) +
                  (e.relation != "new object" ? " (" + e.relation + ")" : std::string()) +
                  (e.via_import ? " by the import system" : " by assignment");
    } else {
      f.summary = k + " holds " + describe(e.obj, e.origin) +
                  (e.via_import ? " (from the import system)" : " (by assignment)") +
                  " instead of " +
                  (gh && !gh->empty() ? describe((*gh)[0].obj, (*gh)[0].origin) : std::string("nothing"));
    }
    if (!e.via_import || !e.set_by.empty()) f.summary += place_text(e.set_by, e.precise);
  } else if (gh && i < gh->size()) {
    const EntryText& e = (*gh)[i];
    f.severity = Severity::Warning;
    f.summary = k + ": the good run then had " + describe(e.obj, e.origin) +
                (e.via_import ? " from the import system" : " by assignment") +
                "; the bad run did not";
    if (!e.set_by.empty()) f.where.push_back(e.set_by);
  } else {
    // Same entries, different class changes, relation or removal details.
    f.severity = Severity::Warning;
    f.summary = k + ": what sat under the name differs";
    bool told = false, failed_import_removal = false;
    for (size_t j = 0; j < bh.size(); ++j) {
      if (!bh[j].removed || (gh && j < gh->size() && (*gh)[j].removed)) continue;
      if (bh[j].removed_by_failed_import) {
        failed_import_removal = true;
        continue;
      }
      f.summary = k + ": " + describe(bh[j].obj, bh[j].origin) + " removed in the bad run" +
                  place_text(bh[j].removed_at, bh[j].removal_precise) + "; the good run kept it";
      if (!bh[j].removed_at.empty()) f.where.push_back(bh[j].removed_at);
      told = true;
      break;
    }
    for (size_t j = 0; j < bh.size(); ++j) {
      const auto& bc = bh[j].class_changes;
      auto same_classes = [&](const std::vector<std::pair<std::string, Location>>& gc) {
        if (gc.size() != bc.size()) return false;
        for (size_t c = 0; c < gc.size(); ++c)
          if (gc[c].first != bc[c].first) return false;
        return true;
      };
      if (bc.empty() || (gh && j < gh->size() && same_classes((*gh)[j].class_changes))) continue;
      f.summary = k + ": the same object changed its class in the bad run (";
      for (size_t c = 0; c < bc.size(); ++c) {
        f.summary += (c ? ", then " : "") + bc[c].first;
        if (!bc[c].second.empty()) f.summary += " at " + format_location(bc[c].second);
      }
      f.summary += "); the good run: " + (gh && j < gh->size() ? history_text({(*gh)[j]}) : std::string("nothing"));
      for (const auto& cc : bc)
        if (!cc.second.empty()) f.where.push_back(cc.second);
      told = true;
      break;
    }
    // Only importlib's clean-up after a failed import of the key: import_failed says it.
    if (!told && failed_import_removal) return;
  }
  out.add(std::move(f));
}

void proxy_finding(const std::string& key, const std::vector<EntryText>& bh,
                   const std::vector<EntryText>* gh, const ProcFacts& pf, const std::string& role,
                      Findings& out) {
  for (const auto& e : bh) {
    if (!e.obj.is_proxy()) continue;
    Finding f = key_finding(Kind::ProxyInSysModules, key, bh, gh, pf, role);
    f.severity = Severity::Error;
    f.summary = "sys.modules['" + key + "'] holds a proxy: " + describe(e.obj, e.origin) +
                (e.via_import ? " from the import system" : " put there by assignment");
    if (!e.set_by.empty()) f.summary += place_text(e.set_by, e.precise);
    place_at(f, e);
    out.add(std::move(f));
    return;
  }
}

// A module that replaced itself under its own name in a key the good run never had: info,
// told as what it is (the module is module_added; its design is no root cause).
void self_replaced_finding(const std::string& key, const std::vector<EntryText>& bh, const model::Import& by,
                           const ProcFacts& pf, const std::string& role, Findings& out) {
  const EntryText& e = bh.back();
  Finding f = key_finding(e.obj.is_proxy() ? Kind::ProxyInSysModules : Kind::SysModulesReplaced, key, bh, nullptr,
                          pf, role);
  f.severity = Severity::Info;
  if (by.name.str() == key)
    f.summary = "module '" + key + "' replaced itself under its own name while it was imported with " +
                describe(e.obj, e.origin) + place_text(e.set_by, e.precise) +
                " (the module's own design; the good run did not import it)";
  else
    f.summary = "the import of " + by.name + " put " + describe(e.obj, e.origin) + " under sys.modules['" + key +
                "']" + place_text(e.set_by, e.precise) +
                ", in its own namespace (the package's own design; the good run did not import it)";
  place_at(f, e);
  out.add(std::move(f));
}

size_t reload_count(const std::vector<EntryText>& h) {
  size_t n = 0;
  for (const auto& e : h) n += e.reloads.size();
  return n;
}

// importlib.reload executed the same module object again in place: a module_reloaded
// finding when the runs reloaded the key a different number of times. A reload only in bad
// is a warning: objects made from the first execution (classes, functions, names bound by
// `from m import x`) stay as they were while the module holds new ones, so isinstance checks,
// registries and identity comparisons can break; the user should find out why the module
// was reloaded (the location says where). Fewer reloads in bad than in good are info.
// Returns whether there was one.
bool reload_finding(const std::string& key, const std::vector<EntryText>& bh,
                    const std::vector<EntryText>* gh, const ProcFacts& pf, const std::string& role,
                    Findings& out) {
  const size_t nb = reload_count(bh), ng = gh ? reload_count(*gh) : 0;
  if (nb == ng) return false;
  Finding f = key_finding(Kind::ModuleReloaded, key, bh, gh, pf, role);
  auto times = [](size_t n) {
    return n == 0 ? std::string("never") : n == 1 ? std::string("once") : std::to_string(n) + " times";
  };
  if (nb > ng) {
    f.severity = Severity::Warning;
    // The bad run's reloads past the good run's count.
    size_t seen = 0;
    for (const auto& e : bh)
      for (const auto& at : e.reloads)
        if (seen++ >= ng && !at.empty()) f.where.push_back(at);
    for (const auto& e : bh)
      if (!e.reloads.empty() && f.test.empty()) f.test = e.test;
    f.summary = "module '" + key + "' reloaded (importlib.reload executed it again in place)";
    if (!f.where.empty()) f.summary += " at " + format_location(f.where[0]);
    f.summary += ": " + times(nb) + " in the bad run, " + times(ng) + " in the good run";
    f.brief = "reloaded " + times(nb);
  } else {
    f.severity = Severity::Info;
    f.summary = "module '" + key + "' reloaded " + times(ng) + " in the good run, " + times(nb) +
                " in the bad run";
    for (const auto& e : *gh)
      for (const auto& at : e.reloads)
        if (!at.empty()) f.where.push_back(at);
    f.brief = "reloaded " + times(nb) + " (good: " + times(ng) + ")";
  }
  out.add(std::move(f));
  return true;
}

// The lifetime parts (diff_facts.h) of the two histories of a key that differ: the first
// part of bad whose structure no part of good has, against good's part of the same
// lifetime ordinal (else good's last); else the first part of good that bad lacks, against
// bad's part of the same ordinal (else bad's last). Like is compared with like: a host that
// initialised Python three times against one that did it twice, or against a plain
// `python`, differs in no part. False when every part's structure is in both.
bool differing_parts(const ProcFacts& bf, const KeyHistory& bh, const ProcFacts& gf,
                     const KeyHistory& gh, LifetimePart& bp, LifetimePart& gp) {
  std::vector<LifetimePart> bparts = lifetime_parts(bh), gparts = lifetime_parts(gh);
  if (bparts.empty() || gparts.empty()) {
    bp = bparts.empty() ? LifetimePart() : bparts[0];
    gp = gparts.empty() ? LifetimePart() : gparts[0];
    return true;
  }
  std::vector<uint64_t> bsigs, gsigs;
  for (const auto& part : bparts) bsigs.push_back(part_sig(bf, bh, part));
  for (const auto& part : gparts) gsigs.push_back(part_sig(gf, gh, part));
  auto missing = [](const std::vector<uint64_t>& in, const std::vector<uint64_t>& from) {
    for (size_t i = 0; i < in.size(); ++i)
      if (std::find(from.begin(), from.end(), in[i]) == from.end()) return static_cast<int64_t>(i);
    return int64_t(-1);
  };
  int64_t j = missing(bsigs, gsigs);
  if (j >= 0) {
    bp = bparts[j];
    gp = static_cast<size_t>(j) < gparts.size() ? gparts[j] : gparts.back();
    return true;
  }
  j = missing(gsigs, bsigs);
  if (j < 0) return false;
  gp = gparts[j];
  bp = static_cast<size_t>(j) < bparts.size() ? bparts[j] : bparts.back();
  return true;
}

// Every entry of `part` after its first is an alias the key's own import made (3.13's
// collections.abc): a new key that is no replacement.
bool only_own_aliases(const KeyHistory& h, std::string_view key, const LifetimePart& part) {
  for (size_t i = part.begin + 1; i < part.end; ++i)
    if (!h.entries[i].alias_made_by_own_import(key)) return false;
  return true;
}

// Every entry of `part` after its first puts back the object an earlier entry held, after
// that one was removed: `mock.patch.dict(sys.modules)` clearing the dict and restoring it
// on exit, a test's saving and restoring of sys.modules. The key held one object all along.
bool only_restorations(const KeyHistory& h, const LifetimePart& part) {
  for (size_t i = part.begin + 1; i < part.end; ++i)
    if (h.entries[i].relation != model::Relation::SameAsEntry || !h.entries[i - 1].removed) return false;
  return true;
}

}  // namespace

bool plain_or_own_aliases(const KeyHistory& h, std::string_view key, const LifetimePart& part) {
  if (part.end <= part.begin || !h.entries[part.begin].via_import || h.entries[part.end - 1].removed ||
      !only_own_aliases(h, key, part))
    return false;
  for (size_t i = part.begin; i < part.end; ++i)
    if (!h.entries[i].reloads.empty() || !h.entries[i].class_changes.empty()) return false;
  return true;
}

// Keys whose history in bad has a structure good never had (in any of its processes),
// compared one interpreter lifetime's part at a time.
void compare_key_histories(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  std::vector<std::string_view> keys;
  Group::KeyUnion gscratch, bscratch;
  b.each_key([&](std::string_view name, const Group::KeyUnion& bk) {
    const Group::KeyUnion* gk = g.find_key(name, gscratch);
    bool all_known = gk != nullptr;
    if (all_known) bk.each([&](const Group::KeyRep& bad) { all_known &= gk->has(bad.sig); });
    if (!all_known) keys.push_back(name);
  });
  // In the bad group's first-import order, for stable output.
  std::sort(keys.begin(), keys.end(), [&](std::string_view x, std::string_view y) {
    uint64_t px = b.pos_of(x), py = b.pos_of(y);
    return px != py ? px < py : x < y;
  });
  for (std::string_view key : keys) {
    const Group::KeyUnion* gk = g.find_key(key, gscratch);
    b.find_key(key, bscratch)->each([&](const Group::KeyRep& bad) {
      const KeyHistory& bh = *bad.history;
      const KeyHistory* gh = nullptr;
      const ProcFacts* gp = nullptr;
      if (gk) {
        if (gk->has(bad.sig)) return;
        gh = gk->first.history;
        gp = gk->first.proc;
      }
      std::string k(key);
      if (!gh) {
        // A key the good run never had: only a proxy or a replacement is worth an
        // identity finding (plain additions are module_added). A replacement is one within
        // a lifetime: the first part with more than one entry.
        std::vector<EntryText> be = materialize(*bad.proc, bh);
        auto blocker = std::find_if(be.begin(), be.end(),
                                    [](const EntryText& e) { return model::is_import_blocker(e.obj); });
        if (blocker != be.end()) blocked_finding(k, *blocker, be, nullptr, *bad.proc, role, out);
        reload_finding(k, be, nullptr, *bad.proc, role, out);
        if (const model::Import* by = set_up_by_own_import(*bad.proc->p, bh)) {
          self_replaced_finding(k, be, *by, *bad.proc, role, out);
        } else if (bh.has_proxy) {
          proxy_finding(k, be, nullptr, *bad.proc, role, out);
        } else if (blocker == be.end()) {
          for (const LifetimePart& part : lifetime_parts(bh))
            if (part.end - part.begin > 1 && !only_own_aliases(bh, k, part) && !only_restorations(bh, part)) {
              replaced_finding(k, materialize(*bad.proc, bh, part.begin, part.end), nullptr, *bad.proc, role, out);
              break;
            }
        }
        return;
      }
      LifetimePart bpart, gpart;
      if (!differing_parts(*bad.proc, bh, *gp, *gh, bpart, gpart)) return;
      // The module made its name an alias while it was imported (3.13's collections/abc.py)
      // where the good run's interpreter imported it plainly (3.12): the standard library's
      // design changed with the interpreter, nothing replaced the module.
      if (!bh.has_proxy && !gh->has_proxy && bpart.end - bpart.begin > 1 && plain_or_own_aliases(bh, k, bpart) &&
          plain_or_own_aliases(*gh, k, gpart))
        return;
      std::vector<EntryText> be = materialize(*bad.proc, bh, bpart.begin, bpart.end);
      std::vector<EntryText> ge = materialize(*gp, *gh, gpart.begin, gpart.end);
      bool proxy_new = bh.has_proxy && !gh->has_proxy;
      bool replaced = be.size() > 1 || ge.size() > 1 ||
                      (!be.empty() && !ge.empty() && be[0].via_import != ge[0].via_import);
      bool reloaded = reload_finding(k, be, &ge, *bad.proc, role, out);
      if (replaced) replaced_finding(k, be, &ge, *bad.proc, role, out, reloaded);
      if (proxy_new) proxy_finding(k, be, &ge, *bad.proc, role, out);
      if (!replaced && !proxy_new && !reloaded) replaced_finding(k, be, &ge, *bad.proc, role, out);
    });
  }
}

// One file as two module objects, or one module object under two names, only in bad.
void compare_duplicates(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  for (const auto& kv : b.dup_sigs) {
    if (g.dup_sigs.count(kv.first)) continue;
    Finding f = new_finding(Kind::DuplicateModule, Severity::Warning, kv.second.second, role, b.pos_of(kv.second.second));
    f.summary = kv.first;
    f.bad = kv.first;
    f.good = "not so";
    out.add(std::move(f));
  }
}

}  // namespace diff
}  // namespace imptrace
