#include "native_symbols.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#ifdef IMPTRACE_ELFUTILS
#include <elfutils/libdwfl.h>
#endif

namespace imptrace {
namespace model {

std::string NativeCaller::library() const {
  const std::string& p = object.str();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string format_native_caller(const NativeCaller& c) {
  if (c.empty()) return "";
  char off[32];
  snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(c.offset));
  std::string s = c.library() + (c.function.empty() ? std::string(off) : ": " + c.function);
  if (!c.file.empty()) s += " (" + c.file + (c.line ? ":" + std::to_string(c.line) : "") + ")";
  if (!c.unsymbolised.empty()) s += " (not symbolised: " + c.unsymbolised + ")";
  return s;
}

namespace {

std::string demangle(const char* name) {
  if (!name) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string out(d);
  free(d);
  return out;
}

struct Symbol {
  std::string function, file;
  uint32_t line = 0;
};

// One object file opened for symbolising, or why it could not be.
class ObjectFile {
 public:
  ObjectFile(const std::string& path, const std::string& build_id) { open(path, build_id); }
  ~ObjectFile() {
#ifdef IMPTRACE_ELFUTILS
    if (dwfl_) dwfl_end(dwfl_);
#endif
  }
  ObjectFile(const ObjectFile&) = delete;
  ObjectFile& operator=(const ObjectFile&) = delete;

  const std::string& problem() const { return problem_; }

  Symbol lookup(uint64_t offset) {
    Symbol s;
#ifdef IMPTRACE_ELFUTILS
    if (!module_) return s;
    Dwarf_Addr addr = low_ + offset;
    s.function = demangle(dwfl_module_addrname(module_, addr));
    if (Dwfl_Line* l = dwfl_module_getsrc(module_, addr)) {
      int line = 0;
      if (const char* f = dwfl_lineinfo(l, nullptr, &line, nullptr, nullptr, nullptr)) {
        s.file = f;
        s.line = line > 0 ? static_cast<uint32_t>(line) : 0;
      }
    }
#else
    (void)offset;
#endif
    return s;
  }

 private:
  void open(const std::string& path, const std::string& build_id) {
#ifdef IMPTRACE_ELFUTILS
    if (build_id.empty()) {
      problem_ = "the trace records no build-id for " + path;
      return;
    }
    std::vector<std::string> candidates;
    if (const char* roots = getenv("IMPTRACE_SYMBOL_PATH")) {
      std::string all(roots);
      size_t at = 0;
      while (at <= all.size()) {
        size_t end = all.find(':', at);
        if (end == std::string::npos) end = all.size();
        std::string root = all.substr(at, end - at);
        while (!root.empty() && root.back() == '/') root.pop_back();
        if (!root.empty()) candidates.push_back(root + path);
        at = end + 1;
      }
    }
    candidates.push_back(path);
    std::string seen;  // the build-id of a file found at the path, for the message
    for (const std::string& c : candidates) {
      std::string id;
      if (try_file(c, build_id, id)) return;
      if (!id.empty() && seen.empty()) seen = c + " has build-id " + id;
    }
    problem_ = "no file with build-id " + build_id + " (" +
               (seen.empty() ? path + " not found" : seen) +
               "; IMPTRACE_SYMBOL_PATH names directories to look in)";
#else
    (void)build_id;
    problem_ = "this imptrace was built without elfutils, " + path + " is not read";
#endif
  }

#ifdef IMPTRACE_ELFUTILS
  // Opens `file` when its build-id is `want`; otherwise `got` says what it has.
  bool try_file(const std::string& file, const std::string& want, std::string& got) {
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        dwfl_build_id_find_elf, dwfl_standard_find_debuginfo, dwfl_offline_section_address,
        &debuginfo_path};
    // Only a regular file: a trace names paths, and a FIFO or a device there must not
    // block or feed the viewer.
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return false;
    }
    Dwfl* dwfl = dwfl_begin(&callbacks);
    if (!dwfl) {
      ::close(fd);
      return false;
    }
    // Base 0: module addresses start at the first segment, which is where the tracer's
    // offsets (from the object's load address) start too. dwfl owns fd from here.
    Dwfl_Module* m = dwfl_report_elf(dwfl, file.c_str(), file.c_str(), fd, 0, false);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (!m) {
      got = "(not an ELF file)";
      dwfl_end(dwfl);
      return false;
    }
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    int n = dwfl_module_build_id(m, &bits, &vaddr);
    static const char kHex[] = "0123456789abcdef";
    for (int i = 0; i < n; ++i) {
      got += kHex[bits[i] >> 4];
      got += kHex[bits[i] & 15];
    }
    if (got != want) {
      if (got.empty()) got = "(none)";
      dwfl_end(dwfl);
      return false;
    }
    dwfl_module_info(m, nullptr, &low_, nullptr, nullptr, nullptr, nullptr, nullptr);
    dwfl_ = dwfl;
    module_ = m;
    return true;
  }

  Dwfl* dwfl_ = nullptr;
  Dwfl_Module* module_ = nullptr;
  Dwarf_Addr low_ = 0;
#endif
  std::string problem_;
};

// Every object of one process's stacks, opened once; every (object, offset) named once.
class Symbolizer {
 public:
  explicit Symbolizer(const Process& p) {
    for (const LoadedObject& o : p.loaded_objects) objects_[o.path.str()] = &o;
  }

  const LoadedObject* loaded(const Str& path) const {
    auto it = objects_.find(path.str());
    return it == objects_.end() ? nullptr : it->second;
  }

  ObjectFile& file(const Str& path) {
    auto it = files_.find(path.str());
    if (it != files_.end()) return *it->second;
    const LoadedObject* o = loaded(path);
    auto f = std::make_unique<ObjectFile>(path.str(), o ? o->build_id : std::string());
    return *files_.emplace(path.str(), std::move(f)).first->second;
  }

  const Symbol& symbol(const Str& path, uint64_t offset) {
    auto key = std::make_pair(path.str(), offset);
    auto it = symbols_.find(key);
    if (it != symbols_.end()) return it->second;
    return symbols_.emplace(key, file(path).lookup(offset)).first->second;
  }

 private:
  std::map<std::string, const LoadedObject*> objects_;
  std::map<std::string, std::unique_ptr<ObjectFile>> files_;
  std::map<std::pair<std::string, uint64_t>, Symbol> symbols_;
};

bool is_libpython(const Str& path) {
  const std::string& p = path.str();
  size_t slash = p.rfind('/');
  return p.compare(slash == std::string::npos ? 0 : slash + 1, 9, "libpython") == 0;
}

// The C runtime (libc, the dynamic loader) starts the program and runs threads; it never
// imports by itself, so a walk that reaches it found the interpreter's own work.
bool is_c_runtime(const Str& path) {
  const std::string& p = path.str();
  size_t slash = p.rfind('/');
  std::string_view name = std::string_view(p).substr(slash == std::string::npos ? 0 : slash + 1);
  return name.compare(0, 7, "libc.so") == 0 || name.compare(0, 3, "ld-") == 0;
}

// The launcher's main() calling the interpreter's main (Py_BytesMain, Py_Main, Py_RunMain).
bool is_interpreter_main(const std::string& function) {
  return function.size() > 6 && function.compare(0, 3, "Py_") == 0 &&
         function.compare(function.size() - 4, 4, "Main") == 0;
}

bool is_bytecode_evaluation(const std::string& function) {
  return function.compare(0, 17, "_PyEval_EvalFrame") == 0 || function == "PyEval_EvalCode";
}

}  // namespace

void name_native_callers(Process& p) {
  bool any = false;
  for (const Import& im : p.imports) any |= !im.native_stack.empty();
  if (!any) return;
  Symbolizer symbols(p);
  for (Import& im : p.imports) {
    if (im.native_stack.empty()) continue;
    bool shared_interpreter = false;
    for (const NativeFrame& f : im.native_stack) shared_interpreter |= is_libpython(f.object);
    const std::string* inner = nullptr;  // the function of the frame inside this one
    for (const NativeFrame& f : im.native_stack) {
      const LoadedObject* o = symbols.loaded(f.object);
      bool interpreter = shared_interpreter ? is_libpython(f.object) : (o && o->main_program);
      const std::string* outer_of = inner;
      inner = &f.symbol.str();
      if (is_c_runtime(f.object)) break;
      if (o && o->main_program && outer_of && is_interpreter_main(*outer_of)) break;
      if (interpreter) {
        // The tracer's dladdr names exported functions; the file names static ones too.
        if (is_bytecode_evaluation(f.symbol.str()) ||
            (f.symbol.empty() && is_bytecode_evaluation(symbols.symbol(f.object, f.offset).function)))
          break;
        continue;
      }
      NativeCaller& c = im.native_caller;
      c.object = f.object;
      c.offset = f.offset;
      const Symbol& s = symbols.symbol(f.object, f.offset);
      c.unsymbolised = symbols.file(f.object).problem();
      c.function = !s.function.empty() ? s.function : demangle(f.symbol.empty() ? nullptr : f.symbol.c_str());
      c.file = s.file;
      c.line = s.line;
      break;
    }
  }
}

}  // namespace model
}  // namespace imptrace
