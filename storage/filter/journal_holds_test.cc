// JournalHolds: holds cover what they keep, renewals only move forward, and lapsed holds are
// swept as the table grows, also when most of it is live (a move holds every filter of its
// slots).
#include "storage/filter/journal_holds.h"

#include <cstdint>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace storage {
namespace {

constexpr absl::Time kStart = absl::FromUnixSeconds(1'000'000);
constexpr absl::Duration kHold = absl::Minutes(1);

TEST(JournalHoldsTest, AHoldCoversItsSequenceUntilItLapses) {
  JournalHolds holds;
  EXPECT_TRUE(holds.empty());
  holds.Hold(/*generation=*/7, /*after_seq=*/10, kStart, kHold);
  EXPECT_TRUE(holds.Covers(7, 10, kStart + absl::Seconds(59)));
  EXPECT_TRUE(holds.Covers(7, 12, kStart)) << "later sequences were kept too";
  EXPECT_FALSE(holds.Covers(7, 9, kStart)) << "records up to 10 may be trimmed";
  EXPECT_FALSE(holds.Covers(8, 10, kStart)) << "another generation is not held";
  EXPECT_FALSE(holds.Covers(7, 10, kStart + kHold)) << "lapsed";
  EXPECT_EQ(holds.TrimLimit(7, 50, kStart), 10u);
  EXPECT_EQ(holds.TrimLimit(7, 50, kStart + kHold), 50u);
}

TEST(JournalHoldsTest, ARenewalNeverMovesAHoldBack) {
  JournalHolds holds;
  holds.Hold(7, 10, kStart, kHold);
  holds.Hold(7, 5, kStart + absl::Seconds(30), kHold);
  uint64_t after = 0;
  ASSERT_TRUE(holds.HeldAfter(7, kStart + absl::Seconds(80), &after)) << "renewed";
  EXPECT_EQ(after, 10u) << "records up to 10 may be gone already";
  holds.Release(7);
  EXPECT_TRUE(holds.empty());
}

TEST(JournalHoldsTest, LapsedHoldsAreSweptWhileManyLiveOnesStay) {
  JournalHolds holds;
  // A first move held 3,000 filters, then went away.
  for (uint64_t generation = 1; generation <= 3'000; ++generation) {
    holds.Hold(generation, 1, kStart, kHold);
  }
  EXPECT_EQ(holds.size(), 3'000u) << "all live: none swept";
  // A second one holds 5,000 others after the first's lapsed: they are swept as the table
  // grows, and every live hold stays.
  const absl::Time later = kStart + 2 * kHold;
  for (uint64_t generation = 10'001; generation <= 15'000; ++generation) {
    holds.Hold(generation, 1, later, kHold);
  }
  EXPECT_EQ(holds.size(), 5'000u);
  for (uint64_t generation = 10'001; generation <= 15'000; ++generation) {
    ASSERT_TRUE(holds.Covers(generation, 1, later)) << generation;
  }
  EXPECT_FALSE(holds.Covers(1, 1, later));
}

}  // namespace
}  // namespace storage
