// tracer/dense_table.h: entries are found again after the index grows, keep their
// addresses and positions, collide safely (same hash, same tag), and clear() forgets them
// while the table keeps working; a miss's hole serves an insert only while the table is unchanged.
#include <gtest/gtest.h>

#include <stdint.h>

#include <vector>

#include "dense_table.h"
#include "hash.h"

namespace {
struct Item { uint64_t key; uint64_t hash; uint32_t payload; };
struct ItemTraits {
  static uint64_t hash(const Item& i) { return i.hash; }
};
using Table = imptrace::DenseTable<Item, ItemTraits>;

uint32_t find(const Table& t, uint64_t key, uint64_t h) {
  return t.find(h, [key](const Item& i) { return i.key == key; });
}
}  // namespace

TEST(DenseTable, FindsEveryEntryAcrossIndexGrowth) {
  Table t;
  std::vector<Item*> addr;
  const uint32_t n = 50000;  // the index doubles from 1024 to 65536; 49 chunks of entries
  for (uint32_t k = 0; k < n; ++k) {
    uint64_t h = imptrace::hash_address(k * 16 + 0x10000);
    EXPECT_EQ(find(t, k, h), Table::kNone);
    uint32_t pos = 0;
    Item* e = t.insert(h, &pos);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(pos, k);  // positions are dense, in insertion order
    EXPECT_EQ(e->key, 0u);  // zeroed
    *e = Item{k, h, k * 3};
    addr.push_back(e);
  }
  EXPECT_EQ(t.size(), n);
  for (uint32_t k = 0; k < n; ++k) {
    uint32_t pos = find(t, k, imptrace::hash_address(k * 16 + 0x10000));
    ASSERT_EQ(pos, k);
    EXPECT_EQ(&t.at(pos), addr[k]);  // never moved
    EXPECT_EQ(t.at(pos).payload, k * 3);
  }
}

TEST(DenseTable, EqualHashesAreToldApartByTheEntry) {
  Table t;
  const uint64_t h = 0xabcdef0123456789ull;  // one hash, one tag, for all of them
  for (uint64_t k = 1; k <= 300; ++k) *t.insert(h) = Item{k, h, 0};
  for (uint64_t k = 1; k <= 300; ++k) EXPECT_EQ(find(t, k, h), k - 1);
  EXPECT_EQ(find(t, 301, h), Table::kNone);
  // Same slot, other tag: not a candidate at all.
  EXPECT_EQ(t.find(h ^ (0xffull << 56), [](const Item&) { return true; }), Table::kNone);
}

// A miss hands its hole to the insert that follows; an insert in between (or the index
// growing) voids it, and the entry is placed by a probe of its own.
TEST(DenseTable, AnInsertAtAMissesHoleIsFoundAgain) {
  Table t;
  const uint32_t n = 5000;  // crosses several index growths
  for (uint32_t k = 0; k < n; ++k) {
    uint64_t h = imptrace::hash_address(k * 48 + 0x7000);
    Table::Hole hole;
    ASSERT_EQ(t.find(h, [k](const Item& i) { return i.key == k; }, &hole), Table::kNone);
    if (k % 3 == 1) {
      // Another entry (same home slot) comes in before: the hole is stale.
      uint64_t other = n + k;
      *t.insert(h) = Item{other, h, 0};
    }
    uint32_t pos = 0;
    Item* e = t.insert(h, &pos, hole);
    ASSERT_NE(e, nullptr);
    *e = Item{k, h, k};
  }
  for (uint32_t k = 0; k < n; ++k) {
    uint64_t h = imptrace::hash_address(k * 48 + 0x7000);
    uint32_t pos = find(t, k, h);
    ASSERT_NE(pos, Table::kNone) << k;
    EXPECT_EQ(t.at(pos).payload, k);
    if (k % 3 == 1) {
      EXPECT_NE(find(t, n + k, h), Table::kNone);
    }
  }
}

TEST(DenseTable, ClearForgetsAndTheTableIsUsableAgain) {
  Table t;
  for (uint64_t k = 0; k < 3000; ++k) *t.insert(imptrace::hash_address(k + 1)) = Item{k, imptrace::hash_address(k + 1), 7};
  t.clear();
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(find(t, 5, imptrace::hash_address(6)), Table::kNone);
  uint32_t pos = 99;
  Item* e = t.insert(imptrace::hash_address(6), &pos);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(pos, 0u);
  EXPECT_EQ(e->payload, 0u);  // a reused chunk's entry comes back zeroed
  *e = Item{5, imptrace::hash_address(6), 1};
  EXPECT_EQ(find(t, 5, imptrace::hash_address(6)), 0u);
}

TEST(ChunkedArray, ItemsStayPutAndComeZeroed) {
  imptrace::ChunkedArray<uint64_t> a;
  std::vector<uint64_t*> addr;
  for (uint64_t i = 0; i < 5000; ++i) {
    uint64_t* p = a.push();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(*p, 0u);
    *p = i + 1;
    addr.push_back(p);
  }
  for (uint32_t i = 0; i < 5000; ++i) {
    EXPECT_EQ(&a[i], addr[i]);
    EXPECT_EQ(a[i], i + 1u);
  }
  a.clear();
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(*a.push(), 0u);
}
