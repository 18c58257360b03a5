// Trace decoding: framing (top-level Trace.record entries) and one decoder per message.
// Leniency policy: a field with an unexpected wire type is skipped like an unknown field;
// bytes that are not protobuf at all end the record (or the file) with a warning.
#include "trace_decoder.h"
#include "native_symbols.h"

#include "trace_reader.h"  // kMaxRecordBytes

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "prefault.h"
#include "proxy_decision.h"
#include "records.h"
#include "wire.h"

namespace imptrace {
namespace reader {
namespace {

namespace F = imptrace::fields;
using wire::WireType;
using Reader = wire::Reader;

enum class VarintResult { Ok, End, Truncated, Malformed };

VarintResult read_varint(ByteSource& src, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    int c = src.get();
    if (c < 0) return shift == 0 ? VarintResult::End : VarintResult::Truncated;
    if (shift == 63 && (c & 0x7e)) return VarintResult::Malformed;
    v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if (!(c & 0x80)) return VarintResult::Ok;
  }
  return VarintResult::Malformed;
}

// ---------------------------------------------------------------------------------------
// Field access helpers. Each returns true when it consumed the field; a false return
// (wrong wire type) makes the caller skip it.
bool get_u64(WireType wt, Reader& r, uint64_t& out) {
  if (wt != wire::VARINT) return false;
  out = r.varint();
  return true;
}
bool get_u32(WireType wt, Reader& r, uint32_t& out) {
  uint64_t v;
  if (!get_u64(wt, r, v)) return false;
  out = static_cast<uint32_t>(v);
  return true;
}
bool get_i64(WireType wt, Reader& r, int64_t& out) {
  uint64_t v;
  if (!get_u64(wt, r, v)) return false;
  out = static_cast<int64_t>(v);
  return true;
}
// An enum: a number past `last` (a newer tracer's value) reads as `unknown`.
template <typename E>
bool get_enum(WireType wt, Reader& r, E& out, E last, E unknown) {
  uint32_t v;
  if (!get_u32(wt, r, v)) return false;
  out = v <= static_cast<uint32_t>(last) ? static_cast<E>(v) : unknown;
  return true;
}
bool get_bool(WireType wt, Reader& r, bool& out) {
  uint64_t v;
  if (!get_u64(wt, r, v)) return false;
  out = v != 0;
  return true;
}
// A record that did not parse is dropped whole: no half-read element stays in the model.
template <typename T>
bool kept_if(bool ok, std::vector<T>& records) {
  if (!ok) records.pop_back();
  return ok;
}

bool get_string(WireType wt, Reader& r, std::string& out) {
  if (wt != wire::LEN) return false;
  Reader s = r.sub();
  if (r.ok) out.assign(reinterpret_cast<const char*>(s.p), static_cast<size_t>(s.end - s.p));
  return true;
}
// Repeated uint32: accepts both packed (LEN) and unpacked (VARINT) encodings.
template <class Fn>
bool get_repeated_u32(WireType wt, Reader& r, Fn&& each) {
  if (wt == wire::VARINT) {
    each(static_cast<uint32_t>(r.varint()));
    return true;
  }
  if (wt != wire::LEN) return false;
  Reader s = r.sub();
  while (r.ok && !s.done()) {
    uint64_t v = s.varint();
    if (!s.ok) { r.ok = false; break; }
    each(static_cast<uint32_t>(v));
  }
  return true;
}

// Calls on_field(field, wt, r) for each field; skips what it does not consume.
template <class Fn>
bool for_each_field(Reader& r, Fn&& on_field) {
  uint32_t field;
  WireType wt;
  while (r.tag(field, wt)) {
    if (!on_field(field, wt, r)) r.skip(wt);
    if (!r.ok) return false;
  }
  return r.ok;
}

// ---------------------------------------------------------------------------------------
class Decoder {
 public:
  explicit Decoder(model::Process& p) : proc_(p) {}

  size_t undefined_string_uses() const { return undefined_uses_; }

  // Returns false when the record's bytes are malformed.
  // `kind` receives the Record.kind field number seen (0 if none).
  bool record(Reader r, uint32_t& kind) {
    kind = 0;
    return for_each_field(r, [&](uint32_t field, WireType wt, Reader& rr) {
      if (wt != wire::LEN) return false;
      Reader body = rr.sub();
      if (!rr.ok) return true;
      kind = field;
      bool ok = true;
      switch (field) {
        case F::Record::header: ok = header(body); break;
        case F::Record::string_def: ok = string_def(body); break;
        case F::Record::import: ok = import_(body); break;
        case F::Record::modules_change: ok = modules_change(body); break;
        case F::Record::binding: ok = binding(body); break;
        case F::Record::proxy_access: ok = proxy_access(body); break;
        case F::Record::sys_path: ok = sys_path(body); break;
        case F::Record::proxy_class: ok = proxy_class(body); break;
        case F::Record::note: ok = note(body); break;
        case F::Record::process_end: ok = process_end(body); break;
        case F::Record::env_update: ok = env_update(body); break;
        case F::Record::lifetime_begin: ok = lifetime_begin(body); break;
        case F::Record::lifetime_end: ok = lifetime_end(body); break;
        case F::Record::proxy_access_summary: ok = proxy_access_summary(body); break;
        case F::Record::loaded_object: ok = loaded_object(body); break;
        case F::Record::lazy_import: ok = lazy_import(body); break;
        case F::Record::lazy_reified: ok = lazy_reified(body); break;
        default: kind = 0; break;  // a newer record kind: skip it
      }
      if (!ok) rr.ok = false;
      return true;
    });
  }

  // Only the first header fills the process; later ones (should not exist) are ignored.
  bool header_seen = false;

  // Adds the counted repeats to the accesses they repeat (by serial); a count whose access
  // is not in the file (a hand-cut or damaged trace) is reported, not invented.
  void apply_repeat_counts() {
    if (summaries_.empty()) return;
    std::unordered_map<uint64_t, size_t> by_serial;
    for (size_t i = 0; i < proc_.proxy_accesses.size(); ++i)
      if (proc_.proxy_accesses[i].serial) by_serial.emplace(proc_.proxy_accesses[i].serial, i);
    uint64_t lost = 0;
    for (const auto& s : summaries_) {
      auto it = by_serial.find(s.first);
      if (it == by_serial.end()) lost += s.second;
      else proc_.proxy_accesses[it->second].repeats += s.second;
    }
    if (lost)
      proc_.warnings.push_back(std::to_string(lost) + " counted proxy access repeat" + (lost == 1 ? "" : "s") +
                               " of accesses not in the trace (left out)");
  }

 private:
  const model::Str& str(uint32_t id) {
    static const model::Str kEmpty;
    if (!id) return kEmpty;
    if (id < dense_.size()) {
      if (dense_defined_[id]) return dense_[id];
    } else {
      auto it = sparse_.find(id);
      if (it != sparse_.end()) return it->second;
    }
    ++undefined_uses_;
    return kEmpty;
  }
  const model::Str* find_str(uint32_t id) const {
    if (id < dense_.size()) return dense_defined_[id] ? &dense_[id] : nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  // Ids are small and dense in real traces (the tracer numbers strings 1, 2, 3, ...): a
  // vector indexed by id. A hostile id far beyond the strings seen so far goes to a map,
  // so a single record cannot make us allocate for 4 billion slots.
  void define_str(uint32_t id, model::Str value) {
    if (id >= dense_.size() && id < 2 * defined_ + 4096) {
      size_t n = std::max<size_t>(id + 1, dense_.size() * 2);
      dense_.resize(n);
      dense_defined_.resize(n, false);
      // Earlier sparse definitions now inside the dense range move over.
      for (auto it = sparse_.begin(); it != sparse_.end();) {
        if (it->first < n) {
          dense_[it->first] = std::move(it->second);
          dense_defined_[it->first] = true;
          it = sparse_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (id < dense_.size()) {
      defined_ += !dense_defined_[id];
      dense_[id] = std::move(value);
      dense_defined_[id] = true;
    } else {
      defined_ += sparse_.count(id) == 0;
      sparse_[id] = std::move(value);
    }
  }
  bool get_str_id(WireType wt, Reader& r, model::Str& out) {
    uint32_t id;
    if (!get_u32(wt, r, id)) return false;
    out = str(id);
    return true;
  }

  bool header(Reader r) {
    model::Process h;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::Header::schema_major: return get_u32(wt, rr, h.schema_major);
        case F::Header::schema_minor: return get_u32(wt, rr, h.schema_minor);
        case F::Header::tracer_version: return get_string(wt, rr, h.tracer_version);
        case F::Header::pid: return get_i64(wt, rr, h.pid);
        case F::Header::ppid: return get_i64(wt, rr, h.ppid);
        case F::Header::argv: {
          std::string a;
          if (!get_string(wt, rr, a)) return false;
          h.argv.push_back(std::move(a));
          return true;
        }
        case F::Header::executable: return get_string(wt, rr, h.executable);
        case F::Header::python_version: return get_string(wt, rr, h.python_version);
        case F::Header::python_build: return get_string(wt, rr, h.python_build);
        case F::Header::platform: return get_string(wt, rr, h.platform);
        case F::Header::machine: return get_string(wt, rr, h.machine);
        case F::Header::cwd: return get_string(wt, rr, h.cwd);
        case F::Header::start_time_unix_ns: return get_i64(wt, rr, h.start_time_unix_ns);
        case F::Header::env: {
          if (wt != wire::LEN) return false;
          Reader e = rr.sub();
          std::pair<std::string, std::string> kv;
          if (!env_var(e, kv)) rr.ok = false;
          h.env.push_back(std::move(kv));
          return true;
        }
        case F::Header::forked_from_pid: return get_i64(wt, rr, h.forked_from_pid);
        case F::Header::start_monotonic_ns: return get_u64(wt, rr, h.start_monotonic_ns);
        default: return false;
      }
    });
    if (!ok) return false;
    if (header_seen) return true;
    header_seen = true;
    // Copy header fields only; keep source_file and records already in proc_.
    proc_.schema_major = h.schema_major;
    proc_.schema_minor = h.schema_minor;
    proc_.tracer_version = std::move(h.tracer_version);
    proc_.pid = h.pid;
    proc_.ppid = h.ppid;
    proc_.argv = std::move(h.argv);
    proc_.executable = std::move(h.executable);
    proc_.python_version = std::move(h.python_version);
    proc_.python_build = std::move(h.python_build);
    proc_.platform = std::move(h.platform);
    proc_.machine = std::move(h.machine);
    proc_.cwd = std::move(h.cwd);
    proc_.start_time_unix_ns = h.start_time_unix_ns;
    proc_.env = std::move(h.env);
    proc_.forked_from_pid = h.forked_from_pid;
    proc_.start_monotonic_ns = h.start_monotonic_ns;
    return true;
  }

  bool string_def(Reader r) {
    uint32_t id = 0, prefix = 0;
    std::string value;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::StringDef::id) return get_u32(wt, rr, id);
      if (f == F::StringDef::value) return get_string(wt, rr, value);
      if (f == F::StringDef::prefix) return get_u32(wt, rr, prefix);
      return false;
    });
    if (!ok) return false;
    if (prefix) {
      // The prefix must be defined already; a forward or unknown reference is corrupt data
      // (and must not be allowed to build strings without bound).
      const model::Str* pre = find_str(prefix);
      if (!pre || pre->size() + value.size() > (1u << 20)) return false;
      value.insert(0, pre->str());
    }
    // Prefix chains let a small file describe large strings; cap the total like a record.
    string_bytes_ += value.size();
    if (string_bytes_ > (size_t(256) << 20)) return false;
    if (id) define_str(id, model::Str(std::move(value)));
    return true;
  }

  bool location(WireType wt, Reader& r, model::Location& loc) {
    if (wt != wire::LEN) return false;
    Reader s = r.sub();
    if (!r.ok) return true;
    if (!for_each_field(s, [&](uint32_t f, WireType fwt, Reader& rr) {
          switch (f) {
            case F::Location::file: return get_str_id(fwt, rr, loc.file);
            case F::Location::line: return get_u32(fwt, rr, loc.line);
            case F::Location::function: return get_str_id(fwt, rr, loc.function);
            default: return false;
          }
        }))
      r.ok = false;
    return true;
  }
  bool stack_entry(WireType wt, Reader& r, std::vector<model::Location>& stack) {
    model::Location loc;
    if (!location(wt, r, loc)) return false;
    stack.push_back(std::move(loc));
    return true;
  }

  bool object(WireType wt, Reader& r, model::ObjectRef& o) {
    if (wt != wire::LEN) return false;
    Reader s = r.sub();
    if (!r.ok) return true;
    o.present = true;
    if (!for_each_field(s, [&](uint32_t f, WireType fwt, Reader& rr) {
          switch (f) {
            case F::ObjectRef::id: return get_u64(fwt, rr, o.id);
            case F::ObjectRef::type: return get_str_id(fwt, rr, o.type);
            case F::ObjectRef::flags: return get_u32(fwt, rr, o.flags);
            case F::ObjectRef::name: return get_str_id(fwt, rr, o.name);
            case F::ObjectRef::file: return get_str_id(fwt, rr, o.file);
            default: return false;
          }
        }))
      r.ok = false;
    // The tracer leaves a plain module's type out: the flag says "module".
    if (o.type.empty() && (o.flags & F::ObjectFlags::plain_module)) o.type = module_type_;
    return true;
  }

  bool native_frame(WireType wt, Reader& r, std::vector<model::NativeFrame>& out) {
    if (wt != wire::LEN) return false;
    Reader s = r.sub();
    if (!r.ok) return true;
    model::NativeFrame nf;
    if (!for_each_field(s, [&](uint32_t f, WireType fwt, Reader& rr) {
          switch (f) {
            case F::NativeFrame::object: return get_str_id(fwt, rr, nf.object);
            case F::NativeFrame::offset: return get_u64(fwt, rr, nf.offset);
            case F::NativeFrame::symbol: return get_str_id(fwt, rr, nf.symbol);
            default: return false;
          }
        }))
      r.ok = false;
    out.push_back(std::move(nf));
    return true;
  }

  bool import_(Reader r) {
    model::Import& im = proc_.imports.emplace_back();
    uint64_t duration = 0;
    bool spec_name_set = false, file_set = false;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::Import::index: return get_u64(wt, rr, im.index);
        case F::Import::parent: return get_u64(wt, rr, im.parent_index);
        case F::Import::thread: return get_u64(wt, rr, im.thread);
        case F::Import::begin_ns: return get_u64(wt, rr, im.begin_ns);
        case F::Import::duration_ns: return get_u64(wt, rr, duration);
        case F::Import::name: return get_str_id(wt, rr, im.name);
        case F::Import::ok: return get_bool(wt, rr, im.ok);
        case F::Import::error_type: return get_str_id(wt, rr, im.error_type);
        case F::Import::error_message: return get_str_id(wt, rr, im.error_message);
        case F::Import::object: return object(wt, rr, im.object);
        case F::Import::spec_name:
          spec_name_set = true;
          return get_str_id(wt, rr, im.spec_name);
        case F::Import::origin: return get_str_id(wt, rr, im.origin);
        case F::Import::loader: return get_str_id(wt, rr, im.loader);
        case F::Import::search_locations:
          return get_repeated_u32(wt, rr, [&](uint32_t id) {
            im.search_locations.push_back(str(id));
          });
        case F::Import::file:
          file_set = true;
          return get_str_id(wt, rr, im.file);
        case F::Import::importer: return location(wt, rr, im.importer);
        case F::Import::trigger: return location(wt, rr, im.trigger);
        case F::Import::test: return get_str_id(wt, rr, im.test);
        case F::Import::interpreter: return get_u32(wt, rr, im.interpreter);
        case F::Import::native_stack: return native_frame(wt, rr, im.native_stack);
        default: return false;
      }
    });
    if (!kept_if(ok, proc_.imports)) return false;
    // Saturate rather than wrap: a corrupt duration must not make end < begin.
    im.end_ns = duration > UINT64_MAX - im.begin_ns ? UINT64_MAX : im.begin_ns + duration;
    if (!spec_name_set || im.spec_name.empty()) im.spec_name = im.name;
    if (!file_set || im.file.empty()) im.file = im.origin;
    return true;
  }

  bool modules_change(Reader r) {
    model::ModulesChange& c = proc_.modules_changes.emplace_back();
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      uint32_t v;
      switch (f) {
        case F::ModulesChange::key: return get_str_id(wt, rr, c.key);
        case F::ModulesChange::op: return get_enum(wt, rr, c.op, model::ChangeOp::Clear, model::ChangeOp::Set);
        case F::ModulesChange::old_: return object(wt, rr, c.old_object);
        case F::ModulesChange::new_: return object(wt, rr, c.new_object);
        case F::ModulesChange::stack: return stack_entry(wt, rr, c.stack);
        case F::ModulesChange::time_ns: return get_u64(wt, rr, c.time_ns);
        case F::ModulesChange::thread: return get_u64(wt, rr, c.thread);
        case F::ModulesChange::test: return get_str_id(wt, rr, c.test);
        case F::ModulesChange::precision:
          if (!get_u32(wt, rr, v)) return false;
          c.precision = v == 1 ? model::Precision::AtBoundary : model::Precision::Exact;
          return true;
        case F::ModulesChange::during_import: return get_u64(wt, rr, c.during_import);
        case F::ModulesChange::by_import_system: return get_bool(wt, rr, c.by_import_system);
        default: return false;
      }
    });
    return kept_if(ok, proc_.modules_changes);
  }

  bool binding(Reader r) {
    model::Binding& b = proc_.bindings.emplace_back();
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::Binding::import_index: return get_u64(wt, rr, b.import_index);
        case F::Binding::parent: return get_str_id(wt, rr, b.parent);
        case F::Binding::attribute: return get_str_id(wt, rr, b.attribute);
        case F::Binding::bound_on: return object(wt, rr, b.bound_on);
        case F::Binding::child: return object(wt, rr, b.child);
        case F::Binding::status:
          // An unknown (newer) status is not "bound": report it as a mismatch.
          return get_enum(wt, rr, b.status, model::BindingStatus::OnProxy, model::BindingStatus::Mismatch);
        case F::Binding::time_ns: return get_u64(wt, rr, b.time_ns);
        case F::Binding::test: return get_str_id(wt, rr, b.test);
        case F::Binding::attribute_value: return object(wt, rr, b.attribute_value);
        default: return false;
      }
    });
    return kept_if(ok, proc_.bindings);
  }

  bool lazy_import(Reader r) {
    model::LazyDeclared d;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::LazyImport::module: return get_str_id(wt, rr, d.module);
        case F::LazyImport::name: return get_str_id(wt, rr, d.name);
        case F::LazyImport::target: return get_str_id(wt, rr, d.target);
        case F::LazyImport::declared_at: return location(wt, rr, d.declared_at);
        case F::LazyImport::test: return get_str_id(wt, rr, d.test);
        case F::LazyImport::time_ns: return get_u64(wt, rr, d.time_ns);
        case F::LazyImport::thread: return get_u64(wt, rr, d.thread);
        case F::LazyImport::during_import: return get_u64(wt, rr, d.during_import);
        default: return false;
      }
    });
    if (ok) proc_.lazy_declared.push_back(std::move(d));
    return ok;
  }

  bool lazy_reified(Reader r) {
    model::LazyResolved d;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::LazyReified::module: return get_str_id(wt, rr, d.module);
        case F::LazyReified::name: return get_str_id(wt, rr, d.name);
        case F::LazyReified::object: return object(wt, rr, d.object);
        case F::LazyReified::used_at: return location(wt, rr, d.used_at);
        case F::LazyReified::test: return get_str_id(wt, rr, d.test);
        case F::LazyReified::time_ns: return get_u64(wt, rr, d.time_ns);
        case F::LazyReified::thread: return get_u64(wt, rr, d.thread);
        case F::LazyReified::during_import: return get_u64(wt, rr, d.during_import);
        default: return false;
      }
    });
    if (ok) proc_.lazy_resolved.push_back(std::move(d));
    return ok;
  }

  bool proxy_access(Reader r) {
    model::ProxyAccess& a = proc_.proxy_accesses.emplace_back();
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::ProxyAccess::proxy: return object(wt, rr, a.proxy);
        case F::ProxyAccess::attribute: return get_str_id(wt, rr, a.attribute);
        case F::ProxyAccess::kind:
          return get_enum(wt, rr, a.kind, model::ProxyAccessKind::ModuleGetattr, model::ProxyAccessKind::Getattr);
        case F::ProxyAccess::ok: return get_bool(wt, rr, a.ok);
        case F::ProxyAccess::result: return object(wt, rr, a.result);
        case F::ProxyAccess::error_type: return get_str_id(wt, rr, a.error_type);
        case F::ProxyAccess::error_message: return get_str_id(wt, rr, a.error_message);
        case F::ProxyAccess::forwarded_to: return object(wt, rr, a.forwarded_to);
        case F::ProxyAccess::stack: return stack_entry(wt, rr, a.stack);
        case F::ProxyAccess::time_ns: return get_u64(wt, rr, a.time_ns);
        case F::ProxyAccess::thread: return get_u64(wt, rr, a.thread);
        case F::ProxyAccess::test: return get_str_id(wt, rr, a.test);
        case F::ProxyAccess::during_import: return get_u64(wt, rr, a.during_import);
        case F::ProxyAccess::from_import_system: return get_bool(wt, rr, a.from_import_system);
        case F::ProxyAccess::serial: return get_u64(wt, rr, a.serial);
        default: return false;
      }
    });
    return kept_if(ok, proc_.proxy_accesses);
  }

  bool proxy_access_summary(Reader r) {
    uint64_t access = 0, count = 0;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::ProxyAccessSummary::access) return get_u64(wt, rr, access);
      if (f == F::ProxyAccessSummary::count) return get_u64(wt, rr, count);
      return false;
    });
    if (!ok || !access) return false;
    summaries_.emplace_back(access, count);
    return true;
  }

  bool proxy_class(Reader r) {
    model::ProxyClass c;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      switch (f) {
        case F::ProxyClass::type: return get_str_id(wt, rr, c.type);
        case F::ProxyClass::getattr_at: return location(wt, rr, c.getattr_at);
        case F::ProxyClass::getattribute_at: return location(wt, rr, c.getattribute_at);
        case F::ProxyClass::setattr_at: return location(wt, rr, c.setattr_at);
        case F::ProxyClass::module_subclass: return get_bool(wt, rr, c.module_subclass);
        case F::ProxyClass::defined_in: return get_str_id(wt, rr, c.defined_in);
        default: return false;
      }
    });
    if (!ok) return false;
    proc_.proxy_classes.push_back(std::move(c));
    return true;
  }

  bool sys_path(Reader r) {
    model::SysPathSnapshot s;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::SysPath::entries)
        return get_repeated_u32(wt, rr, [&](uint32_t id) { s.entries.push_back(str(id)); });
      if (f == F::SysPath::time_ns) return get_u64(wt, rr, s.time_ns);
      return false;
    });
    if (!ok) return false;
    proc_.sys_paths.push_back(std::move(s));
    return true;
  }

  bool env_var(Reader& r, std::pair<std::string, std::string>& kv) {
    return for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::EnvVar::name) return get_string(wt, rr, kv.first);
      if (f == F::EnvVar::value) return get_string(wt, rr, kv.second);
      return false;
    });
  }

  // An allow-listed variable the process set after its header was written.
  bool env_update(Reader r) {
    std::pair<std::string, std::string> kv;
    if (!env_var(r, kv) || kv.first.empty()) return false;
    for (auto& e : proc_.env)
      if (e.first == kv.first) { e.second = std::move(kv.second); return true; }
    proc_.env.push_back(std::move(kv));
    return true;
  }

  bool loaded_object(Reader r) {
    model::LoadedObject o;
    std::string id;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::LoadedObject::path) return get_str_id(wt, rr, o.path);
      if (f == F::LoadedObject::build_id) return get_string(wt, rr, id);
      if (f == F::LoadedObject::main_program) return get_bool(wt, rr, o.main_program);
      return false;
    });
    if (!ok || o.path.empty()) return false;
    static const char kHex[] = "0123456789abcdef";
    for (unsigned char c : id) {
      o.build_id += kHex[c >> 4];
      o.build_id += kHex[c & 15];
    }
    proc_.loaded_objects.push_back(std::move(o));
    return true;
  }

  bool note(Reader r) {
    model::Note n;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::Note::text) return get_string(wt, rr, n.text);
      if (f == F::Note::time_ns) return get_u64(wt, rr, n.time_ns);
      if (f == F::Note::not_traced) return get_bool(wt, rr, n.not_traced);
      return false;
    });
    if (!ok) return false;
    if (n.not_traced) proc_.not_traced = n.text;
    proc_.notes.push_back(std::move(n));
    return true;
  }

  bool lifetime_begin(Reader r) {
    model::Lifetime l;
    uint64_t number = 0, unseen = 0;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::LifetimeBegin::lifetime) return get_u64(wt, rr, number);
      if (f == F::LifetimeBegin::time_ns) return get_u64(wt, rr, l.begin_ns);
      if (f == F::LifetimeBegin::unseen) return get_u64(wt, rr, unseen);
      return false;
    });
    if (!ok || !number || number > UINT32_MAX) return false;
    l.number = static_cast<uint32_t>(number);
    l.subinterpreters_from_c_unseen = unseen & F::LifetimeBegin::SUBINTERPRETERS_FROM_C;
    l.end_unseen = unseen & F::LifetimeBegin::LATER_LIFETIMES;
    proc_.lifetimes.push_back(l);
    return true;
  }

  // Ends the lifetime it names, when that is the last one begun.
  bool lifetime_end(Reader r) {
    uint64_t number = 0, time = 0, next_unseen = 0;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::LifetimeEnd::lifetime) return get_u64(wt, rr, number);
      if (f == F::LifetimeEnd::time_ns) return get_u64(wt, rr, time);
      if (f == F::LifetimeEnd::next_unseen) return get_u64(wt, rr, next_unseen);
      return false;
    });
    if (!ok) return false;
    if (proc_.lifetimes.empty() || proc_.lifetimes.back().number != number) return true;
    model::Lifetime& l = proc_.lifetimes.back();
    l.ended = true;
    l.end_ns = time;
    l.next_unseen = next_unseen != 0;
    return true;
  }

  // The last one counts: an exec that failed is followed by the process's real end.
  bool process_end(Reader r) {
    uint64_t how = 0, sig = 0;
    model::ProcessEnd e;
    bool ok = for_each_field(r, [&](uint32_t f, WireType wt, Reader& rr) {
      if (f == F::ProcessEnd::how) return get_u64(wt, rr, how);
      if (f == F::ProcessEnd::status) return get_i64(wt, rr, e.status);
      if (f == F::ProcessEnd::signal) return get_u64(wt, rr, sig);
      if (f == F::ProcessEnd::time_ns) return get_u64(wt, rr, e.time_ns);
      return false;
    });
    if (!ok) return false;
    using H = model::ProcessEnd::How;
    switch (how) {
      case F::ProcessEnd::EXIT: e.how = H::Exit; break;
      case F::ProcessEnd::OS_EXIT: e.how = H::OsExit; break;
      case F::ProcessEnd::SIGNAL: e.how = H::Signal; break;
      case F::ProcessEnd::EXEC: e.how = H::Exec; break;
      default: return false;  // a newer way of ending: not one this reader can name
    }
    e.signal = static_cast<int>(sig);
    proc_.end = e;
    return true;
  }

  model::Process& proc_;
  const model::Str module_type_{"module"};
  std::vector<model::Str> dense_;        // by id
  std::vector<bool> dense_defined_;
  std::unordered_map<uint32_t, model::Str> sparse_;
  size_t defined_ = 0;
  size_t undefined_uses_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> summaries_;  // (access serial, count), in file order
  size_t string_bytes_ = 0;
};

// Sorts imports into start order and links each to its parent's position.
void finish_imports(model::Process& p) {
  // Records come in end order; sort (index, position) pairs and move each Import once.
  {
    const size_t n = p.imports.size();
    std::vector<std::pair<uint64_t, size_t>> order(n);
    bool sorted = true;
    for (size_t i = 0; i < n; ++i) {
      order[i] = {p.imports[i].index, i};
      if (i && p.imports[i].index < p.imports[i - 1].index) sorted = false;
    }
    if (!sorted) {
      std::sort(order.begin(), order.end());  // pairs: equal indexes keep file order
      // Apply the permutation in place, cycle by cycle (no second vector of Imports):
      // position i receives the import now at order[i].second.
      for (size_t i = 0; i < n; ++i) {
        if (order[i].second == i || order[i].second == SIZE_MAX) continue;
        model::Import tmp = std::move(p.imports[i]);
        size_t j = i;
        for (;;) {
          size_t from = order[j].second;
          order[j].second = SIZE_MAX;
          if (from == i) {
            p.imports[j] = std::move(tmp);
            break;
          }
          p.imports[j] = std::move(p.imports[from]);
          j = from;
        }
      }
    }
  }
  // Position of the first import with a given index: a binary search over the indexes
  // alone (sorted now, and compact, unlike the records).
  std::vector<uint64_t> indexes(p.imports.size());
  for (size_t i = 0; i < p.imports.size(); ++i) indexes[i] = p.imports[i].index;
  auto position = [&](uint64_t index) -> int64_t {
    auto it = std::lower_bound(indexes.begin(), indexes.end(), index);
    return it != indexes.end() && *it == index ? it - indexes.begin() : -1;
  };
  // Fields the tracer leaves out when they repeat the import's own (see imptrace.proto).
  for (auto& im : p.imports)
    if (!im.thread) im.thread = static_cast<uint64_t>(p.pid);  // absent: the main thread
  for (auto& im : p.imports) {
    if (!im.object.present || !(im.object.flags & F::ObjectFlags::elided_name_file)) continue;
    im.object.flags &= ~F::ObjectFlags::elided_name_file;
    im.object.name = im.name;
    im.object.file = im.file;
  }
  // Where a module object came from (the last import that returned it), for bindings that
  // name their parent only by id: (object id, position) pairs, sorted when first needed.
  std::vector<std::pair<uint64_t, size_t>> import_of_object;
  bool import_of_object_built = false;
  auto import_with_object = [&](uint64_t id) -> const model::Import* {
    if (!import_of_object_built) {
      import_of_object_built = true;
      for (size_t i = 0; i < p.imports.size(); ++i)
        if (p.imports[i].ok && p.imports[i].object.present) import_of_object.emplace_back(p.imports[i].object.id, i);
      std::sort(import_of_object.begin(), import_of_object.end());
    }
    auto it = std::upper_bound(import_of_object.begin(), import_of_object.end(), std::make_pair(id, SIZE_MAX));
    if (it == import_of_object.begin() || (--it)->first != id) return nullptr;
    return &p.imports[it->second];
  };
  for (auto& b : p.bindings) {
    int64_t at = position(b.import_index);
    if (at < 0) continue;
    const model::Import& im = p.imports[at];
    size_t dot = im.name.rfind('.');
    if (b.parent.empty() && b.attribute.empty() && dot != std::string::npos) {
      b.parent = im.name.substr(0, dot);
      b.attribute = im.name.substr(dot + 1);
    }
    if (b.bound_on.present && (b.bound_on.flags & F::ObjectFlags::elided_name_file)) {
      b.bound_on.flags &= ~F::ObjectFlags::elided_name_file;
      b.bound_on.name = b.parent;
      if (const model::Import* src = import_with_object(b.bound_on.id)) b.bound_on.file = src->object.file;
    }
    if (!b.child.present && im.ok) b.child = im.object;
    if (!b.time_ns) b.time_ns = im.end_ns;
    if (b.test.empty()) b.test = im.test;
  }
  for (auto& im : p.imports) {
    im.parent_pos = -1;
    if (!im.parent_index) continue;
    int64_t at = position(im.parent_index - 1);
    // A parent must have started earlier; anything else is corrupt nesting, not a cycle.
    if (at >= 0 && p.imports[at].index < im.index) im.parent_pos = at;
  }
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// A first pass over the framing that only counts records by kind, so the record vectors
// are allocated once at their final size (no regrowth: fewer copies and page faults).
// Stops at the first irregularity; the main pass deals with those.
void reserve_records(ByteSource& src, model::Process& out) {
  size_t n[16] = {};
  for (;;) {
    uint64_t tag = 0, len = 0;
    if (read_varint(src, tag) != VarintResult::Ok || (tag & 7) != wire::LEN) break;
    if (read_varint(src, len) != VarintResult::Ok || len > src.remaining()) break;
    if ((tag >> 3) != F::Trace::record) {
      if (!src.skip(len)) break;
      continue;
    }
    if (len > kMaxRecordBytes) break;
    const uint8_t* body = src.take(static_cast<size_t>(len));
    if (!body) break;
    Reader r(body, static_cast<size_t>(len));
    uint32_t field;
    WireType wt;
    if (r.tag(field, wt) && field < 16) ++n[field];
  }
  out.imports.reserve(out.imports.size() + n[F::Record::import]);
  out.bindings.reserve(out.bindings.size() + n[F::Record::binding]);
  out.modules_changes.reserve(out.modules_changes.size() + n[F::Record::modules_change]);
  out.proxy_accesses.reserve(out.proxy_accesses.size() + n[F::Record::proxy_access]);
  prefault_capacity(out.imports);
  prefault_capacity(out.bindings);
  prefault_capacity(out.modules_changes);
  prefault_capacity(out.proxy_accesses);
}

// An unknown top-level scalar (a newer writer may add some): skipped; false when it is
// not whole.
bool skip_scalar(ByteSource& src, uint32_t wt) {
  uint64_t ignored;
  if (wt == wire::VARINT) return read_varint(src, ignored) == VarintResult::Ok;
  if (wt == wire::I64 || wt == wire::I32) {
    uint8_t tmp[8];
    return src.read(tmp, wt == wire::I64 ? 8 : 4);
  }
  return false;
}

// The first record must be a header of a schema this reader knows.
bool readable_first_record(uint32_t kind, const model::Process& out, std::string& why) {
  if (kind != F::Record::header) {
    why = "not an imptrace trace (first record is not a header)";
    return false;
  }
  if (out.schema_major > F::kSchemaMajor) {
    why = "trace schema " + std::to_string(out.schema_major) + "." +
          std::to_string(out.schema_minor) + " is newer than this imptrace reads (" +
          std::to_string(F::kSchemaMajor) + ".x); use a newer imptrace";
    return false;
  }
  return true;
}

}  // namespace

// The framing loop shared by every byte source.
bool decode_trace(ByteSource& src, model::Process& out, std::string& why) {
  reserve_records(src, out);
  if (!src.rewind()) { why = strerror(errno); return false; }
  Decoder dec(out);
  size_t records = 0, malformed = 0;
  std::vector<uint8_t> buf;
  auto stop = [&](const std::string& what) {
    out.warnings.push_back(what + "; read the first " + plural(records, "whole record"));
  };

  for (;;) {
    uint64_t tag = 0;
    VarintResult vr = read_varint(src, tag);
    if (vr == VarintResult::End) break;
    if (vr != VarintResult::Ok) {
      if (!dec.header_seen) { why = "not an imptrace trace (no header record)"; return false; }
      out.truncated = vr == VarintResult::Truncated;
      stop(out.truncated ? "truncated mid-record" : "corrupt data after the last whole record");
      break;
    }
    uint32_t field = static_cast<uint32_t>(tag >> 3);
    uint32_t wt = static_cast<uint32_t>(tag & 7);
    bool is_record = field == F::Trace::record && wt == wire::LEN;
    // The tracer's reserve (zeros) may precede the header in a file whose process died
    // before its first record was committed.
    bool is_reserve = field == F::Trace::unwritten && wt == wire::LEN;
    if (!dec.header_seen && !is_record && !is_reserve) {
      why = "not an imptrace trace (first record is not a header)";
      return false;
    }
    if (wt != wire::LEN) {
      if (!skip_scalar(src, wt)) { stop("corrupt data after the last whole record"); break; }
      continue;
    }
    uint64_t len = 0;
    vr = read_varint(src, len);
    if (vr != VarintResult::Ok || len > src.remaining()) {
      if (is_reserve && vr == VarintResult::Ok) break;  // reserve cut short: killed while growing the file
      if (!dec.header_seen) {
        why = vr == VarintResult::Malformed || len > kMaxRecordBytes
                  ? "not an imptrace trace (no header record)"
                  : "truncated inside the header record";
        return false;
      }
      out.truncated = true;
      stop("truncated mid-record");
      break;
    }
    if (is_reserve) {  // skipped without reading: it can be large
      if (!src.skip(len)) break;
      continue;
    }
    if (len > kMaxRecordBytes) {
      if (!dec.header_seen) { why = "not an imptrace trace (no header record)"; return false; }
      stop("record of " + std::to_string(len) + " bytes exceeds the 64 MiB limit (corrupt?)");
      break;
    }
    const uint8_t* body = src.take(static_cast<size_t>(len));
    if (!body) {
      buf.resize(static_cast<size_t>(len));
      if (!src.read(buf.data(), buf.size())) {
        if (!dec.header_seen) { why = "truncated inside the header record"; return false; }
        out.truncated = true;
        stop("truncated mid-record");
        break;
      }
      body = buf.data();
    }
    if (!is_record) continue;  // unknown top-level LEN field

    uint32_t kind = 0;
    bool ok = dec.record(Reader(body, static_cast<size_t>(len)), kind);
    if (!dec.header_seen) {
      why = ok ? "not an imptrace trace (first record is not a header)"
               : "not an imptrace trace (first record is malformed)";
      return false;
    }
    if (records == 0 && !readable_first_record(kind, out, why)) return false;
    if (!ok) ++malformed;
    ++records;
  }

  if (!dec.header_seen) {
    why = records == 0 && src.remaining() == 0 ? "empty file" : "not an imptrace trace";
    return false;
  }
  if (malformed)
    out.warnings.push_back("skipped " + plural(malformed, "malformed record") +
                           " (parts of them may be missing)");
  if (dec.undefined_string_uses())
    out.warnings.push_back(plural(dec.undefined_string_uses(), "reference") +
                           " to undefined strings (shown as empty)");
  dec.apply_repeat_counts();
  finish_imports(out);
  model::decide_proxies(out);  // after the elided object fields are filled in
  model::name_native_callers(out);
  return true;
}

}  // namespace reader
}  // namespace imptrace
