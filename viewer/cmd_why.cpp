// `imptrace why PATH... MODULE`: everything that ever sat under sys.modules[MODULE], how
// it got there and what replaced it; where its children were bound; every attribute
// access through a proxy that stood in for it.
#include <algorithm>
#include <iostream>
#include <set>
#include <tuple>
#include <sstream>

#include "commands.h"
#include "key_history.h"
#include "native_symbols.h"
#include "lazy_stories.h"
#include "proxy_decision.h"

namespace imptrace {
namespace {

using model::Process;

model::Location first_frame(const std::vector<model::Location>& stack,
                            const std::vector<std::string>& roots) {
  return stack.empty() ? model::Location{} : model::relative_location(stack[0], roots);
}

// Where the code that put an entry there was: the change's innermost frame, else (put
// there by an import) the importer.
model::Location arrived_at(const model::KeyEntry& e, const std::vector<std::string>& roots) {
  if (e.change) return first_frame(e.change->stack, roots);
  if (e.before_trace || !e.import) return {};
  return model::relative_location(e.import->importer, roots);
}

// The key's history (key_history.h) as WhyEntry records.
void add_entries(const Process& p, const model::KeyHistory& h, const std::vector<std::string>& roots,
                 WhyReport& r) {
  for (size_t i = 0; i < h.entries.size(); ++i) {
    const model::KeyEntry& ke = h.entries[i];
    WhyEntry e;
    e.process = p.pid;
    e.object = *ke.object;
    e.origin = ke.object->file;
    e.via_import = ke.via_import;
    e.set_by = arrived_at(ke, roots);
    e.time_ns = ke.time_ns;
    if (const model::Str* test = ke.test()) e.test = *test;
    e.precise = !ke.change || ke.change->precision == model::Precision::Exact;
    if (ke.import) {
      // The import that returned it says where it came from, when the object does not.
      if (ke.via_import || e.origin.empty()) {
        if (e.origin.empty()) e.origin = ke.import->origin;
        e.loader = ke.import->loader;
      }
      if (e.set_by.empty()) e.set_by = model::relative_location(ke.import->importer, roots);
      if (ke.via_import && !ke.change && !ke.before_trace) e.native_caller = ke.import->native_caller;
      if (!ke.change && !ke.before_trace) e.triggered_at = model::relative_location(ke.import->trigger, roots);
    }
    if (ke.during) {
      e.during_import = ke.during->name;
      e.during_importer = model::relative_location(ke.during->importer, roots);
    }
    for (const model::ModulesChange* c : ke.reloads)
      if (const model::Location* at = model::outside_importlib(c->stack))
        e.reloads.push_back(model::relative_location(*at, roots));
      else
        e.reloads.push_back({});
    for (const model::ModulesChange* c : ke.class_changes) {
      const model::Location* at = model::outside_importlib(c->stack);
      e.class_changes.push_back({c->new_object, at ? model::relative_location(*at, roots) : model::Location{}});
    }
    if (p.several_lifetimes()) e.lifetime = ke.lifetime;
    e.finalized = ke.finalized;
    e.removed = ke.removed;
    if (ke.removal) {
      e.removed_at = first_frame(ke.removal->stack, roots);
      e.removal_precise = ke.removal->precision == model::Precision::Exact;
      const model::ModulesChange& r = *ke.removal;
      if (r.by_import_system && r.op == model::ChangeOp::Delete && r.during_import) {
        const int64_t in = p.import_position(r.during_import - 1);
        e.removed_by_failed_import = in >= 0 && !p.imports[in].ok && p.imports[in].name == r.key;
        // importlib's own frame says nothing: the line whose import failed does.
        if (e.removed_by_failed_import) e.removed_at = model::relative_location(p.imports[in].importer, roots);
      }
    }
    // Not removed, not finalised and not the last: the next entry replaced it.
    if (!ke.removed && !ke.finalized && i + 1 < h.entries.size()) {
      e.replaced_by = *h.entries[i + 1].object;
      e.replaced_at = arrived_at(h.entries[i + 1], roots);
    }
    r.entries.push_back(std::move(e));
  }
}

void build_process(const Process& p, const std::string& module, WhyReport& r) {
  const auto roots = p.sys_path_roots();
  model::ModulesHistory history(p);
  for (size_t i = 0; i < p.imports.size(); ++i) {
    const model::Import& im = p.imports[i];
    if (im.name != module) continue;
    WhyImport wi;
    wi.process = p.pid;
    wi.import = im;
    wi.importer = model::relative_location(im.importer, roots);
    wi.trigger = model::relative_location(im.trigger, roots);
    wi.reentry = history.reentry(i);
    if (p.several_lifetimes()) wi.lifetime = p.lifetime_at(im.begin_ns);
    r.imports.push_back(std::move(wi));
  }
  const size_t first_entry = r.entries.size();
  if (const model::KeyHistory* h = history.find(module)) add_entries(p, *h, roots, r);

  std::set<uint64_t> stood_in;  // every object that sat under the key in this process
  for (size_t i = first_entry; i < r.entries.size(); ++i) stood_in.insert(r.entries[i].object.id);

  // A child imported again (a retry after a failure, a reload) records its binding again;
  // the same outcome on the same objects is one fact, listed once.
  std::set<std::tuple<std::string, uint64_t, uint64_t, int, uint64_t>> seen_bindings;
  for (const auto& b : p.bindings) {
    if (b.parent != module) continue;
    if (!seen_bindings.insert({b.attribute.str(), b.bound_on.id, b.child.id, static_cast<int>(b.status),
                               b.attribute_value.present ? b.attribute_value.id : 0}).second)
      continue;
    r.children.push_back({p.pid, b});
  }

  for (const auto& s : model::lazy_stories(p)) {
    if (!model::lazy_target_concerns(s.declared->target.str(), module)) continue;
    WhyLazy l;
    l.process = p.pid;
    l.declared = *s.declared;
    l.declared.declared_at = model::relative_location(s.declared->declared_at, roots);
    if (s.failed) {
      l.outcome = WhyLazy::Outcome::Failed;
      l.used_at = model::relative_location(s.failed->importer, roots);
      l.used_test = s.failed->test.str();
      l.error = s.failed->error_text();
      l.failed_import = s.failed->name.str();
    } else if (s.found_nothing) {
      l.outcome = WhyLazy::Outcome::Failed;
      l.used_at = model::relative_location(s.found_nothing->importer, roots);
      l.used_test = s.found_nothing->test.str();
      l.error = model::lazy_failure_text(s);
      l.failed_lookup = s.declared->target.str();
    } else if (s.resolved) {
      l.outcome = WhyLazy::Outcome::Resolved;
      l.used_at = model::relative_location(s.resolved->used_at, roots);
      l.used_test = s.resolved->test.str();
      l.object = s.resolved->object;
    }
    r.lazy.push_back(std::move(l));
  }

  for (const auto& a : p.proxy_accesses) {
    bool on_entry = a.proxy.present && stood_in.count(a.proxy.id);
    bool forwarded_here = a.forwarded_to.present && a.forwarded_to.name == module;
    if (!on_entry && !forwarded_here) continue;
    WhyProxyAccess w;
    w.process = p.pid;
    w.access = a;
    w.where = first_frame(a.stack, roots);
    r.proxy_accesses.push_back(std::move(w));
  }
}

std::string forwarded_name(const model::ObjectRef& o) {
  if (!o.present) return "";
  return o.name.empty() ? model::object_token(o) : o.name.str();
}

std::string optional_token(const model::ObjectRef& o) { return model::object_token(o); }

}  // namespace

WhyReport build_why(const std::vector<model::Process>& procs, const std::string& module) {
  WhyReport r;
  r.module = module;
  for (const auto& p : procs) {
    build_process(p, module, r);
    if (model::ended_abnormally(p.end)) r.cut_short.emplace_back(p.pid, p.end);
  }
  return r;
}

namespace {

// One object that sat under the key, as an element of "entries".
void write_entry_json(JsonWriter& w, const WhyEntry& e) {
  w.field("object", model::object_token(e.object));
  w.field("type", e.object.type);
  w.field("is_module", e.object.is_module());
  w.field_or_null("origin", e.origin);
  w.field("via", e.via_import ? "import" : "assignment");
  write_location_json(w, "set_by", e.set_by);
  write_location_json(w, "triggered_at", e.triggered_at);
  write_native_caller_json(w, "native_caller", e.native_caller);
  w.field_or_null("replaced_by", optional_token(e.replaced_by));
  w.field("process", e.process);
  w.field("is_proxy", e.object.is_proxy());
  // sys.modules[name] = None: `import name` raises ImportError while it sits there.
  w.field("blocked", model::is_import_blocker(e.object));
  w.field_or_null("name", e.object.name);
  write_location_json(w, "replaced_at", e.replaced_by.present ? e.replaced_at : model::Location{});
  w.field("removed", e.removed);
  if (e.lifetime) w.field("lifetime", static_cast<uint64_t>(e.lifetime)); else w.null_field("lifetime");
  w.field("finalized", e.finalized);
  write_location_json(w, "removed_at", e.removed_at);
  w.field("removed_by_failed_import", e.removed_by_failed_import);
  w.field_or_null("loader", e.loader);
  w.field("time_ns", e.time_ns);
  w.field_or_null("test", e.test);
  // "at_boundary" when any of what the entry tells (its arrival, its removal) was seen
  // only at the next import boundary, so its location is where that import ran.
  w.field("precision", e.precise && e.removal_precise ? "exact" : "at_boundary");
  w.key("during_import");
  if (e.during_import.empty()) {
    w.null();
  } else {
    w.begin_object();
    w.field("module", e.during_import);
    write_location_json(w, "importer", e.during_importer);
    w.end_object();
  }
  w.key("reloads");
  w.begin_array();
  for (const auto& l : e.reloads) write_location_json(w, l);
  w.end_array();
  w.object_array("class_changes", e.class_changes, [&](const WhyEntry::ClassChange& cc) {
    w.field("type", cc.object.type);
    w.field("is_proxy", cc.object.is_proxy());
    write_location_json(w, "where", cc.where);
  });
}

void write_lazy_json(JsonWriter& w, const WhyLazy& l) {
  w.field("module", l.declared.module);
  w.field("name", l.declared.name);
  w.field("target", l.declared.target);
  write_location_json(w, "declared_at", l.declared.declared_at);
  w.field_or_null("declared_test", l.declared.test.str());
  w.field("outcome", l.outcome == WhyLazy::Outcome::Resolved ? "resolved"
                     : l.outcome == WhyLazy::Outcome::Failed ? "failed" : "never_used");
  write_location_json(w, "used_at", l.used_at);
  w.field_or_null("test", l.used_test);
  w.field_or_null("object", model::object_token(l.object));
  w.field_or_null("error", l.error);
  w.field_or_null("failed_import", l.failed_import);
  w.field_or_null("failed_lookup", l.failed_lookup);
  w.field("process", l.process);
}

void write_child_json(JsonWriter& w, const WhyChild& c) {
  const auto& b = c.binding;
  w.field("name", b.attribute);
  w.field("module", b.child_module());
  w.field_or_null("bound_on", model::object_token(b.bound_on));
  w.field("status", model::binding_status_name(b.status));
  w.field("process", c.process);
  w.field("bound_on_type", b.bound_on.type);
  w.field_or_null("child", model::object_token(b.child));
  w.field_or_null("attribute_value", model::object_token(b.attribute_value));
  w.field("time_ns", b.time_ns);
  w.field_or_null("test", b.test);
}

void write_proxy_access_json(JsonWriter& w, const WhyProxyAccess& pa) {
  const auto& a = pa.access;
  w.field("object", model::object_token(a.proxy));
  w.field("attribute", a.attribute);
  w.field("outcome", a.outcome());
  w.field_or_null("forwarded_to", forwarded_name(a.forwarded_to));
  write_location_json(w, "where", pa.where);
  w.field_or_null("test", a.test);
  w.field("process", pa.process);
  w.field("kind", model::proxy_access_kind_name(a.kind));
  w.field("type", a.proxy.type);
  w.field_or_null("result", model::object_token(a.result));
  w.field("time_ns", a.time_ns);
  w.field("from_import_system", a.from_import_system);
  w.field("repeats", a.repeats);
}

void write_import_json(JsonWriter& w, const WhyImport& wi) {
  w.field("process", wi.process);
  w.field("ok", wi.import.ok);
  w.field_or_null("error", wi.import.error_text());
  write_object_json(w, "object", wi.import.object);
  w.field_or_null("origin", wi.import.origin);
  write_location_json(w, "importer", wi.importer);
  write_location_json(w, "trigger", wi.trigger);
  write_native_caller_json(w, "native_caller", wi.import.native_caller);
  w.field("begin_ns", wi.import.begin_ns);
  w.field("end_ns", wi.import.end_ns);
  w.field_or_null("test", wi.import.test);
  w.field("reentry", wi.reentry);
}

}  // namespace

void why_json(const WhyReport& r, std::ostream& out, bool pretty) {
  JsonWriter w(out, pretty);
  w.begin_object();
  w.field("schema", "imptrace.why/1");
  w.field("module", r.module);
  w.string_array("warnings", input_warnings());
  w.object_array("ended_abnormally", r.cut_short, [&](const std::pair<int64_t, model::ProcessEnd>& c) {
    w.field("process", c.first);
    w.field("how", model::end_how_name(c.second.how));
    if (c.second.how == model::ProcessEnd::How::Signal) w.field("signal", c.second.signal); else w.null_field("signal");
  });
  w.object_array("entries", r.entries, [&](const WhyEntry& e) { write_entry_json(w, e); });
  w.object_array("lazy", r.lazy, [&](const WhyLazy& l) { write_lazy_json(w, l); });
  w.object_array("children", r.children, [&](const WhyChild& c) { write_child_json(w, c); });
  w.object_array("proxy_accesses", r.proxy_accesses, [&](const WhyProxyAccess& pa) { write_proxy_access_json(w, pa); });
  w.object_array("imports", r.imports, [&](const WhyImport& wi) { write_import_json(w, wi); });
  w.end_object();
  w.finish();
}

namespace {

// How an entry got under the key: the object, where it came from, what put it there.
void write_arrival_text(const WhyEntry& e, size_t n, std::ostream& out) {
  out << "  " << n << ". " << describe_object(e.object) << "\n";
  if (!e.origin.empty()) out << "     from " << e.origin << "\n";
  out << "     put there by " << (e.via_import ? "the import system" : "an assignment");
  if (!e.precise) out << ", seen at the next import,";
  if (!e.set_by.empty()) out << " at " << format_location(e.set_by);
  if (!e.triggered_at.empty()) out << ", triggered at " << format_location(e.triggered_at);
  out << "\n";
  if (!e.native_caller.empty())
    out << "     entered from native code: " << model::format_native_caller(e.native_caller) << "\n";
  if (!e.during_import.empty()) {
    out << "     during the import of " << e.during_import;
    if (!e.during_importer.empty()) out << " at " << format_location(e.during_importer);
    out << "\n";
  }
}

// What changed the object in place while it sat there: its class, a reload.
void write_in_place_changes_text(const WhyEntry& e, std::ostream& out) {
  for (const auto& cc : e.class_changes) {
    out << "     class changed to " << cc.object.type;
    if (!cc.where.empty()) out << " at " << format_location(cc.where);
    // Back to a plain module from another class: LazyLoader's load, run by this access.
    if (cc.object.is_plain_module() && &cc != &e.class_changes.front()) out << " (this access loaded it)";
    out << "\n";
  }
  for (const auto& at : e.reloads)
    out << "     reloaded (executed again in place)" << (at.empty() ? "" : " at " + format_location(at)) << "\n";
}

// Imports of the key made while this object was initialising under an outer import.
void write_reentries_text(const WhyReport& r, const WhyEntry& e, std::ostream& out) {
  std::vector<const WhyImport*> reentries;
  for (const auto& wi : r.imports)
    if (wi.reentry && wi.process == e.process && wi.import.object.present && wi.import.object.id == e.object.id)
      reentries.push_back(&wi);
  if (reentries.empty()) return;
  out << "     re-entered while initialising (lookups, not importers) at ";
  const size_t shown = std::min<size_t>(reentries.size(), 3);
  for (size_t k = 0; k < shown; ++k) out << (k ? ", " : "") << format_location(reentries[k]->importer);
  if (reentries.size() > shown) out << " and " << reentries.size() - shown << " more";
  out << "\n";
}

// How an entry left the key, or that it never did.
void write_departure_text(const WhyEntry& e, std::ostream& out) {
  if (e.replaced_by.present) {
    out << "     replaced by " << describe_object(e.replaced_by);
    if (!e.replaced_at.empty()) out << " at " << format_location(e.replaced_at);
    out << "\n";
  } else if (e.removed && e.removed_by_failed_import) {
    out << "     removed from sys.modules by the import system when its import"
        << (e.removed_at.empty() ? "" : " at " + format_location(e.removed_at)) << " failed (below)\n";
  } else if (e.removed) {
    out << "     removed from sys.modules";
    if (!e.removal_precise) out << ", seen at the next import,";
    if (!e.removed_at.empty()) out << " at " << format_location(e.removed_at);
    out << "\n";
  } else if (e.finalized) {
    out << "     there until the interpreter was finalised (Py_FinalizeEx)\n";
  } else {
    out << "     still there when the trace ends\n";
  }
}

// Every object that sat under the key, numbered per process, oldest first.
void write_entries_text(const WhyReport& r, const std::string& key, std::ostream& out) {
  std::set<int64_t> pids;
  for (const auto& e : r.entries) pids.insert(e.process);
  // The same object taken out and put back (mock.patch.dict(sys.modules) clears the dict
  // and restores it) is one object, several entries.
  std::set<std::tuple<int64_t, uint32_t, uint64_t>> distinct;
  for (const auto& e : r.entries) distinct.insert({e.process, e.lifetime, e.object.id});
  out << key << ": " << distinct.size() << " object" << (distinct.size() == 1 ? "" : "s")
      << " sat under this name";
  if (distinct.size() < r.entries.size()) out << " in " << r.entries.size() << " entries";
  if (pids.size() > 1) out << " across " << pids.size() << " processes";
  out << ", oldest first.\n";
  int64_t last_pid = -1;
  uint32_t last_lifetime = 0;
  size_t n = 0;
  for (const auto& e : r.entries) {
    if (e.process != last_pid) {
      out << "\nprocess " << e.process << ":\n";
      last_pid = e.process;
      last_lifetime = 0;
      n = 0;
    }
    // A host that initialised Python several times: each lifetime has its own sys.modules.
    if (e.lifetime && e.lifetime != last_lifetime) {
      out << "  interpreter lifetime " << e.lifetime << ":\n";
      last_lifetime = e.lifetime;
    }
    write_arrival_text(e, ++n, out);
    // Entries are numbered per process: the earlier ones of this process.
    const size_t at = static_cast<size_t>(&e - r.entries.data());
    for (size_t k = at + 1 - n; k < at; ++k) {
      if (r.entries[k].object.id != e.object.id || r.entries[k].lifetime != e.lifetime) continue;
      out << "     the same object as entry #" << k - (at + 1 - n) + 1 << ", put back\n";
      break;
    }
    write_in_place_changes_text(e, out);
    write_reentries_text(r, e, out);
    if (!e.test.empty()) out << "     during test " << e.test << "\n";
    write_departure_text(e, out);
  }
}

void write_failed_imports_text(const WhyReport& r, std::ostream& out) {
  bool any_failed = false;
  for (const auto& wi : r.imports) any_failed |= !wi.import.ok;
  if (!any_failed) return;
  out << "\nFailed imports of " << r.module << ":\n";
  for (const auto& wi : r.imports) {
    if (wi.import.ok) continue;
    out << "  process " << wi.process;
    if (wi.lifetime) out << ", interpreter lifetime " << wi.lifetime;
    out << ": " << wi.import.error_text();
    if (!wi.importer.empty()) out << "\n     imported at " << format_location(wi.importer);
    if (!wi.trigger.empty()) out << ", triggered at " << format_location(wi.trigger);
    out << "\n";
    if (!wi.import.native_caller.empty())
      out << "     entered from native code: " << model::format_native_caller(wi.import.native_caller) << "\n";
  }
}

// One lazy binding: where it was declared, and where its first use resolved or failed.
void write_lazy_text(const WhyLazy& l, std::ostream& out) {
  out << "  `" << l.declared.name << "` in " << l.declared.module << " -> " << l.declared.target
      << "  [process " << l.process << "]\n";
  out << "     declared";
  if (!l.declared.declared_at.empty()) out << " at " << format_location(l.declared.declared_at);
  if (!l.declared.test.empty()) out << " during test " << l.declared.test;
  out << "\n";
  if (l.outcome == WhyLazy::Outcome::NeverUsed) {
    out << "     never used: nothing was imported for it\n";
    return;
  }
  out << "     first used";
  if (!l.used_at.empty()) out << " at " << format_location(l.used_at);
  if (!l.used_test.empty()) out << " during test " << l.used_test;
  out << "\n";
  if (l.outcome == WhyLazy::Outcome::Resolved)
    out << "     resolved there to " << describe_object(l.object) << "\n";
  else if (!l.failed_lookup.empty())
    out << "     FAILED there: " << l.error << " (the binding stayed lazy)\n";
  else
    out << "     FAILED there: importing " << l.failed_import << " raised " << l.error << "\n";
}

void write_children_text(const WhyReport& r, std::ostream& out) {
  if (r.children.empty()) return;
  out << "\nChildren bound on " << r.module << ":\n";
  for (const auto& c : r.children) {
    const auto& b = c.binding;
    out << "  " << b.attribute << " (" << b.child_module() << ") bound on "
        << describe_object(b.bound_on) << ": " << model::binding_status_name(b.status);
    if (b.status == model::BindingStatus::Mismatch && b.attribute_value.present)
      out << " (attribute holds " << describe_object(b.attribute_value) << ")";
    out << "  [process " << c.process << "]\n";
  }
}

void write_proxy_accesses_text(const WhyReport& r, std::ostream& out) {
  if (r.proxy_accesses.empty()) return;
  // A module's own __getattr__ (PEP 562: numpy's, scipy's, lazy_loader.attach's) makes
  // no proxy of the module: the heading names what the lookups went through.
  size_t module_getattr = 0;
  for (const auto& pa : r.proxy_accesses) module_getattr += pa.access.kind == model::ProxyAccessKind::ModuleGetattr;
  if (module_getattr == r.proxy_accesses.size())
    out << "\nAttribute lookups through the module __getattr__ (PEP 562) for " << r.module << ":\n";
  else if (module_getattr)
    out << "\nAttribute accesses through proxies and module __getattr__ (PEP 562) for " << r.module << ":\n";
  else
    out << "\nAttribute accesses through proxies for " << r.module << ":\n";
  for (const auto& pa : r.proxy_accesses) {
    const auto& a = pa.access;
    out << "  " << (a.kind == model::ProxyAccessKind::Setattr ? "set ." : ".") << a.attribute
        << " on " << describe_object(a.proxy);
    if (!pa.where.empty()) out << "\n     at " << format_location(pa.where);
    if (!a.test.empty()) out << "\n     during test " << a.test;
    out << "\n     -> " << a.outcome();
    if (a.forwarded_to.present) out << " (forwarded to " << forwarded_name(a.forwarded_to) << ")";
    if (a.repeats) out << "\n     and " << a.repeats << " more time" << (a.repeats == 1 ? "" : "s") << " the same way";
    out << "\n";
  }
}

}  // namespace

void why_text(const WhyReport& r, std::ostream& out) {
  const std::string key = "sys.modules['" + r.module + "']";
  if (r.entries.empty() && r.children.empty() && r.proxy_accesses.empty() && r.imports.empty() && r.lazy.empty()) {
    out << "Nothing recorded about " << key << ": no import, no change, no binding, no "
        << "proxy access, no lazy import.\n";
    return;
  }
  write_entries_text(r, key, out);
  write_failed_imports_text(r, out);
  if (!r.lazy.empty()) {
    // PEP 810: the error comes at first use, far from the statement; both places.
    out << "\nLazy imports of " << r.module << " (PEP 810), declared first, used later:\n";
    for (const auto& l : r.lazy) write_lazy_text(l, out);
  }
  write_children_text(r, out);
  write_proxy_accesses_text(r, out);
  for (const auto& [pid, end] : r.cut_short)
    out << "\nProcess " << pid << " ended abnormally, " << model::end_text(end)
        << ": its story stops there.\n";
}

int run_why(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"--format"}, {"--pretty", "--redact"});
  if (a.positional.size() < 2) throw UsageError("why needs PATH... MODULE");
  std::string format = a.get("--format", "text");
  if (format != "text" && format != "json")
    throw UsageError("unknown why format '" + format + "' (text or json)");
  std::string module = a.positional.back();
  if (module.empty() || module.front() == '.' || module.back() == '.' || module.find("..") != std::string::npos)
    throw UsageError("why needs a module name such as torch or torch.nn, not '" + module + "'");
  a.positional.pop_back();
  const auto& procs = load_for_command(a.positional);
  WhyReport r = build_why(procs, module);
  std::ostringstream buffer;  // --redact: the whole output, redacted before it is written
  bool redact = a.has("--redact");
  std::ostream& out = redact ? buffer : std::cout;
  if (format == "json") why_json(r, out, a.has("--pretty"));
  else why_text(r, out);
  if (redact) write_redacted(buffer.str(), {&procs}, std::cout);
  return 0;
}

}  // namespace imptrace
