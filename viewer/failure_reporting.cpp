// Recognising failure reporting by its frames (see failure_reporting.h). Matched on the end
// of the path, so any install prefix or virtualenv reads the same.
#include "failure_reporting.h"

#include <string_view>

namespace imptrace {
namespace model {

namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool is_failure_reporting_frame(const Location& loc) {
  std::string_view file(loc.file.str());
  std::string_view fn(loc.function.str());
  // The qualified name's last part: "Node._repr_failure_py" -> "_repr_failure_py".
  size_t dot = fn.rfind('.');
  std::string_view leaf = dot == std::string_view::npos ? fn : fn.substr(dot + 1);
  if (leaf == std::string_view("repr_failure") || leaf == std::string_view("_repr_failure_py")) return true;
  if (file.find("/_pytest/_code/") != std::string_view::npos) return true;
  if (ends_with(file, "/_pytest/reports.py") || ends_with(file, "/_pytest/terminal.py")) return true;
  if (ends_with(file, "/unittest/result.py")) return true;
  // The stdlib's traceback and linecache modules (not some package's own traceback.py:
  // they sit in a directory named like "python3.11").
  for (std::string_view tail : {std::string_view("/traceback.py"), std::string_view("/linecache.py")}) {
    if (!ends_with(file, tail)) continue;
    std::string_view dir = file.substr(0, file.size() - tail.size());
    size_t start = dir.rfind('/');
    std::string_view base = start == std::string_view::npos ? dir : dir.substr(start + 1);
    return base.compare(0, 6, "python") == 0;
  }
  return false;
}

bool in_failure_reporting(const std::vector<Location>& stack) {
  for (const auto& loc : stack)
    if (is_failure_reporting_frame(loc)) return true;
  return false;
}

bool import_in_failure_reporting(const Process& p, const Import& im) {
  // A reporting module's own top-level imports run when it is imported, not while it
  // reports: only its functions count.
  auto reporting = [](const Location& l) {
    return !l.empty() && l.function.str() != "<module>" && is_failure_reporting_frame(l);
  };
  const Import* x = &im;
  // Bounded by the number of imports: a parent always began before its child.
  for (size_t n = 0; x && n <= p.imports.size(); ++n) {
    if (reporting(x->importer) || reporting(x->trigger)) return true;
    // The interpreter's own `import traceback` (no Python importer) to print an uncaught
    // exception (3.13+), and what traceback imports in turn.
    if (x->parent_pos < 0 && x->importer.empty() && x->trigger.empty() && x->name.str() == "traceback") return true;
    x = x->parent_pos >= 0 && static_cast<size_t>(x->parent_pos) < p.imports.size()
            ? &p.imports[static_cast<size_t>(x->parent_pos)] : nullptr;
  }
  return false;
}

}  // namespace model
}  // namespace imptrace
