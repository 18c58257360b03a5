// Attribute findings: children bound where they should not be (binding_on_proxy,
// binding_mismatch), failed lookups through a proxy (proxy_forward_failed), and successful
// ones repeated a different number of times (proxy_access_repeats).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "commands.h"
#include "diff_compare.h"
#include "failure_reporting.h"
#include "proxy_decision.h"

namespace imptrace {
namespace diff {

namespace {

// A binding with the process it happened in.
using BindingRep = std::pair<const ProcFacts*, const BindingFact*>;

// One finding for children of one parent bound the same wrong way (`items`, in import
// order); `good` is the good run's first binding of the first child, or nullptr.
Finding binding_finding(const std::vector<BindingRep>& items, const BindingFact* good,
                        const std::string& role) {
  const ProcFacts& pf = *items.front().first;
  const BindingFact& bf = *items.front().second;
  const model::Binding& bd = *bf.b;
  Finding f;
  bool on_proxy = bd.status == model::BindingStatus::OnProxy || bd.bound_on.is_proxy();
  f.kind = on_proxy ? Kind::BindingOnProxy : Kind::BindingMismatch;
  f.severity = Severity::Error;
  f.module = items.size() == 1 ? bd.child_module() : bd.parent.str();
  f.story = bd.parent;
  f.process = role;
  f.order = first_pos(pf, bd.child_module());
  f.test = bd.test;
  std::string who = items.size() == 1
                        ? "'" + bd.attribute + "' (" + bd.child_module() + ")"
                        : std::to_string(items.size()) + " children of " + bd.parent + " (" +
                              bd.attribute + ", ...)";
  std::string what = who + " bound on " + describe(bd.bound_on, (*pf.norm)(bd.bound_on.file));
  std::string replaced_by;
  if (bf.bound_on_place == kLaterReplaced) {
    const KeyHistory* parent = pf.history->find(bd.parent);
    if (parent && bf.replaced_by >= 0) {
      EntryText e = materialize(pf, parent->entries[bf.replaced_by]);
      replaced_by = describe(e.obj, e.origin);
      if (!e.set_by.empty()) replaced_by += place_text(e.set_by, e.precise);
    } else {
      replaced_by = "removal from sys.modules";
    }
  }
  if (bf.bound_on_place == kLaterReplaced)
    f.summary = what + ", the object under sys.modules['" + bd.parent +
                "'] that was later replaced by " + replaced_by;
  else if (bf.bound_on_place == kStale)
    f.summary = what + ", an object no longer under sys.modules['" + bd.parent + "']";
  else if (bf.bound_on_place == kOther)
    f.summary = what + ", not the object under sys.modules['" + bd.parent + "']";
  else if (model::shadowed_by_own_attribute(bd))
    f.summary = what + ": the attribute holds " + bd.attribute_value.type.str() +
                ", the package's own name over its submodule's (normal Python; checked only when the "
                "submodule is imported again, so the other run may not have looked)";
  else
    f.summary = what + ": " + model::binding_status_name(bd.status);
  if (bf.bound_on_place == kCurrent && model::shadowed_by_own_attribute(bd)) f.severity = Severity::Info;
  if (bd.status != model::BindingStatus::Bound && bf.bound_on_place != kCurrent)
    f.summary += std::string(" (status ") + model::binding_status_name(bd.status) + ")";
  std::string subject = items.size() == 1 ? bd.child_module() : who;
  if (bf.bound_on_place == kLaterReplaced) f.brief = subject + " bound on the replaced object";
  else if (on_proxy) f.brief = subject + " bound on a proxy";
  else f.brief = subject + " binding " + bound_on_place_name(bf.bound_on_place);
  f.bad = "status " + std::string(model::binding_status_name(bd.status)) + ", bound_on " +
          bound_on_place_name(bf.bound_on_place) + (bd.bound_on.is_proxy() ? ", a proxy" : "");
  if (items.size() > 1) {
    f.bad += ": ";
    for (size_t i = 0; i < items.size() && i < 20; ++i)
      f.bad += (i ? ", " : "") + items[i].second->b->attribute;
    if (items.size() > 20) f.bad += ", ... (" + std::to_string(items.size() - 20) + " more)";
  }
  if (good) {
    const BindingFact& gbf = *good;
    f.good = "status " + std::string(model::binding_status_name(gbf.b->status)) +
             ", bound_on " + bound_on_place_name(gbf.bound_on_place) + (gbf.b->bound_on.is_proxy() ? ", a proxy" : "");
  } else {
    f.good = "not bound";
  }
  int64_t pos = pf.p->import_position(bd.import_index);
  if (pos >= 0) {
    Location l = pf.norm->loc(pf.p->imports[pos].importer);
    if (!l.empty()) f.where.push_back(l);
  }
  return f;
}

}  // namespace

// Bindings the good run never had and that are anomalous by themselves; children of one
// parent bound the same wrong way are one finding.
void compare_child_bindings(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  // The bad group's anomalous binding signatures, each with its first binding (processes
  // in group order, then record order), in that order. Normal bindings never match one,
  // so neither side needs a table of all its bindings.
  OrderedTable<uint64_t, BindingRep, IdHash> bad_sigs;
  for (const ProcFacts* f : b.procs)
    for (const auto& bf : f->bindings) {
      if (!bf.anomalous()) continue;
      auto ins = bad_sigs.emplace(bf.sig);
      if (ins.second) *ins.first = {f, &bf};
    }
  if (!bad_sigs.size()) return;
  std::vector<bool> in_good(bad_sigs.size(), false);
  for (const ProcFacts* f : g.procs)
    for (const auto& gbf : f->bindings)
      if (gbf.anomalous())
        if (const BindingRep* r = bad_sigs.find(gbf.sig)) in_good[r - bad_sigs.values().data()] = true;
  // Bindings wrong the same way, by parent|status|bound_on relation|proxy.
  std::map<std::string, std::vector<BindingRep>> same_way;
  for (size_t i = 0; i < bad_sigs.size(); ++i) {
    if (in_good[i]) continue;
    const BindingRep& rep = bad_sigs.value(i);
    const BindingFact& bf = *rep.second;
    const model::Binding& bd = *bf.b;
    std::string k = bd.parent + "|" + model::binding_status_name(bd.status) + "|" +
                    bound_on_place_name(bf.bound_on_place) + (bd.bound_on.is_proxy() ? "|proxy" : "");
    same_way[k].push_back(rep);
  }
  // The good run's first binding of each child those findings name (procs, then record
  // order): one pass over the good group's bindings.
  std::unordered_map<uint64_t, const BindingFact*> good_of;
  for (auto& kv : same_way) {
    auto& items = kv.second;
    // In import order. The same import can bind in several processes (xdist workers run
    // the same imports), and one parent's children can share an import: ties go by
    // attribute name, then by process (group order: worker id, start time), then record
    // order. That fixes which binding the finding quotes and the order it lists them in.
    std::stable_sort(items.begin(), items.end(), [](const BindingRep& x, const BindingRep& y) {
      const model::Binding& bx = *x.second->b;
      const model::Binding& by = *y.second->b;
      if (bx.import_index != by.import_index) return bx.import_index < by.import_index;
      return bx.attribute.str() < by.attribute.str();
    });
    const model::Binding& bd = *items.front().second->b;
    good_of.emplace(Group::child_key(bd.parent, bd.attribute), nullptr);
  }
  if (!good_of.empty())
    for (const ProcFacts* f : g.procs)
      for (const auto& gbf : f->bindings) {
        auto it = good_of.find(Group::child_key(gbf.b->parent, gbf.b->attribute));
        if (it != good_of.end() && !it->second) it->second = &gbf;
      }
  Group::KeyUnion scratch;
  for (auto& kv : same_way) {
    const model::Binding& bd = *kv.second.front().second->b;
    Finding f = binding_finding(kv.second, good_of.at(Group::child_key(bd.parent, bd.attribute)), role);
    // Children bound on a parent that replaced itself (or on the module before it did), in
    // a key the good run never had: the parent's design, in a module only bad imported.
    const ProcFacts& pf = *kv.second.front().first;
    const KeyHistory* parent = pf.history->find(bd.parent);
    const model::Import* by =
        parent && !g.find_key(bd.parent.str(), scratch) ? set_up_by_own_import(*pf.p, *parent) : nullptr;
    if (by) {
      f.severity = Severity::Info;
      f.summary += " (" + own_design_text(*by, bd.parent.str()) + "; the good run did not import it)";
    }
    out.add(std::move(f));
  }
}

// Failed lookups through a proxy (or module __getattr__) the good run never had.
void compare_accesses(const Group& g, const Group& b, Findings& out) {
  const std::string& role = b.key;
  std::vector<uint64_t> sigs;
  for (const auto& kv : b.access_sigs)
    if (!g.access_sigs.count(kv.first) && !kv.second.front().second->a->ok) sigs.push_back(kv.first);
  std::sort(sigs.begin(), sigs.end());
  // Lookups made while a test runner formatted a failure (failure_reporting.h): one entry.
  size_t in_reporting = 0;
  std::set<std::string> reporting_keys;
  std::vector<std::string> reporting_tests;
  Location reporting_at;
  for (uint64_t sig : sigs) {
    const auto& all = b.access_sigs.at(sig);
    if (model::in_failure_reporting(all.front().second->a->stack)) {
      for (const auto& x : all) {
        ++in_reporting;
        reporting_keys.insert(std::string(x.second->story));
        const std::string& t = x.second->a->test;
        if (!t.empty() && std::find(reporting_tests.begin(), reporting_tests.end(), t) == reporting_tests.end())
          reporting_tests.push_back(t);
        if (reporting_at.empty() && !x.second->a->stack.empty())
          reporting_at = x.first->norm->loc(x.second->a->stack[0]);
      }
      continue;
    }
    const AccessFact& af = *all.front().second;
    const ProcFacts& pf = *all.front().first;
    const model::ProxyAccess& a = *af.a;
    Location where = a.stack.empty() ? Location() : pf.norm->loc(a.stack[0]);
    Finding f;
    f.kind = Kind::ProxyForwardFailed;
    bool module_getattr = a.kind == model::ProxyAccessKind::ModuleGetattr;
    // Probes (hasattr/getattr with a default, inspect.getmodule, pytest collection) ask
    // proxies for dunders and pytest markers and expect AttributeError: not a cause; nor is
    // any AttributeError the program caught.
    const std::string& at = a.attribute;
    bool probe = (at.size() > 4 && at.compare(0, 2, "__") == 0 &&
                  at.compare(at.size() - 2, 2, "__") == 0) ||
                 at.compare(0, 7, "_pytest") == 0 || model::import_system_probe(*pf.p, a) ||
                 model::caught_attribute_error(*pf.p, a);
    f.severity = probe ? Severity::Info
                 : !module_getattr ? Severity::Error
                 : g.ok(af.story) ? Severity::Warning : Severity::Info;
    f.module = std::string(af.story);
    f.story = f.module;
    f.process = role;
    f.order = first_pos(pf, af.story);
    std::set<std::string> seen;
    for (const auto& x : all) {
      const std::string& t = x.second->a->test;
      if (!t.empty() && seen.insert(t).second) f.tests.push_back(t);
    }
    f.test = a.test.empty() && !f.tests.empty() ? f.tests[0] : a.test.str();
    std::string on = a.proxy.present ? describe(a.proxy, "") : "a module";
    f.summary = (a.kind == model::ProxyAccessKind::Setattr ? "setting ." : "lookup of .") +
                a.attribute + " on " + on + " failed: " + a.outcome();
    if (a.forwarded_to.present)
      f.summary += " (forwarded to '" + (a.forwarded_to.name.empty() ? object_kind(a.forwarded_to)
                                                                       : a.forwarded_to.name.str()) + "')";
    if (!where.empty()) f.summary += " at " + format_location(where);
    if (!f.test.empty()) f.summary += " in " + f.test;
    if (f.tests.size() > 1) f.summary += " and " + std::to_string(f.tests.size() - 1) + " more tests";
    f.brief = "." + a.attribute + " through it failed (" + a.error_type + ")" +
              (where.empty() ? std::string() : " at " + format_location(where)) +
              (f.tests.empty() ? std::string()
                               : " in " + std::to_string(f.tests.size()) + " test" +
                                     (f.tests.size() == 1 ? "" : "s"));
    f.bad = std::to_string(all.size()) + " failing lookup" + (all.size() == 1 ? "" : "s") +
            " of ." + a.attribute + ": " + a.outcome();
    auto ga = g.access_by_attr.find(Group::child_key(af.story, a.attribute));
    if (ga != g.access_by_attr.end()) {
      const model::ProxyAccess& x = *ga->second.second->a;
      f.good = "lookup of ." + x.attribute + " on " + describe(x.proxy, "") + ": " + x.outcome();
    } else {
      f.good = "no such lookup reached a proxy or module __getattr__";
    }
    for (size_t i = 0; i < a.stack.size() && f.where.size() < 4; ++i)
      if (!model::is_importlib_frame(a.stack[i])) f.where.push_back(pf.norm->loc(a.stack[i]));
    out.add(std::move(f));
  }
  if (in_reporting) {
    // About no one key: its own entry, never folded into a key's story.
    Finding f = new_finding(Kind::FailureReporting, Severity::Info, "", role, UINT64_MAX - 1);
    std::string keys;
    size_t n = 0;
    for (const auto& k : reporting_keys) {
      if (n++ == 5) { keys += ", ..."; break; }
      keys += (keys.empty() ? "" : ", ") + k;
    }
    f.summary = std::to_string(in_reporting) + " failed lookup" + (in_reporting == 1 ? "" : "s") +
                " through " + keys + " happened inside failure reporting (the test runner formatting a " +
                "failure: inspect.getmodule, traceback): consequences of the failure, not causes";
    f.bad = std::to_string(in_reporting) + " failed lookup" + (in_reporting == 1 ? "" : "s") + " through " + keys;
    f.good = "no failure was reported this way";
    f.tests = reporting_tests;
    if (!reporting_tests.empty()) f.test = reporting_tests[0];
    if (!reporting_at.empty()) f.where.push_back(reporting_at);
    out.add(std::move(f));
  }
}

// Successful accesses of one signature (object's story and type, attribute, kind, caller)
// that both runs made, a different number of times, where the tracer counted repeats of
// them in either run: how often a loop ran. Info, never more: the accesses themselves are
// the same, and what differs in them is found by the other comparisons.
void compare_access_repeats(const Group& g, const Group& b, Findings& out) {
  struct Totals {
    uint64_t times = 0, repeats = 0;
  };
  auto totals = [](const std::vector<std::pair<const ProcFacts*, const AccessFact*>>& all) {
    Totals t;
    for (const auto& x : all) {
      t.times += 1 + x.second->a->repeats;
      t.repeats += x.second->a->repeats;
    }
    return t;
  };
  std::vector<uint64_t> sigs;
  for (const auto& kv : b.access_sigs)
    if (kv.second.front().second->a->ok && g.access_sigs.count(kv.first)) sigs.push_back(kv.first);
  std::sort(sigs.begin(), sigs.end());
  for (uint64_t sig : sigs) {
    const auto& bad_all = b.access_sigs.at(sig);
    Totals tg = totals(g.access_sigs.at(sig)), tb = totals(bad_all);
    if ((!tg.repeats && !tb.repeats) || tg.times == tb.times) continue;
    const AccessFact& af = *bad_all.front().second;
    const ProcFacts& pf = *bad_all.front().first;
    const model::ProxyAccess& a = *af.a;
    Location where = a.stack.empty() ? Location() : pf.norm->loc(a.stack[0]);
    Finding f = new_finding(Kind::ProxyAccessRepeats, Severity::Info, std::string(af.story), b.key,
                            first_pos(pf, af.story));
    std::string what = std::string(a.kind == model::ProxyAccessKind::Setattr ? "setting ." : "lookup of .") +
                       a.attribute + " on " + (a.proxy.present ? describe(a.proxy, "") : "a module");
    auto times = [](uint64_t n) { return std::to_string(n) + " time" + (n == 1 ? "" : "s"); };
    f.summary = what + (where.empty() ? std::string() : " at " + format_location(where)) + " ran " +
                times(tg.times) + " in the good run and " + times(tb.times) +
                " in the bad (the same access; only how often it repeated differs)";
    f.good = what + ": " + times(tg.times) + " (" + std::to_string(tg.repeats) + " counted as repeats)";
    f.bad = what + ": " + times(tb.times) + " (" + std::to_string(tb.repeats) + " counted as repeats)";
    f.brief = "." + a.attribute + " repeated " + times(tb.times) + " against " + times(tg.times);
    if (!where.empty()) f.where.push_back(where);
    out.add(std::move(f));
  }
}

}  // namespace diff
}  // namespace imptrace
