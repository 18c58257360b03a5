// PEP 810 lazy imports (3.15), read back: each lazy binding's whole story from the
// LazyImport and LazyReified records and the Import records between them. Declared where
// (file:line, the name bound), resolved where (the first use, its test, what it became),
// or failed there (the failed import the first use ran, which carries the test that paid,
// or for a `lazy from` the use's probe that found no such name), or never used.
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
  // `lazy from pkg import attr` whose pkg has no attr (and no submodule attr): the first
  // use imports nothing new. Its probe for a submodule pkg.attr, an import that found
  // nothing (ok, no object; importer = the use), is in the trace, and no resolution
  // follows: the binding stayed lazy and the use raised ImportError. Null when none.
  const Import* found_nothing = nullptr;
  bool failed_at_use() const { return failed || found_nothing; }
  bool never_used() const { return !resolved && !failed_at_use(); }
};

// What a failed first use raised: the failed import's "ExceptionType: message", or for a
// use that found no such name "ImportError: pkg has no attribute or submodule attr".
std::string lazy_failure_text(const LazyStory& s);

// In declaration order.
std::vector<LazyStory> lazy_stories(const Process& p);

// Whether a lazy binding of `target` concerns module `name`: the target itself, a module
// under it being the target ("xml" for `lazy import xml.dom.minidom`), or, for `lazy from
// pkg import attr` (target "pkg.attr"), the package.
bool lazy_target_concerns(const std::string& target, const std::string& name);

}  // namespace model
}  // namespace imptrace
