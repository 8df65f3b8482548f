#include "storage/filter/checkpointed.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace storage {
namespace {

struct Case {
  uint64_t seq;
  uint32_t first_index;
  std::vector<uint64_t> items;
  bool inline_expected;
};

// Every field round-trips, inline at the limits and on the heap just past them; reassigning
// between the two forms frees the old block (ASan: no leak, no double free).
TEST(CheckpointedTest, RoundTripsInlineUpToItsLimitsAndOnTheHeapBeyond) {
  const uint64_t max_seq = (uint64_t{1} << 32) - 1;
  const uint64_t max_items = (uint64_t{1} << 31) - 1;
  const std::vector<Case> cases = {
      {0, 0, {}, true},
      {0, 0, {0}, true},
      {1, 0, {1000}, true},
      {max_seq, 0, {max_items}, true},
      {max_seq + 1, 0, {5}, false},
      {3, 0, {max_items + 1}, false},
      {3, 1, {5}, false},        // a window that retired sub-filter 0
      {3, 7, {}, false},         // ... and every other one
      {0, 0, {1, 2, 3}, false},  // a chain that grew
      {UINT64_MAX, UINT32_MAX, {UINT64_MAX, 0}, false},
  };
  Checkpointed checkpointed;
  for (int round = 0; round < 2; ++round) {  // each form replacing the other
    for (const Case& c : cases) {
      checkpointed.Assign(c.seq, c.first_index, c.items);
      EXPECT_EQ(checkpointed.seq(), c.seq);
      EXPECT_EQ(checkpointed.first_index(), c.first_index);
      const absl::InlinedVector<uint64_t, 1> items = checkpointed.items_added();
      EXPECT_EQ(std::vector<uint64_t>(items.begin(), items.end()), c.items) << c.seq;
      EXPECT_EQ(checkpointed.is_inline(), c.inline_expected) << c.seq << " " << c.first_index;
    }
  }
  Checkpointed fresh;
  EXPECT_EQ(fresh.seq(), 0u);
  EXPECT_TRUE(fresh.items_added().empty());
}

}  // namespace
}  // namespace storage
