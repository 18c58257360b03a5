// Page-fault avoidance for the viewer's big arrays (100,000s of records, per-name tables).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace imptrace {

// Maps in the pages of a vector's reserved, not yet used capacity in one system call.
// Touching them one by one costs a page fault per 4 KiB, and on virtual machines those
// were a fifth of the time of reading a trace or diffing two. Only worth it for big
// vectors (malloc gives those their own mapping). Best effort: a kernel without
// MADV_POPULATE_WRITE (before 5.14) refuses it and pages fault in as before.
template <class T>
void prefault_capacity(std::vector<T>& v) {
#ifdef MADV_POPULATE_WRITE
  size_t bytes = (v.capacity() - v.size()) * sizeof(T);
  if (bytes < (size_t(1) << 20)) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t from = reinterpret_cast<uintptr_t>(v.data() + v.size());
  uintptr_t first = (from + page - 1) & ~(page - 1), last = (from + bytes) & ~(page - 1);
  if (last <= first) return;
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
#else
  (void)v;
#endif
}

// `v` becomes n copies of `value`, its pages mapped in one call (as above) before they
// are written.
template <class T>
void prefaulted_assign(std::vector<T>& v, size_t n, const T& value) {
  v.clear();
  v.reserve(n);
  prefault_capacity(v);
  v.assign(n, value);
}

}  // namespace imptrace
