#include "bloom/sizing.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace bloom {
namespace {

TEST(ChooseLayoutTest, RejectsBadArguments) {
  EXPECT_EQ(ChooseLayout(0, 0.01).status().code(), absl::StatusCode::kInvalidArgument);
  for (double p : {0.0, 1.0, -0.5, 2.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(ChooseLayout(1000, p).status().code(), absl::StatusCode::kInvalidArgument) << p;
  }
}

TEST(ChooseLayoutTest, HugeCapacityIsResourceExhausted) {
  EXPECT_EQ(ChooseLayout(std::numeric_limits<uint64_t>::max(), 0.001).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(ChooseLayoutTest, TinyFilterHasOneBlock) {
  absl::StatusOr<BlockedLayout> layout = ChooseLayout(1, 0.01);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->num_blocks, 1u);
  EXPECT_GE(layout->hash_count, 1u);
}

TEST(ChooseLayoutTest, ChosenLayoutMeetsTheRateAndOneLessBlockDoesNot) {
  for (double p : {0.1, 0.01, 0.001, 1e-4, 1e-6, 1e-9}) {
    const uint64_t n = 1'000'000;
    absl::StatusOr<BlockedLayout> layout = ChooseLayout(n, p);
    ASSERT_TRUE(layout.ok()) << layout.status();
    const double load = static_cast<double>(n) / static_cast<double>(layout->num_blocks);
    EXPECT_LE(BlockedFalsePositiveRate(load, layout->hash_count), p) << p;
    // Minimal: 0.5% fewer blocks would exceed the rate.
    EXPECT_GT(BlockedFalsePositiveRate(load * 1.005, layout->hash_count), p) << p;
  }
}

// Odd rates are sized for the rate rounded down to two significant digits: still within the
// asked rate, at most a few percent more bits, and the many rates of one band share one search
// (a hostile caller cannot make the server search once per distinct rate).
TEST(ChooseLayoutTest, OddRatesShareTheLayoutOfTheirTwoDigitRate) {
  const uint64_t n = 1'000'000;
  for (double p : {0.0137, 0.01999, 0.00251, 3.3333e-5, 0.5}) {
    absl::StatusOr<BlockedLayout> layout = ChooseLayout(n, p);
    ASSERT_TRUE(layout.ok()) << layout.status();
    const double load = static_cast<double>(n) / static_cast<double>(layout->num_blocks);
    EXPECT_LE(BlockedFalsePositiveRate(load, layout->hash_count), p) << p;
    // Rounding costs little: 5% more items per block would already exceed the asked rate.
    EXPECT_GT(BlockedFalsePositiveRate(load * 1.05, layout->hash_count), p) << p;
  }
  absl::StatusOr<BlockedLayout> band = ChooseLayout(n, 0.013);
  ASSERT_TRUE(band.ok());
  for (double p : {0.0130001, 0.0133, 0.0137, 0.01399999}) {
    absl::StatusOr<BlockedLayout> layout = ChooseLayout(n, p);
    ASSERT_TRUE(layout.ok());
    EXPECT_EQ(layout->num_blocks, band->num_blocks) << p;
    EXPECT_EQ(layout->hash_count, band->hash_count) << p;
  }
}

TEST(SizingTest, BitsPerItemWithinIssueBoundOfSplitBlockReference) {
  // The requirement: at most 1.15x the bits of a split-block filter sized by its exact formula.
  for (double p : {0.01, 0.001, 1e-4, 1e-6}) {
    const double ours = BlockedBitsPerItem(p);
    const double split_block = SplitBlockBitsPerItem(p);
    EXPECT_LE(ours, 1.15 * split_block) << "p=" << p;
    // No blocked filter beats the unblocked optimum: a sanity check of the model.
    EXPECT_GT(ours, StandardBitsPerItem(p)) << "p=" << p;
  }
}

TEST(SizingTest, SplitBlockReferenceMatchesPublishedFigure) {
  // Split-block filters need about 10.5 bits/item at 1% (e.g. Apache Impala's sizing tables).
  EXPECT_NEAR(SplitBlockBitsPerItem(0.01), 10.5, 0.2);
}

TEST(SizingTest, FprGrowsWithLoad) {
  double previous = 0;
  for (double load = 1; load < 200; load += 7) {
    const double fpr = BlockedFalsePositiveRate(load, 7);
    EXPECT_GT(fpr, previous);
    previous = fpr;
  }
  EXPECT_EQ(BlockedFalsePositiveRate(0, 7), 0);
}

// Any load answers, and at once: a record may claim any count (an imported dump's header says
// what it likes), and Stats and List compute the expected rate from it. Past saturation the
// rate is 1; across the table's end it keeps growing with the load and stays a probability.
TEST(SizingTest, FprOfAnyLoadIsAProbabilityThatGrowsWithIt) {
  for (const uint32_t k : {1u, 7u, 32u}) {
    double previous = 0;
    for (double load = 1; load < 1e19; load *= 1.7) {
      const double fpr = BlockedFalsePositiveRate(load, k);
      ASSERT_GE(fpr, previous - 1e-12) << "k " << k << " load " << load;
      ASSERT_LE(fpr, 1.0) << "k " << k << " load " << load;
      previous = fpr;
    }
    EXPECT_EQ(BlockedFalsePositiveRate(2e17, k), 1.0) << k;
    EXPECT_EQ(BlockedFalsePositiveRate(1.8e19, k), 1.0) << k;
  }
}

}  // namespace
}  // namespace bloom
