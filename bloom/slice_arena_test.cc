// Slice arenas (slice_arena.h) and the filters in their slots: interleaved bits must answer,
// count and persist exactly as contiguous ones, slots must be handed out once and come back
// cleared, and MightContainAny must mix both kinds.
#include "bloom/slice_arena.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "bloom/blocked_filter.h"
#include "bloom/testing.h"
#include "gtest/gtest.h"

namespace bloom {
namespace {

// 600 blocks: three pages (256 blocks each), the last one short.
constexpr BlockedLayout kLayout{600, 7};

std::vector<std::string> Pages(const BlockedBloomFilter& filter) {
  std::vector<std::string> pages;
  for (uint64_t page = 0; page < filter.num_pages(); ++page) {
    pages.emplace_back(filter.page_size(page), '\0');
    filter.ReadPage(page, pages.back().data());
  }
  return pages;
}

TEST(SliceArenaTest, SlotsAreHandedOutOnceAndComeBackCleared) {
  SliceArena::Ref arena = SliceArena::Create(kLayout, 3);
  ASSERT_NE(arena, nullptr);
  std::vector<std::unique_ptr<BlockedBloomFilter>> filters;
  for (int i = 0; i < 3; ++i) {
    filters.push_back(BlockedBloomFilter::CreateInArena(*arena));
    ASSERT_NE(filters.back(), nullptr);
    EXPECT_TRUE(filters.back()->in_arena());
  }
  EXPECT_EQ(arena->slots_in_use(), 3u);
  EXPECT_EQ(BlockedBloomFilter::CreateInArena(*arena), nullptr);  // full

  absl::BitGen gen;
  for (auto& filter : filters) filter->AddMany(RandomHashes(3000, gen));
  filters[1].reset();
  EXPECT_EQ(arena->slots_in_use(), 2u);
  std::unique_ptr<BlockedBloomFilter> reused = BlockedBloomFilter::CreateInArena(*arena);
  ASSERT_NE(reused, nullptr);
  EXPECT_EQ(reused->CountSetBits(), 0u);  // the old slice's bits are gone
  EXPECT_EQ(reused->set_bits(), 0u);
  EXPECT_TRUE(reused->TakeDirtyPages().empty());
}

TEST(SliceArenaTest, AFilterInASlotAnswersCountsAndPersistsAsAContiguousOne) {
  SliceArena::Ref arena = SliceArena::Create(kLayout, 4);
  ASSERT_NE(arena, nullptr);
  absl::BitGen gen;
  // Neighbours in the other slots, full of other items, must not leak into the one checked.
  std::unique_ptr<BlockedBloomFilter> before = BlockedBloomFilter::CreateInArena(*arena);
  std::unique_ptr<BlockedBloomFilter> slotted = BlockedBloomFilter::CreateInArena(*arena);
  std::unique_ptr<BlockedBloomFilter> after = BlockedBloomFilter::CreateInArena(*arena);
  ASSERT_TRUE(before && slotted && after);
  before->AddMany(RandomHashes(20'000, gen));
  after->AddMany(RandomHashes(20'000, gen));
  std::unique_ptr<BlockedBloomFilter> contiguous = *BlockedBloomFilter::Create(kLayout);

  const std::vector<uint64_t> hashes = RandomHashes(2500, gen);
  slotted->AddMany(hashes);
  contiguous->AddMany(hashes);
  EXPECT_EQ(Pages(*slotted), Pages(*contiguous));
  EXPECT_EQ(slotted->CountSetBits(), contiguous->CountSetBits());
  EXPECT_EQ(slotted->set_bits(), contiguous->set_bits());
  EXPECT_EQ(slotted->TakeDirtyPages(), contiguous->TakeDirtyPages());
  int present = 0;
  std::vector<uint64_t> queries = RandomHashes(5000, gen);  // mostly absent
  queries.insert(queries.end(), hashes.begin(), hashes.end());
  for (uint64_t h : queries) {
    ASSERT_EQ(slotted->MightContain(h), contiguous->MightContain(h));
    present += slotted->MightContain(h);
  }
  EXPECT_GE(present, 2500);  // the comparison saw both answers
  EXPECT_LT(present, 7500);

  // Pages load into a slot as they were written from it (start-up, Import).
  std::unique_ptr<BlockedBloomFilter> loaded = BlockedBloomFilter::CreateInArena(*arena);
  ASSERT_NE(loaded, nullptr);
  const std::vector<std::string> pages = Pages(*contiguous);
  for (uint64_t page = 0; page < pages.size(); ++page) {
    ASSERT_TRUE(loaded->OrPage(page, pages[page]).ok());
  }
  EXPECT_EQ(Pages(*loaded), pages);
  EXPECT_EQ(loaded->set_bits(), contiguous->set_bits());
  for (uint64_t h : hashes) ASSERT_TRUE(loaded->MightContain(h));
}

TEST(SliceArenaTest, MightContainAnyMixesSlotsAndContiguousFilters) {
  SliceArena::Ref arena = SliceArena::Create(kLayout, 3);
  ASSERT_NE(arena, nullptr);
  absl::BitGen gen;
  std::vector<std::unique_ptr<BlockedBloomFilter>> owned;
  owned.push_back(BlockedBloomFilter::CreateInArena(*arena));
  owned.push_back(*BlockedBloomFilter::Create(kLayout));
  owned.push_back(BlockedBloomFilter::CreateInArena(*arena));
  owned.push_back(*BlockedBloomFilter::Create(kLayout));
  std::vector<const BlockedBloomFilter*> filters;
  for (auto& filter : owned) {
    ASSERT_NE(filter, nullptr);
    filter->AddMany(RandomHashes(1500, gen));
    filters.push_back(filter.get());
  }
  const std::vector<uint64_t> queries = RandomHashes(5000, gen);
  std::unique_ptr<bool[]> any(new bool[queries.size()]);
  for (size_t i = 0; i < queries.size(); ++i) any[i] = i % 97 == 0;  // already answered: kept
  BlockedBloomFilter::MightContainAny(filters, queries, any.get());
  int hits = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    bool expected = i % 97 == 0;
    for (const BlockedBloomFilter* f : filters) expected = expected || f->MightContain(queries[i]);
    ASSERT_EQ(any[i], expected) << i;
    hits += expected;
  }
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, static_cast<int>(queries.size()));
}

TEST(SliceArenaTest, TheArenaOutlivesItsOwnerWhileSlotsAreInUse) {
  SliceArena::Ref arena = SliceArena::Create(kLayout, 2);
  ASSERT_NE(arena, nullptr);
  std::unique_ptr<BlockedBloomFilter> filter = BlockedBloomFilter::CreateInArena(*arena);
  ASSERT_NE(filter, nullptr);
  arena.reset();  // the owner lets go first (a ScalableFilter whose retired slices live on)
  absl::BitGen gen;
  const std::vector<uint64_t> hashes = RandomHashes(1000, gen);
  filter->AddMany(hashes);  // AddressSanitizer would see an unmapped arena here
  for (uint64_t h : hashes) ASSERT_TRUE(filter->MightContain(h));
}

}  // namespace
}  // namespace bloom
