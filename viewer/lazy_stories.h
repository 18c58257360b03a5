// PEP 810 lazy imports (3.15), read back: each lazy binding's whole story from the
// LazyImport and LazyReified records and the Import records between them. Declared where
// (file:line, the name bound), resolved where (the first use, its test, what it became),
// or failed there (the failed import the first use ran, which carries the test that paid),
// or never used.
#pragma once

#include <string>
#include <vector>

#include "model.h"

namespace imptrace {
namespace model {

struct LazyStory {
  const LazyDeclared* declared = nullptr;
  const LazyResolved* resolved = nullptr;  // the first use that resolved it; null: none
  // A failed import of its target (or of a package on the way to it) begun while the
  // binding was still lazy: the first use's resolution failed there (its importer is
  // that use). Null when none.
  const Import* failed = nullptr;
  bool never_used() const { return !resolved && !failed; }
};

// In declaration order.
std::vector<LazyStory> lazy_stories(const Process& p);

// Whether a lazy binding of `target` concerns module `name`: the target itself, a module
// under it being the target ("xml" for `lazy import xml.dom.minidom`), or, for `lazy from
// pkg import attr` (target "pkg.attr"), the package.
bool lazy_target_concerns(const std::string& target, const std::string& name);

}  // namespace model
}  // namespace imptrace
