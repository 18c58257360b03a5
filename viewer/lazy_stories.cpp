#include "lazy_stories.h"

namespace imptrace {
namespace model {

bool lazy_target_concerns(const std::string& target, const std::string& name) {
  return target == name || (target.size() > name.size() && target.compare(0, name.size(), name) == 0 &&
                            target[name.size()] == '.');
}

std::string lazy_failure_text(const LazyStory& s) {
  if (s.failed) return s.failed->error_text();
  if (!s.found_nothing) return "";
  const std::string target = s.declared->target.str();
  size_t dot = target.rfind('.');
  return "ImportError: " + target.substr(0, dot) + " has no attribute or submodule " + target.substr(dot + 1);
}

std::vector<LazyStory> lazy_stories(const Process& p) {
  std::vector<LazyStory> out;
  out.reserve(p.lazy_declared.size());
  for (const auto& d : p.lazy_declared) out.push_back({&d, nullptr, nullptr});
  // A resolution belongs to the latest declaration of the same global before it that is
  // still lazy (a module run twice declares again).
  for (const auto& r : p.lazy_resolved) {
    for (size_t i = out.size(); i > 0; --i) {
      LazyStory& s = out[i - 1];
      if (s.resolved || s.declared->time_ns > r.time_ns || s.declared->module != r.module ||
          s.declared->name != r.name)
        continue;
      s.resolved = &r;
      break;
    }
  }
  // A failed import of what a binding will import, while it was lazy: its resolution
  // failed (the binding stays lazy, and CPython raises at that use). The trace does not
  // say which use ran it, so a failure counts for a binding only when it was made from
  // the declaring module's own file (a function of that module using its global), or is
  // an outermost import of exactly the target (a use from anywhere else): bindings of the
  // same name elsewhere, and the outer imports a failure propagates through, are not it.
  for (auto& s : out) {
    const std::string target = s.declared->target.str();
    uint64_t until = s.resolved ? s.resolved->time_ns : UINT64_MAX;
    for (const auto& im : p.imports) {
      if (im.ok || im.begin_ns < s.declared->time_ns || im.begin_ns > until) continue;
      const std::string name = im.name.str();
      // The target, or a package on its way (a package that fails makes the whole
      // resolution fail).
      if (!lazy_target_concerns(target, name)) continue;
      bool from_declaring_file = !im.importer.file.empty() && im.importer.file == s.declared->declared_at.file;
      if (!from_declaring_file && !(im.parent_pos < 0 && name == target)) continue;
      s.failed = &im;
      break;
    }
  }
  // A `lazy from pkg import attr` whose first use found pkg without attr: 3.15 probes for
  // a submodule pkg.attr (an import that finds nothing: ok, no object), then looks attr up
  // on pkg and raises ImportError, leaving the binding lazy. The probe is the trace's
  // mark of that use; with no resolution after it, the use failed. As above, only a use
  // from the declaring module's own file counts.
  for (auto& s : out) {
    if (s.resolved || s.failed) continue;
    const std::string target = s.declared->target.str();
    if (target.find('.') == std::string::npos) continue;
    for (const auto& im : p.imports) {
      if (!im.ok || im.object.present || im.begin_ns < s.declared->time_ns || im.name.str() != target ||
          im.importer.file.empty() || im.importer.file.str() != s.declared->declared_at.file.str())
        continue;
      s.found_nothing = &im;
      break;
    }
  }
  return out;
}

}  // namespace model
}  // namespace imptrace
