// Module findings: imports that failed (import_failed), modules only one run imported
// (module_added, module_missing), and how modules both imported were found, loaded and
// timed (origin_changed, loader_changed, import_slower).
#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "commands.h"
#include "diff_compare.h"
#include "failure_reporting.h"
#include "import_time.h"
#include "lazy_stories.h"

namespace imptrace {
namespace diff {

namespace {

// An absolute path with "//", "/./" and "dir/.." folded, so one file has one spelling.
// Lexical only: the trace is read on another machine, the files need not exist here.
std::string clean_absolute(const std::string& path) {
  if (path.empty() || path[0] != '/') return path;
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(std::move(part));
    }
    i = j + 1;
  }
  std::string out;
  for (const auto& part : parts) out += "/" + part;
  return out.empty() ? "/" : out;
}

// Where an origin sits relative to the OUTERMOST sys.path entry that contains it, and that
// entry: with a package directory on sys.path too ("/dist-packages/yaml"), the innermost
// entry would make "yaml/__init__.py" read "__init__.py", as if it were another file.
struct RootedPath {
  std::string root, rel;
};
RootedPath outer_rooted(const std::string& path, const std::vector<std::string>& roots) {
  RootedPath best{"", path};
  for (std::string r : roots) {
    r = clean_absolute(r);
    if (r.size() < 2 || r[0] != '/') continue;  // "/" says nothing; zip files and relative entries
    if (path.size() > r.size() + 1 && path.compare(0, r.size(), r) == 0 && path[r.size()] == '/' &&
        (best.root.empty() || r.size() < best.root.size()))
      best = {r, path.substr(r.size() + 1)};
  }
  return best;
}

std::string rooted_text(const RootedPath& r) {
  return r.root.empty() ? r.rel : r.rel + " under " + r.root;
}

// What kind of place a module file is in: the interpreter's standard library, an installed
// package (site-packages, dist-packages), or any other directory (a script's directory, a
// checkout, the working directory). The same path under two entries of one kind is one file
// moved (another venv, another prefix); across kinds it is another file: a `calendar.py`
// beside a script shadows the standard library's, a checkout's `yaml/` the installed one.
enum class PlaceKind { Stdlib, Installed, Other };
PlaceKind place_kind(const std::string& file) {
  if (stdlib_file(file)) return PlaceKind::Stdlib;
  if (file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos)
    return PlaceKind::Installed;
  return PlaceKind::Other;
}

// The same file in both runs by the rules above (origins already cleaned).
bool same_file(const RootedPath& b, const RootedPath& g, const std::string& bad_file, const std::string& good_file) {
  return !b.root.empty() && !g.root.empty() && b.rel == g.rel && place_kind(bad_file) == place_kind(good_file);
}

// The module names an error message puts in quotes as a module: "module 'calendar' has no
// attribute 'day_abbr'", "cannot import name 'X' from 'pkg' (/path)", "partially initialized
// module 'pkg.a'".
std::vector<std::string> modules_named_in_error(const std::string& message) {
  std::vector<std::string> out;
  for (const char* lead : {"module '", "from '"}) {
    const std::string l = lead;
    for (size_t at = message.find(l); at != std::string::npos; at = message.find(l, at + 1)) {
      size_t start = at + l.size(), end = message.find('\'', start);
      if (end == std::string::npos || end == start) continue;
      std::string name = message.substr(start, end - start);
      if (name.find_first_of(" /") == std::string::npos && std::find(out.begin(), out.end(), name) == out.end())
        out.push_back(name);
    }
  }
  return out;
}


// The file of the module a failed import put under its key before its code raised
// (importlib takes it out again: the removal names it), "" when it made none
// (ModuleNotFoundError).
std::string failed_module_file(const Process& p, const Import& im) {
  for (const auto& c : p.modules_changes) {
    if (c.time_ns < im.begin_ns || c.time_ns > im.end_ns) continue;
    if (!(c.key == im.name)) continue;
    // Its insertion is the import system's own (no record); its removal carries it.
    const model::ObjectRef& o = c.op == model::ChangeOp::Set ? c.new_object : c.old_object;
    if (o.present && !o.file.empty()) return o.file.str();
  }
  return "";
}

}  // namespace

std::string normalize_loader(const std::string& l) {
  // "<_frozen_importlib_external.SourceFileLoader object at 0x7f..>" -> without address.
  std::string out;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] == '0' && i + 1 < l.size() && (l[i + 1] == 'x' || l[i + 1] == 'X')) {
      size_t j = i + 2;
      while (j < l.size() && isxdigit(static_cast<unsigned char>(l[j]))) ++j;
      if (j > i + 2) {
        out += "0x?";
        i = j - 1;
        continue;
      }
    }
    out += l[i];
  }
  return out;
}

// Imports that failed in bad with an error good never had. A failure its importer handled
// (an optional dependency's probe) is one severity level below one that propagated: the
// one that stopped something ranks first.
void compare_failed(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  std::unordered_map<const Process*, std::vector<timing::Fate>> fates;  // per process, when first asked
  auto handled = [&](const Process& p, const Import& im) {
    auto it = fates.find(&p);
    if (it == fates.end()) it = fates.emplace(&p, timing::classify_failures(p)).first;
    return it->second[static_cast<size_t>(&im - p.imports.data())] == timing::Fate::Handled;
  };
  for (size_t i = 0; i < b.mods->size(); ++i) {
    const ModFacts& bm = b.mods->value(i);
    if (bm.failed.empty()) continue;
    std::string_view name = b.mods->key(i);
    const ModFacts* gm = g.mod(name);
    for (const auto& x : bm.failed) {
      bool known = false;
      if (gm)
        for (const auto& y : gm->failed) known |= y.second->error_type == x.second->error_type;
      if (known) continue;
      const Import& im = *x.second;
      Finding f;
      f.kind = Kind::ImportFailed;
      bool was_ok = g.ok(name);
      bool by_importer = handled(*x.first->p, im);
      f.severity = was_ok ? (by_importer ? Severity::Warning : Severity::Error)
                          : (by_importer ? Severity::Info : Severity::Warning);
      f.module = std::string(name);
      f.story = f.module;
      f.process = role;
      f.order = b.pos_of(name);
      // An import that only carried the error of one inside it is part of that one's
      // story, which ranks first: the import where the error was raised is the cause.
      const Import& origin = timing::origin_of_failure(*x.first->p, im);
      if (&origin != &im) {
        f.story = origin.name.str();
        f.order = b.pos_of(origin.name) + 1;
      }
      f.test = im.test;
      f.summary = "import " + f.module + " failed: " + im.error_text() +
                  (by_importer ? " (handled by its importer)" : "");
      f.brief = "import " + f.module + " failed (" + im.error_type + ")";
      Location l = x.first->norm->loc(im.importer);
      if (!l.empty()) {
        f.summary += " (imported at " + format_location(l) + ")";
        f.where.push_back(l);
      }
      // PEP 810: the import ran at the first use of a lazy binding (a lazy run against an
      // eager one moves it there); the statement that declared it is the other place.
      if (!x.first->p->lazy_declared.empty()) {
        for (const auto& s : model::lazy_stories(*x.first->p)) {
          if (s.failed != &im) continue;
          Location d = x.first->norm->loc(s.declared->declared_at);
          f.summary += ", the first use of a lazy import" +
                       (d.empty() ? std::string() : " declared at " + format_location(d));
          if (!d.empty()) f.where.push_back(d);
          break;
        }
      }
      f.bad = im.error_text();
      // The module the failing import made came from another file than the good run's
      // (a file shadowing it on sys.path): that file, not the module's own code, is what
      // the user has to look at, and the error alone does not say so.
      const ModFacts* good_ok = gm ? gm->ok_facts : nullptr;
      std::string made_from = failed_module_file(*x.first->p, im);
      if (was_ok && good_ok && !made_from.empty()) {
        const Import& gim = *good_ok->first_ok;
        if (!gim.origin.empty() && clean_absolute(made_from) != clean_absolute(gim.origin)) {
          RootedPath br = outer_rooted(clean_absolute(made_from), x.first->p->sys_path_roots());
          RootedPath gr = outer_rooted(clean_absolute(gim.origin), good_ok->ok_process->p->sys_path_roots());
          if (!same_file(br, gr, clean_absolute(made_from), clean_absolute(gim.origin))) {
            f.summary += "; the failing " + f.module + " came from " + rooted_text(br) + ", not from " +
                         rooted_text(gr) + " as in the good run";
            f.bad += " (from " + rooted_text(br) + ")";
          }
        }
      }
      f.good = was_ok ? "imported fine"
                      : (gm && !gm->failed.empty() ? "failed with " + gm->failed.front().second->error_text()
                                               : "not imported");
      out.add(std::move(f));
    }
  }
}

namespace {

// The modules imported only inside one run's failure reporting, added to the role's
// failure_reporting entry (made by compare_accesses when lookups were folded too).
void fold_reporting_imports(const std::vector<std::string_view>& bad_only,
                            const std::vector<std::string_view>& good_only, const std::string& role,
                            Findings& out) {
  if (bad_only.empty() && good_only.empty()) return;
  auto list = [](const std::vector<std::string_view>& names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < 10; ++i) s += (i ? ", " : "") + std::string(names[i]);
    if (names.size() > 10) s += ", ... (" + std::to_string(names.size() - 10) + " more)";
    return s;
  };
  auto count = [](size_t n) { return std::to_string(n) + (n == 1 ? " module" : " modules"); };
  std::string text;
  if (!bad_only.empty()) text = count(bad_only.size()) + " imported only by the bad run's failure reporting (" + list(bad_only) + ")";
  if (!good_only.empty())
    text += (text.empty() ? "" : "; ") + count(good_only.size()) + " imported only by the good run's failure reporting (" +
            list(good_only) + ")";
  for (Finding& f : out.out) {
    if (f.kind != Kind::FailureReporting || f.process != role) continue;
    f.summary += "; " + text;
    if (!bad_only.empty()) f.bad += "; imported " + list(bad_only);
    if (!good_only.empty()) f.good = "imported " + list(good_only);
    return;
  }
  Finding f = new_finding(Kind::FailureReporting, Severity::Info, "", role, UINT64_MAX - 1);
  f.summary = text + ": the test runner or traceback formatting a failure, consequences of the failure, not causes";
  f.bad = bad_only.empty() ? "no module imported this way" : "imported " + list(bad_only);
  f.good = good_only.empty() ? "no failure was reported this way" : "imported " + list(good_only);
  out.add(std::move(f));
}

// Whether some entry of the history of key `name` in `run` holds an object `held` accepts.
template <typename Held>
bool key_history_holds(const Group& run, std::string_view name, Held held) {
  Group::KeyUnion scratch;
  const Group::KeyUnion* k = run.find_key(name, scratch);
  if (!k) return false;
  bool found = false;
  k->each([&](const Group::KeyRep& r) {
    for (const auto& e : r.history->entries) found |= e.object && e.object->present && held(e);
  });
  return found;
}

// A module sat under `name` in `run` though no import of it ran find-and-load there
// (importlib.util.LazyLoader, lazy_loader.load, a module made and assigned by hand): it was
// not missing there, and the comparison of the key's history tells how it got there.
bool module_sat_under(const Group& run, std::string_view name) {
  return key_history_holds(run, name, [](const auto& e) {
    return e.object->is_plain_module() || e.object->is_module_subclass();
  });
}

// Some object sat under `name` in `run` that was not a module (a MagicMock, a proxy that is
// no ModuleType): the key's history tells that story.
bool key_held_other_object(const Group& run, std::string_view name) {
  return key_history_holds(run, name, [](const auto& e) { return !e.via_import && !e.object->is_module(); });
}

std::string_view last_part(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// The file of each module `from` imported that sat in `other` under another name with the
// same last part (pytest's --import-mode=prepend names tests/test_a.py `test_a`, importlib
// names it `tests.test_a`): name in `from` -> name in `other`. One file, two names: the
// runs' layouts differ, no module is missing. The same file is the same absolute path, or
// the same path under each run's working directory (a checkout in another place); a file
// outside the working directory elsewhere (a vendored copy in site-packages) is another.
std::unordered_map<std::string_view, std::string> renamed_modules(const Group& from, const Group& other) {
  auto under_cwd = [](const std::string& file, const std::string& cwd) {
    std::string dir = cwd;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (dir.size() < 2 || file.size() <= dir.size() + 1 || file.compare(0, dir.size(), dir) != 0 ||
        file[dir.size()] != '/')
      return std::string();
    return file.substr(dir.size() + 1);
  };
  // Only a module `other` did not import can have been imported there under another name:
  // the last parts of those names bound what `other` must index (usually none or a few).
  std::unordered_set<std::string_view> wanted;
  for (size_t i = 0; i < from.mods->size(); ++i) {
    std::string_view name = from.mods->key(i);
    const ModFacts* o = other.mod(name);
    if (from.mods->value(i).ok_facts && !(o && (o->ok_facts || !o->failed.empty()))) wanted.insert(last_part(name));
  }
  std::unordered_map<std::string_view, std::string> out;
  if (wanted.empty()) return out;
  // `other`'s module files with one of those last parts, by absolute path and by path under
  // its working directory: the keys they sat under there. Looked up by file: a run of many
  // packages has thousands of `__init__`s and `utils`es sharing a last part.
  std::unordered_map<std::string, std::vector<std::string>> by_absolute, by_in_cwd;
  auto note = [](std::vector<std::string>& keys, std::string_view key) {
    if (keys.empty() || keys.back() != key) keys.emplace_back(key);
  };
  other.each_key([&](std::string_view key, const Group::KeyUnion& k) {
    if (!wanted.count(last_part(key))) return;
    k.each([&](const Group::KeyRep& r) {
      for (const auto& e : r.history->entries)
        if (e.object && e.object->present && !e.object->file.empty() &&
            (e.object->is_plain_module() || e.object->is_module_subclass())) {
          const std::string abs = clean_absolute(e.object->file.str());
          note(by_absolute[abs], key);
          std::string in_cwd = under_cwd(abs, r.proc->p->cwd);
          if (!in_cwd.empty()) note(by_in_cwd[in_cwd], key);
        }
    });
  });
  if (by_absolute.empty()) return out;
  for (size_t i = 0; i < from.mods->size(); ++i) {
    const ModFacts& m = from.mods->value(i);
    std::string_view name = from.mods->key(i);
    if (!m.ok_facts || m.ok_facts->first_ok->file.empty() || !wanted.count(last_part(name))) continue;
    // Another name with the same last part, for the same file.
    auto pick = [&](const std::unordered_map<std::string, std::vector<std::string>>& index, const std::string& file) {
      auto it = file.empty() ? index.end() : index.find(file);
      if (it == index.end()) return false;
      for (const std::string& key : it->second)
        if (key != name && last_part(key) == last_part(name)) {
          out.emplace(name, key);
          return true;
        }
      return false;
    };
    const std::string abs = clean_absolute(m.ok_facts->first_ok->file.str());
    if (!pick(by_absolute, abs)) pick(by_in_cwd, under_cwd(abs, m.ok_process->p->cwd));
  }
  return out;
}

}  // namespace

const char* const kVersionStory = "python version";

std::string python_version_of(const Process& p) {
  return p.python_version.substr(0, p.python_version.find(' '));
}

bool python_versions_differ(const Group& g, const Group& b) {
  // A header without a version (a trace the reader could not fully describe) tells nothing.
  const std::string gv = python_version_of(*g.procs.front()->p), bv = python_version_of(*b.procs.front()->p);
  return !gv.empty() && !bv.empty() && gv != bv;
}

bool stdlib_file(std::string_view file) {
  if (file == "built-in" || file == "frozen" || file.compare(0, 8, "<frozen ") == 0) return true;
  // A component "pythonX.Y" (Debian's "python3" too) right under "lib" or "lib64", and not
  // its site-packages or dist-packages: /usr/lib/python3.11/json/__init__.py,
  // .../lib/python3.12/lib-dynload/_json.cpython-312-x86_64-linux-gnu.so.
  for (size_t at = file.find("/lib"); at != std::string_view::npos; at = file.find("/lib", at + 1)) {
    std::string_view rest = file.substr(at + 1);
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return false;
    std::string_view lib = rest.substr(0, slash);
    if (lib != "lib" && lib != "lib64") continue;
    rest = rest.substr(slash + 1);
    slash = rest.find('/');
    if (slash == std::string_view::npos) return false;
    std::string_view dir = rest.substr(0, slash);
    if (dir.size() < 7 || dir.compare(0, 6, "python") != 0 || dir[6] < '0' || dir[6] > '9') continue;
    rest = rest.substr(slash + 1);
    return rest.compare(0, 14, "site-packages/") != 0 && rest.compare(0, 14, "dist-packages/") != 0;
  }
  return false;
}

bool stdlib_import(const Import& im) {
  return stdlib_file(im.origin.str()) && (im.importer.empty() || stdlib_file(im.importer.file.str()));
}

namespace {

// An `encodings.X` module imported by the standard library's codec search function: the
// registry looking up an encoding some code named at run time.
bool codec_lookup(const Import& im) {
  const std::string& name = im.name.str();
  const std::string& file = im.importer.file.str();
  static const std::string kRegistry = "/encodings/__init__.py";
  return name.compare(0, 10, "encodings.") == 0 && name.find('.', 10) == std::string::npos &&
         file.size() > kRegistry.size() && file.compare(file.size() - kRegistry.size(), kRegistry.size(), kRegistry) == 0 &&
         stdlib_file(file) && im.importer.function == "search_function";
}

// "a, b, c, ... (N more)"
std::string name_list(const std::vector<std::string_view>& names, size_t limit) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < limit; ++i) list += (i ? ", " : "") + std::string(names[i]);
  if (names.size() > limit) list += ", ... (" + std::to_string(names.size() - limit) + " more)";
  return list;
}

// One info finding for what the standard library of one Python version did and the other's
// did not: part of the python_version_changed story, not the user's code.
void version_finding(Kind kind, const std::vector<std::string_view>& names, const std::string& what,
                     const Group& g, const Group& b, Findings& out) {
  if (names.empty()) return;
  out.add(version_part(kind, std::vector<std::string>(names.begin(), names.end()), what,
                       python_version_of(*g.procs.front()->p), python_version_of(*b.procs.front()->p), b.key));
}

}  // namespace

Finding version_part(Kind kind, const std::vector<std::string>& names, const std::string& what,
                     const std::string& good_version, const std::string& bad_version, const std::string& role) {
  Finding f = new_finding(kind, Severity::Info, names.empty() ? std::string() : names[0], role, UINT64_MAX - 1);
  std::vector<std::string_view> views(names.begin(), names.end());
  f.summary = std::to_string(names.size()) + " standard-library module(s) " + what + ": " + name_list(views, 20) +
              " (the standard library of Python " + good_version + " and " + bad_version + " differs, not your code)";
  f.brief = std::to_string(names.size()) + " standard-library module(s) " + what;
  f.good = "Python " + good_version;
  f.bad = "Python " + bad_version;
  f.story = kVersionStory;
  return f;
}

namespace {

// Whether a module both runs imported came from another file, by the rules of
// compare_common; `br`, `gr` get where each path sits (only when the absolute files differ).
bool origin_moved(const Import& bim, const Import& gim, PathNorm& bn, PathNorm& gn, const std::vector<std::string>& broots,
                  const std::vector<std::string>& groots, RootedPath& br, RootedPath& gr) {
  if ((bn.view(bim.origin) == gn.view(gim.origin) && place_kind(bim.origin) == place_kind(gim.origin)) ||
      clean_absolute(bim.origin) == clean_absolute(gim.origin))
    return false;
  br = outer_rooted(clean_absolute(bim.origin), broots);
  gr = outer_rooted(clean_absolute(gim.origin), groots);
  return !same_file(br, gr, clean_absolute(bim.origin), clean_absolute(gim.origin));
}

// The modules both runs imported from other files (the standard library of two Python
// versions aside): what each imported in its own run is that file's doing.
std::unordered_set<std::string_view> moved_modules(const Group& g, const Group& b) {
  std::unordered_set<std::string_view> out;
  const bool versions_differ = python_versions_differ(g, b);
  for (size_t i = 0; i < b.mods->size(); ++i) {
    const ModFacts& bi = b.mods->value(i);
    const ModFacts* gi = g.mod(b.mods->key(i));
    if (!bi.ok_facts || !gi || !gi->ok_facts) continue;
    const Import& bim = *bi.ok_facts->first_ok;
    const Import& gim = *gi->ok_facts->first_ok;
    if (versions_differ && stdlib_file(bim.origin.str()) && stdlib_file(gim.origin.str())) continue;
    RootedPath br, gr;
    if (origin_moved(bim, gim, *bi.ok_process->norm, *gi->ok_process->norm, bi.ok_process->p->sys_path_roots(),
                     gi->ok_process->p->sys_path_roots(), br, gr))
      out.insert(b.mods->key(i));
  }
  return out;
}

// The innermost import enclosing `im` (itself excluded) of a module in `moved`, or "".
std::string_view moved_ancestor(const Process& p, const Import& im, const std::unordered_set<std::string_view>& moved) {
  for (int64_t at = im.parent_pos; at >= 0 && static_cast<size_t>(at) < p.imports.size();
       at = p.imports[static_cast<size_t>(at)].parent_pos) {
    auto it = moved.find(p.imports[static_cast<size_t>(at)].name.str());
    if (it != moved.end()) return *it;
  }
  return {};
}

}  // namespace

// The program stopped at a failed import: it exited with an error status after an import
// whose failure nothing caught (import_time.h: nothing on its thread imported anything
// afterwards). What the good run imported after that point was never reached.
const Import* failed_import_that_stopped(const Process& p) {
  if (p.end.how != model::ProcessEnd::How::Exit || p.end.status == 0) return nullptr;
  bool failed = false;
  for (const auto& im : p.imports) failed |= !im.ok && im.parent_pos < 0;
  if (!failed) return nullptr;
  const std::vector<timing::Fate> fate = timing::classify_failures(p);
  const Import* last = nullptr;
  for (size_t i = 0; i < p.imports.size(); ++i)
    if (!p.imports[i].ok && p.imports[i].parent_pos < 0 && fate[i] == timing::Fate::Propagated) last = &p.imports[i];
  return last;
}

bool exited_with_error(const model::ProcessEnd& e) {
  using How = model::ProcessEnd::How;
  return (e.how == How::Exit || e.how == How::OsExit) && e.status != 0;
}

bool stopped_short(const Process& p, bool counterpart_failed) {
  // pytest exits with 1 when tests failed after running every one of them: it reached its
  // end (what a failing test did not import is told per module).
  const bool tests_failed = p.end.how == model::ProcessEnd::How::Exit && p.end.status == 1 &&
                            process_role_class(p) == "pytest main";
  return model::ended_abnormally(p.end) || failed_import_that_stopped(p) ||
         (!counterpart_failed && exited_with_error(p.end) && !tests_failed);
}

bool reached_point(const Process& p, const ModFacts& m) {
  return !(m.ok_facts && model::import_in_failure_reporting(p, *m.ok_facts->first_ok));
}

Finding unreached_finding(const std::vector<std::string>& names, const std::string& role, const char* good_side,
                          const char* stopped) {
  Finding f = new_finding(Kind::ModuleMissing, Severity::Info, names.empty() ? std::string() : names[0], role,
                          UINT64_MAX - 1);
  std::vector<std::string_view> views(names.begin(), names.end());
  f.summary = "not reached: " + std::to_string(names.size()) + " module(s) " + good_side +
              " imported after the point where " + stopped +
              " ended abnormally, exited with an error status or stopped at a failed import (or was still importing "
              "there)";
  f.good = name_list(views, 20);
  f.bad = "not reached";
  return f;
}

namespace {

// How far the bad group got, when one of its processes stopped short (reach_in).
Reach reach_of_cut_short(const Group& g, const Group& b) {
  // A bad process that exited with an error status where no good one of its role did (an
  // uncaught RuntimeError after its imports: status 1) stopped there too. Both runs failing
  // alike (a test run exits 1 in both) is no stop to compare against.
  bool good_failed = false;
  for (const ProcFacts* p : g.procs) good_failed |= exited_with_error(p->p->end);
  bool cut = false;
  for (const ProcFacts* p : b.procs) cut |= stopped_short(*p->p, good_failed);
  if (!cut) return Reach();
  return reach_in(*g.mods, [&](std::string_view name) {
    const ModFacts* bm = b.mod(name);
    return bm && reached_point(*(bm->ok_facts ? bm->ok_facts->ok_process->p : b.procs.front()->p), *bm);
  });
}

}  // namespace

void compare_present(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  // A bad process cut short (process_ended_abnormally) is compared only up to where it
  // stopped: what the good run imported after that point was not reached, not missing.
  const Reach reach = reach_of_cut_short(g, b);
  std::vector<std::string_view> unreached;
  // Modules only one run imported, and only inside its failure reporting (traceback's
  // `import ast` to draw carets under a failing line): consequences of a failure, folded
  // into the failure_reporting entry. Good's are those of a failure the bad run did not have.
  std::vector<std::string_view> reporting[2];  // [in_bad]
  // One file under two names, one in each run, and the packages above the other name
  // (pytest's importlib mode makes `tests` for `tests.test_a`): the layout, at info.
  const std::unordered_map<std::string_view, std::string> renamed[2] = {renamed_modules(g, b), renamed_modules(b, g)};
  std::vector<std::string> layout[2];  // [in_bad]: "name (file; NAME in the other run)"
  // Under two Python versions, what one's standard library imported for itself.
  const bool versions_differ = python_versions_differ(g, b);
  std::vector<std::string_view> by_version[2];  // [in_bad]
  // Codecs the standard library's codec registry imported when the program named an
  // encoding (bytes.decode("utf-16-be"), open(..., encoding=...)): what data came by
  // (matplotlib reading font names only when it rebuilds its font cache), not the code.
  std::vector<std::string_view> codecs[2];  // [in_bad]
  // Modules only one run imported from inside the import of a module whose file differs
  // between the runs (the real networkx imports gzip and pickle, a local stand-in does
  // not): that file's doing, told with its origin_changed, by the innermost such module.
  const std::unordered_set<std::string_view> moved = moved_modules(g, b);
  std::map<std::string_view, std::vector<std::string_view>> under_moved[2];  // [in_bad]
  auto package_of_other_name = [&](std::string_view name, bool in_bad) {
    for (const auto& kv : renamed[!in_bad])
      if (kv.second.size() > name.size() && timing::is_under(kv.second, std::string(name))) return true;
    return false;
  };
  auto aggregate = [&](const Group& from, const Group& other, Kind kind, bool in_bad) {
    std::unordered_map<std::string_view, std::vector<std::string_view>> by_top;
    std::vector<std::string_view> tops;
    std::vector<std::string_view> candidates;  // in import order
    for (size_t i = 0; i < from.mods->size(); ++i) {
      if (!from.mods->value(i).ok_facts) continue;
      std::string_view name = from.mods->key(i);
      const ModFacts* o = other.mod(name);
      if (o && (o->ok_facts || !o->failed.empty())) continue;  // import_failed tells that story
      if (module_sat_under(other, name)) continue;            // sys_modules_replaced tells it
      if (!other.ok(name) && key_held_other_object(other, name)) continue;  // so it does here
      // The other run imported it in a process this run has no counterpart for (serial
      // against `-n 2`: the xdist workers import the tests): not missing from that run.
      bool elsewhere = false;
      for (const Group* sib : other.unpaired_siblings) elsewhere |= sib->ok(name);
      if (elsewhere) continue;
      auto other_name = renamed[in_bad].find(name);
      if (other_name != renamed[in_bad].end()) {
        layout[in_bad].push_back(std::string(name) + " (as " + other_name->second + ")");
        continue;
      }
      if (package_of_other_name(name, in_bad)) {
        layout[in_bad].push_back(std::string(name) + " (package)");
        continue;
      }
      if (!in_bad && (from.mods->value(i).pos > reach.pos || reach.unfinished.count(name))) {
        unreached.push_back(name);
        continue;
      }
      const ModFacts& m = from.mods->value(i);
      if (versions_differ && stdlib_import(*m.ok_facts->first_ok)) {
        by_version[in_bad].push_back(name);
        continue;
      }
      if (model::import_in_failure_reporting(*m.ok_process->p, *m.ok_facts->first_ok)) {
        reporting[in_bad].push_back(name);
        continue;
      }
      if (codec_lookup(*m.ok_facts->first_ok)) {
        codecs[in_bad].push_back(name);
        continue;
      }
      if (!moved.empty()) {
        std::string_view by = moved_ancestor(*m.ok_process->p, *m.ok_facts->first_ok, moved);
        if (!by.empty()) {
          under_moved[in_bad][by].push_back(name);
          continue;
        }
      }
      candidates.push_back(name);
    }
    // What a module only this run imported imported in turn (conftest's unittest.mock and
    // the asyncio it pulls in; the good run's `import requests`'s http, email, six) follows
    // from that import: one finding for the outermost one, holding them. And what an import
    // made under a key the other run held another object under (a MagicMock put under
    // sys.modules['requests'] by a conftest) is part of that key's story.
    std::unordered_set<std::string_view> candidate_set(candidates.begin(), candidates.end());
    std::map<std::string_view, std::vector<std::string_view>> under_replaced;
    for (std::string_view name : candidates) {
      const ModFacts& m = *from.mod(name);
      const Process& p = *m.ok_process->p;
      std::string_view head = name, replaced;
      for (int64_t at = m.ok_facts->first_ok->parent_pos; at >= 0 && static_cast<size_t>(at) < p.imports.size();
           at = p.imports[static_cast<size_t>(at)].parent_pos) {
        std::string_view outer = p.imports[static_cast<size_t>(at)].name.str();
        auto in = candidate_set.find(outer);
        if (in != candidate_set.end()) head = *in;
        if (!other.ok(outer) && key_held_other_object(other, outer)) replaced = outer;
      }
      if (!replaced.empty()) {
        under_replaced[replaced].push_back(name);
        continue;
      }
      std::string_view t = head.substr(0, head.find('.'));
      auto ins = by_top.emplace(t, std::vector<std::string_view>());
      if (ins.second) tops.push_back(t);
      ins.first->second.push_back(name);
    }
    for (const auto& kv : under_replaced) {
      Finding f = new_finding(kind, Severity::Info, std::string(kv.second[0]), role, UINT64_MAX - 1);
      f.story = std::string(kv.first);
      f.summary = std::to_string(kv.second.size()) + " module(s) the " + (in_bad ? "bad" : "good") + " run's import of " +
                  std::string(kv.first) + " imported, not imported in the " + (in_bad ? "good" : "bad") +
                  " run, where sys.modules['" + std::string(kv.first) + "'] held another object: " + name_list(kv.second, 10);
      (in_bad ? f.bad : f.good) = name_list(kv.second, 20);
      (in_bad ? f.good : f.bad) = "not imported";
      out.add(std::move(f));
    }
    for (std::string_view t : tops) {
      const auto& names = by_top[t];
      Finding f;
      f.kind = kind;
      f.severity = Severity::Warning;
      // Named after the package the group is for, not a module its import pulled in.
      std::string_view shortest = names[0];
      for (std::string_view n : names)
        if (n.size() < shortest.size() && n.substr(0, n.find('.')) == t) shortest = n;
      f.module = std::string(shortest);
      f.process = role;
      f.order = in_bad ? b.pos_of(names[0]) : UINT64_MAX - 1;
      const ModFacts& rep = *from.mod(names[0]);
      const Import& im = *rep.ok_facts->first_ok;
      // A module a test runner's failure report imported (3.14+'s traceback imports
      // _suggestions to suggest a name) follows from the failure: not a cause.
      if (model::is_failure_reporting_frame(im.importer)) f.severity = Severity::Info;
      Location l = rep.ok_process->norm->loc(im.importer);
      if (!l.empty()) f.where.push_back(l);
      f.test = im.test;
      std::string list;
      for (size_t i = 0; i < names.size() && i < 20; ++i) list += (i ? ", " : "") + std::string(names[i]);
      if (names.size() > 20) list += ", ... (" + std::to_string(names.size() - 20) + " more)";
      bool all_under = true;
      for (std::string_view n : names) all_under &= n.substr(0, n.find('.')) == t;
      std::string count = names.size() == 1 ? ""
                          : " and " + std::to_string(names.size() - 1) + " more under " + std::string(t) +
                                (all_under ? "" : " or imported by it");
      std::string first(names[0]);
      if (in_bad) {
        f.summary = "imported only in the bad run: " + first + count;
        f.bad = list;
        f.good = "not imported";
      } else {
        f.summary = "imported only in the good run: " + first + count;
        f.good = list;
        f.bad = "not imported";
      }
      if (!l.empty()) f.summary += " (first imported at " + format_location(l) + ")";
      out.add(std::move(f));
    }
  };
  aggregate(b, g, Kind::ModuleAdded, true);
  aggregate(g, b, Kind::ModuleMissing, false);
  fold_reporting_imports(reporting[1], reporting[0], role, out);
  version_finding(Kind::ModuleMissing, by_version[0], "imported only by the good run's standard library", g, b, out);
  version_finding(Kind::ModuleAdded, by_version[1], "imported only by the bad run's standard library", g, b, out);
  // One info entry per side and moved module, in that module's story; compare_common folds
  // it into the origin_changed finding.
  for (int in_bad = 1; in_bad >= 0; --in_bad)
    for (const auto& kv : under_moved[in_bad]) {
      Finding f = new_finding(in_bad ? Kind::ModuleAdded : Kind::ModuleMissing, Severity::Info,
                              std::string(kv.second[0]), role, UINT64_MAX - 1);
      f.story = std::string(kv.first);
      f.summary = std::string("the ") + (in_bad ? "bad" : "good") + " run's " + std::string(kv.first) + " imported " +
                  std::to_string(kv.second.size()) + " module(s) the " + (in_bad ? "good" : "bad") +
                  " run's did not: " + name_list(kv.second, 10);
      (in_bad ? f.bad : f.good) = name_list(kv.second, 20);
      (in_bad ? f.good : f.bad) = "not imported";
      out.add(std::move(f));
    }
  for (int in_bad = 1; in_bad >= 0; --in_bad) {
    if (codecs[in_bad].empty()) continue;
    Finding f = new_finding(in_bad ? Kind::ModuleAdded : Kind::ModuleMissing, Severity::Info,
                            std::string(codecs[in_bad][0]), role, UINT64_MAX - 1);
    const std::string list = name_list(codecs[in_bad], 20);
    f.summary = std::to_string(codecs[in_bad].size()) + " codec module(s) imported only in the " +
                (in_bad ? "bad" : "good") + " run by the codec registry (encodings.search_function), when the " +
                "program decoded or encoded text in that encoding: the data differed, not the imports: " + list;
    (in_bad ? f.bad : f.good) = list;
    (in_bad ? f.good : f.bad) = "not imported";
    out.add(std::move(f));
  }
  for (int in_bad = 1; in_bad >= 0; --in_bad) {
    if (layout[in_bad].empty()) continue;
    Finding f = new_finding(in_bad ? Kind::ModuleAdded : Kind::ModuleMissing, Severity::Info,
                            layout[in_bad][0].substr(0, layout[in_bad][0].find(' ')), role, UINT64_MAX - 1);
    std::string list;
    for (size_t i = 0; i < layout[in_bad].size() && i < 20; ++i) list += (i ? ", " : "") + layout[in_bad][i];
    if (layout[in_bad].size() > 20) list += ", ... (" + std::to_string(layout[in_bad].size() - 20) + " more)";
    f.summary = std::to_string(layout[in_bad].size()) + " module(s) only in the " + (in_bad ? "bad" : "good") +
                " run are the other run's files under other names, or packages above those names: a layout " +
                "difference (pytest's --import-mode, sys.path), not a " + (in_bad ? "new" : "missing") + " module: " + list;
    (in_bad ? f.bad : f.good) = list;
    (in_bad ? f.good : f.bad) = "the same files under other names";
    out.add(std::move(f));
  }
  if (unreached.empty()) return;
  out.add(unreached_finding(std::vector<std::string>(unreached.begin(), unreached.end()), role, "the good run",
                            "the bad process"));
}

namespace {

// A module both runs import, found or loaded differently: "M <how> <bad's> (was <good's>)".
Finding changed_finding(Kind kind, std::string_view name, const char* how, const char* none,
                        const std::string& good, const std::string& bad, const Import& bad_import,
                        const Group& b, const std::string& role) {
  Finding f = new_finding(kind, Severity::Warning, std::string(name), role, b.pos_of(name));
  f.summary = f.module + " " + how + " " + (bad.empty() ? none : bad) + " (was " +
              (good.empty() ? none : good) + ")";
  f.good = good;
  f.bad = bad;
  f.test = bad_import.test;
  return f;
}

}  // namespace

namespace {

// compare_present's entries for what the module's file imported in one run only: their
// text goes into the origin_changed finding, which is the story.
void fold_what_the_file_imported(Finding& origin, Findings& out) {
  auto& fs = out.out;
  for (size_t i = 0; i < fs.size();) {
    Finding& f = fs[i];
    if ((f.kind == Kind::ModuleMissing || f.kind == Kind::ModuleAdded) && f.process == origin.process &&
        f.story == origin.module) {
      origin.summary += "; " + f.summary;
      (f.kind == Kind::ModuleAdded ? origin.bad : origin.good) += "; imported " + (f.kind == Kind::ModuleAdded ? f.bad : f.good);
      fs.erase(fs.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

// An import failed in the bad run with an error that names `origin`'s module (the error
// was raised where `calendar.day_abbr` was read from a `calendar.py` that shadows the
// standard library's): the changed file is that failure's story, told in the failure's
// own line where the error was raised.
void link_to_failures_naming(Finding& origin, Findings& out) {
  for (Finding& f : out.out) {
    if (f.kind != Kind::ImportFailed || f.process != origin.process || f.story != f.module) continue;
    const std::vector<std::string> named = modules_named_in_error(f.bad);
    if (std::find(named.begin(), named.end(), origin.module) == named.end()) continue;
    if (origin.story.empty()) origin.story = f.story;
    if (origin.story != f.story) continue;
    f.summary += "; '" + origin.module + "' came from " + origin.bad + ", not from " + origin.good + " as in the good run";
    origin.brief.clear();  // the failure's line says it already
  }
}

}  // namespace

// Origin, loader and timing of modules both runs imported.
// An origin changed only when the files differ by every measure: not the same absolute file
// (after folding "//", "." and ".."), not the same path under the innermost sys.path entry
// (an install moved to another prefix), not the same path under the outermost one (a
// package directory also on sys.path). The finding names the entry each path is under.
void compare_common(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  const bool versions_differ = python_versions_differ(g, b);
  std::vector<std::string_view> stdlib_origins, stdlib_loaders;
  std::unordered_map<const Process*, std::vector<std::string>> roots_of;
  auto roots = [&](const Process* p) -> const std::vector<std::string>& {
    auto it = roots_of.find(p);
    if (it == roots_of.end()) it = roots_of.emplace(p, p->sys_path_roots()).first;
    return it->second;
  };
  for (size_t i = 0; i < b.mods->size(); ++i) {
    const ModFacts* bi = &b.mods->value(i);
    if (!bi->ok_facts) continue;
    std::string_view name = b.mods->key(i);
    const ModFacts* gi = g.mod(name);
    if (!gi || !gi->ok_facts) continue;
    const Import& bim = *bi->ok_facts->first_ok;
    const Import& gim = *gi->ok_facts->first_ok;
    PathNorm& bn = *bi->ok_process->norm;
    PathNorm& gn = *gi->ok_process->norm;
    RootedPath br, gr;
    bool origin_differs = origin_moved(bim, gim, bn, gn, roots(bi->ok_process->p), roots(gi->ok_process->p), br, gr);
    // Under two Python versions a module of each one's own standard library comes from
    // that interpreter's files, and some are frozen in one and not the other.
    const bool stdlib_both = versions_differ && stdlib_file(bim.origin.str()) && stdlib_file(gim.origin.str());
    if (origin_differs && stdlib_both) {
      stdlib_origins.push_back(name);
      origin_differs = false;
    }
    if (origin_differs) {
      Finding f = changed_finding(Kind::OriginChanged, name, "now comes from", "<no origin>",
                                  gim.origin.empty() ? std::string() : rooted_text(gr),
                                  bim.origin.empty() ? std::string() : rooted_text(br), bim, b, role);
      Location l = bn.loc(bim.importer);
      if (!l.empty()) f.where.push_back(l);
      const bool shadows_stdlib = !bim.origin.empty() && !gim.origin.empty() &&
                                  place_kind(clean_absolute(gim.origin)) == PlaceKind::Stdlib &&
                                  place_kind(clean_absolute(bim.origin)) != PlaceKind::Stdlib;
      if (shadows_stdlib) f.summary += ": a file shadowing the standard library's";
      f.brief = f.module + " from " + rooted_text(br) + (shadows_stdlib ? ", shadowing the standard library's" : "");
      link_to_failures_naming(f, out);
      fold_what_the_file_imported(f, out);
      out.add(std::move(f));
    }
    if (bim.loader != gim.loader) {
      std::string bl = normalize_loader(bim.loader), gl = normalize_loader(gim.loader);
      if (bl != gl && stdlib_both) stdlib_loaders.push_back(name);
      else if (bl != gl) out.add(changed_finding(Kind::LoaderChanged, name, "loaded by", "<none>", gl, bl, bim, b, role));
    }
    uint64_t bs = bi->min_self, gs = gi->min_self;
    if (bs >= gs + out.options.slower_min_ns &&
        static_cast<double>(bs) >= out.options.slower_ratio * static_cast<double>(gs)) {
      Finding f = new_finding(Kind::ImportSlower, out.options.slower_is_warning ? Severity::Warning : Severity::Info,
                              std::string(name), role, b.pos_of(name));
      char ratio[32];
      snprintf(ratio, sizeof ratio, "%.1fx", gs ? static_cast<double>(bs) / gs : 0.0);
      f.summary = f.module + " import (self time) " + format_duration(bs) + " vs " + format_duration(gs) +
                  (gs ? std::string(" (") + ratio + ")" : std::string());
      f.good = format_duration(gs) + " self";
      f.bad = format_duration(bs) + " self";
      out.add(std::move(f));
    }
  }
  version_finding(Kind::OriginChanged, stdlib_origins, "come from the other interpreter's files", g, b, out);
  version_finding(Kind::LoaderChanged, stdlib_loaders, "loaded another way (frozen in one version)", g, b, out);
}

}  // namespace diff
}  // namespace imptrace
