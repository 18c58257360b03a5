#include "native_stacks.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdlib.h>

#include "trace_writer.h"

namespace imptrace {
namespace {

// Native stacks use glibc's backtrace(): it unwinds with the libgcc_s that glibc dlopens
// privately (RTLD_LOCAL), so nothing of it joins the host's symbol scope - unlike linking
// libunwind, whose exported _Unwind_* would take over every C++ exception of the host.
//
// dladdr walks the loader's tables for every address; the same return addresses (the
// interpreter's own call chain) come back at every import, so what it said is kept per
// address (direct-mapped, string ids valid for one strings epoch).
struct NativePc {
  void* pc;
  uint32_t generation, object, symbol;
  uintptr_t offset;
  bool ours;  // a frame of this library: left out
};
constexpr size_t kNativePcs = 4096;
struct NativePcCache {
  NativePc* slots;  // allocated on first use (only with native stacks on)
};
NativePcCache g_native_pcs;

const NativePc* native_pc(void* pc) {
  if (!g_native_pcs.slots) {
    g_native_pcs.slots = static_cast<NativePc*>(calloc(kNativePcs, sizeof(NativePc)));
    if (!g_native_pcs.slots) return nullptr;
  }
  NativePc& e = g_native_pcs.slots[(reinterpret_cast<uintptr_t>(pc) >> 2) & (kNativePcs - 1)];
  if (e.pc == pc && e.generation == TraceWriter::strings_epoch()) return &e;
  static Dl_info self;
  static bool self_known = dladdr(reinterpret_cast<void*>(&native_pc), &self) != 0;
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname) return nullptr;
  e.pc = pc;
  e.generation = TraceWriter::strings_epoch();
  e.ours = self_known && info.dli_fbase == self.dli_fbase;
  e.object = TraceWriter::intern(info.dli_fname);
  e.offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase);
  e.symbol = info.dli_sname ? TraceWriter::intern(info.dli_sname) : 0;
  return &e;
}

}  // namespace

void prepare_native_stacks() {
  void* warm[4];
  backtrace(warm, 4);
}

int capture_native_stack(void** frames) { return backtrace(frames, kNativeDepth); }

int resolve_native_stack(void* const* frames, int n, NativeFrameValue* out) {
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    // A return address points after the call; -1 keeps it inside the calling function.
    const NativePc* e = native_pc(static_cast<char*>(frames[i]) - 1);
    if (!e || e->ours) continue;
    out[kept].object = e->object;
    out[kept].offset = e->offset;
    out[kept].symbol = e->symbol;
    ++kept;
  }
  return kept;
}

}  // namespace imptrace
