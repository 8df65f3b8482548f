// NextRebalanceMove (client/rebalance_plan.h): moves that even groups by bytes, of whole slots
// their source owns, until the groups are within the tolerance or no move helps.
#include "client/rebalance_plan.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace bloomcli {
namespace {

// `groups` owning `slots` slots in even contiguous ranges (as a new map's).
SlotOwners EvenSplit(std::vector<std::string> groups, uint32_t slots) {
  SlotOwners owners{std::move(groups), std::vector<uint32_t>(slots)};
  const auto n = static_cast<uint32_t>(owners.groups.size());
  for (uint32_t slot = 0; slot < slots; ++slot) {
    owners.owner[slot] = static_cast<uint32_t>(uint64_t{slot} * n / slots);
  }
  return owners;
}

std::vector<uint64_t> Loads(const SlotOwners& map, const std::vector<uint64_t>& bytes) {
  std::vector<uint64_t> load(map.groups.size(), 0);
  for (uint32_t slot = 0; slot < map.owner.size(); ++slot) load[map.owner[slot]] += bytes[slot] + 1;
  return load;
}

std::vector<uint32_t> SlotsPerGroup(const SlotOwners& map) {
  std::vector<uint32_t> count(map.groups.size(), 0);
  for (const uint32_t owner : map.owner) ++count[owner];
  return count;
}

// Plans and applies moves until none is left; answers how many it took.
int Rebalance(SlotOwners& map, const std::vector<uint64_t>& bytes,
              const std::vector<uint64_t>& filters, const RebalanceLimits& limits) {
  for (int moves = 0; moves < 100; ++moves) {
    const absl::optional<PlannedMove> move = NextRebalanceMove(map, bytes, filters, limits);
    if (!move.has_value()) return moves;
    if (limits.max_filters > 0 && move->slots.first != move->slots.last) {
      EXPECT_LE(move->filters, limits.max_filters) << "only a slot alone may hold more";
    }
    uint64_t moved_filters = 0;
    for (uint32_t slot = move->slots.first; slot <= move->slots.last && !filters.empty(); ++slot) {
      moved_filters += filters[slot];
    }
    EXPECT_EQ(move->filters, moved_filters);
    EXPECT_NE(move->from, move->to);
    for (uint32_t slot = move->slots.first; slot <= move->slots.last; ++slot) {
      EXPECT_EQ(map.groups[map.owner[slot]], move->from) << "slot " << slot;
    }
    const uint64_t spread_before = [&] {
      const std::vector<uint64_t> load = Loads(map, bytes);
      return *std::max_element(load.begin(), load.end()) -
             *std::min_element(load.begin(), load.end());
    }();
    const uint32_t to = static_cast<uint32_t>(
        std::find(map.groups.begin(), map.groups.end(), move->to) - map.groups.begin());
    EXPECT_LT(to, map.groups.size());
    if (to >= map.groups.size()) return -1;
    for (uint32_t slot = move->slots.first; slot <= move->slots.last; ++slot) {
      map.owner[slot] = to;
    }
    const std::vector<uint64_t> load = Loads(map, bytes);
    EXPECT_LE(
        *std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()),
        spread_before)
        << "a move never widens the spread";
  }
  ADD_FAILURE() << "no end of moves";
  return -1;
}

int Rebalance(SlotOwners& map, const std::vector<uint64_t>& bytes, double tolerance) {
  return Rebalance(map, bytes, {}, {.tolerance = tolerance});
}

TEST(RebalanceTest, AnEvenDeploymentNeedsNoMove) {
  const SlotOwners map = EvenSplit({"a", "b", "c"}, 300);
  EXPECT_FALSE(NextRebalanceMove(map, std::vector<uint64_t>(300, 1000), {}, {}).has_value());
  EXPECT_FALSE(NextRebalanceMove(map, std::vector<uint64_t>(300, 0), {}, {}).has_value());
}

TEST(RebalanceTest, BytesInOneGroupAreSpreadToTheOther) {
  SlotOwners map = EvenSplit({"a", "b"}, 64);
  std::vector<uint64_t> bytes(64, 0);
  for (uint32_t slot = 0; slot < 32; ++slot) bytes[slot] = 1'000'000;  // all in a's slots
  const absl::optional<PlannedMove> first = NextRebalanceMove(map, bytes, {}, {.tolerance = 0.1});
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->from, "a");
  EXPECT_EQ(first->to, "b");
  EXPECT_EQ(first->bytes, 16'000'000U) << "half of a's bytes: a slot never splits";
  EXPECT_EQ(Rebalance(map, bytes, 0.1), 1);
}

TEST(RebalanceTest, AGroupJustAddedGetsItsShareOfSlots) {
  SlotOwners map = EvenSplit({"a", "b"}, 4096);
  map.groups.emplace_back("c");  // added, owning nothing
  const std::vector<uint64_t> empty(4096, 0);
  EXPECT_GT(Rebalance(map, empty, 0.05), 0);
  for (const uint32_t slots : SlotsPerGroup(map)) {
    EXPECT_NEAR(slots, 4096.0 / 3, 4096.0 / 3 * 0.05 + 1);
  }
}

TEST(RebalanceTest, RandomBytesEndWithinTheToleranceOrWithNoHelpfulMove) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 20; ++trial) {
    SlotOwners map = EvenSplit({"a", "b", "c", "d"}, 512);
    std::vector<uint64_t> bytes(512);
    // Skewed: a few heavy slots among many light ones.
    for (uint64_t& b : bytes) b = random() % 100 < 5 ? random() % 10'000'000 : random() % 10'000;
    ASSERT_GE(Rebalance(map, bytes, 0.1), 0);
    const std::vector<uint64_t> load = Loads(map, bytes);
    uint64_t total = 0;
    for (const uint64_t l : load) total += l;
    const double mean = static_cast<double>(total) / 4;
    const uint64_t heaviest = *std::max_element(load.begin(), load.end());
    // Within the tolerance, or the heaviest group's edge slots are each too heavy to help.
    if (heaviest > mean * 1.1) {
      const absl::optional<PlannedMove> none =
          NextRebalanceMove(map, bytes, {}, {.tolerance = 0.1});
      EXPECT_FALSE(none.has_value());
    }
  }
}

TEST(RebalanceTest, OneGroupOrNoSlotsPlanNothing) {
  EXPECT_FALSE(NextRebalanceMove(EvenSplit({"a"}, 16), std::vector<uint64_t>(16, 5), {}, {}));
  EXPECT_FALSE(NextRebalanceMove(SlotOwners(), {}, {}, {}).has_value());
  SlotOwners bad = EvenSplit({"a", "b"}, 16);
  bad.owner[3] = 7;  // no such group
  EXPECT_FALSE(NextRebalanceMove(bad, std::vector<uint64_t>(16, 5), {}, {}).has_value());
}

// A filter per user: a million small filters in group a's half of the slots. A move's write
// pause grows with its filters, so no move carries more than the bound.
TEST(RebalanceTest, ManySmallFiltersMoveInBoundedMoves) {
  SlotOwners map = EvenSplit({"a", "b"}, 4096);
  std::vector<uint64_t> filters(4096, 0);
  std::vector<uint64_t> bytes(4096, 0);
  for (uint32_t slot = 0; slot < 2048; ++slot) {
    filters[slot] = 488 + slot % 3;  // about a million in all
    bytes[slot] = filters[slot] * 1200;
  }
  const absl::optional<PlannedMove> unbounded = NextRebalanceMove(map, bytes, filters, {});
  ASSERT_TRUE(unbounded.has_value());
  EXPECT_GT(unbounded->filters, 300'000U) << "without a bound, one move takes half of them";

  const RebalanceLimits limits{.tolerance = 0.05, .max_filters = 300'000};
  const absl::optional<PlannedMove> first = NextRebalanceMove(map, bytes, filters, limits);
  ASSERT_TRUE(first.has_value());
  EXPECT_LE(first->filters, 300'000U);
  EXPECT_GT(first->filters, 290'000U) << "as many as the bound allows";
  EXPECT_GE(Rebalance(map, bytes, filters, limits), 2);
  const std::vector<uint64_t> load = Loads(map, bytes);
  EXPECT_NEAR(static_cast<double>(load[0]), static_cast<double>(load[1]),
              0.1 * static_cast<double>(load[0] + load[1]) / 2);
}

TEST(RebalanceTest, ASlotHoldingMoreThanTheBoundMovesAlone) {
  // Group a's weight is in its last two slots, of half a million filters each.
  SlotOwners map = EvenSplit({"a", "b"}, 64);
  std::vector<uint64_t> filters(64, 10);
  std::vector<uint64_t> bytes(64, 0);
  for (const uint32_t slot : {30U, 31U}) {
    filters[slot] = 500'000;
    bytes[slot] = 100'000;
  }
  const absl::optional<PlannedMove> unbounded = NextRebalanceMove(map, bytes, filters, {});
  ASSERT_TRUE(unbounded.has_value());
  EXPECT_GT(unbounded->filters, 500'000U) << "slots 0-30 weigh a little more than slot 31";

  const absl::optional<PlannedMove> move =
      NextRebalanceMove(map, bytes, filters, {.tolerance = 0.1, .max_filters = 1'000});
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->from, "a");
  EXPECT_EQ(move->slots.first, 31U);
  EXPECT_EQ(move->slots.last, 31U) << "a slot never splits, and takes no other slot with it";
  EXPECT_EQ(move->filters, 500'000U);
  EXPECT_EQ(move->bytes, 100'000U);
}

}  // namespace
}  // namespace bloomcli
