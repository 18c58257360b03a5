// What the comparisons share: a finding's first fields, ranking positions, and the
// phrases findings are written in (structural: no object tokens, paths relativized).
#include <cstdio>

#include "commands.h"
#include "diff_compare.h"

#include "proxy_decision.h"

namespace imptrace {
namespace diff {

Finding new_finding(Kind kind, Severity severity, std::string module, const std::string& process,
                    uint64_t order) {
  Finding f;
  f.kind = kind;
  f.severity = severity;
  f.module = std::move(module);
  f.process = process;
  f.order = order;
  return f;
}

uint64_t first_pos(const ProcFacts& pf, std::string_view name) {
  const ModFacts* m = pf.mods.find(name);
  return m ? m->pos : UINT64_MAX - 2;
}

std::string object_kind(const ObjectRef& o) {
  if (!o.present) return "nothing";
  std::string s = o.is_plain_module() ? std::string("module") : (o.type.empty() ? "object" : o.type.str());
  return s;
}

// "module 'a' (a/__init__.py)" or "pkg.Lazy 'a' [proxy]": structural, no token.
std::string describe(const ObjectRef& o, const std::string& origin) {
  if (!o.present) return "nothing";
  if (model::is_import_blocker(o)) return "None (blocks the import)";
  std::string s = object_kind(o);
  if (!o.name.empty()) s += " '" + o.name + "'";
  if (o.is_proxy()) s += " [proxy]";
  if (!origin.empty()) s += " (" + origin + ")";
  return s;
}

std::string format_duration(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}


std::string place_text(const Location& at, bool precise) {
  if (at.empty()) return precise ? std::string() : ", seen at the next import";
  return (precise ? " at " : ", seen at the next import, at ") + format_location(at);
}

const model::Import* set_up_by_own_import(const model::Process& p, const KeyHistory& h) {
  if (h.entries.empty() || h.entries.size() > 2) return nullptr;
  const model::KeyEntry& first = h.entries[0];
  const model::KeyEntry& last = h.entries[h.entries.size() - 1];
  // Before it: nothing, or the module the key's import created.
  if (h.entries.size() == 2 && (!first.via_import || first.before_trace)) return nullptr;
  if (last.via_import || !last.change) return nullptr;
  return model::own_namespace_import(p, *last.change);
}

std::string own_design_text(const model::Import& by, std::string_view key) {
  if (by.name.str() == key) return std::string(key) + " replaced itself under its own name while it was imported";
  return "the import of " + by.name + " put " + std::string(key) + " there, in its own namespace";
}

std::string history_text(const std::vector<EntryText>& h) {
  std::string s;
  size_t n = 0;
  for (const auto& e : h) {
    if (!s.empty()) s += "; then ";
    s += std::to_string(++n) + ". " + describe(e.obj, e.origin);
    if (e.before_trace) s += " already there";
    else s += e.via_import ? " by the import system" : " by assignment";
    if (!e.via_import) s += place_text(e.set_by, e.precise);
    if (e.relation != "new object") s += " (" + e.relation + ")";
    for (const auto& cc : e.class_changes) {
      s += ", class changed to " + cc.first;
      if (!cc.second.empty()) s += " at " + format_location(cc.second);
    }
    if (!e.reloads.empty())
      s += e.reloads.size() == 1 ? ", reloaded" : ", reloaded " + std::to_string(e.reloads.size()) + " times";
    if (e.removed) s += ", removed" + place_text(e.removed_at, e.removal_precise);
  }
  return s.empty() ? "nothing" : s;
}


}  // namespace diff
}  // namespace imptrace
