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

// The object's readable loaded segments, from one pass over its program headers: every
// read below is checked against them, so nothing outside what the loader mapped is read.
struct Segments {
  static constexpr int kMax = 8;
  uintptr_t lo[kMax], size[kMax];
  int n;

  bool hold(uintptr_t p, size_t bytes) const {
    for (int i = 0; i < n; ++i)
      if (p >= lo[i] && bytes <= size[i] && p - lo[i] <= size[i] - bytes) return true;
    return false;
  }
};

// A dynamic entry's address. glibc usually rewrites the entries of an object's dynamic
// section to absolute addresses at load, but not those of a read-only one (the vDSO's,
// those of targets that keep it read-only): there the entry is still an offset from the
// load address. Whichever reading lands in the object's loaded segments is the one; when
// both or neither do (an object loaded so low that the two overlap), there is no answer.
bool dynamic_address(const Segments& s, uintptr_t base, ElfW(Addr) value, size_t bytes, uintptr_t* out) {
  bool absolute = s.hold(value, bytes);
  bool relative = base != 0 && s.hold(base + value, bytes);
  if (absolute == relative) return false;
  *out = absolute ? value : base + value;
  return true;
}

// True when this object might define the symbol (or cannot be read): the walk stops there.
bool object_may_define(const dl_phdr_info* info, uint32_t h) {
  Segments s;
  s.n = 0;
  const ElfW(Phdr)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dynamic = &ph;
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_R)) continue;
    if (s.n == Segments::kMax) return true;
    s.lo[s.n] = info->dlpi_addr + ph.p_vaddr;
    s.size[s.n++] = ph.p_memsz;
  }
  if (!dynamic) return false;  // no dynamic section (a static executable): exports nothing
  uintptr_t d = info->dlpi_addr + dynamic->p_vaddr;
  size_t entries = dynamic->p_memsz / sizeof(ElfW(Dyn));
  if (!s.hold(d, entries * sizeof(ElfW(Dyn)))) return true;
  const ElfW(Dyn)* dyn = reinterpret_cast<const ElfW(Dyn)*>(d);
  ElfW(Addr) gnu_hash = 0;
  for (size_t i = 0; i < entries && dyn[i].d_tag != DT_NULL; ++i)
    if (dyn[i].d_tag == DT_GNU_HASH) { gnu_hash = dyn[i].d_un.d_ptr; break; }
  if (!gnu_hash) return true;  // only a SysV hash table, or none: ask dlsym

  // Header: nbuckets, symoffset, bloom_size (words), bloom_shift; then the Bloom words,
  // the buckets, and the chain of hashes of the symbols from symoffset on.
  uintptr_t table;
  if (!dynamic_address(s, info->dlpi_addr, gnu_hash, 16, &table)) return true;
  const uint32_t* header = reinterpret_cast<const uint32_t*>(table);
  uint32_t nbuckets = header[0], symoffset = header[1], bloom_size = header[2], shift = header[3];
  if (nbuckets == 0 || bloom_size == 0 || (bloom_size & (bloom_size - 1)) != 0 || bloom_size > (1u << 24) ||
      nbuckets > (1u << 24))
    return true;
  constexpr unsigned kBits = sizeof(ElfW(Addr)) * 8;
  size_t fixed = 16 + size_t{bloom_size} * sizeof(ElfW(Addr)) + size_t{nbuckets} * 4;
  if (!s.hold(table, fixed)) return true;
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
    if (!s.hold(p, 4)) return true;
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

bool maybe_exported_by_a_loaded_object(const char* name) {
  uint32_t h = 5381;  // the GNU hash (dl_new_hash): h * 33 + c
  for (const unsigned char* c = reinterpret_cast<const unsigned char*>(name); *c; ++c) h = h * 33 + *c;
  SymbolQuery q = {h, false};
  dl_iterate_phdr(visit_object, &q);
  return q.maybe;
}

}  // namespace imptrace
