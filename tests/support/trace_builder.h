// Builds imptrace trace files in memory with proto/wire.h, for tests: every add_* call
// appends one whole record (after any StringDef records its strings need), exactly as the
// tracer frames them, so tests can cut the result at record boundaries or anywhere else.
//
//   imptrace::testing::TraceBuilder b;            // header written by default
//   b.add_sys_path({"/usr/lib/python3/dist-packages", "/site"});
//   auto im = imptrace::testing::ImportSpec::make(0, "json", 100, 2000);
//   im.object = imptrace::testing::Obj::module(0x10, "json", "/usr/lib/python3.11/json/__init__.py");
//   b.add_import(im);
//   model::Process p; std::string why;
//   imptrace::reader::parse_trace(b.data(), b.size(), p, why);
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "records.h"
#include "wire.h"

namespace imptrace {
namespace testing {

namespace F = imptrace::fields;

struct Obj {
  uint64_t id = 0;
  std::string type = "module";
  uint32_t flags = F::ObjectFlags::plain_module;
  std::string name;
  std::string file;

  static Obj module(uint64_t id, const std::string& name, const std::string& file = "") {
    Obj o;
    o.id = id;
    o.name = name;
    o.file = file;
    return o;
  }
  // A non-module stand-in, e.g. a lazy class instance under a sys.modules key.
  static Obj proxy(uint64_t id, const std::string& type, const std::string& name = "") {
    Obj o;
    o.id = id;
    o.type = type;
    o.flags = F::ObjectFlags::proxy;
    o.name = name;
    return o;
  }
};

struct Loc {
  std::string file;
  uint32_t line = 0;
  std::string function;
};

struct HeaderSpec {
  uint32_t schema_major = F::kSchemaMajor;
  uint32_t schema_minor = F::kSchemaMinor;
  std::string tracer_version = "0.1.0";
  int64_t pid = 4242;
  int64_t ppid = 1;
  std::vector<std::string> argv{"python3", "app.py"};
  std::string executable = "/usr/bin/python3.11";
  std::string python_version = "3.11.2 (main) [GCC 12.2.0]";
  std::string python_build = "static";
  std::string platform = "Linux 6.1";
  std::string machine = "x86_64";
  std::string cwd = "/work/app";
  int64_t start_time_unix_ns = 1700000000000000000;
  std::vector<std::pair<std::string, std::string>> env{{"PYTHONPATH", "/site"}};
  int64_t forked_from_pid = 0;
  uint64_t start_monotonic_ns = 5000000000ull;
};

struct ImportSpec {
  uint64_t index = 0;
  uint64_t parent = 0;  // index+1 of the enclosing import, 0 none
  uint64_t thread = 1;
  uint64_t begin_ns = 0;
  uint64_t duration_ns = 0;
  std::string name;
  bool ok = true;
  std::string error_type, error_message;
  std::optional<Obj> object;
  std::string spec_name, origin, loader, file, test;
  std::vector<std::string> search_locations;
  bool packed_search_locations = true;
  std::optional<Loc> importer;
  std::optional<Loc> trigger;

  static ImportSpec make(uint64_t index, const std::string& name, uint64_t begin_ns,
                         uint64_t duration_ns, uint64_t parent = 0) {
    ImportSpec s;
    s.index = index;
    s.name = name;
    s.begin_ns = begin_ns;
    s.duration_ns = duration_ns;
    s.parent = parent;
    return s;
  }
  // An import that bound `object`, made at `importer` (its first frame outside importlib).
  static ImportSpec bound(uint64_t index, const std::string& name, uint64_t begin_ns, uint64_t duration_ns,
                          const Obj& object, const Loc& importer, uint64_t parent = 0) {
    ImportSpec s = make(index, name, begin_ns, duration_ns, parent);
    s.object = object;
    s.importer = importer;
    return s;
  }
};

struct ChangeSpec {
  std::string key;
  uint32_t op = F::ModulesChange::SET;
  std::optional<Obj> old_object, new_object;
  std::vector<Loc> stack;
  uint64_t time_ns = 0, thread = 1, during_import = 0;
  std::string test;
  uint32_t precision = F::ModulesChange::EXACT;
  bool by_import_system = false;
};

struct BindingSpec {
  uint64_t import_index = 0;
  std::string parent, attribute;
  std::optional<Obj> bound_on, child, attribute_value;
  uint32_t status = F::Binding::BOUND;
  uint64_t time_ns = 0;
  std::string test;
};

struct AccessSpec {
  std::optional<Obj> proxy;
  std::string attribute;
  uint32_t kind = F::ProxyAccess::GETATTR;
  bool ok = true;
  std::optional<Obj> result, forwarded_to;
  std::string error_type, error_message, test;
  std::vector<Loc> stack;
  uint64_t time_ns = 0, thread = 1, during_import = 0;
  bool from_import_system = false;
  uint64_t serial = 0;  // non-zero: ProxyAccessSummary records may name it
};

class TraceBuilder {
 public:
  // Writes the header record unless `with_header` is false.
  explicit TraceBuilder(bool with_header = true, const HeaderSpec& h = HeaderSpec()) {
    if (with_header) add_header(h);
  }

  const uint8_t* data() const { return out_.p; }
  size_t size() const { return out_.n; }
  std::vector<uint8_t> bytes() const { return std::vector<uint8_t>(out_.p, out_.p + out_.n); }
  // Offsets where a whole record ends (the valid cut points), in order.
  const std::vector<size_t>& record_ends() const { return ends_; }

  bool write_file(const std::string& path) const {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f) return false;
    bool ok = out_.n == 0 || fwrite(out_.p, 1, out_.n, f) == out_.n;  // fwrite(NULL, ..) is UB even for 0 bytes
    return fclose(f) == 0 && ok;
  }

  void add_header(const HeaderSpec& h) {
    add_record(F::Record::header, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::Header::schema_major, h.schema_major);
      wire::put_uint(r, F::Header::schema_minor, h.schema_minor);
      wire::put_string(r, F::Header::tracer_version, h.tracer_version.c_str());
      wire::put_sint64_as_int64(r, F::Header::pid, h.pid);
      wire::put_sint64_as_int64(r, F::Header::ppid, h.ppid);
      for (const auto& a : h.argv) wire::put_bytes(r, F::Header::argv, a.data(), a.size());
      wire::put_string(r, F::Header::executable, h.executable.c_str());
      wire::put_string(r, F::Header::python_version, h.python_version.c_str());
      wire::put_string(r, F::Header::python_build, h.python_build.c_str());
      wire::put_string(r, F::Header::platform, h.platform.c_str());
      wire::put_string(r, F::Header::machine, h.machine.c_str());
      wire::put_string(r, F::Header::cwd, h.cwd.c_str());
      wire::put_sint64_as_int64(r, F::Header::start_time_unix_ns, h.start_time_unix_ns);
      for (const auto& kv : h.env) {
        auto e = wire::begin_message(r, F::Header::env);
        wire::put_string(r, F::EnvVar::name, kv.first.c_str());
        wire::put_string(r, F::EnvVar::value, kv.second.c_str());
        wire::end_message(r, e);
      }
      wire::put_sint64_as_int64(r, F::Header::forked_from_pid, h.forked_from_pid);
      wire::put_uint(r, F::Header::start_monotonic_ns, h.start_monotonic_ns);
    });
  }

  // Interns `s`: emits a StringDef record the first time, returns its id (0 for "").
  uint32_t add_string(const std::string& s) {
    if (s.empty()) return 0;
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    uint32_t id = next_id_++;
    ids_[s] = id;
    add_record(F::Record::string_def, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::StringDef::id, id);
      wire::put_bytes(r, F::StringDef::value, s.data(), s.size());
    });
    return id;
  }

  void add_import(const ImportSpec& s) {
    // Strings first: their StringDef records must precede the record that uses them.
    uint32_t name = add_string(s.name), et = add_string(s.error_type),
             em = add_string(s.error_message), sn = add_string(s.spec_name),
             origin = add_string(s.origin), loader = add_string(s.loader),
             file = add_string(s.file), test = add_string(s.test);
    std::vector<uint32_t> locs;
    for (const auto& l : s.search_locations) locs.push_back(add_string(l));
    if (s.object) intern(*s.object);
    if (s.importer) intern(*s.importer);
    if (s.trigger) intern(*s.trigger);

    add_record(F::Record::import, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::Import::index, s.index);
      wire::put_uint(r, F::Import::parent, s.parent);
      wire::put_uint(r, F::Import::thread, s.thread);
      wire::put_uint(r, F::Import::begin_ns, s.begin_ns);
      wire::put_uint(r, F::Import::duration_ns, s.duration_ns);
      wire::put_uint(r, F::Import::name, name);
      wire::put_bool(r, F::Import::ok, s.ok);
      wire::put_uint(r, F::Import::error_type, et);
      wire::put_uint(r, F::Import::error_message, em);
      if (s.object) put_object(r, F::Import::object, *s.object);
      wire::put_uint(r, F::Import::spec_name, sn);
      wire::put_uint(r, F::Import::origin, origin);
      wire::put_uint(r, F::Import::loader, loader);
      if (!locs.empty()) {
        if (s.packed_search_locations) {
          wire::ByteBuf packed;
          for (uint32_t id : locs) wire::put_varint(packed, id);
          wire::put_bytes(r, F::Import::search_locations, packed.p, packed.n);
        } else {
          for (uint32_t id : locs) {
            wire::put_tag(r, F::Import::search_locations, wire::VARINT);
            wire::put_varint(r, id);
          }
        }
      }
      wire::put_uint(r, F::Import::file, file);
      if (s.importer) put_location(r, F::Import::importer, *s.importer);
      if (s.trigger) put_location(r, F::Import::trigger, *s.trigger);
      wire::put_uint(r, F::Import::test, test);
    });
  }

  void add_modules_change(const ChangeSpec& s) {
    uint32_t key = add_string(s.key), test = add_string(s.test);
    if (s.old_object) intern(*s.old_object);
    if (s.new_object) intern(*s.new_object);
    for (const auto& l : s.stack) intern(l);
    add_record(F::Record::modules_change, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::ModulesChange::key, key);
      wire::put_uint(r, F::ModulesChange::op, s.op);
      if (s.old_object) put_object(r, F::ModulesChange::old_, *s.old_object);
      if (s.new_object) put_object(r, F::ModulesChange::new_, *s.new_object);
      for (const auto& l : s.stack) put_location(r, F::ModulesChange::stack, l);
      wire::put_uint(r, F::ModulesChange::time_ns, s.time_ns);
      wire::put_uint(r, F::ModulesChange::thread, s.thread);
      wire::put_uint(r, F::ModulesChange::test, test);
      wire::put_uint(r, F::ModulesChange::precision, s.precision);
      wire::put_uint(r, F::ModulesChange::during_import, s.during_import);
      wire::put_bool(r, F::ModulesChange::by_import_system, s.by_import_system);
    });
  }

  void add_binding(const BindingSpec& s) {
    uint32_t parent = add_string(s.parent), attr = add_string(s.attribute),
             test = add_string(s.test);
    for (const auto* o : {&s.bound_on, &s.child, &s.attribute_value})
      if (*o) intern(**o);
    add_record(F::Record::binding, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::Binding::import_index, s.import_index);
      wire::put_uint(r, F::Binding::parent, parent);
      wire::put_uint(r, F::Binding::attribute, attr);
      if (s.bound_on) put_object(r, F::Binding::bound_on, *s.bound_on);
      if (s.child) put_object(r, F::Binding::child, *s.child);
      wire::put_uint(r, F::Binding::status, s.status);
      wire::put_uint(r, F::Binding::time_ns, s.time_ns);
      wire::put_uint(r, F::Binding::test, test);
      if (s.attribute_value) put_object(r, F::Binding::attribute_value, *s.attribute_value);
    });
  }

  void add_proxy_access(const AccessSpec& s) {
    uint32_t attr = add_string(s.attribute), et = add_string(s.error_type),
             em = add_string(s.error_message), test = add_string(s.test);
    for (const auto* o : {&s.proxy, &s.result, &s.forwarded_to})
      if (*o) intern(**o);
    for (const auto& l : s.stack) intern(l);
    add_record(F::Record::proxy_access, [&](wire::ByteBuf& r) {
      if (s.proxy) put_object(r, F::ProxyAccess::proxy, *s.proxy);
      wire::put_uint(r, F::ProxyAccess::attribute, attr);
      wire::put_uint(r, F::ProxyAccess::kind, s.kind);
      wire::put_bool(r, F::ProxyAccess::ok, s.ok);
      if (s.result) put_object(r, F::ProxyAccess::result, *s.result);
      wire::put_uint(r, F::ProxyAccess::error_type, et);
      wire::put_uint(r, F::ProxyAccess::error_message, em);
      if (s.forwarded_to) put_object(r, F::ProxyAccess::forwarded_to, *s.forwarded_to);
      for (const auto& l : s.stack) put_location(r, F::ProxyAccess::stack, l);
      wire::put_uint(r, F::ProxyAccess::time_ns, s.time_ns);
      wire::put_uint(r, F::ProxyAccess::thread, s.thread);
      wire::put_uint(r, F::ProxyAccess::test, test);
      wire::put_uint(r, F::ProxyAccess::during_import, s.during_import);
      wire::put_bool(r, F::ProxyAccess::from_import_system, s.from_import_system);
      wire::put_uint(r, F::ProxyAccess::serial, s.serial);
    });
  }

  // `count` repeats of the access whose serial is `access`.
  void add_proxy_access_summary(uint64_t access, uint64_t count, uint64_t time_ns = 0) {
    add_record(F::Record::proxy_access_summary, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::ProxyAccessSummary::access, access);
      wire::put_uint(r, F::ProxyAccessSummary::count, count);
      wire::put_uint(r, F::ProxyAccessSummary::time_ns, time_ns);
    });
  }

  void add_sys_path(const std::vector<std::string>& entries, uint64_t time_ns = 0) {
    std::vector<uint32_t> ids;
    for (const auto& e : entries) ids.push_back(intern_allow_empty(e));
    add_record(F::Record::sys_path, [&](wire::ByteBuf& r) {
      wire::ByteBuf packed;
      for (uint32_t id : ids) wire::put_varint(packed, id);
      if (packed.n) wire::put_bytes(r, F::SysPath::entries, packed.p, packed.n);
      wire::put_uint(r, F::SysPath::time_ns, time_ns);
    });
  }

  // A class description; an empty Loc (no file) leaves that method out, as the tracer does
  // for a class that does not define it in Python.
  void add_proxy_class(const std::string& type, const Loc& getattr_at,
                       const std::string& defined_in, bool module_subclass = false,
                       const Loc& getattribute_at = Loc()) {
    uint32_t t = add_string(type), d = add_string(defined_in);
    if (!getattr_at.file.empty()) intern(getattr_at);
    if (!getattribute_at.file.empty()) intern(getattribute_at);
    add_record(F::Record::proxy_class, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::ProxyClass::type, t);
      if (!getattr_at.file.empty()) put_location(r, F::ProxyClass::getattr_at, getattr_at);
      if (!getattribute_at.file.empty()) put_location(r, F::ProxyClass::getattribute_at, getattribute_at);
      wire::put_bool(r, F::ProxyClass::module_subclass, module_subclass);
      wire::put_uint(r, F::ProxyClass::defined_in, d);
    });
  }

  void add_note(const std::string& text, uint64_t time_ns = 0) {
    add_record(F::Record::note, [&](wire::ByteBuf& r) {
      wire::put_string(r, F::Note::text, text.c_str());
      wire::put_uint(r, F::Note::time_ns, time_ns);
    });
  }

  // How the process ended (ProcessEnd); a trace without one was cut short.
  void add_process_end(uint32_t how, int64_t status = 0, int signal = 0, uint64_t time_ns = 0) {
    add_record(F::Record::process_end, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::ProcessEnd::how, how);
      wire::put_sint64_as_int64(r, F::ProcessEnd::status, status);
      wire::put_uint(r, F::ProcessEnd::signal, static_cast<uint64_t>(signal));
      wire::put_uint(r, F::ProcessEnd::time_ns, time_ns);
    });
  }

  // A lifetime of the interpreter (Py_Initialize* ... Py_FinalizeEx) began or ended.
  void add_lifetime_begin(uint32_t lifetime, uint64_t time_ns, uint32_t unseen = 0) {
    add_record(F::Record::lifetime_begin, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::LifetimeBegin::lifetime, lifetime);
      wire::put_uint(r, F::LifetimeBegin::time_ns, time_ns);
      wire::put_uint(r, F::LifetimeBegin::unseen, unseen);
    });
  }
  void add_lifetime_end(uint32_t lifetime, uint64_t time_ns, bool next_unseen = false) {
    add_record(F::Record::lifetime_end, [&](wire::ByteBuf& r) {
      wire::put_uint(r, F::LifetimeEnd::lifetime, lifetime);
      wire::put_uint(r, F::LifetimeEnd::time_ns, time_ns);
      wire::put_bool(r, F::LifetimeEnd::next_unseen, next_unseen);
    });
  }

  // Appends raw bytes as one Trace.record entry (for unknown-field and corruption tests).
  void add_raw_record(const std::vector<uint8_t>& record_body) {
    wire::ByteBuf r;
    r.put(record_body.data(), record_body.size());
    append_record(r);
  }
  // Appends raw bytes to the file, outside any record.
  void add_raw_bytes(const std::vector<uint8_t>& bytes) {
    out_.put(bytes.data(), bytes.size());
    ends_.push_back(out_.n);
  }

 private:
  // One Record of kind `field` (a Record oneof field) whose body `fill` writes into its
  // buffer, appended to the trace; strings it interns are defined before it.
  template <class Fill>
  void add_record(uint32_t field, Fill fill) {
    wire::ByteBuf r;
    auto m = wire::begin_message(r, field);
    fill(r);
    wire::end_message(r, m);
    append_record(r);
  }
  void append_record(const wire::ByteBuf& record) {
    wire::put_bytes(out_, F::Trace::record, record.p, record.n);
    ends_.push_back(out_.n);
  }
  // '' is a meaningful sys.path entry, so it gets a real id rather than 0.
  uint32_t intern_allow_empty(const std::string& s) {
    if (!s.empty()) return add_string(s);
    if (!empty_id_) {
      empty_id_ = next_id_++;
      add_record(F::Record::string_def, [&](wire::ByteBuf& r) {
        wire::put_uint(r, F::StringDef::id, empty_id_);
      });
    }
    return empty_id_;
  }
  void intern(const Obj& o) { add_string(o.type); add_string(o.name); add_string(o.file); }
  void intern(const Loc& l) { add_string(l.file); add_string(l.function); }
  void put_object(wire::ByteBuf& r, uint32_t field, const Obj& o) {
    auto m = wire::begin_message(r, field);
    wire::put_uint(r, F::ObjectRef::id, o.id);
    wire::put_uint(r, F::ObjectRef::type, add_string(o.type));
    wire::put_uint(r, F::ObjectRef::flags, o.flags);
    wire::put_uint(r, F::ObjectRef::name, add_string(o.name));
    wire::put_uint(r, F::ObjectRef::file, add_string(o.file));
    wire::end_message(r, m);
  }
  void put_location(wire::ByteBuf& r, uint32_t field, const Loc& l) {
    auto m = wire::begin_message(r, field);
    wire::put_uint(r, F::Location::file, add_string(l.file));
    wire::put_uint(r, F::Location::line, l.line);
    wire::put_uint(r, F::Location::function, add_string(l.function));
    wire::end_message(r, m);
  }

  wire::ByteBuf out_;
  std::vector<size_t> ends_;
  std::map<std::string, uint32_t> ids_;
  uint32_t next_id_ = 1;
  uint32_t empty_id_ = 0;
};

}  // namespace testing
}  // namespace imptrace
