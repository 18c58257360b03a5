// The diff engine's facts about one process: what it imported (per module name), what sat
// under each sys.modules key, where children were bound, what lookups went through proxies,
// which files became two module objects. Built once per process from the model, in one
// pass over each record kind; pointers into the model, hashes as signatures, no text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "diff.h"
#include "key_history.h"
#include "ordered_table.h"

namespace imptrace {
namespace diff {

using model::Import;
using model::KeyEntry;
using model::KeyHistory;
using model::Location;
using model::ObjectRef;
using model::Process;

// ---- path normalisation ------------------------------------------------------------------
// Relative to the sys.path entry (contract), else to the cwd, else the last three path
// components: runs from different prefixes compare equal.
class PathNorm {
 public:
  explicit PathNorm(const Process& p) : roots_(p.sys_path_roots()), cwd_(p.cwd) {
    while (cwd_.size() > 1 && cwd_.back() == '/') cwd_.pop_back();
    for (std::string r : roots_) {
      while (r.size() > 1 && r.back() == '/') r.pop_back();
      if (r.size() > 1 && model::rooted_path(r)) trimmed_.push_back(r);
    }
  }
  const std::string& operator()(const std::string& path) {
    auto it = cache_.find(path);
    if (it != cache_.end()) return it->second;
    return cache_.emplace(path, compute(path)).first->second;
  }
  // The relativized path as a view into `path` (the last-components fallback without its
  // "..." marker): compares like operator() without allocating.
  std::string_view view(const std::string& path) const {
    std::string_view v(path);
    if (!model::rooted_path(path)) return v;
    size_t best = 0;
    for (const auto& r : trimmed_)
      if (r.size() > best && path.size() > r.size() + 1 && path.compare(0, r.size(), r) == 0 &&
          path[r.size()] == '/')
        best = r.size() + 1;
    if (best) return v.substr(best);
    if (!cwd_.empty() && cwd_ != "/" && path.size() > cwd_.size() + 1 &&
        path.compare(0, cwd_.size(), cwd_) == 0 && path[cwd_.size()] == '/')
      return v.substr(cwd_.size() + 1);
    size_t cut = path.size();
    for (int i = 0; i < 3 && cut != std::string::npos && cut > 0; ++i) cut = path.rfind('/', cut - 1);
    if (cut == std::string::npos || cut == 0) return v;
    return v.substr(cut);
  }
  Location loc(const Location& l) {
    Location out = l;
    out.file = (*this)(l.file);
    return out;
  }

 private:
  std::string compute(const std::string& path) const {
    if (!model::rooted_path(path)) return path;
    std::string r = model::relativize_path(path, roots_);
    if (r != path) return r;
    if (!cwd_.empty() && cwd_ != "/" && path.size() > cwd_.size() + 1 &&
        path.compare(0, cwd_.size(), cwd_) == 0 && path[cwd_.size()] == '/')
      return path.substr(cwd_.size() + 1);
    size_t cut = path.size();
    for (int i = 0; i < 3 && cut != std::string::npos && cut > 0; ++i)
      cut = path.rfind('/', cut - 1);
    if (cut == std::string::npos || cut == 0) return path;
    return "..." + path.substr(cut);
  }
  std::vector<std::string> roots_, trimmed_;
  std::string cwd_;
  std::unordered_map<std::string, std::string> cache_;
};

// ---- per-process facts -------------------------------------------------------------------
// A key's entry materialised for a finding's text.
struct EntryText {
  ObjectRef obj;
  bool via_import = true;
  bool before_trace = false;
  std::string origin;               // relativized file/origin
  std::string relation;             // "new object", "same object as under 'x'", ...
  Location set_by;                  // relativized
  std::vector<Location> stack;      // relativized, a few frames
  std::string test;
  bool removed = false;
  Location removed_at;              // relativized; empty when unknown
  // False when its arrival (removal) was seen only at the next import boundary (3.8-3.11:
  // a write the tracer could not see as it happened): set_by (removed_at) is then where
  // that import ran.
  bool precise = true, removal_precise = true;
  // The removal was the import system's own clean-up after the import of this key failed
  // (importlib deletes the half-initialised module): the import_failed finding tells that
  // story, the removal is no identity change of its own.
  bool removed_by_failed_import = false;
  std::vector<Location> reloads;    // where importlib.reload ran it again, relativized
  std::vector<std::pair<std::string, Location>> class_changes;  // (class, where), relativized
};

struct ProcFacts;

// One module name's facts in a process; the same struct is a group's union (a group of one
// process uses its process's table as is).
struct ModFacts {
  bool ok = false;
  const Import* first_ok = nullptr;
  uint64_t self_ns = 0;
  uint64_t pos = 0;  // position of the first import in the process (group: first process)
  // Failed imports, one per error type (first seen), with the process they happened in.
  std::vector<std::pair<const ProcFacts*, const Import*>> failed;
  // Union view: the first process where it imported fine, and the least self time.
  const ProcFacts* ok_process = nullptr;
  const ModFacts* ok_facts = nullptr;
  uint64_t min_self = UINT64_MAX;
};

enum BoundOnPlace : uint8_t { kCurrent, kLaterReplaced, kStale, kOther, kUnknown };
const char* bound_on_place_name(uint8_t r);  // "current", "later_replaced", ...

struct BindingFact {
  const model::Binding* b = nullptr;
  uint8_t bound_on_place = kUnknown;  // where bound_on stood in the parent key's history
  // Structure (parent, attribute, status, bound_on_place, proxy); only anomalous bindings
  // have one (0 otherwise): they are the only ones compare_child_bindings looks for in the
  // other run, and a normal binding can never have an anomalous one's signature.
  uint64_t sig = 0;
  int64_t replaced_by = -1;  // entry of the parent key that replaced bound_on
  // Worth a finding by itself: not bound, not on what sys.modules held, or on a proxy.
  bool anomalous() const {
    return b->status != model::BindingStatus::Bound || bound_on_place != kCurrent ||
           b->bound_on.is_proxy();
  }
};

struct AccessFact {
  const model::ProxyAccess* a = nullptr;
  uint64_t sig = 0;
  std::string_view story;  // sys.modules key the proxy sat under
};

struct ProcFacts {
  const Process* p = nullptr;
  int index = 0;
  std::string group, worker, role;
  std::unique_ptr<PathNorm> norm;
  std::unique_ptr<model::ModulesHistory> history;  // what sat under each sys.modules key
  // Per key of `history`: its structure, that of each interpreter lifetime's part pooled
  // (lifetime_sigs): a host that initialises Python three times has the key of a run that
  // did so once, when each lifetime did the same.
  std::vector<uint64_t> key_sig;
  NameTable<ModFacts> mods;                       // in first-import order
  std::vector<uint32_t> main_seq;                 // positions in imports, main thread
  std::vector<uint32_t> mod_of;                   // per import: its position in `mods`
  std::vector<BindingFact> bindings;
  std::vector<AccessFact> accesses;
  std::vector<std::pair<std::string, std::string>> duplicates;  // (sig, module)
};

// Fills every fact of `f` from the process `f.p` (set by the caller).
void build_facts(ProcFacts& f);

// The role a process plays, without and with its xdist worker id (see diff.h), and the
// worker id itself ("" outside pytest-xdist).
std::string group_of(const Process& p);
std::string worker_of(const Process& p);
std::string basename_of(const std::string& path);

// An entry of a key's history as text: "same object as under 'x'", "same as entry #2",
// "new object"; its relativized origin; the whole entry with its stack (a few frames).
std::string relation_text(const KeyEntry& e);
std::string origin_text(PathNorm& norm, const KeyEntry& e);
EntryText materialize(const ProcFacts& f, const KeyEntry& e);
std::vector<EntryText> materialize(const ProcFacts& f, const KeyHistory& h);
// The entries [begin, end) of a key's history, one interpreter lifetime's part of it.
std::vector<EntryText> materialize(const ProcFacts& f, const KeyHistory& h, size_t begin, size_t end);

// A key's history cut at interpreter lifetimes (key_history.h: each lifetime has its own
// sys.modules, so its first entry replaces nothing): [begin, end) ranges of entries, in
// order; one range for a process that never re-initialised.
struct LifetimePart {
  size_t begin = 0, end = 0;
  uint32_t lifetime = 0;
};
std::vector<LifetimePart> lifetime_parts(const KeyHistory& h);
// The structure of one part (what key_sig pools): how each entry got there, its kind,
// relation (within the part), removal, reloads and class changes.
uint64_t part_sig(const ProcFacts& f, const KeyHistory& h, const LifetimePart& part);

}  // namespace diff
}  // namespace imptrace
