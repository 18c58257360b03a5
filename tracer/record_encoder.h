// Records from plain values (record_values.h) into the trace writer's pending buffer.
// Nothing here reads a Python object: what a record says is decided by its caller, and
// this file only spells it in the .proto's vocabulary, so it can be tested against the
// viewer's reader without an interpreter.
#pragma once

#include <stdint.h>

#include "record_values.h"
#include "records.h"
#include "trace_writer.h"
#include "wire.h"

namespace imptrace {

// A Location message in `field`; nothing for an unknown place.
inline void put_location(wire::ByteBuf& b, uint32_t field, const CodeLocation& l) {
  if (!l.file && !l.function) return;
  auto m = wire::begin_message(b, field);
  wire::put_uint(b, fields::Location::file, l.file);
  wire::put_uint(b, fields::Location::line, l.line);
  wire::put_uint(b, fields::Location::function, l.function);
  wire::end_message(b, m);
}

// An ObjectRef message in `field`; nothing for no object (id 0).
inline void put_object(wire::ByteBuf& b, uint32_t field, const ObjectDescription& i) {
  if (!i.id) return;
  auto m = wire::begin_message(b, field);
  wire::put_uint(b, fields::ObjectRef::id, i.id);
  // A plain module's type is "module": the flag says it (readers fill the name in).
  if (!(i.flags & fields::ObjectFlags::plain_module)) wire::put_uint(b, fields::ObjectRef::type, i.type);
  wire::put_uint(b, fields::ObjectRef::flags, i.flags);
  wire::put_uint(b, fields::ObjectRef::name, i.name);
  wire::put_uint(b, fields::ObjectRef::file, i.file);
  wire::end_message(b, m);
}

// Where and when a record happened, on which thread, in which test.
struct RecordContext {
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  uint32_t test = 0;
  uint64_t during_import = 0;  // the import in progress (its index + 1), 0: none
};

// A record's context in the four fields its message numbers them with.
struct ContextFields {
  uint32_t time_ns, thread, test, during_import;
};
inline void put_context(wire::ByteBuf& b, const RecordContext& c, ContextFields f) {
  wire::put_uint(b, f.time_ns, c.time_ns);
  wire::put_uint(b, f.thread, c.thread);
  wire::put_uint(b, f.test, c.test);
  wire::put_uint(b, f.during_import, c.during_import);
}

// One change of sys.modules (imptrace.ModulesChange).
struct ModulesChangeRecord {
  uint32_t key = 0;
  uint32_t op = 0;
  const ObjectDescription* old_value = nullptr;
  const ObjectDescription* new_value = nullptr;
  uint32_t precision = 0;
  bool by_import_system = false;
  const CodeLocation* stack = nullptr;
  int stack_depth = 0;
  RecordContext context;
};
void encode_modules_change(const ModulesChangeRecord& r);

}  // namespace imptrace

namespace imptrace {

// Whether a submodule is bound on its parent package (imptrace.Binding).
struct BindingRecord {
  uint64_t import_index = 0;
  ObjectDescription bound_on;
  const ObjectDescription* child = nullptr;            // null: the Import record's object
  uint32_t status = 0;
  const ObjectDescription* attribute_value = nullptr;  // null: missing, or the child itself
};
void encode_binding(const BindingRecord& r);

}  // namespace imptrace

namespace imptrace {

// What a module's __spec__ said (string ids), for its Import record.
constexpr int kMaxSearchLocations = 64;
struct SpecFacts {
  bool present = false;  // a spec that could be read (not None)
  uint32_t name = 0, origin = 0, loader = 0;
  uint32_t search_locations[kMaxSearchLocations];
  int search_location_count = 0;
};

// One native frame (imptrace.NativeFrame). No initialisers: the import hook keeps room for
// a whole stack of them on every import, and fills only what it uses.
struct NativeFrameValue {
  uint32_t object, symbol;
  uint64_t offset;
};

// The bytes of one Import.native_stack entry (tag, length, NativeFrame body) for `f`, in
// `out` (room for kNativeFrameBytes); returns how many. The same return addresses come back
// at every import, so native_stacks encodes each once and the import copies the bytes.
constexpr size_t kNativeFrameBytes = 32;
size_t encode_native_frame(const NativeFrameValue& f, uint8_t* out);

// One import (imptrace.Import). What the record leaves out because a reader can fill it
// in (the object's name and file when they are the import's) is decided here.
struct ImportRecord {
  uint64_t index = 0;
  uint64_t parent = 0;   // the enclosing import's index + 1, 0: none
  uint64_t thread = 0;   // 0: the process's main thread
  uint64_t begin_ns = 0, end_ns = 0;
  uint32_t name = 0;
  bool ok = false;
  uint32_t error_type = 0, error_message = 0;
  // ok: the module produced, and (when it had an instance dict) its spec.
  ObjectDescription object;
  bool spec_read = false;
  SpecFacts spec;
  CodeLocation importer;
  CodeLocation trigger;  // importer a module-level __getattr__: the frame beyond it
  uint32_t test = 0;
  uint64_t interpreter = 0;  // a sub-interpreter's id, 0: the main interpreter
  // Import.native_stack entries, encoded (encode_native_frame), innermost first.
  const uint8_t* native_stack = nullptr;
  size_t native_stack_bytes = 0;
};
void encode_import(const ImportRecord& r);

// An ELF object native frames name (imptrace.LoadedObject): its path's string id and its
// build-id (`id_len` 0: none), and whether it is the program the process runs.
void encode_loaded_object(uint32_t path, const uint8_t* id, size_t id_len, bool main_program);

}  // namespace imptrace

namespace imptrace {

// The one record of a process the tracer does not trace (imptrace.Note, not_traced).
void encode_not_traced(const char* why);

}  // namespace imptrace

namespace imptrace {

// A lazy binding declared (imptrace.LazyImport) or resolved (imptrace.LazyReified).
struct LazyBindingRecord {
  bool declared = false;
  uint32_t module = 0, name = 0;
  uint32_t target = 0;                          // declared
  const ObjectDescription* object = nullptr;    // resolved
  const CodeLocation* at = nullptr;             // the statement, or the first use
  RecordContext context;
};
void encode_lazy_binding(const LazyBindingRecord& r);

}  // namespace imptrace
