// The import tree with self time, and the fate of each failed import (see import_time.h).
#include "import_time.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "enum_names.h"
#include "failure_reporting.h"
#include "test_outcomes.h"

namespace imptrace {
namespace timing {

ImportTree build_tree(const model::Process& p) {
  const size_t n = p.imports.size();
  ImportTree t;
  t.children.resize(n);
  t.self_ns.resize(n);
  t.depth.assign(n, 0);
  std::vector<uint64_t> child_time(n, 0);
  std::unordered_map<uint64_t, size_t> thread_pos;
  for (size_t i = 0; i < n; ++i) {
    const auto& im = p.imports[i];
    int64_t parent = im.parent_pos;
    // A parent always starts first; anything else is a damaged file and becomes a root.
    if (parent >= 0 && static_cast<size_t>(parent) < i) {
      t.children[parent].push_back(i);
      child_time[parent] += im.duration_ns();
      t.depth[i] = t.depth[parent] + 1;
      continue;
    }
    auto ins = thread_pos.emplace(im.thread, t.threads.size());
    if (ins.second) {
      t.threads.emplace_back();
      t.threads.back().id = im.thread;
    }
    auto& th = t.threads[ins.first->second];
    th.roots.push_back(i);
    th.total_ns += im.duration_ns();
  }
  for (size_t i = 0; i < n; ++i) {
    uint64_t cumul = p.imports[i].duration_ns();
    t.self_ns[i] = cumul > child_time[i] ? cumul - child_time[i] : 0;
  }
  return t;
}

const char* fate_name(Fate f) {
  static constexpr const char* kNames[] = {"ok", "handled", "propagated"};
  return name_of<Fate::Propagated>(kNames, f, "ok");
}

bool is_under(const std::string& name, const std::string& prefix) {
  if (prefix.empty()) return true;
  return name.size() >= prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         (name.size() == prefix.size() || name[prefix.size()] == '.');
}

namespace {

// Imported by a test runner's collector: pytest's import_path (test modules, conftest.py)
// or unittest's loader.
bool collector_import(const model::Import& im) {
  const std::string& f = im.importer.file.str();
  auto ends_with = [&](const char* tail) {
    size_t n = strlen(tail);
    return f.size() >= n && f.compare(f.size() - n, n, tail) == 0;
  };
  return (ends_with("_pytest/pathlib.py") && im.importer.function.str() == "import_path") ||
         (ends_with("unittest/loader.py") && im.importer.function.str().find("_get_module_from_name") != std::string::npos);
}

// The first thing `im`'s thread did from Python code after `im` returned (an import or an
// attribute lookup through a proxy or module __getattr__) ran inside failure reporting
// (failure_reporting.h) for the same test. pytest.importorskip is left out: its Skipped
// is a skip, not a failure.
bool reported_as_failure(const model::Process& p, const model::Import& im) {
  if (im.importer.file.str().find("_pytest/") != std::string::npos) return false;
  const model::Import* next_import = nullptr;
  for (const auto& o : p.imports)
    if (o.thread == im.thread && o.begin_ns >= im.end_ns && !o.importer.empty() &&
        (!next_import || o.begin_ns < next_import->begin_ns))
      next_import = &o;
  const model::ProxyAccess* next_access = nullptr;
  for (const auto& a : p.proxy_accesses)
    if (a.thread == im.thread && a.time_ns >= im.end_ns && (!next_access || a.time_ns < next_access->time_ns))
      next_access = &a;
  const std::string test = outcomes::node_id_of(im.test);
  if (next_access && (!next_import || next_access->time_ns < next_import->begin_ns))
    return outcomes::node_id_of(next_access->test) == test && model::in_failure_reporting(next_access->stack);
  return next_import && outcomes::node_id_of(next_import->test) == test &&
         model::import_in_failure_reporting(p, *next_import);
}

// `from P import X` where P has no attribute X: importlib's _handle_fromlist tries the
// submodule P.X and swallows its ModuleNotFoundError, then the import statement raises
// "cannot import name 'X' from 'P'". The enclosing import failed with that error, not with
// this one.
bool fromlist_probe(const model::Import& im, const model::Import& outer) {
  size_t dot = im.name.rfind('.');
  if (dot == std::string::npos || im.error_type.str() != "ModuleNotFoundError") return false;
  const std::string said = "cannot import name '" + im.name.substr(dot + 1) + "' from '" + im.name.substr(0, dot) + "'";
  return outer.error_message.str().compare(0, said.size(), said) == 0;
}

}  // namespace

std::vector<Fate> classify_failures(const model::Process& p) {
  const size_t n = p.imports.size();
  // Per thread, when the last import asked for by Python code began. Imports without a
  // Python importer are left out: the interpreter's own imports while it prints an
  // uncaught error and shuts down (3.13 imports `traceback` to print it) are not the
  // program going on.
  // A trace without importers at all (the tracer's floor build records none) counts every
  // import.
  bool have_importers = false;
  for (const auto& im : p.imports) have_importers |= !im.importer.empty();
  // From the interpreter's own import of `traceback` to print an uncaught error on a
  // thread, nothing that thread imports is the program going on either: 3.15's traceback
  // resolves its lazy imports (linecache's, tokenize's...) from Python code while it prints.
  // (Told by that import having no importer, so only where imports have them.)
  std::unordered_map<uint64_t, uint64_t> printing_from;
  for (const auto& im : p.imports)
    if (have_importers && im.parent_pos < 0 && im.importer.empty() && im.name == "traceback")
      printing_from.emplace(im.thread, im.begin_ns);
  std::unordered_map<uint64_t, uint64_t> last_begin;
  for (const auto& im : p.imports) {
    if (have_importers && im.importer.empty()) continue;
    auto printing = printing_from.find(im.thread);
    if (printing != printing_from.end() && im.begin_ns >= printing->second) continue;
    auto ins = last_begin.emplace(im.thread, im.begin_ns);
    if (!ins.second) ins.first->second = std::max(ins.first->second, im.begin_ns);
  }
  std::vector<Fate> fate(n, Fate::Ok);
  for (size_t i = 0; i < n; ++i) {
    const auto& im = p.imports[i];
    if (im.ok) continue;
    int64_t parent = im.parent_pos;
    if (parent >= 0 && static_cast<size_t>(parent) < i) {
      const auto& outer = p.imports[parent];
      if (outer.ok) fate[i] = Fate::Handled;
      else if (outer.name != im.name && is_under(outer.name, im.name)) fate[i] = fate[parent];
      else if (fromlist_probe(im, outer)) fate[i] = Fate::Handled;
      // The same error went on out of the enclosing import (urllib3.contrib.socks re-raises
      // `import socks`'s ModuleNotFoundError): it ends where that one ends, handled by
      // requests.adapters' try/except.
      else if (outer.error_type == im.error_type && outer.error_message == im.error_message) fate[i] = fate[parent];
      else fate[i] = Fate::Propagated;
      continue;
    }
    // A test module or conftest that pytest or unittest failed to import is reported as a
    // collection error or a failing test: an error of the run, though the run goes on.
    if (collector_import(im)) {
      fate[i] = Fate::Propagated;
      continue;
    }
    auto it = last_begin.find(im.thread);
    bool went_on = it != last_begin.end() && it->second >= im.end_ns;
    // Asked for by a test: pytest going on with the next test is not the test going on.
    // When the next thing its thread did was the runner formatting this test's failure,
    // the error left the test.
    if (went_on && !im.test.empty() && reported_as_failure(p, im)) went_on = false;
    // Asked for by C code (an embedding host's PyImport_ImportModule, pybind11's
    // module_::import), which got the error back: the host went on when the interpreter's
    // lifetime ended by Py_FinalizeEx rather than with the program.
    if (!went_on && have_importers && im.importer.empty()) {
      uint32_t l = p.lifetime_at(im.begin_ns);
      for (const auto& lt : p.lifetimes)
        if (lt.number == l && lt.ended) went_on = true;
    }
    // The main thread's error that nothing caught ends the program with status 1: one
    // that exited with 0 caught it, though nothing was imported after (the last import of
    // a script failing inside its try/except), unless a test runner then reported it as
    // the test's failure.
    if (!went_on && im.thread == static_cast<uint64_t>(p.pid) && p.end.status == 0 &&
        (p.end.how == model::ProcessEnd::How::Exit || p.end.how == model::ProcessEnd::How::OsExit) &&
        (im.test.empty() || !reported_as_failure(p, im)))
      went_on = true;
    fate[i] = went_on ? Fate::Handled : Fate::Propagated;
  }
  return fate;
}

bool parse_sort_key(const std::string& s, SortKey& out) {
  if (s == "start") out = SortKey::Start;
  else if (s == "cumulative") out = SortKey::Cumulative;
  else if (s == "self") out = SortKey::Self;
  else return false;
  return true;
}

// The failed import inside `im` whose error went on out of it, and so on down: where the
// error was raised. `import pkg` failing with pkg.a's and pkg.b's "cannot import name 'A'
// from partially initialized module" started in pkg.b. `im` itself when no import inside
// it failed with its error, or only the packages of its own dotted name did.
const model::Import& origin_of_failure(const model::Process& p, const model::Import& im) {
  const model::Import* at = &im;
  for (bool deeper = true; deeper;) {
    deeper = false;
    const int64_t pos = at - p.imports.data();
    for (size_t j = static_cast<size_t>(pos) + 1; j < p.imports.size(); ++j) {
      const model::Import& c = p.imports[j];
      if (c.parent_pos != pos || c.ok || c.error_type != at->error_type || c.error_message != at->error_message)
        continue;
      // The first step of a dotted import (`org` inside `org.python.core`) is that import's
      // own failure: the story stays with the name the code asked for, unless the error was
      // raised further inside that package's own import (`pandas.util.version` failing
      // because `pandas.util` imported `_strptime`, which raised).
      if (is_under(at->name, c.name)) {
        const model::Import& inner = origin_of_failure(p, c);
        if (&inner == &c) continue;
        at = &inner;
        deeper = true;
        break;
      }
      at = &c;
      deeper = true;
      break;
    }
  }
  return *at;
}

}  // namespace timing
}  // namespace imptrace
