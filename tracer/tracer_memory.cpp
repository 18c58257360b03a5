#include "tracer_memory.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>

namespace imptrace {
namespace tracer_memory {
namespace {

// Address space only: pages are committed as the tables reach them. A trace of 100,000
// imports needs about 20 MiB of tables; past the region, blocks come from calloc.
constexpr size_t kReserve = size_t{64} << 20;
constexpr size_t kHuge = size_t{2} << 20;
// The first part stays in small pages, so that a process with few imports (most of a test
// run's helper processes) does not pay 2 MiB of resident memory for a few tables.
constexpr size_t kSmallHead = size_t{256} << 10;
constexpr size_t kPage = 4096;
// Tables grow through the same few sizes (capacity doublings times a slot size), so the
// blocks given back are kept on one list per size, a handful of sizes in all.
constexpr int kSizes = 48;

struct FreeBlock { FreeBlock* next; };
struct FreeList { size_t size; FreeBlock* head; };

bool g_tried = false;
char* g_base = nullptr;  // [g_base, g_end): the region; g_top: first byte not handed out
char* g_top = nullptr;  // beyond it nothing was ever touched: still zero
char* g_end = nullptr;
FreeList g_free[kSizes];
Stats g_stats;
bool g_lock = false;

struct SpinLock {
  SpinLock() {
    while (__atomic_test_and_set(&g_lock, __ATOMIC_ACQUIRE)) sched_yield();
  }
  ~SpinLock() { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }
};

size_t rounded(size_t n) { return n ? (n + kPage - 1) & ~(kPage - 1) : kPage; }

// The list for blocks of `size` bytes; null when all lists are taken by other sizes.
FreeList* list_for(size_t size, bool create) {
  for (FreeList& l : g_free) {
    if (l.size == size) return &l;
    if (!l.size) {
      if (!create) return nullptr;
      l.size = size;
      return &l;
    }
  }
  return nullptr;
}

// Off by default: with the kernel's default THP "defrag" setting, a fault in a region
// advised MADV_HUGEPAGE may compact memory on the spot, a stall no host process asked for;
// and on this project's CI machine the time it saves was within the noise (see README).
bool huge_pages_wanted() {
  const char* v = getenv("IMPTRACE_HUGEPAGES");
  return v && v[0] == '1' && v[1] == 0;
}

void reserve() {
  g_tried = true;
  size_t len = kReserve + kHuge;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return;
  // Place the region so that its huge-page part starts on a 2 MiB boundary.
  auto raw = reinterpret_cast<uintptr_t>(m);
  uintptr_t huge_start = (raw + kSmallHead + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  uintptr_t base = huge_start - kSmallHead;
  uintptr_t end = raw + len;
  if (base > raw) munmap(m, base - raw);
  g_base = reinterpret_cast<char*>(base);
  g_top = g_base;
  g_end = reinterpret_cast<char*>(end);
  g_stats.reserved = end - base;
  // Refused (no THP in this kernel): small pages, still touched once.
  if (huge_pages_wanted()) madvise(reinterpret_cast<void*>(huge_start), end - huge_start, MADV_HUGEPAGE);
}

// A new block is made writable at once, with one madvise(MADV_POPULATE_WRITE), rather than
// by a page fault per page as the table fills it: tables fill their blocks (the last chunk
// of each only in part), and a microbenchmark of 400 pages in 16 KiB blocks measured
// +5.1 ms by faults, +3.0 ms this way. Kernels before 5.14 refuse (EINVAL).
bool g_no_populate = false;
void populate(void* p, size_t n) {
  if (g_no_populate) return;
  if (madvise(p, n, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) g_no_populate = true;
}

bool in_region(const void* p) {
  auto c = static_cast<const char*>(p);
  return g_base && c >= g_base && c < g_end;
}

void* alloc_locked(size_t n) {
  if (!g_tried) reserve();
  size_t size = rounded(n);
  FreeList* l = list_for(size, false);
  if (l && l->head) {
    FreeBlock* b = l->head;
    l->head = b->next;
    memset(b, 0, size);
    ++g_stats.recycled;
    return b;
  }
  if (g_base && size <= static_cast<size_t>(g_end - g_top)) {
    char* p = g_top;
    g_top += size;
    g_stats.used = static_cast<size_t>(g_top - g_base);
    populate(p, size);
    return p;
  }
  ++g_stats.fallbacks;
  return calloc(1, size);
}

void release_locked(void* p, size_t n) {
  if (!p) return;
  if (!in_region(p)) { free(p); return; }
  FreeList* l = list_for(rounded(n), true);
  if (!l) return;  // more distinct sizes than lists: the block stays unused
  auto* b = static_cast<FreeBlock*>(p);
  b->next = l->head;
  l->head = b;
}

}  // namespace

void* alloc(size_t n) {
  SpinLock lock;
  return alloc_locked(n);
}

void release(void* p, size_t n) {
  SpinLock lock;
  release_locked(p, n);
}

void* resize(void* p, size_t old_n, size_t new_n) {
  SpinLock lock;
  if (!p) return alloc_locked(new_n);
  size_t old_size = rounded(old_n), new_size = rounded(new_n);
  if (new_size <= old_size) return p;  // beyond old_n the block is still zero
  if (in_region(p) && static_cast<char*>(p) + old_size == g_top &&
      new_size - old_size <= static_cast<size_t>(g_end - g_top)) {
    populate(g_top, new_size - old_size);
    g_top += new_size - old_size;
    g_stats.used = static_cast<size_t>(g_top - g_base);
    return p;
  }
  void* q = alloc_locked(new_n);
  if (!q) return nullptr;
  memcpy(q, p, old_n);
  release_locked(p, old_n);
  return q;
}

Stats stats() {
  SpinLock lock;
  return g_stats;
}

void after_fork_in_child() { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }

}  // namespace tracer_memory
}  // namespace imptrace
