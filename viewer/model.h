// The in-memory model of a trace: one `Process` per trace file, every string already
// resolved (no interned ids leak out of the reader), every time relative to the process's
// start (Header.start_monotonic_ns). Commands (show, tree, export, why, diff) read only this
// model, never the wire format, so the format can grow without touching them.
//
// Stability: this header is shared with the `diff` command. Fields are only ever added.
//
// Conventions
// - An absent string is "" (the wire's id 0). An absent ObjectRef has `present == false`.
// - An absent Location has `file.empty()`. Location::file is the absolute path as the code
//   object had it; use Process::relativize() (or `relativize_path`) before showing or
//   comparing it across runs.
// - Vectors hold records in the order the tracer wrote them (which is time order for
//   everything except `imports`, which are sorted by start order / Import.index).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace imptrace {
namespace model {

// Where some code was: one Python frame.
struct Location {
  std::string file;      // absolute, as the code object has it; "" = unknown
  uint32_t line = 0;
  std::string function;  // qualified name where the interpreter has one
  bool empty() const { return file.empty() && line == 0 && function.empty(); }
};

// Identity of a Python object. `id` is equal within one process iff same object.
struct ObjectRef {
  bool present = false;  // false when the record did not carry this object
  uint64_t id = 0;
  std::string type;      // "module" or "pkg.mod.QualName"
  uint32_t flags = 0;    // bit0 plain module, bit1 ModuleType subclass, bit2 proxy
  std::string name;      // the object's own __name__ (modules only)
  std::string file;      // its __file__ (modules only)

  bool is_plain_module() const { return flags & 1u; }
  bool is_module_subclass() const { return flags & 2u; }
  bool is_proxy() const { return flags & 4u; }
};

// Opaque identity token for JSON/text: "obj:<hex id>". Equal within a process iff the
// object is the same; "" for an absent object.
std::string object_token(const ObjectRef& o);

// One native frame (IMPTRACE_NATIVE_STACKS=1): ELF object, offset from its load address,
// nearest exported symbol ("" when none).
struct NativeFrame {
  std::string object;
  uint64_t offset = 0;
  std::string symbol;
};

// One run of importlib's find-and-load.
struct Import {
  uint64_t index = 0;          // Import.index: start order within the process
  uint64_t parent_index = 0;   // raw Import.parent: index+1 of enclosing import, 0 none
  // Position in Process::imports of the enclosing import, or -1 when there is none or
  // its record is not in the file (e.g. the trace was cut while it was still running).
  int64_t parent_pos = -1;
  uint64_t thread = 0;
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;         // begin_ns + duration_ns
  uint64_t duration_ns() const { return end_ns - begin_ns; }
  std::string name;
  bool ok = false;
  std::string error_type;
  std::string error_message;
  ObjectRef object;            // what sys.modules[name] held when the import returned
  std::string spec_name;       // already defaulted: equals name when the wire omitted it
  std::string origin;
  std::string loader;
  std::vector<std::string> search_locations;
  std::string file;            // already defaulted: equals origin when the wire omitted it
  Location importer;           // first frame outside importlib
  std::string test;            // pytest node id, "" none
  uint32_t interpreter = 0;
  std::vector<NativeFrame> native_stack;  // innermost first; empty unless enabled
  // "ExceptionType: message" or "" when ok.
  std::string error_text() const;
};

enum class ChangeOp { Set = 0, Delete = 1, Clear = 2 };
enum class Precision { Exact = 0, AtBoundary = 1 };

// A key of sys.modules got a new value, lost it, or the dict was cleared.
struct ModulesChange {
  std::string key;
  ChangeOp op = ChangeOp::Set;
  ObjectRef old_object;               // absent for an insertion
  ObjectRef new_object;               // absent for a deletion
  std::vector<Location> stack;        // innermost first
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  std::string test;
  Precision precision = Precision::Exact;
  uint64_t during_import = 0;         // index+1 of the import in progress, 0 none
  bool by_import_system = false;
};

enum class BindingStatus { Bound = 0, Missing = 1, Mismatch = 2, OnProxy = 3 };
const char* binding_status_name(BindingStatus s);  // "bound", "missing", ...

// After an import of `a.b`: where the import system bound `b`.
struct Binding {
  uint64_t import_index = 0;
  std::string parent;      // "a"
  std::string attribute;   // "b"
  ObjectRef bound_on;
  ObjectRef child;
  BindingStatus status = BindingStatus::Bound;
  uint64_t time_ns = 0;
  std::string test;
  ObjectRef attribute_value;
  std::string child_module() const { return parent.empty() ? attribute : parent + "." + attribute; }
};

enum class ProxyAccessKind { Getattr = 0, Setattr = 1, ModuleGetattr = 2 };
const char* proxy_access_kind_name(ProxyAccessKind k);  // "getattr", "setattr", "module_getattr"

struct ProxyAccess {
  ObjectRef proxy;
  std::string attribute;
  ProxyAccessKind kind = ProxyAccessKind::Getattr;
  bool ok = false;
  ObjectRef result;
  std::string error_type;
  std::string error_message;
  ObjectRef forwarded_to;
  std::vector<Location> stack;   // [0] is the caller of the attribute access
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  std::string test;
  uint64_t during_import = 0;
  bool from_import_system = false;
  // "ok" or "ExceptionType: message".
  std::string outcome() const;
};

struct ProxyClass {
  std::string type;
  Location getattr_at;
  Location getattribute_at;
  Location setattr_at;
  bool module_subclass = false;
  std::string defined_in;
};

struct SysPathSnapshot {
  std::vector<std::string> entries;
  uint64_t time_ns = 0;
};

struct Note {
  std::string text;
  uint64_t time_ns = 0;
};

// Everything one trace file says about one process.
struct Process {
  std::string source_file;       // the trace file it was read from

  // Header.
  uint32_t schema_major = 0;
  uint32_t schema_minor = 0;
  std::string tracer_version;
  int64_t pid = 0;
  int64_t ppid = 0;
  std::vector<std::string> argv;
  std::string executable;
  std::string python_version;
  std::string python_build;
  std::string platform;
  std::string machine;
  std::string cwd;
  int64_t start_time_unix_ns = 0;
  std::vector<std::pair<std::string, std::string>> env;
  int64_t forked_from_pid = 0;
  uint64_t start_monotonic_ns = 0;

  // Records.
  std::vector<Import> imports;   // sorted by Import::index (start order)
  std::vector<ModulesChange> modules_changes;
  std::vector<Binding> bindings;
  std::vector<ProxyAccess> proxy_accesses;
  std::vector<ProxyClass> proxy_classes;
  std::vector<SysPathSnapshot> sys_paths;
  std::vector<Note> notes;       // from the tracer

  // From the reader: truncation, malformed records skipped, undefined string ids.
  std::vector<std::string> warnings;
  bool truncated = false;

  // Every distinct sys.path entry seen in any snapshot ('' maps to cwd), deduplicated.
  std::vector<std::string> sys_path_roots() const;
  // `path` relative to the longest sys.path entry containing it (see relativize_path).
  std::string relativize(const std::string& path) const;
  // A Location with its file relativized.
  Location relative(const Location& loc) const;
  // Position in `imports` of the import with this Import::index, or -1.
  int64_t import_position(uint64_t index) const;
};

// Contract relativization: `path` relative to the longest `roots` entry that is a
// directory prefix of it ("/x/site-packages/a/b.py" with root "/x/site-packages" ->
// "a/b.py"). Paths under no root, "<frozen ...>" and other pseudo-files stay unchanged.
std::string relativize_path(const std::string& path, const std::vector<std::string>& roots);

}  // namespace model
}  // namespace imptrace
