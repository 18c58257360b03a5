// The many-run diff (diff_many.h): fact keys per run, streamed; support per fact; findings
// ranked by separation and grouped into stories; the top stories told by the two-run diff
// of one failing and one passing run, with the test-order evidence of every run.
#include "diff_many.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "commands.h"
#include "diff_compare.h"
#include "failure_reporting.h"
#include "import_time.h"
#include "proxy_decision.h"
#include "test_outcomes.h"

namespace imptrace {
namespace diff {

std::string support_text(const Support& s) {
  std::string t = "bad " + std::to_string(s.bad) + "/" + std::to_string(s.bad_runs) + ", good " +
                  std::to_string(s.good) + "/" + std::to_string(s.good_runs);
  bool bad_side = s.bad * s.good_runs >= s.good * s.bad_runs;
  if (bad_side) {
    if (s.bad < s.bad_runs) t += " (not in every failing run)";
    if (s.good) t += " (also in " + std::to_string(s.good) + " passing run" + (s.good == 1 ? ")" : "s)");
  } else {
    t += " (more often in passing runs)";
  }
  return t;
}

namespace {

// What a fact key is a hash of: the family, then what the two-run comparison compares.
// Exit: a process's role and exit status; Version: its role and Python version; Unreached:
// a module a passing run imported beyond where the failing runs' processes of its role
// stopped (diff_compare.h, reach_in), counted in passing runs only.
enum class Family : uint64_t {
  History = 1, Binding, Access, Failed, Present, Origin, Loader, Duplicate, End, Exit, Version, Unreached
};

// A fact as first seen (the text of that run), and in how many runs of each set.
struct FactInfo {
  Family family = Family::History;
  Kind kind = Kind::SysModulesReplaced;
  Severity severity = Severity::Info;
  std::string module, story, summary, brief, detail, test, process;
  std::string name, value;  // Present/Origin/Loader/Failed: the module name; origin or loader
  std::vector<Location> where;
  uint64_t order = UINT64_MAX;
  uint32_t bad = 0, good = 0;
  std::string subject;  // the event in a sentence: "sys.modules['x'] was replaced"
  // Present/Origin/Loader: the interpreter's own standard library (stdlib_import,
  // stdlib_file), a part of the python_version_changed story when the versions differ.
  bool stdlib = false;
  // Exit: the status, why the process exited so (exit_cause), and where it got to
  // (add_last_program_import: the clause, its place in `where`).
  int64_t status = 0;
  std::string cause, last_import;
  // End: how it ended; over the passing runs, how many of their processes of its role were
  // compared with the failing runs' processes that ended so, and how many of those the
  // failing one had not got as far as (abnormal_end_severity).
  model::ProcessEnd end;
  uint32_t compared = 0, short_of = 0;
};

// A failing run's process that stopped short (stopped_short): its role, the names of what
// it imported (reach_in: what counts as reached) and imported fine (reached_all_of), as
// hashes, sorted; its end fact when it ended abnormally. Kept while the passing runs are
// read, which tell how far it got against them.
struct Stop {
  std::string role;
  bool error_exit_only = false;  // it only exited with an error status: no stop where a passing one did so too
  uint64_t end_key = 0;
  std::vector<uint64_t> reached, ok;
};

struct Event {
  uint64_t time = 0;  // monotonic, comparable across the run's processes
  std::string test;   // node id, "" none
};

struct RunFacts {
  RunInfo info;
  outcomes::RunOutcome outcome;
  std::vector<uint64_t> keys;  // sorted
  std::unordered_map<uint64_t, Event> events;  // anomalies only: the first occurrence
  std::vector<std::pair<std::string, uint64_t>> tests;  // node ids by their first record, in time order
  // By junit key (test_outcomes.h): where each test ran (the junit order when there is
  // one, else the trace's) and the time of its first record.
  std::unordered_map<std::string, int> position;
  std::unordered_map<std::string, uint64_t> first_record;
  std::vector<Stop> stops;  // failing runs only
  bool has(uint64_t key) const { return std::binary_search(keys.begin(), keys.end(), key); }
};

uint64_t fact_key(Family f, std::string_view a, uint64_t b = 0) {
  return mix(mix(static_cast<uint64_t>(f) * 0x9e3779b97f4a7c15ull, hash_text(a)), b);
}

class Collector {
 public:
  Collector(std::unordered_map<uint64_t, FactInfo>& facts, RunFacts& run, bool bad)
      : facts_(facts), run_(run), bad_(bad) {}

  // Marks `key` seen in this run; returns the fact to describe when it is new anywhere.
  // (One table lookup per call: the run's keys are counted once, deduplicated, at finish.)
  FactInfo* see(uint64_t key) {
    keys_.push_back(key);
    if (facts_.size() + 64 > facts_.bucket_count() * facts_.max_load_factor())
      facts_.reserve(2 * facts_.size() + 1024);
    auto ins = facts_.try_emplace(key);
    return ins.second ? &ins.first->second : nullptr;
  }
  void event(uint64_t key, uint64_t time, const std::string& test) {
    auto ins = run_.events.emplace(key, Event{time, outcomes::node_id_of(test)});
    if (!ins.second && time < ins.first->second.time) ins.first->second = Event{time, outcomes::node_id_of(test)};
  }
  void finish() {
    std::sort(keys_.begin(), keys_.end());
    keys_.erase(std::unique(keys_.begin(), keys_.end()), keys_.end());
    for (uint64_t k : keys_) {
      FactInfo& f = facts_.find(k)->second;
      (bad_ ? f.bad : f.good)++;
    }
    run_.keys = std::move(keys_);
  }

 private:
  std::unordered_map<uint64_t, FactInfo>& facts_;
  RunFacts& run_;
  bool bad_;
  std::vector<uint64_t> keys_;
};

// The role a process's abnormal end is counted under: the part it plays (pytest's main
// process, an xdist worker) whatever its options, else its group.
std::string end_role(const ProcFacts& f) {
  std::string role = process_role_class(*f.p);
  return role.empty() ? f.group : role;
}

// The role its exit status and Python version are counted under, and that a passing run's
// processes are measured against a failing run's stopped ones by: as the two-run diff
// pairs processes whose options differ (`pool.py close` with `pool.py terminate`), the
// part it plays, else its program and script (forked or not).
std::string pair_role(const ProcFacts& f) {
  std::string role = process_role_class(*f.p);
  if (!role.empty()) return role;
  const auto& argv = f.p->argv;
  std::string program = argv.empty() ? basename_of(f.p->executable) : basename_of(argv[0]);
  if (program.compare(0, 6, "python") == 0) program = "python";
  for (size_t i = 1; i < argv.size(); ++i)
    if (!argv[i].empty() && argv[i][0] != '-') {
      program += " " + basename_of(argv[i]);
      break;
    }
  return (f.p->forked_from_pid ? "fork of " : "") + program;
}

uint64_t end_key(const std::string& role, const model::ProcessEnd& e) {
  return fact_key(Family::End, role, static_cast<uint64_t>(e.how) * 1000 + e.signal);
}

bool ordinary(const KeyHistory& h, std::string_view name) {
  if (h.has_proxy) return false;
  if (h.entries.size() > 1) {
    // Only aliases its own import made, as the two-run diff tells it (compare_key_histories).
    for (const LifetimePart& part : lifetime_parts(h))
      if (!plain_or_own_aliases(h, name, part)) return false;
    return true;
  }
  if (h.entries.size() != 1) return false;
  const KeyEntry& e = h.entries[0];
  return (e.via_import || e.before_trace) && !e.removed && e.reloads.empty() && e.class_changes.empty() &&
         !model::is_import_blocker(*e.object);
}

// The entry that makes a history worth a fact: the first one put there by assignment, else
// the second entry, else the first.
size_t change_of(const KeyHistory& h) {
  for (size_t i = 0; i < h.entries.size(); ++i)
    if (!h.entries[i].via_import && !h.entries[i].before_trace) return i;
  return h.entries.size() > 1 ? 1 : 0;
}

void history_facts(const ProcFacts& f, Collector& c) {
  const Process& p = *f.p;
  for (size_t pos = 0; pos < f.history->size(); ++pos) {
    const KeyHistory& h = f.history->history(pos);
    // A history with no entries (a hostile trace's) has nothing to tell, nor an entry to index.
    std::string_view name = f.history->key(pos);
    if (h.entries.empty() || ordinary(h, name)) continue;
    uint64_t key = fact_key(Family::History, name, f.key_sig[pos]);
    const KeyEntry& e = h.entries[change_of(h)];
    uint64_t time = e.time_ns;
    const model::Str* test = e.test();
    if (e.via_import && h.entries.size() == 1) {
      const model::ModulesChange* m = e.removal ? e.removal
                                      : !e.reloads.empty() ? e.reloads[0]
                                      : !e.class_changes.empty() ? e.class_changes[0] : nullptr;
      if (m) {
        time = m->time_ns;
        test = &m->test;
      }
    }
    c.event(key, p.start_monotonic_ns + time, test ? test->str() : std::string());
    FactInfo* fi = c.see(key);
    if (!fi) continue;
    std::vector<EntryText> et = materialize(f, h);
    const EntryText& ch = et[change_of(h)];
    std::string k = "sys.modules['" + std::string(name) + "']";
    fi->family = Family::History;
    fi->module = fi->story = fi->name = std::string(name);
    fi->process = f.group;
    fi->order = first_pos(f, name);
    fi->detail = history_text(et);
    fi->where = ch.stack;
    if (fi->where.empty() && !ch.set_by.empty()) fi->where.push_back(ch.set_by);
    fi->test = ch.test;
    std::string at = ch.set_by.empty() ? std::string() : " at " + format_location(ch.set_by);
    if (model::is_import_blocker(ch.obj)) {
      fi->kind = Kind::ImportBlocked;
      fi->severity = Severity::Warning;
      fi->summary = k + " = None blocks `import " + fi->module + "` (ImportError)" + at;
      fi->subject = k + " was set to None";
    } else if (et.size() > 1 || (!ch.via_import && !ch.before_trace)) {
      fi->kind = Kind::SysModulesReplaced;
      fi->severity = Severity::Error;
      size_t i = change_of(h);
      fi->summary = i ? k + " replaced: " + describe(et[i - 1].obj, et[i - 1].origin) + " -> " +
                            describe(ch.obj, ch.origin) + (ch.via_import ? " by the import system" : " by assignment") + at
                      : k + " holds " + describe(ch.obj, ch.origin) + " (by assignment)" + at;
      fi->subject = k + (i ? " was replaced" : " was set");
      fi->brief = "replaced by " + describe(ch.obj, ch.origin);
    } else if (h.has_proxy) {
      fi->kind = Kind::ProxyInSysModules;
      fi->severity = Severity::Error;
      fi->summary = k + " holds a proxy: " + describe(ch.obj, ch.origin) + " from the import system";
      fi->subject = k + " got a proxy";
      fi->brief = "a proxy under the key";
    } else if (!ch.reloads.empty()) {
      fi->kind = Kind::ModuleReloaded;
      fi->severity = Severity::Warning;
      fi->summary = "module '" + fi->module + "' reloaded (importlib.reload executed it again in place)";
      fi->subject = "module '" + fi->module + "' was reloaded";
      fi->brief = "reloaded";
    } else {
      fi->kind = Kind::SysModulesReplaced;
      fi->severity = Severity::Warning;
      fi->summary = k + ": " + fi->detail;
      fi->subject = k + " changed";
    }
    // The module's own design (pygments.lexers): where it separates the runs, importing
    // the module at all does too (module_added).
    if (const model::Import* by = set_up_by_own_import(p, h)) {
      fi->severity = Severity::Info;
      fi->summary += " (" + own_design_text(*by, name) + ")";
    }
  }
}

std::string place_text(const BindingFact& bf) {
  switch (bf.bound_on_place) {
    case kLaterReplaced: return ", the object under sys.modules['" + bf.b->parent + "'] that was later replaced";
    case kStale: return ", an object no longer under sys.modules['" + bf.b->parent + "']";
    case kOther: return ", not the object under sys.modules['" + bf.b->parent + "']";
  }
  return std::string(": ") + model::binding_status_name(bf.b->status);
}

void binding_facts(const ProcFacts& f, Collector& c) {
  for (const auto& bf : f.bindings) {
    if (!bf.anomalous()) continue;
    uint64_t key = fact_key(Family::Binding, "", bf.sig);
    const model::Binding& b = *bf.b;
    c.event(key, f.p->start_monotonic_ns + b.time_ns, b.test);
    FactInfo* fi = c.see(key);
    if (!fi) continue;
    bool on_proxy = b.status == model::BindingStatus::OnProxy || b.bound_on.is_proxy();
    fi->family = Family::Binding;
    fi->kind = on_proxy ? Kind::BindingOnProxy : Kind::BindingMismatch;
    fi->severity = Severity::Error;
    fi->module = b.child_module();
    fi->story = b.parent;
    fi->process = f.group;
    fi->order = first_pos(f, fi->module);
    fi->test = b.test;
    fi->name = b.attribute;
    fi->value = "bound on " + describe(b.bound_on, (*f.norm)(b.bound_on.file)) + place_text(bf);
    fi->summary = "'" + b.attribute + "' (" + fi->module + ") " + fi->value;
    fi->detail = std::string("status ") + model::binding_status_name(b.status) + ", bound_on " +
                 bound_on_place_name(bf.bound_on_place) + (b.bound_on.is_proxy() ? ", a proxy" : "");
    fi->brief = fi->module + (bf.bound_on_place == kLaterReplaced ? " bound on the replaced object"
                              : on_proxy ? " bound on a proxy" : std::string(" binding ") + bound_on_place_name(bf.bound_on_place));
    fi->subject = "'" + b.attribute + "' was bound on " + (on_proxy ? "a proxy" : "the wrong object");
    int64_t pos = f.p->import_position(b.import_index);
    if (pos >= 0) {
      Location l = f.norm->loc(f.p->imports[pos].importer);
      if (!l.empty()) fi->where.push_back(l);
    }
    const KeyHistory* parent = f.history->find(b.parent);
    const model::Import* by = parent ? set_up_by_own_import(*f.p, *parent) : nullptr;
    if (by) {
      fi->severity = Severity::Info;
      fi->summary += " (" + own_design_text(*by, b.parent.str()) + ")";
    }
  }
}

void access_facts(const ProcFacts& f, Collector& c) {
  for (const auto& af : f.accesses) {
    const model::ProxyAccess& a = *af.a;
    // Lookups while a test runner formats a failure are its consequences, never its cause.
    if (a.ok || model::in_failure_reporting(a.stack)) continue;
    uint64_t key = fact_key(Family::Access, "", af.sig);
    c.event(key, f.p->start_monotonic_ns + a.time_ns, a.test);
    FactInfo* fi = c.see(key);
    if (!fi) continue;
    const std::string& at = a.attribute;
    bool probe = (at.size() > 4 && at.compare(0, 2, "__") == 0 && at.compare(at.size() - 2, 2, "__") == 0) ||
                 at.compare(0, 7, "_pytest") == 0;
    fi->family = Family::Access;
    fi->kind = Kind::ProxyForwardFailed;
    fi->severity = probe ? Severity::Info
                   : a.kind == model::ProxyAccessKind::ModuleGetattr ? Severity::Warning : Severity::Error;
    fi->module = fi->story = std::string(af.story);
    fi->name = at;
    fi->process = f.group;
    fi->order = first_pos(f, af.story);
    fi->test = a.test;
    Location where = a.stack.empty() ? Location() : f.norm->loc(a.stack[0]);
    std::string on = a.proxy.present ? describe(a.proxy, "") : "a module";
    fi->summary = (a.kind == model::ProxyAccessKind::Setattr ? "setting ." : "lookup of .") + at + " on " + on +
                  " failed: " + a.outcome();
    if (a.forwarded_to.present)
      fi->summary += " (forwarded to '" +
                     (a.forwarded_to.name.empty() ? object_kind(a.forwarded_to) : a.forwarded_to.name.str()) + "')";
    if (!where.empty()) fi->summary += " at " + format_location(where);
    fi->detail = "failing lookup of ." + at + ": " + a.outcome();
    fi->brief = "." + at + " through it failed (" + a.error_type + ")";
    fi->subject = "the lookup of ." + at + " through sys.modules['" + fi->module + "'] failed";
    for (size_t i = 0; i < a.stack.size() && fi->where.size() < 4; ++i)
      if (!model::is_importlib_frame(a.stack[i])) fi->where.push_back(f.norm->loc(a.stack[i]));
  }
}

// What the facts of one imported module (its presence, origin, loader) have in common.
void module_fact(FactInfo& fi, Family family, Kind kind, std::string_view name, const ProcFacts& f, uint64_t order) {
  fi.family = family;
  fi.kind = kind;
  fi.severity = Severity::Warning;
  fi.module = fi.name = std::string(name);
  fi.process = f.group;
  fi.order = order;
}

void module_facts(const ProcFacts& f, Collector& c) {
  const Process& p = *f.p;
  std::vector<timing::Fate> fates;
  for (size_t i = 0; i < f.mods.size(); ++i) {
    std::string_view name = f.mods.key(i);
    const ModFacts& m = f.mods.value(i);
    for (const auto& x : m.failed) {
      const Import& im = *x.second;
      uint64_t key = fact_key(Family::Failed, name, hash_text(im.error_type));
      c.event(key, p.start_monotonic_ns + im.begin_ns, im.test);
      FactInfo* fi = c.see(key);
      if (!fi) continue;
      if (fates.empty()) fates = timing::classify_failures(p);
      bool handled = fates[static_cast<size_t>(&im - p.imports.data())] == timing::Fate::Handled;
      fi->family = Family::Failed;
      fi->kind = Kind::ImportFailed;
      fi->severity = handled ? Severity::Info : Severity::Warning;
      fi->module = fi->story = fi->name = std::string(name);
      fi->process = f.group;
      fi->order = m.pos;
      fi->test = im.test;
      fi->summary = "import " + fi->module + " failed: " + im.error_text() + (handled ? " (handled by its importer)" : "");
      Location l = f.norm->loc(im.importer);
      if (!l.empty()) {
        fi->summary += " (imported at " + format_location(l) + ")";
        fi->where.push_back(l);
      }
      fi->detail = im.error_text();
      fi->brief = "import " + fi->module + " failed (" + im.error_type + ")";
      fi->subject = "import " + fi->module + " failed";
    }
    if (!m.ok) continue;
    const Import& im = *m.first_ok;
    if (FactInfo* fi = c.see(fact_key(Family::Present, name))) {
      module_fact(*fi, Family::Present, Kind::ModuleAdded, name, f, m.pos);
      fi->value = fi->module.substr(0, fi->module.find('.'));
      fi->stdlib = stdlib_import(im);
      fi->test = im.test;
      Location l = f.norm->loc(im.importer);
      if (!l.empty()) fi->where.push_back(l);
    }
    // Compared as the two-run diff compares them: relative to their sys.path entry.
    std::string origin(f.norm->view(im.origin.empty() ? im.file.str() : im.origin.str()));
    if (FactInfo* fi = c.see(fact_key(Family::Origin, name, hash_text(origin)))) {
      module_fact(*fi, Family::Origin, Kind::OriginChanged, name, f, m.pos);
      fi->stdlib = stdlib_file(im.origin.str());
      fi->value = origin.empty() ? "<no origin>" : origin;
    }
    std::string loader = normalize_loader(im.loader);
    if (FactInfo* fi = c.see(fact_key(Family::Loader, name, hash_text(loader)))) {
      module_fact(*fi, Family::Loader, Kind::LoaderChanged, name, f, m.pos);
      fi->stdlib = stdlib_file(im.origin.str());
      fi->value = loader.empty() ? "<none>" : loader;
    }
  }
  for (const auto& d : f.duplicates) {
    if (FactInfo* fi = c.see(fact_key(Family::Duplicate, d.first))) {
      fi->family = Family::Duplicate;
      fi->kind = Kind::DuplicateModule;
      fi->severity = Severity::Warning;
      fi->module = d.second;
      fi->process = f.group;
      fi->order = first_pos(f, d.second);
      fi->summary = fi->detail = d.first;
      fi->subject = d.first;
    }
  }
  if (model::ended_abnormally(p.end)) {
    const std::string role = end_role(f);
    uint64_t key = end_key(role, p.end);
    c.event(key, p.start_monotonic_ns + p.end.time_ns, "");
    if (FactInfo* fi = c.see(key)) {
      fi->family = Family::End;
      fi->kind = Kind::ProcessEndedAbnormally;
      fi->severity = Severity::Error;
      fi->process = f.group;
      fi->name = role;
      fi->end = p.end;
      fi->summary = "process " + role + " " + model::end_text(p.end);
      fi->detail = model::end_text(p.end);
      fi->subject = "a " + role + " process ended abnormally";
    }
  }
  const std::string role = pair_role(f);
  using How = model::ProcessEnd::How;
  if (p.end.how == How::Exit || p.end.how == How::OsExit) {
    if (FactInfo* fi = c.see(fact_key(Family::Exit, role, static_cast<uint64_t>(p.end.status)))) {
      fi->family = Family::Exit;
      fi->kind = Kind::ExitStatusChanged;
      fi->severity = Severity::Info;
      fi->process = f.group;
      fi->name = role;
      fi->status = p.end.status;
      fi->value = model::end_text(p.end);
      if (p.end.status) fi->cause = exit_cause(f);
      Finding at;
      add_last_program_import(f, at);
      fi->last_import = at.summary;
      fi->where = at.where;
      fi->test = at.test;
    }
  }
  const std::string version = python_version_of(p);
  if (!version.empty())
    if (FactInfo* fi = c.see(fact_key(Family::Version, role, hash_text(version)))) {
      fi->family = Family::Version;
      fi->kind = Kind::PythonVersionChanged;
      fi->severity = Severity::Info;
      fi->process = f.group;
      fi->name = role;
      fi->value = version;
    }
}

// Hash of a module name, as a stop keeps it.
uint64_t name_hash(std::string_view name) { return hash_text(name); }

bool holds(const std::vector<uint64_t>& sorted, std::string_view name) {
  return std::binary_search(sorted.begin(), sorted.end(), name_hash(name));
}

// A failing run's process that stopped short, kept for the passing runs to measure.
void note_stop(const ProcFacts& f, std::vector<Stop>& stops) {
  const Process& p = *f.p;
  if (!stopped_short(p, false)) return;
  Stop s;
  s.role = pair_role(f);
  s.error_exit_only = !stopped_short(p, true);
  if (model::ended_abnormally(p.end)) s.end_key = end_key(end_role(f), p.end);
  for (size_t i = 0; i < f.mods.size(); ++i) {
    const ModFacts& m = f.mods.value(i);
    if (reached_point(p, m)) s.reached.push_back(name_hash(f.mods.key(i)));
    if (m.ok) s.ok.push_back(name_hash(f.mods.key(i)));
  }
  std::sort(s.reached.begin(), s.reached.end());
  std::sort(s.ok.begin(), s.ok.end());
  stops.push_back(std::move(s));
}

// A passing run's processes against the failing runs' stops of their role: the modules each
// imported beyond where every failing run that lacks them stopped (Unreached facts, the
// two-run diff's "not reached"), and for each stop that ended abnormally whether it had got
// as far as this run's processes of its role (abnormal_end_severity).
void measure_stops(const std::vector<ProcFacts>& run, std::vector<RunFacts>& bad_runs,
                   std::unordered_map<uint64_t, FactInfo>& facts, Collector& c) {
  bool any = false;
  for (const auto& b : bad_runs) any |= !b.stops.empty();
  if (!any) return;
  std::map<std::string, std::vector<const ProcFacts*>> by_role;
  for (const ProcFacts& f : run) by_role[pair_role(f)].push_back(&f);
  for (const auto& kv : by_role) {
    for (auto& b : bad_runs)
      for (const Stop& s : b.stops) {
        if (s.role != kv.first || !s.end_key) continue;
        auto it = facts.find(s.end_key);
        if (it == facts.end()) continue;
        ++it->second.compared;
        bool all = true;
        for (const ProcFacts* f : kv.second)
          all &= reached_all_of(f->mods, [&](std::string_view name) { return holds(s.ok, name); });
        if (!all) ++it->second.short_of;
      }
    for (const ProcFacts* f : kv.second) {
      const bool failed = exited_with_error(f->p->end);
      std::vector<std::vector<Reach>> reach(bad_runs.size());
      bool stopped = false;
      for (size_t k = 0; k < bad_runs.size(); ++k)
        for (const Stop& s : bad_runs[k].stops)
          if (s.role == kv.first && !(s.error_exit_only && failed)) {
            reach[k].push_back(reach_in(f->mods, [&](std::string_view name) { return holds(s.reached, name); }));
            stopped = true;
          }
      if (!stopped) continue;
      for (size_t i = 0; i < f->mods.size(); ++i) {
        const ModFacts& m = f->mods.value(i);
        if (!m.ok_facts) continue;
        std::string_view name = f->mods.key(i);
        const uint64_t present = fact_key(Family::Present, name);
        bool lacking = false, beyond = true;
        for (size_t k = 0; k < bad_runs.size() && beyond; ++k) {
          if (bad_runs[k].has(present)) continue;
          lacking = true;
          bool here = false;
          for (const Reach& r : reach[k]) here |= r.unreached(name, m.pos);
          beyond = here;
        }
        if (!lacking || !beyond) continue;
        if (FactInfo* fi = c.see(fact_key(Family::Unreached, name))) {
          fi->family = Family::Unreached;
          fi->name = std::string(name);
        }
      }
    }
  }
}

// The tests of a run in the order they first show in its records (all processes).
std::vector<std::pair<std::string, uint64_t>> test_order(const std::vector<Process>& procs) {
  // Keyed by the shared string (every record of one test holds the same one): no copy
  // of the name per record.
  std::unordered_map<const void*, std::pair<const model::Str*, uint64_t>> first;
  auto note = [&](const model::Str& test, uint64_t t) {
    if (test.empty()) return;
    auto ins = first.emplace(test.key(), std::make_pair(&test, t));
    if (!ins.second && t < ins.first->second.second) ins.first->second.second = t;
  };
  for (const auto& p : procs) {
    uint64_t base = p.start_monotonic_ns;
    for (const auto& im : p.imports) note(im.test, base + im.begin_ns);
    for (const auto& c : p.modules_changes) note(c.test, base + c.time_ns);
    for (const auto& b : p.bindings) note(b.test, base + b.time_ns);
    for (const auto& a : p.proxy_accesses) note(a.test, base + a.time_ns);
  }
  std::map<std::string, uint64_t> by_id;  // one entry per node id, whatever the phase
  for (const auto& kv : first) {
    uint64_t t = kv.second.second;
    auto ins = by_id.emplace(outcomes::node_id_of(kv.second.first->str()), t);
    if (!ins.second && t < ins.first->second) ins.first->second = t;
  }
  std::vector<std::pair<std::string, uint64_t>> out(by_id.begin(), by_id.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  return out;
}

// `bad_runs`: the failing runs read so far, measured against this (passing) run; null for a
// failing run.
RunFacts read_run(const std::string& path, bool bad, const RunLoader& load,
                  std::unordered_map<uint64_t, FactInfo>& facts, std::vector<std::string>& warnings,
                  std::vector<RunFacts>* bad_runs) {
  RunFacts run;
  std::vector<Process> procs;
  load(path, procs, false);
  run.info.path = path;
  run.info.processes = procs.size();
  for (const auto& p : procs) run.info.imports += p.imports.size();
  run.outcome = outcomes::outcome_of(path, procs, warnings);
  run.tests = test_order(procs);
  // Junit names tests by classname::name: show them by the node ids the trace has.
  std::unordered_map<std::string, std::string> by_key;
  for (const auto& t : run.tests) by_key.emplace(outcomes::junit_key(t.first), t.first);
  for (auto& t : run.outcome.tests) {
    auto it = by_key.find(t.key);
    if (it != by_key.end()) t.name = it->second;
  }
  for (size_t i = 0; i < run.tests.size(); ++i) {
    std::string key = outcomes::junit_key(run.tests[i].first);
    run.first_record.emplace(key, run.tests[i].second);
    if (run.outcome.tests.empty()) run.position.emplace(key, static_cast<int>(i));
  }
  for (size_t i = 0; i < run.outcome.tests.size(); ++i) run.position.emplace(run.outcome.tests[i].key, static_cast<int>(i));
  run.info.failed = run.outcome.failed;
  run.info.outcome_source = outcomes::source_name(run.outcome.source);
  run.info.outcome = run.outcome.text;
  if (run.outcome.first_failing >= 0) run.info.first_failing_test = run.outcome.tests[run.outcome.first_failing].name;
  if (run.outcome.source != outcomes::RunOutcome::Source::Unknown && run.outcome.failed != bad)
    warnings.push_back(path + ": given as a " + (bad ? "failing" : "passing") + " run, but it " +
                       (bad ? "passed" : "failed") + " (" + run.outcome.text + ")");
  Collector c(facts, run, bad);
  std::vector<ProcFacts> all(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    ProcFacts& f = all[i];
    f.p = &procs[i];
    f.index = static_cast<int>(i);
    build_facts(f);
    history_facts(f, c);
    binding_facts(f, c);
    access_facts(f, c);
    module_facts(f, c);
    if (bad) note_stop(f, run.stops);
  }
  if (bad_runs) measure_stops(all, *bad_runs, facts, c);
  c.finish();
  return run;
}

// ---- aggregation ---------------------------------------------------------------------------

struct Ranked {
  Finding f;
  double sep = 0, frac = 0;  // separation, and the fraction of its own side's runs
  bool bad_side = true;
  uint64_t key = 0;          // the fact (the first one, for merged module findings)
  const FactInfo* info = nullptr;
};

bool better(const Ranked& a, const Ranked& b) {
  if (a.sep != b.sep) return a.sep > b.sep;
  if (a.frac != b.frac) return a.frac > b.frac;
  if (a.bad_side != b.bad_side) return a.bad_side;
  if (a.f.kind != b.f.kind) return a.f.kind < b.f.kind;
  if (a.f.severity != b.f.severity) return a.f.severity > b.f.severity;
  if (a.f.order != b.f.order) return a.f.order < b.f.order;
  if (a.f.module != b.f.module) return a.f.module < b.f.module;
  return a.f.summary < b.f.summary;
}

std::string runs_phrase(size_t k, size_t n, const char* side) {
  return std::to_string(k) + " of " + std::to_string(n) + " " + side + " run" + (n == 1 ? "" : "s");
}

Ranked to_finding(uint64_t key, const FactInfo& fi, size_t nb, size_t ng) {
  Ranked r;
  r.key = key;
  r.info = &fi;
  double bf = nb ? static_cast<double>(fi.bad) / nb : 0, gf = ng ? static_cast<double>(fi.good) / ng : 0;
  r.bad_side = bf >= gf;
  r.sep = r.bad_side ? bf - gf : gf - bf;
  r.frac = r.bad_side ? bf : gf;
  Finding& f = r.f;
  f.kind = fi.kind;
  f.severity = fi.severity;
  f.module = fi.module;
  f.story = fi.story;
  f.summary = fi.summary;
  f.brief = fi.brief;
  f.where = fi.where;
  f.test = fi.test;
  f.process = fi.process;
  f.order = fi.order;
  f.support = {fi.bad, nb, fi.good, ng};
  std::string seen = fi.detail.empty() ? "seen" : fi.detail;
  if (r.bad_side) {
    f.bad = seen + " (" + runs_phrase(fi.bad, nb, "failing") + ")";
    f.good = fi.good ? "the same in " + runs_phrase(fi.good, ng, "passing") : "not in any passing run";
  } else {
    f.good = seen + " (" + runs_phrase(fi.good, ng, "passing") + ")";
    f.bad = fi.bad ? "the same in " + runs_phrase(fi.bad, nb, "failing") : "not in any failing run";
    if (f.severity > Severity::Warning) f.severity = Severity::Warning;
    if (fi.family != Family::Present) f.summary = "only in passing runs: " + f.summary;
  }
  return r;
}

// The fact's own side, partly: say so in the summary.
void note_partial(Ranked& r) {
  const Support& s = r.f.support;
  if (r.bad_side && s.bad < s.bad_runs)
    r.f.summary += " [in " + runs_phrase(s.bad, s.bad_runs, "failing") + " only]";
  if (!r.bad_side && s.good < s.good_runs)
    r.f.summary += " [in " + runs_phrase(s.good, s.good_runs, "passing") + " only]";
  // Seen in both sets alike: not what separates them.
  if (r.sep < 0.5) r.f.severity = Severity::Info;
}

// Facts told together as one finding, by (bad side, what they share, bad runs, good runs):
// each with its key.
using FactGroups =
    std::map<std::tuple<bool, std::string, uint32_t, uint32_t>, std::vector<std::pair<uint64_t, const FactInfo*>>>;

// What the first pass over the facts sets aside for the passes that tell them together.
struct SetAside {
  // Module presence: one finding per top-level package, side and support.
  FactGroups modules;
  // Origins and loaders by module, for what the other side had.
  std::unordered_map<std::string, std::vector<const FactInfo*>> values;
  // Children of one parent bound the same wrong way, in the same runs: one finding, as in
  // the two-run diff.
  FactGroups children;
  // Exit statuses of the failing side, each told against the passing side's of its role.
  std::vector<std::pair<uint64_t, const FactInfo*>> exits;
  // Under two Python versions, what one's standard library imported for itself ([bad side])
  // and the modules of both standard libraries found or loaded differently ([origin?]):
  // parts of the python_version_changed story.
  std::vector<std::pair<uint64_t, const FactInfo*>> stdlib_present[2], stdlib_values[2];
  // Modules of the passing side imported where every failing run that lacks them had
  // already stopped: "not reached", one info entry.
  std::vector<std::pair<uint64_t, const FactInfo*>> unreached;
};

// The Python versions the failing runs used where the passing runs of the same role used
// another: (passing, failing) pairs, each once, with the failing side's facts.
struct Versions {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> roles;
  std::vector<std::pair<uint64_t, const FactInfo*>> facts;
  bool differ() const { return !pairs.empty(); }
};

// The fact of `family` and the same role (name) the passing side shows most, not `fi`.
const FactInfo* passing_value(const std::unordered_map<uint64_t, FactInfo>& facts, const FactInfo& fi, size_t nb,
                              size_t ng) {
  const FactInfo* other = nullptr;
  for (const auto& kv : facts) {
    const FactInfo& o = kv.second;
    if (o.family != fi.family || o.name != fi.name || &o == &fi || o.value == fi.value) continue;
    if (o.good * nb <= o.bad * ng) continue;  // not the passing side's
    if (!other || o.good > other->good) other = &o;
  }
  return other;
}

Versions versions_of(const std::unordered_map<uint64_t, FactInfo>& facts, size_t nb, size_t ng) {
  Versions v;
  for (const auto& kv : facts) {
    const FactInfo& fi = kv.second;
    if (fi.family != Family::Version || fi.bad * ng <= fi.good * nb) continue;
    const FactInfo* other = passing_value(facts, fi, nb, ng);
    if (!other) continue;
    std::pair<std::string, std::string> pair{other->value, fi.value};
    if (std::find(v.pairs.begin(), v.pairs.end(), pair) == v.pairs.end()) v.pairs.push_back(pair);
    if (std::find(v.roles.begin(), v.roles.end(), fi.process) == v.roles.end()) v.roles.push_back(fi.process);
    v.facts.push_back({kv.first, &fi});
  }
  std::sort(v.facts.begin(), v.facts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return v;
}

// Every module of the passing side `fi` stands for was, in every passing run that imported
// it, imported beyond where the failing runs lacking it stopped.
bool unreached_fact(const std::unordered_map<uint64_t, FactInfo>& facts, const FactInfo& fi) {
  auto it = facts.find(fact_key(Family::Unreached, fi.name));
  return it != facts.end() && it->second.good == fi.good;
}

const FactInfo* present_fact(const std::unordered_map<uint64_t, FactInfo>& facts, const std::string& name) {
  auto it = facts.find(fact_key(Family::Present, name));
  return it == facts.end() ? nullptr : &it->second;
}

// Every fact seen more often on one side: a finding of its own, or set aside to be told
// with others.
SetAside split_facts(const std::unordered_map<uint64_t, FactInfo>& facts, size_t nb, size_t ng,
                     const Versions& versions, std::vector<Ranked>& out) {
  SetAside aside;
  for (const auto& kv : facts) {
    const FactInfo& fi = kv.second;
    if (fi.bad * ng == fi.good * nb) continue;  // as often on both sides: nothing to tell
    bool bad_side = fi.bad * ng > fi.good * nb;
    switch (fi.family) {
      case Family::Unreached:
      case Family::Version:  // told by versions_of
        continue;
      case Family::Exit:
        if (bad_side) aside.exits.push_back({kv.first, &fi});  // the passing side's: its mirror
        continue;
      case Family::Binding:
        aside.children[{bad_side, fi.story + "\n" + fi.detail + "\n" + std::to_string(static_cast<int>(fi.kind)),
                        fi.bad, fi.good}]
            .push_back({kv.first, &fi});
        continue;
      case Family::Present: {
        if (versions.differ() && fi.stdlib) aside.stdlib_present[bad_side].push_back({kv.first, &fi});
        else if (!bad_side && unreached_fact(facts, fi)) aside.unreached.push_back({kv.first, &fi});
        else aside.modules[{bad_side, fi.value, fi.bad, fi.good}].push_back({kv.first, &fi});
        continue;
      }
      case Family::Origin:
      case Family::Loader: {
        if (!bad_side) continue;  // the mirror of the failing side's value
        const FactInfo* p = present_fact(facts, fi.name);
        if (!p || !p->good) continue;  // not imported by the passing runs: module_added tells it
        aside.values[fi.name];
        break;
      }
      default: break;
    }
    if (fi.family == Family::Origin || fi.family == Family::Loader) continue;
    Ranked r = to_finding(kv.first, fi, nb, ng);
    if (fi.family == Family::End && !bad_side) {
      // A passing run's process cut short where the failing runs' finished explains no
      // failure (the two-run diff tells only the bad run's ends).
      r.f.severity = Severity::Info;
    } else if (fi.family == Family::End) {
      // As the two-run diff tells a process that ended abnormally, over every passing run.
      const bool has_counterpart = fi.compared > 0, reached_all = fi.short_of == 0;
      r.f.severity = abnormal_end_severity(fi.end, has_counterpart, reached_all);
      r.f.summary += abnormal_end_clause(fi.end, has_counterpart, reached_all, "its counterparts in the passing runs",
                                         "the passing runs");
    }
    out.push_back(std::move(r));
  }
  return aside;
}

// A module the failing runs load from another origin or with another loader than the
// passing runs: one finding with both values.
void add_value_findings(const std::unordered_map<uint64_t, FactInfo>& facts,
                        std::unordered_map<std::string, std::vector<const FactInfo*>>& values, size_t nb, size_t ng,
                        const Versions& versions, SetAside& aside, std::vector<Ranked>& out) {
  if (values.empty()) return;
  for (const auto& kv : facts) {
    const FactInfo& fi = kv.second;
    if ((fi.family == Family::Origin || fi.family == Family::Loader) && values.count(fi.name))
      values[fi.name].push_back(&fi);
  }
  for (const auto& kv : facts) {
    const FactInfo& fi = kv.second;
    if ((fi.family != Family::Origin && fi.family != Family::Loader) || !values.count(fi.name)) continue;
    if (fi.bad * ng <= fi.good * nb) continue;
    const FactInfo* other = nullptr;  // the passing runs' most common value
    for (const FactInfo* o : values[fi.name])
      if (o->family == fi.family && o != &fi && (!other || o->good > other->good)) other = o;
    if (!other || !other->good) continue;
    if (versions.differ() && fi.stdlib && other->stdlib) {
      aside.stdlib_values[fi.family == Family::Origin].push_back({kv.first, &fi});
      continue;
    }
    Ranked r = to_finding(kv.first, fi, nb, ng);
    const char* how = fi.family == Family::Origin ? " now comes from " : " loaded by ";
    r.f.summary = fi.name + how + fi.value + " (was " + other->value + ")";
    r.f.bad = fi.value + " (" + runs_phrase(fi.bad, nb, "failing") + ")";
    r.f.good = other->value + " (" + runs_phrase(other->good, ng, "passing") + ")";
    out.push_back(std::move(r));
  }
}

// A group's facts in the order they first happened, then by name: the first one leads.
void sort_by_first_seen(std::vector<std::pair<uint64_t, const FactInfo*>>& list) {
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
    return a.second->order != b.second->order ? a.second->order < b.second->order : a.second->name < b.second->name;
  });
}

void add_children_findings(FactGroups& children, size_t nb, size_t ng, std::vector<Ranked>& out) {
  for (auto& kv : children) {
    auto& list = kv.second;
    sort_by_first_seen(list);
    Ranked r = to_finding(list[0].first, *list[0].second, nb, ng);
    if (list.size() > 1) {
      const FactInfo& first = *list[0].second;
      r.f.module = first.story;
      r.f.summary = std::to_string(list.size()) + " children of " + first.story + " (" + first.name + ", ...) " + first.value;
      std::string names;
      for (size_t i = 0; i < list.size() && i < 20; ++i) names += (i ? ", " : "") + list[i].second->name;
      if (list.size() > 20) names += ", ... (" + std::to_string(list.size() - 20) + " more)";
      (r.bad_side ? r.f.bad : r.f.good) += ": " + names;
      if (!r.bad_side) r.f.summary = "only in passing runs: " + r.f.summary;
    }
    out.push_back(std::move(r));
  }
}

// Modules imported on one side only, one finding per top-level package: named after the
// shortest module name of the group, the others listed.
void add_module_findings(FactGroups& modules, size_t nb, size_t ng, std::vector<Ranked>& out) {
  for (auto& kv : modules) {
    auto& kept = kv.second;
    sort_by_first_seen(kept);
    Ranked r = to_finding(kept[0].first, *kept[0].second, nb, ng);
    bool bad_side = std::get<0>(kv.first);
    r.f.kind = bad_side ? Kind::ModuleAdded : Kind::ModuleMissing;
    std::string shortest = kept[0].second->name;
    std::string list_text;
    for (size_t i = 0; i < kept.size(); ++i) {
      const std::string& n = kept[i].second->name;
      if (n.size() < shortest.size()) shortest = n;
      if (i < 20) list_text += (i ? ", " : "") + n;
    }
    if (kept.size() > 20) list_text += ", ... (" + std::to_string(kept.size() - 20) + " more)";
    r.f.module = shortest;
    std::string count = kept.size() == 1 ? "" : " and " + std::to_string(kept.size() - 1) + " more under " +
                                                     std::get<1>(kv.first);
    r.f.summary = std::string("imported only in ") + (bad_side ? "failing" : "passing") + " runs: " +
                  kept[0].second->name + count;
    if (!r.f.where.empty()) r.f.summary += " (first imported at " + format_location(r.f.where[0]) + ")";
    (bad_side ? r.f.bad : r.f.good) = list_text + " (" + (bad_side ? runs_phrase(r.f.support.bad, nb, "failing")
                                                                   : runs_phrase(r.f.support.good, ng, "passing")) + ")";
    (bad_side ? r.f.good : r.f.bad) = (bad_side ? r.f.support.good : r.f.support.bad)
                                          ? "imported in " + (bad_side ? runs_phrase(r.f.support.good, ng, "passing")
                                                                       : runs_phrase(r.f.support.bad, nb, "failing"))
                                          : "not imported";
    out.push_back(std::move(r));
  }
}

// The failing side's exit statuses against the passing side's of the same role
// (exit_status_changed, info, as in the two-run diff).
void add_exit_findings(const std::unordered_map<uint64_t, FactInfo>& facts,
                       const std::vector<std::pair<uint64_t, const FactInfo*>>& exits, size_t nb, size_t ng,
                       std::vector<Ranked>& out) {
  for (const auto& e : exits) {
    const FactInfo& fi = *e.second;
    const FactInfo* other = passing_value(facts, fi, nb, ng);
    if (!other) continue;
    Ranked r = to_finding(e.first, fi, nb, ng);
    r.f.summary = exit_status_summary(other->status, fi.status, fi.name, fi.cause, other->cause) + fi.last_import;
    r.f.bad = fi.value + " (" + runs_phrase(fi.bad, nb, "failing") + ")";
    r.f.good = other->value + " (" + runs_phrase(other->good, ng, "passing") + ")";
    out.push_back(std::move(r));
  }
}

// Facts told as one finding made by `make` from their names, with the first one's support.
template <class Make>
void add_named_finding(std::vector<std::pair<uint64_t, const FactInfo*>>& list, size_t nb, size_t ng, Make&& make,
                       std::vector<Ranked>& out) {
  if (list.empty()) return;
  sort_by_first_seen(list);
  std::vector<std::string> names;
  for (const auto& x : list) names.push_back(x.second->name);
  Ranked r = to_finding(list[0].first, *list[0].second, nb, ng);
  Finding f = make(names, *list[0].second);
  f.support = r.f.support;
  f.order = r.f.order;
  f.test = r.f.test;
  f.where = r.f.where;
  r.f = std::move(f);
  out.push_back(std::move(r));
}

// python_version_changed and its parts: what each standard library did for itself.
void add_version_findings(Versions& versions, SetAside& aside, size_t nb, size_t ng, std::vector<Ranked>& out) {
  if (!versions.differ()) return;
  add_named_finding(versions.facts, nb, ng, [&](const std::vector<std::string>&, const FactInfo&) {
    Finding f = python_version_finding(versions.pairs, versions.roles, "the passing runs", "the failing runs");
    f.story = kVersionStory;
    return f;
  }, out);
  const std::string& gv = versions.pairs[0].first;
  const std::string& bv = versions.pairs[0].second;
  auto part = [&](Kind kind, const char* what) {
    return [=](const std::vector<std::string>& names, const FactInfo& first) {
      return version_part(kind, names, what, gv, bv, first.process);
    };
  };
  add_named_finding(aside.stdlib_present[0], nb, ng,
                    part(Kind::ModuleMissing, "imported only by the passing runs' standard library"), out);
  add_named_finding(aside.stdlib_present[1], nb, ng,
                    part(Kind::ModuleAdded, "imported only by the failing runs' standard library"), out);
  add_named_finding(aside.stdlib_values[1], nb, ng, part(Kind::OriginChanged, "come from the other interpreter's files"),
                    out);
  add_named_finding(aside.stdlib_values[0], nb, ng,
                    part(Kind::LoaderChanged, "loaded another way (frozen in one version)"), out);
}

std::vector<Ranked> candidates(const std::unordered_map<uint64_t, FactInfo>& facts, size_t nb, size_t ng) {
  std::vector<Ranked> out;
  Versions versions = versions_of(facts, nb, ng);
  SetAside aside = split_facts(facts, nb, ng, versions, out);
  add_value_findings(facts, aside.values, nb, ng, versions, aside, out);
  add_children_findings(aside.children, nb, ng, out);
  add_module_findings(aside.modules, nb, ng, out);
  add_exit_findings(facts, aside.exits, nb, ng, out);
  add_version_findings(versions, aside, nb, ng, out);
  add_named_finding(aside.unreached, nb, ng, [](const std::vector<std::string>& names, const FactInfo& first) {
    return unreached_finding(names, first.process, "the passing runs", "the failing runs' processes");
  }, out);
  for (auto& r : out) {
    // A failed import of a module the passing runs import fine stopped something there.
    if (r.info->family == Family::Failed && r.bad_side && r.f.severity == Severity::Warning) {
      const FactInfo* p = present_fact(facts, r.info->name);
      if (p && ng && p->good * 2 >= ng) r.f.severity = Severity::Error;
    }
    note_partial(r);
  }
  return out;
}

struct Story {
  Ranked primary;
  std::vector<Ranked> related;
  double sep = 0, frac = 0;  // of its best separating part
  bool bad_side = true;
};

// A story that is only info (noise, or a module's own design) ranks after one that
// separates as well with a warning or an error, as in the two-run diff.
bool info_only(const Story& s) {
  if (s.primary.f.severity != Severity::Info) return false;
  for (const auto& r : s.related)
    if (r.f.severity != Severity::Info) return false;
  return true;
}

bool better_story(const Story& a, const Story& b) {
  if (a.sep != b.sep) return a.sep > b.sep;
  if (a.frac != b.frac) return a.frac > b.frac;
  if (a.bad_side != b.bad_side) return a.bad_side;
  if (info_only(a) != info_only(b)) return !info_only(a);
  Ranked x = a.primary, y = b.primary;
  x.sep = y.sep = x.frac = y.frac = 0;
  return better(x, y);
}

// Findings about one sys.modules key are one story: its primary is the root-cause kind
// among the parts that separate (the best separating part when none does), ranked by its
// best separating part.
std::vector<Story> make_stories(std::vector<Ranked> all) {
  std::sort(all.begin(), all.end(), better);
  std::unordered_map<std::string, size_t> of_story;
  std::vector<std::vector<Ranked>> parts;
  for (auto& r : all) {
    auto it = r.f.story.empty() ? of_story.end() : of_story.find(r.f.story);
    if (it == of_story.end()) {
      if (!r.f.story.empty()) of_story[r.f.story] = parts.size();
      parts.emplace_back();
      parts.back().push_back(std::move(r));
    } else {
      parts[it->second].push_back(std::move(r));
    }
  }
  std::vector<Story> stories;
  for (auto& ps : parts) {
    // ps[0] is the best separating part.
    size_t primary = 0;
    double need = std::min(0.5, ps[0].sep);
    for (size_t i = 1; i < ps.size(); ++i)
      if (ps[i].sep >= need && ps[i].bad_side == ps[0].bad_side && ps[i].f.kind < ps[primary].f.kind) primary = i;
    Story s;
    s.sep = ps[0].sep;
    s.frac = ps[0].frac;
    s.bad_side = ps[0].bad_side;
    Support best = ps[0].f.support;
    s.primary = std::move(ps[primary]);
    for (size_t i = 0; i < ps.size(); ++i)
      if (i != primary) s.related.push_back(std::move(ps[i]));
    if (!s.related.empty()) s.primary.f.story_support = best;
    stories.push_back(std::move(s));
  }
  std::stable_sort(stories.begin(), stories.end(), better_story);
  return stories;
}

// ---- the top stories: the two-run text and the test-order evidence ---------------------------

// A finding of the two-run diff that tells the same thing as `f` and no other fact took:
// same kind, the same module (else story), and for a lookup the same attribute.
const Finding* same_finding(const std::vector<Finding>& fs, const Finding& f, const FactInfo& fi,
                            std::set<const Finding*>& used) {
  auto fits = [&](const Finding& y, int pass) {
    if (y.kind != f.kind || used.count(&y)) return false;
    if (pass ? (f.story.empty() || y.story != f.story) : y.module != f.module) return false;
    return fi.family != Family::Access || y.summary.find("." + fi.name + " on ") != std::string::npos;
  };
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& x : fs) {
      if (fits(x, pass)) return used.insert(&x), &x;
      for (const auto& rel : x.related)
        if (fits(rel, pass)) return used.insert(&rel), &rel;
    }
  return nullptr;
}

void take_text(Finding& f, const Finding& from) {
  f.summary = from.summary;
  // A primary of the two-run diff carries its story's clauses; the story here has its own.
  std::string tail = story_tail(from);
  if (!tail.empty() && f.summary.size() > tail.size() &&
      f.summary.compare(f.summary.size() - tail.size(), tail.size(), tail) == 0)
    f.summary.resize(f.summary.size() - tail.size());
  f.good = from.good;
  f.bad = from.bad;
  f.where = from.where;
  f.test = from.test;
  f.tests = from.tests;
  f.brief = from.brief;
  f.process = from.process;
}

// Where a test ran in a run (-1: not known), and the time of its first record (UINT64_MAX).
int position_of(const RunFacts& run, const std::string& key) {
  auto it = run.position.find(key);
  return it == run.position.end() ? -1 : it->second;
}

uint64_t first_record_of(const RunFacts& run, const std::string& key) {
  auto it = run.first_record.find(key);
  return it == run.first_record.end() ? UINT64_MAX : it->second;
}

std::string quoted_test(const std::string& t) { return t.empty() ? "outside any test (collection or import time)" : "during `" + t + "`"; }

// How one set of runs saw a fact: in how many it happened, by test and by place relative to
// the failing tests.
struct Tally {
  size_t happened = 0;
  std::map<std::string, size_t> tests, relative;
};

// Fills `e` for run `r` and counts it; the fact's first occurrence there, null when it did
// not happen.
const Event* tally_event(const RunFacts& r, uint64_t key, Finding::RunEvent& e, Tally& tally) {
  e.run = r.info.path;
  auto it = r.events.find(key);
  e.happened = it != r.events.end();
  if (!e.happened) return nullptr;
  ++tally.happened;
  e.test = it->second.test;
  ++tally.tests[e.test];
  return &it->second;
}

// The runs' places relative to the failing tests, in the table's order ({place, words}):
// "before the first failing test, after the first failing test in 2" (a count only where
// not all of the `happened` runs agree).
template <size_t N>
std::string relative_clauses(const std::pair<const char*, const char*> (&table)[N],
                             const std::map<std::string, size_t>& counts, size_t happened) {
  std::string out;
  for (const auto& kr : table) {
    auto it = counts.find(kr.first);
    if (it == counts.end()) continue;
    out += (out.empty() ? "" : ", ") + std::string(kr.second) +
           (it->second == happened ? std::string() : " in " + std::to_string(it->second));
  }
  return out;
}

// In every run: did it happen, during which test, where relative to the failure.
void explain_order(Finding& f, const FactInfo& fi, uint64_t key, const std::vector<RunFacts>& bad,
                   const std::vector<RunFacts>& good) {
  if (fi.subject.empty()) return;
  // The tests that failed in the failing runs (junit), by key.
  std::set<std::string> failing;
  bool all_junit = true;
  for (const auto& r : bad) {
    all_junit &= r.outcome.source == outcomes::RunOutcome::Source::Junit;
    for (const auto& t : r.outcome.tests)
      if (t.failed) failing.insert(t.key);
  }
  Tally in_bad;
  for (const auto& r : bad) {
    Finding::RunEvent e;
    if (const Event* ev = tally_event(r, key, e, in_bad)) {
      if (r.outcome.first_failing >= 0) {
        // By time when the first failing test left a record (right under pytest-xdist too,
        // where junit's order is not the order tests ran in), else by junit's order.
        const std::string& ff = r.outcome.tests[r.outcome.first_failing].key;
        std::string test_key = e.test.empty() ? std::string() : outcomes::junit_key(e.test);
        uint64_t t = first_record_of(r, ff);
        int at = test_key.empty() ? -1 : position_of(r, test_key);
        if (test_key == ff) e.relative = "in_first_failure";
        else if (t != UINT64_MAX) e.relative = ev->time < t ? "before_first_failure" : "after_first_failure";
        else if (at >= 0) e.relative = at < r.outcome.first_failing ? "before_first_failure" : "after_first_failure";
        else if (e.test.empty() && !r.tests.empty() && ev->time < r.tests[0].second)
          e.relative = "before_first_failure";  // before any test left a record
      }
      if (!e.relative.empty()) ++in_bad.relative[e.relative];
    }
    f.bad_events.push_back(e);
  }
  auto tests_text = [](const std::map<std::string, size_t>& m, size_t total) {
    std::vector<std::pair<size_t, std::string>> v;
    for (const auto& kv : m) v.push_back({kv.second, kv.first});
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    std::string s;
    for (size_t i = 0; i < v.size() && i < 4; ++i) {
      s += (i ? ", " : "") + quoted_test(v[i].second);
      if (v.size() > 1 || v[i].first != total) s += " (" + std::to_string(v[i].first) + ")";
    }
    if (v.size() > 4) s += ", ... (" + std::to_string(v.size() - 4) + " more tests)";
    return s;
  };
  std::string line = "in " + std::to_string(in_bad.happened) + "/" + std::to_string(bad.size()) + " failing runs " + fi.subject;
  if (in_bad.happened) line += " " + tests_text(in_bad.tests, in_bad.happened);
  static const std::pair<const char*, const char*> kRel[] = {{"before_first_failure", "before the first failing test"},
                                                             {"in_first_failure", "in the first failing test"},
                                                             {"after_first_failure", "after the first failing test"}};
  std::string rel = relative_clauses(kRel, in_bad.relative, in_bad.happened);
  if (!rel.empty()) line += ", " + rel;
  else if (in_bad.happened && !all_junit)
    line += "; which test failed first is not known (no junit XML in the run's directory: pytest --junitxml writes it)";
  f.evidence.push_back(line);

  // The passing runs: did it happen, and where relative to the tests that failed elsewhere.
  Tally in_good;
  for (const auto& r : good) {
    Finding::RunEvent e;
    if (const Event* ev = tally_event(r, key, e, in_good)) {
      int at = e.test.empty() ? -1 : position_of(r, outcomes::junit_key(e.test));
      int before = 0, after = 0;
      for (const auto& k : failing) {
        int p = position_of(r, k);
        if (p < 0) continue;
        (p < at ? before : after)++;
      }
      if (e.test.empty() && !failing.empty()) {
        // Outside any test: before every test that has a record after it.
        before = after = 0;
        for (const auto& k : failing) {
          uint64_t t = first_record_of(r, k);
          if (t != UINT64_MAX) (t < ev->time ? before : after)++;
        }
      }
      if (at >= 0 || e.test.empty()) {
        if (before && !after) e.relative = "after_failing_tests";
        else if (after && !before) e.relative = "before_failing_tests";
        else if (before && after) e.relative = "among_failing_tests";
      }
      if (!e.relative.empty()) ++in_good.relative[e.relative];
    }
    f.good_events.push_back(e);
  }
  std::string gl = "in " + std::to_string(in_good.happened) + "/" + std::to_string(good.size()) + " passing runs ";
  if (!in_good.happened) {
    gl = "in none of the " + std::to_string(good.size()) + " passing runs";
  } else {
    gl += "it happened too, " + tests_text(in_good.tests, in_good.happened);
    static const std::pair<const char*, const char*> kGood[] = {
        {"after_failing_tests", "after the tests that fail in the failing runs had run"},
        {"before_failing_tests", "before the tests that fail in the failing runs"},
        {"among_failing_tests", "between the tests that fail in the failing runs"}};
    std::string r2 = relative_clauses(kGood, in_good.relative, in_good.happened);
    if (!r2.empty()) gl += ", " + r2;
    if (in_good.happened < good.size()) gl += "; in the other " + std::to_string(good.size() - in_good.happened) + " it did not happen";
  }
  f.evidence.push_back(gl);
}

}  // namespace

Result diff_many_runs(const std::vector<std::string>& good, const std::vector<std::string>& bad,
                      const RunLoader& load, const Options& opts) {
  Result r;
  r.many = true;
  r.options = opts;
  std::unordered_map<uint64_t, FactInfo> facts;
  std::vector<RunFacts> bad_runs, good_runs;
  for (const auto& path : bad) bad_runs.push_back(read_run(path, true, load, facts, r.input_warnings, nullptr));
  for (const auto& path : good)
    good_runs.push_back(read_run(path, false, load, facts, r.input_warnings, &bad_runs));
  for (const auto* side : {&bad_runs, &good_runs})
    for (const auto& run : *side) {
      RunSummary& s = side == &bad_runs ? r.bad : r.good;
      s.paths.push_back(run.info.path);
      s.imports += run.info.imports;
      (side == &bad_runs ? r.bad_runs : r.good_runs).push_back(run.info);
    }
  const size_t nb = bad_runs.size(), ng = good_runs.size();
  std::vector<Story> stories = make_stories(candidates(facts, nb, ng));

  // The top stories in the two-run diff's words: one failing run showing the primary's
  // fact against one passing run without it (or the other way round), read again.
  struct Pair {
    size_t g, b;
    std::vector<Process> good, bad;
    Result diff;
  };
  std::vector<std::unique_ptr<Pair>> pairs;
  for (size_t i = 0; i < stories.size() && i < kStoriesExplained; ++i) {
    Story& s = stories[i];
    // Only what separates is worth the words: the rest is noise told briefly.
    if (s.sep < 0.5) break;
    size_t b = 0, g = 0;
    bool bad_side = s.primary.bad_side;
    for (size_t k = 0; k < nb; ++k)
      if (bad_runs[k].has(s.primary.key) == bad_side) { b = k; break; }
    for (size_t k = 0; k < ng; ++k)
      if (good_runs[k].has(s.primary.key) != bad_side) { g = k; break; }
    Pair* pair = nullptr;
    for (auto& p : pairs)
      if (p->g == g && p->b == b) pair = p.get();
    std::set<const Finding*> used;
    if (!pair && nb && ng) {
      pairs.push_back(std::make_unique<Pair>());
      pair = pairs.back().get();
      pair->g = g;
      pair->b = b;
      load(good_runs[g].info.path, pair->good, true);
      load(bad_runs[b].info.path, pair->bad, true);
      pair->diff = diff_runs(pair->good, pair->bad, opts);
    }
    if (i == 0 && pair) {
      r.example_good = good_runs[g].info.path;
      r.example_bad = bad_runs[b].info.path;
    }
    auto tell = [&](Ranked& x) {
      if (pair)
        if (const Finding* same = same_finding(pair->diff.findings, x.f, *x.info, used)) {
          std::string partial;
          size_t cut = x.f.summary.rfind(" [in ");
          if (cut != std::string::npos) partial = x.f.summary.substr(cut);
          take_text(x.f, *same);
          x.f.summary += partial;
          x.f.example = "failing run " + bad_runs[b].info.path + " against passing run " + good_runs[g].info.path;
        }
      explain_order(x.f, *x.info, x.key, bad_runs, good_runs);
    };
    tell(s.primary);
    for (auto& rel : s.related) tell(rel);
    // The story's root event (what sat under the key) leads its evidence.
    for (auto& rel : s.related)
      if ((rel.f.kind == Kind::SysModulesReplaced || rel.f.kind == Kind::ProxyInSysModules ||
           rel.f.kind == Kind::ImportBlocked) && s.primary.f.kind > rel.f.kind) {
        s.primary.f.evidence.insert(s.primary.f.evidence.begin(), rel.f.evidence.begin(), rel.f.evidence.end());
        break;
      }
  }
  for (auto& s : stories) {
    Finding f = std::move(s.primary.f);
    for (auto& rel : s.related) f.related.push_back(std::move(rel.f));
    tell_story(f);
    r.findings.push_back(std::move(f));
  }
  return r;
}

}  // namespace diff
}  // namespace imptrace
