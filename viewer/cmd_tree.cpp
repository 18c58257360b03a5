// `imptrace tree PATH... [--min-ms X] [--depth N] [--sort start|cumulative|self] [--top N]
// [--under MODULE]`: the nested import tree per process and thread, with cumulative and
// self time, like `python -X importtime` but in start order (or sorted) and cut down to
// what the options keep.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "import_time.h"

namespace imptrace {
namespace {

struct TreePrinter {
  const model::Process& p;
  const timing::ImportTree& t;
  const std::vector<timing::Fate>& fate;
  const timing::TreeOptions& o;
  std::ostream& out;
  size_t shown = 0;

  // The imports of one level the options keep, in print order; `rest`/`rest_ns` count
  // those above the --min-ms cut that --top left out.
  std::vector<size_t> level(const std::vector<size_t>& items, size_t& rest, uint64_t& rest_ns) const {
    std::vector<size_t> kept;
    for (size_t i : items)
      if (p.imports[i].duration_ns() >= o.min_ns) kept.push_back(i);
    if (o.sort == timing::SortKey::Cumulative)
      std::stable_sort(kept.begin(), kept.end(), [&](size_t a, size_t b) {
        return p.imports[a].duration_ns() > p.imports[b].duration_ns();
      });
    else if (o.sort == timing::SortKey::Self)
      std::stable_sort(kept.begin(), kept.end(), [&](size_t a, size_t b) { return t.self_ns[a] > t.self_ns[b]; });
    rest = 0;
    rest_ns = 0;
    if (o.top && kept.size() > o.top) {
      for (size_t k = o.top; k < kept.size(); ++k) rest_ns += p.imports[kept[k]].duration_ns();
      rest = kept.size() - o.top;
      kept.resize(o.top);
    }
    return kept;
  }

  void more_line(size_t depth, size_t rest, uint64_t rest_ns) {
    if (!rest) return;
    out << "  " << std::string(24, ' ') << "  " << std::string(std::min<size_t>(depth, 40) * 2, ' ') << "... "
        << rest << " more (" << format_ms(rest_ns) << " ms)\n";
  }

  void line(size_t i, size_t depth) {
    const auto& im = p.imports[i];
    char cols[48];
    snprintf(cols, sizeof cols, "%12s%12s  ", format_ms(im.duration_ns()).c_str(), format_ms(t.self_ns[i]).c_str());
    out << "  " << cols << std::string(std::min<size_t>(depth, 40) * 2, ' ');
    if (depth > 40) out << "[depth " << depth << "] ";
    out << im.name;
    if (!im.ok) out << "  FAILED " << im.error_text() << " (" << timing::fate_name(fate[i]) << ")";
    out << "\n";
    ++shown;
  }

  // Iterative depth-first walk: nesting comes from the file, so it may be deep.
  void walk(const std::vector<size_t>& roots) {
    struct Item {
      size_t pos;
      size_t depth;
      size_t rest;       // a "... N more" line, not an import, when pos == npos
      uint64_t rest_ns;
    };
    constexpr size_t kMore = static_cast<size_t>(-1);
    std::vector<Item> stack;
    auto push_level = [&](const std::vector<size_t>& items, size_t depth) {
      size_t rest;
      uint64_t rest_ns;
      auto kept = level(items, rest, rest_ns);
      if (rest) stack.push_back({kMore, depth, rest, rest_ns});
      for (auto it = kept.rbegin(); it != kept.rend(); ++it) stack.push_back({*it, depth, 0, 0});
    };
    push_level(roots, 0);
    while (!stack.empty()) {
      Item item = stack.back();
      stack.pop_back();
      if (item.pos == kMore) {
        more_line(item.depth, item.rest, item.rest_ns);
        continue;
      }
      line(item.pos, item.depth);
      if (!o.max_depth || item.depth + 1 < o.max_depth) push_level(t.children[item.pos], item.depth + 1);
    }
  }
};

size_t subtree_size(const timing::ImportTree& t, const std::vector<size_t>& roots) {
  size_t n = 0;
  std::vector<size_t> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    size_t i = stack.back();
    stack.pop_back();
    ++n;
    stack.insert(stack.end(), t.children[i].begin(), t.children[i].end());
  }
  return n;
}

// The outermost imports of `prefix` or its submodules among `roots` and their descendants,
// in start order.
std::vector<size_t> outermost_under(const model::Process& p, const timing::ImportTree& t,
                                    const std::vector<size_t>& roots, const std::string& prefix) {
  std::vector<size_t> found;
  std::vector<size_t> stack(roots.rbegin(), roots.rend());
  while (!stack.empty()) {
    size_t i = stack.back();
    stack.pop_back();
    if (timing::is_under(p.imports[i].name, prefix)) {
      found.push_back(i);
      continue;
    }
    stack.insert(stack.end(), t.children[i].rbegin(), t.children[i].rend());
  }
  return found;
}

bool options_cut(const timing::TreeOptions& o) { return o.min_ns || o.max_depth || o.top || !o.under.empty(); }

void tree_process(const model::Process& p, const timing::TreeOptions& o, std::ostream& out) {
  std::string version = p.python_version.substr(0, p.python_version.find(' '));
  out << "process " << p.pid << ": " << join_argv(p.argv) << "  [python "
      << (version.empty() ? "?" : version);
  if (!p.python_build.empty()) out << " " << p.python_build;
  out << ", " << p.imports.size() << " imports, " << p.source_file << "]\n";
  if (p.imports.empty()) {
    out << "  (no imports recorded)\n";
    return;
  }
  const timing::ImportTree t = timing::build_tree(p);
  const std::vector<timing::Fate> fate = timing::classify_failures(p);
  bool any = false;
  for (const auto& th : t.threads) {
    std::vector<size_t> roots = o.under.empty() ? th.roots : outermost_under(p, t, th.roots, o.under);
    if (roots.empty()) continue;
    any = true;
    uint64_t total = 0;
    for (size_t r : roots) total += p.imports[r].duration_ns();
    out << "  thread " << th.id << " (" << format_ms(total) << " ms in "
        << (o.under.empty() ? std::string("top-level imports") : "imports of " + o.under) << ")\n";
    out << "    cumul ms     self ms  module\n";
    TreePrinter printer{p, t, fate, o, out};
    printer.walk(roots);
    if (options_cut(o)) {
      size_t all = subtree_size(t, roots);
      out << "  (" << printer.shown << " of " << all << " imports shown)\n";
    }
  }
  if (!any) out << "  (no import of " << o.under << " or its submodules)\n";
}

// A whole non-negative number, or a UsageError naming the option.
size_t parse_count(const std::string& opt, const std::string& v, bool allow_zero) {
  char* end = nullptr;
  errno = 0;
  unsigned long long x = v.empty() || v[0] == '-' ? 0 : strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || !end || *end || errno || (!allow_zero && x == 0))
    throw UsageError(opt + " needs a whole number" + (allow_zero ? "" : " above 0") + ", not '" + v + "'");
  return static_cast<size_t>(x);
}

}  // namespace

void tree_text(const std::vector<model::Process>& procs, const timing::TreeOptions& opts, std::ostream& out) {
  for (size_t pi = 0; pi < procs.size(); ++pi) {
    if (pi) out << "\n";
    tree_process(procs[pi], opts, out);
  }
}

void tree_text(const std::vector<model::Process>& procs, std::ostream& out) {
  tree_text(procs, timing::TreeOptions(), out);
}

timing::TreeOptions parse_tree_options(const ParsedArgs& a) {
  timing::TreeOptions o;
  if (a.has("--min-ms")) {
    std::string v = a.get("--min-ms", "");
    char* end = nullptr;
    double ms = v.empty() ? -1 : strtod(v.c_str(), &end);
    if (v.empty() || !end || *end || !std::isfinite(ms) || ms < 0 || ms > 1e9)
      throw UsageError("--min-ms needs a number of milliseconds (0 or more), not '" + v + "'");
    o.min_ns = static_cast<uint64_t>(std::llround(ms * 1e6));
  }
  if (a.has("--depth")) o.max_depth = parse_count("--depth", a.get("--depth", ""), false);
  if (a.has("--top")) o.top = parse_count("--top", a.get("--top", ""), false);
  if (a.has("--sort") && !timing::parse_sort_key(a.get("--sort", ""), o.sort))
    throw UsageError("--sort takes start, cumulative or self, not '" + a.get("--sort", "") + "'");
  if (a.has("--under")) {
    o.under = a.get("--under", "");
    if (o.under.empty() || o.under.front() == '.' || o.under.back() == '.' ||
        o.under.find_first_of(" \t\n/") != std::string::npos)
      throw UsageError("--under needs a module name such as torch or torch.nn, not '" + o.under + "'");
  }
  return o;
}

int run_tree(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"--min-ms", "--depth", "--sort", "--top", "--under"}, {"--redact"});
  if (a.positional.empty()) throw UsageError("tree needs a PATH");
  timing::TreeOptions o = parse_tree_options(a);
  const auto& procs = load_for_command(a.positional);
  std::ostringstream buffer;  // --redact: the whole output, redacted before it is written
  bool redact = a.has("--redact");
  tree_text(procs, o, redact ? buffer : std::cout);
  if (redact) write_redacted(buffer.str(), {&procs}, std::cout);
  return 0;
}

}  // namespace imptrace
