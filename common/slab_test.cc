#include "common/slab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace slab {
namespace {

TEST(SlabTest, ServesAlignedSlotsOfAtLeastTheSizeAsked) {
  EXPECT_FALSE(Fits(0));
  EXPECT_TRUE(Fits(1));
  EXPECT_TRUE(Fits(kMaxSlotBytes));
  EXPECT_FALSE(Fits(kMaxSlotBytes + 1));
  EXPECT_EQ(Allocate(0), nullptr);
  EXPECT_EQ(Allocate(kMaxSlotBytes + 1), nullptr);

  std::vector<void*> slots;
  for (size_t bytes :
       {size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1544}, size_t{4096}, kMaxSlotBytes}) {
    void* slot = Allocate(bytes);
    ASSERT_NE(slot, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(slot) % kAlignment, 0u) << bytes;
    std::memset(slot, 0xab, bytes);  // the whole size is ours (ASan would object otherwise)
    slots.push_back(slot);
  }
  const Figures figures = Totals();
  EXPECT_GE(figures.in_use_bytes, 1 + 63 + 64 + 65 + 1544 + 4096 + kMaxSlotBytes);
  EXPECT_GE(figures.slab_bytes, figures.in_use_bytes);
  for (void* slot : slots) Free(slot);
  Free(nullptr);  // ignored
  EXPECT_LT(Totals().in_use_bytes, figures.in_use_bytes);
}

TEST(SlabTest, AFreedSlotIsTheNextOneOfItsSizeAndOnlyOfItsSize) {
  void* a = Allocate(1544);
  void* other_size = Allocate(3000);
  Free(a);
  void* b = Allocate(4000);  // another size: not a's slot
  EXPECT_NE(b, a);
  void* c = Allocate(1540);  // rounds to the same slot size as 1544 (1600)
  EXPECT_EQ(c, a);
  Free(b);
  Free(c);
  Free(other_size);
}

// What it is for: under any order of frees, memory is the peak of live slots of each size plus
// at most one partly carved slab per size; malloc's holes would grow instead.
TEST(SlabTest, ChurnUnderALiveBoundNeedsNoMoreSlabs) {
  constexpr size_t kSizes[] = {1544, 3008, 6080};
  constexpr int kLivePerSize = 2'000;
  std::mt19937_64 random(7);
  std::vector<std::vector<void*>> live(std::size(kSizes));
  for (size_t s = 0; s < std::size(kSizes); ++s) {
    for (int i = 0; i < kLivePerSize; ++i) live[s].push_back(Allocate(kSizes[s]));
  }
  const uint64_t slabs_at_peak = Totals().slab_bytes;
  for (int round = 0; round < 200'000; ++round) {
    const size_t s = random() % std::size(kSizes);
    const size_t victim = random() % live[s].size();
    std::memset(live[s][victim], 0, kSizes[s]);
    Free(live[s][victim]);
    live[s][victim] = Allocate(kSizes[s]);
    ASSERT_NE(live[s][victim], nullptr);
  }
  EXPECT_EQ(Totals().slab_bytes, slabs_at_peak);
  std::set<void*> distinct;
  for (const auto& slots : live) distinct.insert(slots.begin(), slots.end());
  EXPECT_EQ(distinct.size(), std::size(kSizes) * kLivePerSize);
  for (const auto& slots : live) {
    for (void* slot : slots) Free(slot);
  }
}

TEST(SlabTest, SlotsSpanManySlabsAndFreeFindsTheirSize) {
  // 64 KiB slots: 63 per slab, so 200 of them take four slabs.
  std::vector<void*> slots;
  for (int i = 0; i < 200; ++i) slots.push_back(Allocate(kMaxSlotBytes));
  std::set<uintptr_t> slabs;
  for (void* slot : slots) slabs.insert(reinterpret_cast<uintptr_t>(slot) / kSlabBytes);
  EXPECT_GE(slabs.size(), 4u);
  for (void* slot : slots) Free(slot);
  // Every one comes back for the same size, none for another.
  std::set<void*> freed(slots.begin(), slots.end());
  void* small = Allocate(100);
  EXPECT_EQ(freed.count(small), 0u);
  Free(small);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(freed.count(Allocate(kMaxSlotBytes)), 1u);
}

// Each thread stamps its slots with its own pattern and checks it before freeing: two threads
// handed one slot would overwrite each other's stamp.
TEST(SlabTest, ThreadsNeverShareASlot) {
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> corrupted(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &corrupted] {
      std::mt19937_64 random(t);
      std::vector<std::pair<uint8_t*, size_t>> mine;
      for (int i = 0; i < 20'000; ++i) {
        if (mine.size() < 64 && (mine.empty() || random() % 2 == 0)) {
          const size_t bytes = 64 + random() % 4096;
          auto* slot = static_cast<uint8_t*>(Allocate(bytes));
          std::memset(slot, t + 1, bytes);
          mine.emplace_back(slot, bytes);
        } else {
          const size_t victim = random() % mine.size();
          auto [slot, bytes] = mine[victim];
          if (std::count(slot, slot + bytes, static_cast<uint8_t>(t + 1)) !=
              static_cast<std::ptrdiff_t>(bytes)) {
            ++corrupted[t];
          }
          Free(slot);
          mine[victim] = mine.back();
          mine.pop_back();
        }
      }
      for (auto [slot, bytes] : mine) Free(slot);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(corrupted[t], 0) << "thread " << t;
}

#if defined(__SANITIZE_ADDRESS__)
TEST(SlabDeathTest, AddressSanitizerSeesAUseAfterFree) {
  auto* slot = static_cast<volatile char*>(Allocate(1544));
  Free(const_cast<char*>(slot));
  EXPECT_DEATH(slot[100] = 1, "use-after-poison");
}
#endif

}  // namespace
}  // namespace slab
