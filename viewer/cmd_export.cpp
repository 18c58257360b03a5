// `imptrace export PATH... --format json|chrome`: every recorded event, machine-readable.
// json is the contract's imptrace.export/1 document (plus extra keys); chrome is the
// Trace Event format that Perfetto and chrome://tracing open.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "enum_names.h"

namespace imptrace {
namespace {

using model::Process;

// Index+1 of an import (as the wire has it) -> its position in `imports`, or null.
void write_import_ref(JsonWriter& w, const Process& p, uint64_t index_plus_one) {
  int64_t pos = index_plus_one ? p.import_position(index_plus_one - 1) : -1;
  if (pos < 0) w.null();
  else w.value(pos);
}

struct Relativizer {
  std::vector<std::string> roots;
  explicit Relativizer(const Process& p) : roots(p.sys_path_roots()) {}
  model::Location operator()(const model::Location& loc) const { return model::relative_location(loc, roots); }
};

void write_stack(JsonWriter& w, const Relativizer& rel, const std::vector<model::Location>& s) {
  w.begin_array();
  for (const auto& loc : s) write_location_json(w, rel(loc));
  w.end_array();
}

const char* op_name(model::ChangeOp op) {
  static constexpr const char* kNames[] = {"set", "delete", "clear"};
  return name_of<model::ChangeOp::Clear>(kNames, op, "set");
}

void write_import(JsonWriter& w, const Relativizer& rel, const model::Import& im) {
  w.field("name", im.name);
  w.field("begin_ns", im.begin_ns);
  w.field("end_ns", im.end_ns);
  w.field("thread", im.thread);
  w.key("parent_import");
  if (im.parent_pos < 0) w.null(); else w.value(im.parent_pos);
  w.field("ok", im.ok);
  w.field_or_null("error", im.error_text());
  write_object_json(w, "object", im.object);
  w.field_or_null("origin", im.origin);
  w.field_or_null("loader", im.loader);
  write_location_json(w, "importer", rel(im.importer));
  write_location_json(w, "trigger", rel(im.trigger));
  w.field("index", im.index);
  w.field("spec_name", im.spec_name);
  w.field_or_null("file", im.file);
  w.string_array("search_locations", im.search_locations);
  w.field_or_null("test", im.test);
  w.field("interpreter", im.interpreter);
  if (!im.native_stack.empty()) {
    // The first frame outside the interpreter, when native code entered the import.
    write_native_caller_json(w, "native_caller", im.native_caller);
  }
  if (!im.native_stack.empty())
    w.object_array("native_stack", im.native_stack, [&](const model::NativeFrame& nf) {
      w.field("object", nf.object);
      w.field("offset", nf.offset);
      w.field_or_null("symbol", nf.symbol);
    });
}

void write_change(JsonWriter& w, const Process& p, const Relativizer& rel, const model::ModulesChange& c) {
  w.field("key", c.key);
  w.field("op", op_name(c.op));
  write_object_json(w, "old", c.old_object);
  write_object_json(w, "new", c.new_object);
  w.field("by_import_system", c.by_import_system);
  w.key("stack");
  write_stack(w, rel, c.stack);
  w.field("time_ns", c.time_ns);
  w.field("thread", c.thread);
  w.field_or_null("test", c.test);
  w.field("precision", c.precision == model::Precision::Exact ? "exact" : "at_boundary");
  w.key("during_import");
  write_import_ref(w, p, c.during_import);
}

void write_binding(JsonWriter& w, const Process& p, const model::Binding& b) {
  w.field("name", b.attribute);
  w.field("parent", b.parent);
  w.field("module", b.child_module());
  w.field("status", model::binding_status_name(b.status));
  write_object_json(w, "bound_on", b.bound_on);
  write_object_json(w, "child", b.child);
  write_object_json(w, "attribute_value", b.attribute_value);
  w.key("import");
  write_import_ref(w, p, b.import_index + 1);
  w.field("time_ns", b.time_ns);
  w.field_or_null("test", b.test);
}

void write_access(JsonWriter& w, const Process& p, const Relativizer& rel, const model::ProxyAccess& a) {
  write_object_json(w, "proxy", a.proxy);
  w.field("attribute", a.attribute);
  w.field("kind", model::proxy_access_kind_name(a.kind));
  w.field("outcome", a.outcome());
  write_object_json(w, "result", a.result);
  write_object_json(w, "forwarded_to", a.forwarded_to);
  write_location_json(w, "where", a.stack.empty() ? model::Location{} : rel(a.stack[0]));
  w.key("stack");
  write_stack(w, rel, a.stack);
  w.field("time_ns", a.time_ns);
  w.field("thread", a.thread);
  w.field_or_null("test", a.test);
  w.key("during_import");
  write_import_ref(w, p, a.during_import);
  w.field("from_import_system", a.from_import_system);
  // Further accesses like this one, counted by the tracer instead of recorded.
  w.field("repeats", a.repeats);
}

void write_proxy_class(JsonWriter& w, const Relativizer& rel, const model::ProxyClass& c) {
  w.field("type", c.type);
  w.field("defined_in", c.defined_in);
  w.field("module_subclass", c.module_subclass);
  write_location_json(w, "getattr_at", rel(c.getattr_at));
  write_location_json(w, "getattribute_at", rel(c.getattribute_at));
  write_location_json(w, "setattr_at", rel(c.setattr_at));
}

void write_process(JsonWriter& w, const Process& p) {
  Relativizer rel(p);
  w.begin_object();
  w.field("pid", p.pid);
  w.field("ppid", p.ppid);
  w.string_array("argv", p.argv);
  w.field("executable", p.executable);
  w.field("python", p.python_version);
  w.field("python_build", p.python_build);
  w.field("platform", p.platform);
  w.field("machine", p.machine);
  w.field("cwd", p.cwd);
  w.field("start_time_unix_ns", p.start_time_unix_ns);
  w.key("forked_from_pid");
  if (p.forked_from_pid) w.value(p.forked_from_pid); else w.null();
  w.field("tracer_version", p.tracer_version);
  w.field("trace_schema", std::to_string(p.schema_major) + "." + std::to_string(p.schema_minor));
  w.field("trace_file", p.source_file);
  // Truncated: the file was cut inside a record. A process killed before it could write its
  // end record (SIGTERM, SIGKILL) has whole records and says so in "end".
  w.field("truncated", p.truncated);
  w.key("end");
  w.begin_object();
  w.field("how", model::end_how_name(p.end.how));
  bool has_status = p.end.how == model::ProcessEnd::How::Exit || p.end.how == model::ProcessEnd::How::OsExit;
  if (has_status) w.field("status", p.end.status); else w.null_field("status");
  if (p.end.how == model::ProcessEnd::How::Signal) w.field("signal", p.end.signal); else w.null_field("signal");
  w.end_object();
  w.key("env");
  w.begin_object();
  for (const auto& kv : p.env) w.field(kv.first, kv.second);
  w.end_object();
  w.string_array("sys_path", p.sys_paths.empty() ? std::vector<std::string>{} : p.sys_paths.back().entries);

  // The interpreter's lifetimes (Py_Initialize* ... Py_FinalizeEx); an import's "lifetime"
  // is its number (null when the trace marks none).
  w.object_array("lifetimes", p.lifetimes, [&](const model::Lifetime& l) {
    w.field("lifetime", l.number);
    w.field("begin_ns", l.begin_ns);
    if (l.ended) w.field("end_ns", l.end_ns); else w.null_field("end_ns");
    w.field("subinterpreters_from_c_unseen", l.subinterpreters_from_c_unseen);
    w.field("end_unseen", l.end_unseen);
    w.field("next_unseen", l.next_unseen);
  });
  w.object_array("imports", p.imports, [&](const model::Import& im) {
    write_import(w, rel, im);
    if (uint32_t l = p.lifetime_at(im.begin_ns)) w.field("lifetime", l); else w.null_field("lifetime");
  });
  w.object_array("modules_changes", p.modules_changes,
                 [&](const model::ModulesChange& c) { write_change(w, p, rel, c); });
  w.object_array("bindings", p.bindings, [&](const model::Binding& b) { write_binding(w, p, b); });
  w.object_array("proxy_accesses", p.proxy_accesses,
                 [&](const model::ProxyAccess& a) { write_access(w, p, rel, a); });
  w.object_array("proxy_classes", p.proxy_classes,
                 [&](const model::ProxyClass& c) { write_proxy_class(w, rel, c); });
  w.object_array("notes", p.notes, [&](const model::Note& n) {
    w.field("text", n.text);
    w.field("time_ns", n.time_ns);
  });
  w.field_or_null("not_traced", p.not_traced);
  w.string_array("warnings", p.warnings);
  w.end_object();
}

// Opens a Trace Event that marks an instant on one thread, up to its open "args" object (the
// caller writes the arguments and closes both).
void begin_instant_event(JsonWriter& w, const char* category, const std::string& name, double ts, int64_t pid,
                         uint64_t thread) {
  w.begin_object();
  w.field("ph", "i");
  w.field("s", "t");
  w.field("cat", category);
  w.field("name", name);
  w.field("ts", ts);
  w.field("pid", pid);
  w.field("tid", thread);
  w.key("args");
  w.begin_object();
}

}  // namespace

void export_json(const std::vector<model::Process>& procs, std::ostream& out, bool pretty) {
  JsonWriter w(out, pretty);
  w.begin_object();
  w.field("schema", "imptrace.export/1");
  w.string_array("warnings", input_warnings());
  w.key("processes");
  w.begin_array();
  for (const auto& p : procs) write_process(w, p);
  w.end_array();
  w.end_object();
  w.finish();
}

void export_chrome(const std::vector<model::Process>& procs, std::ostream& out, bool pretty) {
  // All processes share CLOCK_MONOTONIC, so one timeline shows a whole run; it starts at
  // the earliest process start so timestamps stay small.
  uint64_t base = UINT64_MAX;
  for (const auto& p : procs) base = std::min(base, p.start_monotonic_ns);
  if (procs.empty()) base = 0;
  JsonWriter w(out, pretty);
  w.begin_object();
  w.key("traceEvents");
  w.begin_array();
  for (const auto& p : procs) {
    Relativizer rel(p);
    uint64_t offset = p.start_monotonic_ns - base;
    auto us = [&](uint64_t rel_ns) { return static_cast<double>(offset + rel_ns) / 1000.0; };
    w.begin_object();
    w.field("ph", "M");
    w.field("name", "process_name");
    w.field("pid", p.pid);
    w.key("args");
    w.begin_object();
    w.field("name", join_argv(p.argv) + " (pid " + std::to_string(p.pid) + ")");
    w.end_object();
    w.end_object();

    for (const auto& im : p.imports) {
      w.begin_object();
      w.field("ph", "X");
      w.field("cat", im.ok ? "import" : "import,failed");
      w.field("name", im.ok ? im.name.str() : im.name + " (failed)");
      w.field("ts", us(im.begin_ns));
      w.field("dur", static_cast<double>(im.duration_ns()) / 1000.0);
      w.field("pid", p.pid);
      w.field("tid", im.thread);
      w.key("args");
      w.begin_object();
      w.field("module", im.name);
      w.field("ok", im.ok);
      if (!im.ok) w.field("error", im.error_text());
      if (!im.origin.empty()) w.field("origin", im.origin);
      if (!im.loader.empty()) w.field("loader", im.loader);
      if (!im.importer.empty()) w.field("importer", format_location(rel(im.importer)));
      if (im.object.present) w.field("object", describe_object(im.object));
      if (!im.test.empty()) w.field("test", im.test);
      w.end_object();
      w.end_object();
    }
    for (const auto& c : p.modules_changes) {
      std::string what = c.op == model::ChangeOp::Clear ? "sys.modules.clear()"
                         : c.op == model::ChangeOp::Delete ? "del sys.modules['" + c.key + "']"
                                                           : "sys.modules['" + c.key + "'] = " +
                                                                 describe_object(c.new_object);
      begin_instant_event(w, c.by_import_system ? "sys.modules,import" : "sys.modules,assignment", what,
                          us(c.time_ns), p.pid, c.thread);
      w.field("key", c.key);
      if (c.old_object.present) w.field("old", describe_object(c.old_object));
      if (c.new_object.present) w.field("new", describe_object(c.new_object));
      if (!c.stack.empty()) w.field("where", format_location(rel(c.stack[0])));
      if (!c.test.empty()) w.field("test", c.test);
      w.end_object();
      w.end_object();
    }
    for (const auto& a : p.proxy_accesses) {
      begin_instant_event(w, a.ok ? "proxy" : "proxy,failed",
                          std::string(model::proxy_access_kind_name(a.kind)) + " ." + a.attribute + (a.ok ? "" : " failed"),
                          us(a.time_ns), p.pid, a.thread);
      w.field("proxy", describe_object(a.proxy));
      w.field("outcome", a.outcome());
      if (a.forwarded_to.present) w.field("forwarded_to", describe_object(a.forwarded_to));
      if (!a.stack.empty()) w.field("where", format_location(rel(a.stack[0])));
      if (!a.test.empty()) w.field("test", a.test);
      if (a.repeats) w.field("repeats", a.repeats);
      w.end_object();
      w.end_object();
    }
  }
  w.end_array();
  w.field("displayTimeUnit", "ms");
  w.end_object();
  w.finish();
}

int run_export(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"--format"}, {"--pretty", "--redact"});
  if (a.positional.empty()) throw UsageError("export needs at least one PATH");
  std::string format = a.get("--format", "json");
  if (format != "json" && format != "chrome")
    throw UsageError("unknown export format '" + format + "' (json or chrome)");
  const auto& procs = load_for_command(a.positional);
  std::ostringstream buffer;  // --redact: the whole output, redacted before it is written
  bool redact = a.has("--redact");
  std::ostream& out = redact ? buffer : std::cout;
  if (format == "json") export_json(procs, out, a.has("--pretty"));
  else export_chrome(procs, out, a.has("--pretty"));
  if (redact) write_redacted(buffer.str(), {&procs}, std::cout);
  return 0;
}

}  // namespace imptrace
