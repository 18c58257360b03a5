#include "native_stacks.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_writer.h"

namespace imptrace {
namespace {

// The unwinder is libunwind's unw_backtrace, from libunwind.so.8 dlopen'ed RTLD_LOCAL and
// only with native stacks on: linked, or loaded into the global scope, its exported
// _Unwind_* (and `backtrace`) would take over every C++ exception of the host; local, the
// loader never binds another object's symbol to it. It costs about a tenth of glibc's
// backtrace() per capture and unwinds the same frames (bench/native_unwind: signal
// handlers, libraries without frame pointers). Where it is missing, or with
// IMPTRACE_NATIVE_UNWINDER=backtrace, backtrace() it is (libgcc_s, which glibc also loads
// privately).
//
// The tracer names a frame only by object and offset (plus the nearest exported symbol,
// which dladdr knows anyway); the viewer symbolises from the files, checked against the
// build-id written here once per object and file (the LoadedObject record).
//
// dladdr walks the loader's tables for every address; the same return addresses (the
// interpreter's own call chain) come back at every import, so what it said is kept per
// address, as the frame's bytes in the Import record (string ids valid for one strings
// epoch). Open addressing over a few slots: with one slot per hash, two of the ~100
// addresses of the tree benchmark's stacks evicted each other at every import (two dladdr
// calls, and their symbols interned again, per import under callgrind).
struct NativePc {
  void* pc;
  uint32_t generation;
  uint8_t len;  // bytes used in `encoded`; 0: a frame of this library, left out
  uint8_t encoded[kNativeFrameBytes];
};
constexpr size_t kNativePcs = 4096;
constexpr size_t kNativePcProbes = 4;
// The objects this file has a LoadedObject record for, by load address (open addressing;
// a full table describes an object again rather than fail).
struct NativeObject {
  const void* base;
  uint32_t generation, path;
};
constexpr size_t kNativeObjects = 512;
// The last stack resolved at each import depth, as captured and as written: imports made
// one after another from the same module (siblings) come from the same C call chain, only
// the Python line differs, so their captures are equal and the bytes are copied whole.
// Shared by all threads (the writer lock is held): the bytes depend only on the addresses
// and the strings epoch.
struct NativeStackMemo {
  uint32_t generation;
  int n;  // captured frames; 0: none kept
  size_t len;
  void* pcs[kNativeDepth];
  uint8_t encoded[kNativeDepth * kNativeFrameBytes];
};
constexpr int kNativeMemoDepths = 8;
struct NativeTables {
  NativePc* pcs;          // allocated on first use (only with native stacks on)
  NativeObject* objects;
  NativeStackMemo* memo;  // kNativeMemoDepths of them
};
NativeTables g_native;

// The loaded object whose PT_LOAD segments hold `pc`, found through the loader's list.
struct ObjectSearch {
  uintptr_t pc;
  bool found;
  bool main_program;
  uintptr_t load_bias;
  const ElfW(Phdr)* phdr;
  int phnum;
};

int find_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<ObjectSearch*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (s->pc >= start && s->pc - start < ph.p_memsz) {
      s->found = true;
      s->main_program = !info->dlpi_name || !info->dlpi_name[0];
      s->load_bias = info->dlpi_addr;
      s->phdr = info->dlpi_phdr;
      s->phnum = info->dlpi_phnum;
      return 1;
    }
  }
  return 0;
}

// The object's NT_GNU_BUILD_ID, read from its mapped PT_NOTE segments; 0 when none.
size_t build_id(const ObjectSearch& s, const uint8_t** id) {
  for (int i = 0; i < s.phnum; ++i) {
    const ElfW(Phdr)& ph = s.phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const size_t align = ph.p_align == 8 ? 8 : 4;
    auto* p = reinterpret_cast<const uint8_t*>(s.load_bias + ph.p_vaddr);
    const uint8_t* end = p + ph.p_memsz;
    while (static_cast<size_t>(end - p) >= sizeof(ElfW(Nhdr))) {
      auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const size_t name_at = sizeof(ElfW(Nhdr));
      const size_t desc_at = name_at + ((n->n_namesz + align - 1) & ~(align - 1));
      const size_t next = desc_at + ((n->n_descsz + align - 1) & ~(align - 1));
      if (next > static_cast<size_t>(end - p)) break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(p + name_at, "GNU", 4) == 0) {
        *id = p + desc_at;
        return n->n_descsz;
      }
      p += next;
    }
  }
  return 0;
}

// The string id of the object at `base` (holding `pc`), writing its LoadedObject record
// the first time this file names it. `loader_name`: what dladdr calls it.
uint32_t object_path(const void* base, void* pc, const char* loader_name) {
  const uint32_t gen = TraceWriter::strings_epoch();
  size_t h = (reinterpret_cast<uintptr_t>(base) >> 12) & (kNativeObjects - 1);
  NativeObject* slot = nullptr;
  for (size_t probe = 0; probe < 8; ++probe) {
    NativeObject& o = g_native.objects[(h + probe) & (kNativeObjects - 1)];
    if (o.base == base && o.generation == gen) return o.path;
    if (!slot && (o.generation != gen || !o.base)) slot = &o;
  }
  ObjectSearch s{};
  s.pc = reinterpret_cast<uintptr_t>(pc);
  dl_iterate_phdr(find_object, &s);
  // dladdr names the main program by argv[0]; the file it was loaded from is what counts.
  static char exe[4096];
  static bool exe_known = [] {
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = 0;
    return true;
  }();
  const char* name = s.found && s.main_program && exe_known ? exe : loader_name;
  uint32_t path = TraceWriter::intern(name);
  const uint8_t* id = nullptr;
  size_t id_len = s.found ? build_id(s, &id) : 0;
  encode_loaded_object(path, id, id_len, s.found && s.main_program);
  if (!slot) slot = &g_native.objects[h];
  *slot = NativeObject{base, gen, path};
  return path;
}

size_t pc_slot(const void* pc) {
  static_assert(kNativePcs == 1u << 12, "the hash gives 12 bits");
  return (reinterpret_cast<uintptr_t>(pc) * 0x9E3779B97F4A7C15ull) >> (64 - 12);
}

bool native_tables() {
  if (g_native.pcs) return true;
  g_native.pcs = static_cast<NativePc*>(calloc(kNativePcs, sizeof(NativePc)));
  g_native.objects = static_cast<NativeObject*>(calloc(kNativeObjects, sizeof(NativeObject)));
  g_native.memo = static_cast<NativeStackMemo*>(calloc(kNativeMemoDepths, sizeof(NativeStackMemo)));
  if (g_native.pcs && g_native.objects && g_native.memo) return true;
  free(g_native.pcs);
  free(g_native.objects);
  free(g_native.memo);
  g_native = NativeTables{};
  return false;
}

// What is known of `pc`, from the table or from dladdr (then kept). The caller has looked
// in its first slot already (the common hit, inline there).
const NativePc* native_pc(void* pc) {
  const uint32_t gen = TraceWriter::strings_epoch();
  const size_t h = pc_slot(pc);
  NativePc* slot = nullptr;
  for (size_t probe = 0; probe < kNativePcProbes; ++probe) {
    NativePc& e = g_native.pcs[(h + probe) & (kNativePcs - 1)];
    if (e.pc == pc && e.generation == gen) return &e;
    if (!slot && (e.generation != gen || !e.pc)) slot = &e;
  }
  static Dl_info self;
  static bool self_known = dladdr(reinterpret_cast<void*>(&native_pc), &self) != 0;
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname) return nullptr;
  NativePc& e = slot ? *slot : g_native.pcs[h];
  e.pc = pc;
  e.generation = gen;
  e.len = 0;
  if (!self_known || info.dli_fbase != self.dli_fbase) {
    NativeFrameValue f;
    f.object = object_path(info.dli_fbase, pc, info.dli_fname);
    f.offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase);
    f.symbol = info.dli_sname ? TraceWriter::intern(info.dli_sname) : 0;
    e.len = static_cast<uint8_t>(encode_native_frame(f, e.encoded));
  }
  return &e;
}

// The interpreter's bytecode evaluation function, [begin, end): the frames outside it are
// the Python code's own C stack, which the Python stack recorded beside them already tells,
// and the viewer reads a native stack only up to that frame (the native caller is the
// first frame outside the interpreter with no bytecode evaluation between it and the
// import). So a capture stops there: a short unwind first, as most imports are made a few
// frames from it (the import statement's IMPORT_NAME), the whole depth only when it is not
// among them (a native caller deep in a C extension, an embedding host). Its extent is the
// dynamic symbol's size (exported on 3.8-3.13, static and shared builds); a compiler-split
// cold part lies outside it, and a capture made from there is simply kept whole.
struct CodeRange {
  uintptr_t begin, end;  // end 0: unknown, every capture whole
};
CodeRange g_evaluation;
bool g_evaluation_looked_up;
constexpr int kNativeShortDepth = 10;

// Fills the range, then says so (release: a thread that sees the flag sees the range).
void look_up_evaluation() {
  struct Publish {
    ~Publish() { __atomic_store_n(&g_evaluation_looked_up, true, __ATOMIC_RELEASE); }
  } publish;
  void* f = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  Dl_info info;
  void* extra = nullptr;
  if (!f || !dladdr1(f, &info, &extra, RTLD_DL_SYMENT) || !extra) return;
  auto* sym = static_cast<const ElfW(Sym)*>(extra);
  if (!sym->st_size) return;
  g_evaluation = CodeRange{reinterpret_cast<uintptr_t>(f), reinterpret_cast<uintptr_t>(f) + sym->st_size};
}

// The frames up to and including the first in the evaluation function; 0 when none is.
int through_evaluation(void* const* frames, int n) {
  for (int i = 0; i < n; ++i) {
    // A return address points after the call; -1 keeps it inside the calling function.
    const uintptr_t pc = reinterpret_cast<uintptr_t>(frames[i]) - 1;
    if (pc - g_evaluation.begin < g_evaluation.end - g_evaluation.begin) return i + 1;
  }
  return 0;
}

using BacktraceFn = int (*)(void**, int);
// glibc's backtrace() reached through a call of our own: its address in the table would
// be a symbol relocation, resolved at load in every process the library is preloaded into;
// a call is bound lazily, on first use.
int glibc_backtrace(void** frames, int max) { return backtrace(frames, max); }
BacktraceFn g_unwinder = glibc_backtrace;

}  // namespace

void prepare_native_stacks() {
  const char* which = getenv("IMPTRACE_NATIVE_UNWINDER");
  if (!which || strcmp(which, "backtrace") != 0) {
    if (void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL))
      if (void* fn = dlsym(h, "unw_backtrace")) g_unwinder = reinterpret_cast<BacktraceFn>(fn);
  }
  void* warm[4];
  g_unwinder(warm, 4);
}

int capture_native_stack(void** frames) {
  // Looked up at the first import, not in prepare_native_stacks: an embedding host may load
  // the interpreter after this library's constructor ran.
  if (!__atomic_load_n(&g_evaluation_looked_up, __ATOMIC_ACQUIRE)) look_up_evaluation();
  if (!g_evaluation.end) return g_unwinder(frames, kNativeDepth);
  int n = g_unwinder(frames, kNativeShortDepth);
  if (int cut = through_evaluation(frames, n)) return cut;
  if (n < kNativeShortDepth) return n;  // the whole stack, no evaluation in it
  n = g_unwinder(frames, kNativeDepth);
  if (int cut = through_evaluation(frames, n)) return cut;
  return n;
}

size_t resolve_native_stack(void* const* frames, int n, int depth, uint8_t* out) {
  if (!native_tables() || n <= 0 || n > kNativeDepth) return 0;
  const uint32_t gen = TraceWriter::strings_epoch();
  NativeStackMemo& memo = g_native.memo[depth < kNativeMemoDepths ? depth : kNativeMemoDepths - 1];
  if (memo.generation == gen && memo.n == n && memcmp(memo.pcs, frames, n * sizeof(void*)) == 0) {
    memcpy(out, memo.encoded, memo.len);
    return memo.len;
  }
  size_t used = 0;
  for (int i = 0; i < n; ++i) {
    // A return address points after the call; -1 keeps it inside the calling function.
    void* pc = static_cast<char*>(frames[i]) - 1;
    const NativePc* e = &g_native.pcs[pc_slot(pc)];
    if (e->pc != pc || e->generation != gen) e = native_pc(pc);
    if (!e) continue;
    // The whole slot, not e->len bytes: a fixed-size copy is two moves, not a call. The
    // bytes past e->len are overwritten by the next frame or left past the end; they fit,
    // as each frame takes at most kNativeFrameBytes of the caller's room. A frame of this
    // library has len 0: left out.
    memcpy(out + used, e->encoded, kNativeFrameBytes);
    used += e->len;
  }
  // Kept only when every frame's bytes are of this epoch (interning one of them may have
  // begun another).
  if (gen == TraceWriter::strings_epoch()) {
    memo.generation = gen;
    memo.n = n;
    memo.len = used;
    memcpy(memo.pcs, frames, n * sizeof(void*));
    memcpy(memo.encoded, out, used);
  }
  return used;
}

}  // namespace imptrace
