// Import time as people look at it: one process's imports as a tree with cumulative and
// self time (what `python -X importtime` prints), and whether each failed import mattered.
// Shared by `tree`, `show`, `report` and `diff`; works on the model only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model.h"

namespace imptrace {
namespace timing {

// The nesting of one process's imports. Positions are indices into Process::imports.
struct ImportTree {
  std::vector<std::vector<size_t>> children;  // per import, in start order
  std::vector<uint64_t> self_ns;              // cumulative minus the children's cumulative
  std::vector<size_t> depth;                  // 0 for a top-level import
  // Threads in the order of their first top-level import, each with its top-level imports
  // in start order.
  struct Thread {
    uint64_t id = 0;
    std::vector<size_t> roots;
    uint64_t total_ns = 0;  // sum of the roots' cumulative time
  };
  std::vector<Thread> threads;
};
ImportTree build_tree(const model::Process& p);

// What became of a failed import.
// - Handled: the code that asked for it caught the error and went on. The enclosing
//   import finished OK, or (top level) its thread imported more afterwards.
// - Propagated: the failure stopped something. The enclosing import failed too, or (top
//   level) nothing on its thread imported anything afterwards (the process or thread
//   ended with it).
// The first step of a dotted import is one failure with the import it belongs to: in
// `import a.b`, a missing `a` fails inside the import of `a.b` with the same error, so the
// failure of `a` has the fate of `a.b` (`from org.python.core import X` inside
// try/except in copy.py is one handled failure, not a propagated `org`).
enum class Fate { Ok, Handled, Propagated };
const char* fate_name(Fate f);  // "ok", "handled", "propagated"
// One entry per import of `p`.
std::vector<Fate> classify_failures(const model::Process& p);

// Options of `imptrace tree`.
enum class SortKey { Start, Cumulative, Self };
struct TreeOptions {
  uint64_t min_ns = 0;       // hide imports whose cumulative time is below this
  size_t max_depth = 0;      // 0: all levels; 1: top-level imports only
  SortKey sort = SortKey::Start;
  size_t top = 0;            // 0: all; else at most this many imports at each level
  std::string under;         // "" all; else the subtrees of the outermost imports of
                             // this module or its submodules
};
// Parses --sort's value; false for anything else.
bool parse_sort_key(const std::string& s, SortKey& out);

// True when `name` is `prefix` or one of its submodules ("torch" matches "torch.nn", not
// "torchvision").
bool is_under(const std::string& name, const std::string& prefix);

// The failed import inside `im` whose error went on out of it, and so on down: where the
// error was raised (`im` itself when it was raised there).
const model::Import& origin_of_failure(const model::Process& p, const model::Import& im);

}  // namespace timing
}  // namespace imptrace
