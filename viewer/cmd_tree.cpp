// `imptrace tree PATH`: the nested import tree per process and thread, with cumulative
// and self time, like `python -X importtime` but in start order and readable.
#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.h"

namespace imptrace {

void tree_text(const std::vector<model::Process>& procs, std::ostream& out) {
  for (size_t pi = 0; pi < procs.size(); ++pi) {
    const auto& p = procs[pi];
    if (pi) out << "\n";
    out << "process " << p.pid << ": " << join_argv(p.argv) << "\n";
    if (p.imports.empty()) {
      out << "  (no imports recorded)\n";
      continue;
    }
    const size_t n = p.imports.size();
    std::vector<std::vector<size_t>> children(n);
    std::vector<uint64_t> child_time(n, 0);
    std::vector<size_t> roots;
    for (size_t i = 0; i < n; ++i) {
      int64_t parent = p.imports[i].parent_pos;
      if (parent >= 0 && static_cast<size_t>(parent) < i) {
        children[parent].push_back(i);
        child_time[parent] += p.imports[i].duration_ns();
      } else {
        roots.push_back(i);
      }
    }
    // Threads in order of their first import.
    std::vector<uint64_t> thread_order;
    std::map<uint64_t, std::vector<size_t>> roots_by_thread;
    for (size_t r : roots) {
      uint64_t t = p.imports[r].thread;
      if (!roots_by_thread.count(t)) thread_order.push_back(t);
      roots_by_thread[t].push_back(r);
    }
    for (uint64_t t : thread_order) {
      const auto& thread_roots = roots_by_thread[t];
      uint64_t total = 0;
      for (size_t r : thread_roots) total += p.imports[r].duration_ns();
      out << "  thread " << t << " (" << format_ms(total) << " ms in top-level imports)\n";
      out << "    cumul ms     self ms  module\n";
      // Iterative depth-first walk: nesting comes from the file, so it may be deep.
      std::vector<std::pair<size_t, size_t>> stack;  // (import position, depth)
      for (auto it = thread_roots.rbegin(); it != thread_roots.rend(); ++it) stack.push_back({*it, 0});
      while (!stack.empty()) {
        auto [i, depth] = stack.back();
        stack.pop_back();
        const auto& im = p.imports[i];
        uint64_t cumul = im.duration_ns();
        uint64_t self = cumul > child_time[i] ? cumul - child_time[i] : 0;
        char cols[48];
        snprintf(cols, sizeof cols, "%12s%12s  ", format_ms(cumul).c_str(), format_ms(self).c_str());
        out << "  " << cols << std::string(std::min<size_t>(depth, 40) * 2, ' ');
        if (depth > 40) out << "[depth " << depth << "] ";
        out << im.name;
        if (!im.ok) out << "  FAILED " << im.error_text();
        out << "\n";
        const auto& kids = children[i];
        for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, depth + 1});
      }
    }
  }
}

int run_tree(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {}, {"--redact"});
  if (a.positional.empty()) throw UsageError("tree needs a PATH");
  if (a.positional.size() > 1) throw UsageError("tree takes one PATH (a file or a directory)");
  const auto& procs = load_for_command(a.positional);
  std::ostringstream buffer;  // --redact: the whole output, redacted before it is written
  bool redact = a.has("--redact");
  tree_text(procs, redact ? buffer : std::cout);
  if (redact) write_redacted(buffer.str(), {&procs}, std::cout);
  return 0;
}

}  // namespace imptrace
