#include "record_encoder.h"

namespace imptrace {

using namespace fields;

void encode_modules_change(const ModulesChangeRecord& c) {
  auto r = TraceWriter::begin_record(Record::modules_change);
  auto& b = TraceWriter::buf();
  wire::put_uint(b, ModulesChange::key, c.key);
  wire::put_uint(b, ModulesChange::op, c.op);
  if (c.old_value) put_object(b, ModulesChange::old_, *c.old_value);
  if (c.new_value) put_object(b, ModulesChange::new_, *c.new_value);
  for (int i = 0; i < c.stack_depth; ++i) put_location(b, ModulesChange::stack, c.stack[i]);
  put_context(b, c.context, {ModulesChange::time_ns, ModulesChange::thread, ModulesChange::test, ModulesChange::during_import});
  wire::put_uint(b, ModulesChange::precision, c.precision);
  wire::put_bool(b, ModulesChange::by_import_system, c.by_import_system);
  TraceWriter::end_record(r);
}

}  // namespace imptrace

namespace imptrace {

void encode_binding(const BindingRecord& c) {
  auto r = TraceWriter::begin_record(fields::Record::binding);
  auto& b = TraceWriter::buf();
  wire::put_uint(b, fields::Binding::import_index, c.import_index);
  put_object(b, fields::Binding::bound_on, c.bound_on);
  if (c.child) put_object(b, fields::Binding::child, *c.child);
  wire::put_uint(b, fields::Binding::status, c.status);
  if (c.attribute_value) put_object(b, fields::Binding::attribute_value, *c.attribute_value);
  TraceWriter::end_record(r);
}

}  // namespace imptrace

namespace imptrace {

void encode_import(const ImportRecord& c) {
  auto r = TraceWriter::begin_record(Record::import);
  auto& b = TraceWriter::buf();
  wire::put_uint(b, Import::index, c.index);
  wire::put_uint(b, Import::parent, c.parent);
  wire::put_uint(b, Import::thread, c.thread);
  wire::put_uint(b, Import::begin_ns, c.begin_ns);
  wire::put_uint(b, Import::duration_ns, c.end_ns - c.begin_ns);
  wire::put_uint(b, Import::name, c.name);
  wire::put_bool(b, Import::ok, c.ok);
  wire::put_uint(b, Import::error_type, c.error_type);
  wire::put_uint(b, Import::error_message, c.error_message);
  if (c.ok) {
    // The module's file as the trace has it: its __file__, else its spec's origin.
    uint32_t file = c.object.file;
    if (c.spec_read) {
      const SpecFacts& s = c.spec;
      if (s.present) {
        if (s.name != c.name) wire::put_uint(b, Import::spec_name, s.name);
        wire::put_uint(b, Import::origin, s.origin);
        wire::put_uint(b, Import::loader, s.loader);
        for (int i = 0; i < s.search_location_count; ++i)
          wire::put_uint(b, Import::search_locations, s.search_locations[i]);
      }
      if (c.object.file != s.origin) wire::put_uint(b, Import::file, c.object.file);
      if (!file) file = s.origin;
    } else {
      file = 0;
    }
    // The object's own __name__ and __file__ are left out when they are the import's name
    // and file (the common case); readers fill them back in.
    ObjectDescription slim = c.object;
    if (slim.name == c.name && slim.file == file && slim.name) {
      slim.name = slim.file = 0;
      slim.flags |= ObjectFlags::elided_name_file;
    }
    put_object(b, Import::object, slim);
  }
  put_location(b, Import::importer, c.importer);
  put_location(b, Import::trigger, c.trigger);
  wire::put_uint(b, Import::test, c.test);
  wire::put_uint(b, Import::interpreter, c.interpreter);
  if (c.native_stack_bytes) b.put(c.native_stack, c.native_stack_bytes);
  TraceWriter::end_record(r);
}

size_t encode_native_frame(const NativeFrameValue& f, uint8_t* out) {
  // Tag (2 bytes), length (1: the body is at most 23 bytes) and three varint fields, so
  // kNativeFrameBytes always holds it.
  uint8_t* p = out;
  p += wire::encode_varint(p, (static_cast<uint64_t>(Import::native_stack) << 3) | wire::LEN);
  uint8_t* len = p++;
  uint8_t* body = p;
  auto field = [&p](uint32_t number, uint64_t v) {  // wire::put_uint's bytes: zero is left out
    if (!v) return;
    p += wire::encode_varint(p, (static_cast<uint64_t>(number) << 3) | wire::VARINT);
    p += wire::encode_varint(p, v);
  };
  field(NativeFrame::object, f.object);
  field(NativeFrame::offset, f.offset);
  field(NativeFrame::symbol, f.symbol);
  *len = static_cast<uint8_t>(p - body);
  return static_cast<size_t>(p - out);
}

}  // namespace imptrace

namespace imptrace {

void encode_loaded_object(uint32_t path, const uint8_t* id, size_t id_len, bool main_program) {
  auto r = TraceWriter::begin_record(fields::Record::loaded_object);
  auto& b = TraceWriter::buf();
  wire::put_uint(b, fields::LoadedObject::path, path);
  if (id_len) wire::put_bytes(b, fields::LoadedObject::build_id, id, id_len);
  wire::put_bool(b, fields::LoadedObject::main_program, main_program);
  TraceWriter::end_record(r);
}

void encode_not_traced(const char* why) {
  auto r = TraceWriter::begin_record(fields::Record::note);
  auto& b = TraceWriter::buf();
  wire::put_string(b, fields::Note::text, why);
  wire::put_uint(b, fields::Note::time_ns, TraceWriter::now_ns());
  wire::put_bool(b, fields::Note::not_traced, true);
  TraceWriter::end_record(r);
}

}  // namespace imptrace

namespace imptrace {

void encode_lazy_binding(const LazyBindingRecord& c) {
  using namespace fields;
  if (c.declared) {
    auto r = TraceWriter::begin_record(Record::lazy_import);
    auto& b = TraceWriter::buf();
    wire::put_uint(b, LazyImport::module, c.module);
    wire::put_uint(b, LazyImport::name, c.name);
    wire::put_uint(b, LazyImport::target, c.target);
    if (c.at) put_location(b, LazyImport::declared_at, *c.at);
    put_context(b, c.context, {LazyImport::time_ns, LazyImport::thread, LazyImport::test, LazyImport::during_import});
    TraceWriter::end_record(r);
    return;
  }
  auto r = TraceWriter::begin_record(Record::lazy_reified);
  auto& b = TraceWriter::buf();
  wire::put_uint(b, LazyReified::module, c.module);
  wire::put_uint(b, LazyReified::name, c.name);
  if (c.object) put_object(b, LazyReified::object, *c.object);
  if (c.at) put_location(b, LazyReified::used_at, *c.at);
  put_context(b, c.context, {LazyReified::time_ns, LazyReified::thread, LazyReified::test, LazyReified::during_import});
  TraceWriter::end_record(r);
}

}  // namespace imptrace
