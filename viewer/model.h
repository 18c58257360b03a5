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
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace imptrace {
namespace model {

// An immutable string shared by every record that names it. The reader makes one per
// string the trace defines (names, paths, types are interned on the wire) and every field
// that refers to it holds a handle: copying a record copies pointers, not characters.
// Reads like a `const std::string&` (it converts to one, and has the usual read-only
// members and operators); assigning a std::string or a literal makes a new shared string.
// The reference count is not atomic: a model is used by one thread at a time.
class Str {
 public:
  Str() noexcept = default;
  Str(const std::string& s) : r_(make(s.data(), s.size())) {}
  // Takes the characters over (no copy): the reader builds each interned string this way.
  Str(std::string&& s) : r_(s.empty() ? nullptr : new Rep{std::move(s), 1}) {}
  Str(const char* s) : r_(s ? make(s, strlen(s)) : nullptr) {}
  Str(std::string_view s) : r_(make(s.data(), s.size())) {}
  Str(const Str& o) noexcept : r_(o.r_) { if (r_) ++r_->refs; }
  Str(Str&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Str& operator=(const Str& o) noexcept {
    if (o.r_) ++o.r_->refs;
    release();
    r_ = o.r_;
    return *this;
  }
  Str& operator=(Str&& o) noexcept {
    if (this != &o) { release(); r_ = o.r_; o.r_ = nullptr; }
    return *this;
  }
  Str& operator=(const std::string& s) { return *this = Str(s); }
  Str& operator=(const char* s) { return *this = Str(s); }
  ~Str() { release(); }

  const std::string& str() const { return r_ ? r_->s : empty_string(); }
  operator const std::string&() const { return str(); }
  operator std::string_view() const { return std::string_view(str()); }

  bool empty() const { return !r_ || r_->s.empty(); }
  size_t size() const { return str().size(); }
  size_t length() const { return size(); }
  const char* c_str() const { return str().c_str(); }
  const char* data() const { return str().data(); }
  char operator[](size_t i) const { return str()[i]; }
  char front() const { return str().front(); }
  char back() const { return str().back(); }
  std::string::const_iterator begin() const { return str().begin(); }
  std::string::const_iterator end() const { return str().end(); }
  std::string substr(size_t pos = 0, size_t n = std::string::npos) const { return str().substr(pos, n); }
  template <class... A> size_t find(A&&... a) const { return str().find(std::forward<A>(a)...); }
  template <class... A> size_t rfind(A&&... a) const { return str().rfind(std::forward<A>(a)...); }
  template <class... A> int compare(A&&... a) const { return str().compare(std::forward<A>(a)...); }
  // Same shared string (not merely equal text).
  bool same(const Str& o) const { return r_ == o.r_; }
  // An identity for hashing shared strings: equal handles give equal keys.
  const void* key() const { return r_; }

 private:
  struct Rep {
    std::string s;
    uint32_t refs;
  };
  static Rep* make(const char* p, size_t n) { return n ? new Rep{std::string(p, n), 1} : nullptr; }
  static const std::string& empty_string() {
    static const std::string kEmpty;
    return kEmpty;
  }
  void release() {
    if (r_ && --r_->refs == 0) delete r_;
  }
  Rep* r_ = nullptr;
};

inline bool operator==(const Str& a, const Str& b) { return a.same(b) || a.str() == b.str(); }
inline bool operator==(const Str& a, const std::string& b) { return a.str() == b; }
inline bool operator==(const std::string& a, const Str& b) { return a == b.str(); }
inline bool operator==(const Str& a, const char* b) { return a.str() == b; }
inline bool operator==(const char* a, const Str& b) { return a == b.str(); }
inline bool operator==(const Str& a, std::string_view b) { return std::string_view(a.str()) == b; }
inline bool operator==(std::string_view a, const Str& b) { return a == std::string_view(b.str()); }
template <class T> bool operator!=(const Str& a, const T& b) { return !(a == b); }
inline bool operator!=(const std::string& a, const Str& b) { return !(a == b); }
inline bool operator!=(const char* a, const Str& b) { return !(a == b); }
inline bool operator!=(std::string_view a, const Str& b) { return !(a == b); }
inline bool operator<(const Str& a, const Str& b) { return a.str() < b.str(); }
inline bool operator<(const Str& a, const std::string& b) { return a.str() < b; }
inline bool operator<(const std::string& a, const Str& b) { return a < b.str(); }
inline std::string operator+(const Str& a, const Str& b) { return a.str() + b.str(); }
inline std::string operator+(const Str& a, const std::string& b) { return a.str() + b; }
inline std::string operator+(const std::string& a, const Str& b) { return a + b.str(); }
inline std::string operator+(std::string&& a, const Str& b) { return std::move(a) + b.str(); }
inline std::string operator+(const Str& a, const char* b) { return a.str() + b; }
inline std::string operator+(const char* a, const Str& b) { return a + b.str(); }
inline std::string operator+(const Str& a, char b) { return a.str() + b; }
inline std::string operator+(char a, const Str& b) { return a + b.str(); }
inline std::string& operator+=(std::string& a, const Str& b) { return a += b.str(); }
inline std::ostream& operator<<(std::ostream& o, const Str& s) { return o << s.str(); }
inline bool operator==(const std::vector<Str>& a, const std::vector<std::string>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}
inline bool operator==(const std::vector<std::string>& a, const std::vector<Str>& b) { return b == a; }

// Where some code was: one Python frame.
struct Location {
  Str file;      // absolute, as the code object has it; "" = unknown
  uint32_t line = 0;
  Str function;  // qualified name where the interpreter has one
  bool empty() const { return file.empty() && line == 0 && function.empty(); }
};

// A frame of importlib's: its frozen bootstrap ("<frozen importlib._bootstrap>",
// ..._external>) or a file under an `importlib/` directory (importlib.import_module,
// LazyLoader, a source importlib under -X frozen_modules=off). It says nothing about who
// caused an import or a change, so findings skip it. The same rule as the tracer's
// is_importlib_file (tracer/code_location.cpp), which picks each import's `importer`.
bool is_importlib_frame(const Location& loc);

// Identity of a Python object. `id` is equal within one process iff same object.
// (Small fields first: records hold up to three of these, 100,000s of records a trace.)
struct ObjectRef {
  bool present = false;  // false when the record did not carry this object
  uint32_t flags = 0;    // bit0 plain module, bit1 ModuleType subclass, bit2 proxy
  uint64_t id = 0;
  Str type;      // "module" or "pkg.mod.QualName"
  Str name;      // the object's own __name__ (modules only)
  Str file;      // its __file__ (modules only)

  bool is_plain_module() const { return flags & 1u; }
  bool is_module_subclass() const { return flags & 2u; }
  // A module object, as isinstance(o, types.ModuleType) says: plain or of a subclass (six.moves'
  // _MovedItems, a LazyLoader's _LazyModule, a proxy that subclasses ModuleType).
  bool is_module() const { return flags & 3u; }
  bool is_proxy() const { return flags & 4u; }
};

// Opaque identity token for JSON/text: "obj:<hex id>". Equal within a process iff the
// object is the same; "" for an absent object.
std::string object_token(const ObjectRef& o);

// One native frame (IMPTRACE_NATIVE_STACKS=1): ELF object, offset from its load address,
// nearest exported symbol ("" when none).
struct NativeFrame {
  Str object;
  uint64_t offset = 0;
  Str symbol;
};

// The first frame outside the interpreter of an import entered from native code (an
// extension calling PyImport_ImportModule and friends), symbolised by the viewer from the
// object's file (native_symbols.h). Empty `object`: the import was entered from Python
// code, or no native stack was recorded.
struct NativeCaller {
  Str object;         // path of the ELF object, as the trace names it
  uint64_t offset = 0;
  std::string function;  // demangled; "" when it could not be named
  std::string file;      // source file from debug information, "" none
  uint32_t line = 0;
  // Why it is not symbolised from the file ("" when it is): the file is missing, or has
  // another build-id than the traced one.
  std::string unsymbolised;
  bool empty() const { return object.empty(); }
  std::string library() const;  // the object's file name
};
// "libfoo.so: ns::fn (foo.cpp:12)", "libfoo.so+0x1137 (not symbolised: ...)"; "" when empty.
// (native_symbols.cpp)
std::string format_native_caller(const NativeCaller& c);

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
  Str name;
  bool ok = false;
  uint32_t interpreter = 0;    // (beside `ok`: no padding)
  Str error_type;
  Str error_message;
  ObjectRef object;            // what sys.modules[name] held when the import returned
  Str spec_name;       // already defaulted: equals name when the wire omitted it
  Str origin;
  Str loader;
  std::vector<Str> search_locations;
  Str file;            // already defaulted: equals origin when the wire omitted it
  Location importer;           // first frame outside importlib
  // The importer a module-level __getattr__ (PEP 562): the first frame outside importlib
  // beyond it, whose attribute access made the import. Empty otherwise.
  Location trigger;
  Str test;            // pytest node id, "" none
  std::vector<NativeFrame> native_stack;  // innermost first; empty unless enabled
  NativeCaller native_caller;             // filled by the reader (native_symbols.h)
  // "ExceptionType: message" or "" when ok.
  std::string error_text() const;
};

enum class ChangeOp { Set = 0, Delete = 1, Clear = 2 };
enum class Precision { Exact = 0, AtBoundary = 1 };

// A key of sys.modules got a new value, lost it, or the dict was cleared.
struct ModulesChange {
  Str key;
  ChangeOp op = ChangeOp::Set;
  Precision precision = Precision::Exact;  // (beside `op`: no padding)
  ObjectRef old_object;               // absent for an insertion
  ObjectRef new_object;               // absent for a deletion
  std::vector<Location> stack;        // innermost first
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  Str test;
  uint64_t during_import = 0;         // index+1 of the import in progress, 0 none
  bool by_import_system = false;
};

enum class BindingStatus { Bound = 0, Missing = 1, Mismatch = 2, OnProxy = 3 };
const char* binding_status_name(BindingStatus s);  // "bound", "missing", ...

// After an import of `a.b`: where the import system bound `b`.
struct Binding {
  uint64_t import_index = 0;
  Str parent;      // "a"
  Str attribute;   // "b"
  ObjectRef bound_on;
  ObjectRef child;
  BindingStatus status = BindingStatus::Bound;
  uint64_t time_ns = 0;
  Str test;
  ObjectRef attribute_value;
  std::string child_module() const { return parent.empty() ? attribute.str() : parent + "." + attribute; }
};

enum class ProxyAccessKind { Getattr = 0, Setattr = 1, ModuleGetattr = 2 };
const char* proxy_access_kind_name(ProxyAccessKind k);  // "getattr", "setattr", "module_getattr"

struct ProxyAccess {
  ObjectRef proxy;
  Str attribute;
  ProxyAccessKind kind = ProxyAccessKind::Getattr;
  bool ok = false;
  ObjectRef result;
  Str error_type;
  Str error_message;
  ObjectRef forwarded_to;
  std::vector<Location> stack;   // [0] is the caller of the attribute access
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  Str test;
  uint64_t during_import = 0;
  bool from_import_system = false;
  // Non-zero: the tracer may have counted repeats of this access (ProxyAccessSummary)
  // instead of recording them.
  uint64_t serial = 0;
  // Further accesses like this one (same object, attribute, kind, calling instruction and
  // test; successful) that the tracer counted, summed over its summary records.
  uint64_t repeats = 0;
  // "ok" or "ExceptionType: message".
  std::string outcome() const;
};

struct ProxyClass {
  Str type;
  Location getattr_at;
  Location getattribute_at;
  Location setattr_at;
  bool module_subclass = false;
  Str defined_in;
};

// An ELF object that native frames name, with its build-id (lowercase hex, "" none).
struct LoadedObject {
  Str path;
  std::string build_id;
  bool main_program = false;  // the executable, not a shared library
};

// PEP 810 (3.15): a module global bound to a lazy import object (LazyImport), and the
// first use that replaced it with what it resolved to (LazyReified).
struct LazyDeclared {
  Str module;          // whose globals
  Str name;            // the bound name
  Str target;          // what it will import ("pkg.mod", "pkg.attr" for lazy from)
  Location declared_at;
  Str test;
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  uint64_t during_import = 0;
};
struct LazyResolved {
  Str module;
  Str name;
  ObjectRef object;    // what the binding holds now
  Location used_at;    // the first use
  Str test;
  uint64_t time_ns = 0;
  uint64_t thread = 0;
  uint64_t during_import = 0;
};

struct SysPathSnapshot {
  std::vector<std::string> entries;
  uint64_t time_ns = 0;
};

struct Note {
  std::string text;
  uint64_t time_ns = 0;
  bool not_traced = false;  // the tracer left the process alone; text says why
};

// How a process ended (ProcessEnd). A trace without an end record stops before its
// process ended: killed (SIGKILL, the OOM killer), cut short, or still running.
struct ProcessEnd {
  enum class How { None, Exit, OsExit, Signal, Exec };
  How how = How::None;
  int64_t status = 0;  // Exit, OsExit
  int signal = 0;      // Signal
  uint64_t time_ns = 0;
};
const char* end_how_name(ProcessEnd::How h);  // "none", "exit", "os_exit", "signal", "exec"
// "exited with status 3", "killed by SIGSEGV (signal 11)", "no end record (killed, e.g.
// by SIGKILL, or still running)"...
std::string end_text(const ProcessEnd& e);
// The process did not finish on its own: a fatal signal, or no end record at all. An exit
// with a non-zero status is an ending the program chose (a failing test run), not this.
bool ended_abnormally(const ProcessEnd& e);
// Killed by SIGTERM: stopped from outside on purpose (multiprocessing's Pool.terminate(),
// `kill PID`, a job's timeout). Still an abnormal end (the trace stops there), but one a
// run's summary need not call a surprise.
bool terminated(const ProcessEnd& e);
// A mismatch where the parent's attribute holds a plain object (function, class, value)
// of its own rather than a module or proxy: the package bound its own name over its
// submodule's (`from .quantize import quantize`, lazy_loader.attach's some_func). Normal
// Python, and seen only when a later import of the submodule checks the binding again.
bool shadowed_by_own_attribute(const Binding& b);

// One lifetime of the main interpreter (Py_Initialize* ... Py_FinalizeEx): an embedding
// host may finalise Python and initialise it again. Numbered from 1; sys.modules, modules
// and sub-interpreter ids are the lifetime's own.
struct Lifetime {
  uint32_t number = 0;
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
  bool ended = false;  // its LifetimeEnd was seen (Py_FinalizeEx finished)
  // What the tracer could not see in it (LifetimeBegin.Unseen bits) ...
  bool subinterpreters_from_c_unseen = false;  // static libpython: Py_NewInterpreter* not interposable
  bool end_unseen = false;                     // its end, and any later lifetime
  // ... and after it: the tracer could not put itself back for a next Py_Initialize.
  bool next_unseen = false;
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
  std::vector<LazyDeclared> lazy_declared;  // in record order (lazy_imports.h pairs them)
  std::vector<LazyResolved> lazy_resolved;
  std::vector<Note> notes;       // from the tracer
  std::vector<LoadedObject> loaded_objects;  // IMPTRACE_NATIVE_STACKS=1
  // Why the tracer left this process alone (a CPython it does not know); empty: traced.
  std::string not_traced;
  ProcessEnd end;                // the last end record; How::None when there is none
  // In time order. Empty for a trace from a tracer that did not mark lifetimes.
  std::vector<Lifetime> lifetimes;

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
  // The lifetime a record made at `time_ns` belongs to (0 when the trace marks none).
  uint32_t lifetime_at(uint64_t time_ns) const;
  // The host initialised Python more than once.
  bool several_lifetimes() const { return lifetimes.size() > 1; }
};

// Is `path` a path from the file system root: absolute, or as a redacted trace writes one
// (redact.h: "~/...", "<site-packages>/...", "<python>/...")? What relativizing applies to.
bool rooted_path(const std::string& path);

// Contract relativization: `path` relative to the longest `roots` entry that is a
// directory prefix of it ("/x/site-packages/a/b.py" with root "/x/site-packages" ->
// "a/b.py"). Paths under no root, "<frozen ...>" and other pseudo-files stay unchanged.
std::string relativize_path(const std::string& path, const std::vector<std::string>& roots);
// `loc` with its file relativized against `roots` (Process::sys_path_roots(), computed once
// by a caller that relativizes many).
Location relative_location(const Location& loc, const std::vector<std::string>& roots);

}  // namespace model
}  // namespace imptrace

template <>
struct std::hash<imptrace::model::Str> {
  size_t operator()(const imptrace::model::Str& s) const noexcept {
    return std::hash<std::string_view>()(std::string_view(s.str()));
  }
};
