// The constructor's first question in every process the library is preloaded into: is there
// a CPython here at all? A failed dlsym answers it, but at a price paid by every shell,
// compiler and git of a CI job that exports LD_PRELOAD: it walks every object's symbol
// table and then builds its error message, which is the first malloc of the process (the
// arena's set-up: getrandom, two brk, heap pages). The GNU hash table that the loader itself
// consults (DT_GNU_HASH: a Bloom filter, buckets, and a chain of the symbols' hashes) gives
// a definite "no" for almost every object from one word of its Bloom filter, reading only
// memory the loader has mapped. Anything this code does not understand is a "maybe", for
// which the caller asks dlsym as before: a wrong "maybe" costs time, never a missed Python.
#include "loaded_symbols.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

namespace imptrace {

namespace {

struct SymbolQuery {
  uint32_t hash;  // the GNU hash of the name
  bool maybe;
};

// The end of the object's readable loaded segment that holds [p, p + bytes), or 0 when none
// does: nothing outside what the loader mapped is read.
uintptr_t segment_end(const dl_phdr_info* info, uintptr_t p, size_t bytes) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_R)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    if (p >= lo && bytes <= ph.p_memsz && p - lo <= ph.p_memsz - bytes) return lo + ph.p_memsz;
  }
  return 0;
}

// True when this object might define the symbol (or cannot be read): the walk stops there.
bool object_may_define(const dl_phdr_info* info, uint32_t h) {
  const ElfW(Phdr)* dynamic = nullptr;
  ElfW(Addr) lo = ~ElfW(Addr){0}, hi = 0;  // the loaded segments' extent, as offsets
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) {
      dynamic = &ph;
    } else if (ph.p_type == PT_LOAD) {
      if (ph.p_vaddr < lo) lo = ph.p_vaddr;
      if (ph.p_vaddr + ph.p_memsz > hi) hi = ph.p_vaddr + ph.p_memsz;
    }
  }
  if (!dynamic) return false;  // no dynamic section (a static executable): exports nothing
  // The loader read this dynamic section up to its DT_NULL when it set the object up.
  const ElfW(Dyn)* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + dynamic->p_vaddr);
  size_t entries = dynamic->p_memsz / sizeof(ElfW(Dyn));
  ElfW(Addr) gnu_hash = 0;
  for (size_t i = 0; i < entries && dyn[i].d_tag != DT_NULL; ++i)
    if (dyn[i].d_tag == DT_GNU_HASH) { gnu_hash = dyn[i].d_un.d_ptr; break; }
  if (!gnu_hash) return true;  // only a SysV hash table, or none: ask dlsym

  // glibc usually rewrites the entries of an object's dynamic section to absolute addresses
  // at load, but not those of a read-only one (the vDSO's, those of targets that keep it
  // read-only): there the entry is still an offset from the load address. Whichever
  // reading lands within the object's extent is the one; when both do (an object loaded
  // below its own size) or neither, there is no answer.
  uintptr_t base = info->dlpi_addr;
  bool absolute = gnu_hash >= base && gnu_hash - base >= lo && gnu_hash - base < hi;
  bool relative = base != 0 && gnu_hash >= lo && gnu_hash < hi;
  if (absolute == relative) return true;
  uintptr_t table = absolute ? gnu_hash : base + gnu_hash;

  // Header: nbuckets, symoffset, bloom_size (words), bloom_shift; then the Bloom words,
  // the buckets, and the chain of hashes of the symbols from symoffset on, all in the
  // segment that holds the header.
  uintptr_t end = segment_end(info, table, 16);
  if (!end) return true;
  const uint32_t* header = reinterpret_cast<const uint32_t*>(table);
  uint32_t nbuckets = header[0], symoffset = header[1], bloom_size = header[2], shift = header[3];
  if (nbuckets == 0 || bloom_size == 0 || (bloom_size & (bloom_size - 1)) != 0 || bloom_size > (1u << 24) ||
      nbuckets > (1u << 24))
    return true;
  constexpr unsigned kBits = sizeof(ElfW(Addr)) * 8;
  size_t fixed = 16 + size_t{bloom_size} * sizeof(ElfW(Addr)) + size_t{nbuckets} * 4;
  if (fixed > end - table) return true;
  const ElfW(Addr)* bloom = reinterpret_cast<const ElfW(Addr)*>(table + 16);
  ElfW(Addr) word = bloom[(h / kBits) & (bloom_size - 1)];
  ElfW(Addr) mask = (ElfW(Addr){1} << (h % kBits)) | (ElfW(Addr){1} << ((h >> shift) % kBits));
  if ((word & mask) != mask) return false;
  const uint32_t* buckets = reinterpret_cast<const uint32_t*>(table + 16 + size_t{bloom_size} * sizeof(ElfW(Addr)));
  uint32_t index = buckets[h % nbuckets];
  if (index == 0) return false;
  if (index < symoffset) return true;
  uintptr_t chain = table + fixed;
  for (;; ++index) {
    uintptr_t p = chain + (size_t{index} - symoffset) * 4;
    if (p > end - 4) return true;
    uint32_t hv = *reinterpret_cast<const uint32_t*>(p);
    if ((hv | 1) == (h | 1)) return true;  // a symbol with this hash: dlsym compares names
    if (hv & 1) return false;              // the bucket's last symbol
  }
}

int visit_object(dl_phdr_info* info, size_t size, void* data) {
  auto* q = static_cast<SymbolQuery*>(data);
  if (size < offsetof(dl_phdr_info, dlpi_phnum) + sizeof info->dlpi_phnum || object_may_define(info, q->hash)) {
    q->maybe = true;
    return 1;  // stop: the answer is known
  }
  return 0;
}

}  // namespace

bool maybe_exported_by_a_loaded_object(uint32_t gnu_hash) {
  SymbolQuery q = {gnu_hash, false};
  dl_iterate_phdr(visit_object, &q);
  return q.maybe;
}

}  // namespace imptrace
