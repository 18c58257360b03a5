// tracer/tracer_memory: blocks come back zeroed, keep their contents when resized, are
// handed out again after release (the point: pages touched once), and never overlap.
#include <gtest/gtest.h>

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <vector>

#include "tracer_memory.h"

namespace mem = imptrace::tracer_memory;

namespace {
bool all_zero(const void* p, size_t n) {
  auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (c[i]) return false;
  return true;
}
}  // namespace

TEST(TracerMemory, BlocksAreZeroedAlignedAndDisjoint) {
  std::vector<std::pair<char*, size_t>> blocks;
  for (size_t n : {1u, 4096u, 5000u, 65536u, 100000u, 12288u}) {
    auto* p = static_cast<char*>(mem::alloc(n));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
    EXPECT_TRUE(all_zero(p, n));
    memset(p, 0xab, n);
    blocks.push_back({p, n});
  }
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t j = i + 1; j < blocks.size(); ++j) {
      auto [a, an] = blocks[i];
      auto [b, bn] = blocks[j];
      EXPECT_TRUE(a + an <= b || b + bn <= a) << i << " overlaps " << j;
    }
  for (auto [p, n] : blocks) mem::release(p, n);
}

TEST(TracerMemory, ReleasedBlockIsReusedZeroed) {
  auto* p = static_cast<char*>(mem::alloc(3 * 4096));
  ASSERT_NE(p, nullptr);
  memset(p, 0x5a, 3 * 4096);
  size_t recycled = mem::stats().recycled;
  mem::release(p, 3 * 4096);
  // Same rounded size (a 3-page block): the released one, cleared.
  auto* q = static_cast<char*>(mem::alloc(3 * 4096 - 100));
  EXPECT_EQ(q, p);
  EXPECT_EQ(mem::stats().recycled, recycled + 1);
  EXPECT_TRUE(all_zero(q, 3 * 4096));
  mem::release(q, 3 * 4096 - 100);
}

TEST(TracerMemory, ResizeKeepsContentsAndZeroesTheRest) {
  auto* p = static_cast<char*>(mem::resize(nullptr, 0, 4096));
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 4096; ++i) p[i] = static_cast<char>(i * 7);
  auto* other = mem::alloc(4096);  // p is no longer the last block: resize must move it
  auto* q = static_cast<char*>(mem::resize(p, 4096, 5 * 4096));
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(q[i], static_cast<char>(i * 7));
  EXPECT_TRUE(all_zero(q + 4096, 4 * 4096));
  // q is the last block now: growing it again happens in place.
  auto* r = static_cast<char*>(mem::resize(q, 5 * 4096, 9 * 4096));
  if (mem::stats().reserved) {
    EXPECT_EQ(r, q);
  }
  EXPECT_TRUE(all_zero(r + 5 * 4096, 4 * 4096));
  EXPECT_EQ(r[4095], static_cast<char>(4095 * 7));
  mem::release(r, 9 * 4096);
  mem::release(other, 4096);
}

TEST(TracerMemory, FallsBackBeyondTheRegion) {
  // A block larger than the whole region comes from calloc and goes back to free().
  size_t before = mem::stats().fallbacks;
  size_t n = size_t{80} << 20;
  auto* p = static_cast<char*>(mem::alloc(n));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(mem::stats().fallbacks, before + 1);
  p[0] = 1;
  p[n - 1] = 2;
  mem::release(p, n);
}

// clear_static: an object of the test binary's own static storage (found as the library
// finds its own: the writable segment it lies in) reads as zero again. Its whole pages in
// the segment's zero-filled part are dropped, not written (so they are not resident
// after); bytes beside the range keep their contents; an object outside static storage
// (the heap) is written.
namespace {
alignas(4096) unsigned char g_static_pages[10 * 4096 + 100];
unsigned char g_static_small[100];
}  // namespace

TEST(TracerMemory, ClearStaticZeroesStaticStorageDroppingWholePages) {
  memset(g_static_pages, 0xab, sizeof g_static_pages);
  mem::clear_static(g_static_pages, sizeof g_static_pages);
  unsigned char resident[10] = {};  // asked before any read, which maps the zero page
  ASSERT_EQ(mincore(g_static_pages, 10 * 4096, resident), 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(resident[i] & 1, 0) << "page " << i << " still resident: written, not dropped";
  EXPECT_TRUE(all_zero(g_static_pages, sizeof g_static_pages));

  memset(g_static_pages, 0xcd, sizeof g_static_pages);
  mem::clear_static(g_static_pages + 10, 5 * 4096);
  EXPECT_TRUE(all_zero(g_static_pages + 10, 5 * 4096));
  for (size_t i : {size_t{0}, size_t{9}, size_t{10 + 5 * 4096}, sizeof g_static_pages - 1})
    EXPECT_EQ(g_static_pages[i], 0xcd) << "byte " << i;

  memset(g_static_small, 1, sizeof g_static_small);
  mem::clear_static(g_static_small, sizeof g_static_small);
  EXPECT_TRUE(all_zero(g_static_small, sizeof g_static_small));

  std::vector<unsigned char> heap(3 * 4096 + 7, 7);
  mem::clear_static(heap.data(), heap.size());
  EXPECT_TRUE(all_zero(heap.data(), heap.size()));
}
