// Memory for the tracer's own tables (string interning, object identity, the sys.modules
// shadow). Why not malloc: on the virtual machines CI runs on, the first touch of a 4 KiB
// page costs 10-15 us, and doubling tables that are calloc'ed afresh and freed each time
// touch every page of every generation. Here blocks come from 1 MiB regions mapped as
// needed; a block a table outgrew is kept, by size, for the next one that grows to that
// size, so pages are touched once (see dense_table.h for the tables' side); and a new
// block's pages are made in one system call.
// Thread-safe (a spin lock; the sections are a few instructions long); usable in a fork
// child. A block larger than half a region, or one that no region can take, comes from
// calloc (and goes back to free).
#pragma once

#include <stddef.h>

namespace imptrace {
namespace tracer_memory {

// n bytes, zeroed, 4 KiB aligned; null when out of memory. Sizes are rounded up to whole
// pages: ask for whole tables, not for small objects.
void* alloc(size_t n);

// Gives back a block from alloc (or resize) of n bytes (the size asked for).
void release(void* p, size_t n);

// A block of new_n bytes holding the first old_n bytes of p (zero after them); p is given
// back. Grows in place when p is the last block handed out. Null (p untouched) when out of
// memory.
void* resize(void* p, size_t old_n, size_t new_n);

// Makes the pages of [p, p + n) now, writable, with one madvise(MADV_POPULATE_WRITE)
// instead of a fault per page as they are first written (a fault costs 10-15 us on CI's
// virtual machines). Only whole pages inside the range are made (the rest fault as usual:
// with 64 KiB pages, blocks rounded to 4 KiB may not start on one). Once a kernel says it
// has no such advice (before 5.14), nothing more is asked.
void populate(void* p, size_t n);

// Zeroes [p, p + n), an object in the library's static storage, as the loader left it:
// the whole pages of it that lie in the zero-filled (anonymous) part of the library's
// writable segment are dropped (madvise MADV_DONTNEED: they read as zero again, and a page
// never touched is not made now), the rest is written. A lifetime's end clears caches of
// up to 168 KiB this way: written, each page of them cost a fault (10-15 us on CI's
// virtual machines) at every process exit, to be thrown away.
void clear_static(void* p, size_t n);

// Figures for tests and benchmarks.
struct Stats {
  size_t reserved;      // bytes of the regions mapped so far
  size_t used;          // bytes of them handed out
  size_t recycled;      // blocks handed out again after release
  size_t fallbacks;     // blocks that came from calloc
};
Stats stats();

// In a fork child: the lock may have been held by a thread that does not exist there.
void after_fork_in_child();

}  // namespace tracer_memory
}  // namespace imptrace
