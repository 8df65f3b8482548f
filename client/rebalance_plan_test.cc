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
  const uint32_t n = static_cast<uint32_t>(owners.groups.size());
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
int Rebalance(SlotOwners& map, const std::vector<uint64_t>& bytes, double tolerance) {
  for (int moves = 0; moves < 100; ++moves) {
    const absl::optional<PlannedMove> move = NextRebalanceMove(map, bytes, tolerance);
    if (!move.has_value()) return moves;
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

TEST(RebalanceTest, AnEvenDeploymentNeedsNoMove) {
  const SlotOwners map = EvenSplit({"a", "b", "c"}, 300);
  EXPECT_FALSE(NextRebalanceMove(map, std::vector<uint64_t>(300, 1000), 0.1).has_value());
  EXPECT_FALSE(NextRebalanceMove(map, std::vector<uint64_t>(300, 0), 0.1).has_value());
}

TEST(RebalanceTest, BytesInOneGroupAreSpreadToTheOther) {
  SlotOwners map = EvenSplit({"a", "b"}, 64);
  std::vector<uint64_t> bytes(64, 0);
  for (uint32_t slot = 0; slot < 32; ++slot) bytes[slot] = 1'000'000;  // all in a's slots
  const absl::optional<PlannedMove> first = NextRebalanceMove(map, bytes, 0.1);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->from, "a");
  EXPECT_EQ(first->to, "b");
  EXPECT_EQ(first->bytes, 16'000'000U) << "half of a's bytes: a slot never splits";
  EXPECT_EQ(Rebalance(map, bytes, 0.1), 1);
}

TEST(RebalanceTest, AGroupJustAddedGetsItsShareOfSlots) {
  SlotOwners map = EvenSplit({"a", "b"}, 4096);
  map.groups.push_back("c");  // added, owning nothing
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
      const absl::optional<PlannedMove> none = NextRebalanceMove(map, bytes, 0.1);
      EXPECT_FALSE(none.has_value());
    }
  }
}

TEST(RebalanceTest, OneGroupOrNoSlotsPlanNothing) {
  EXPECT_FALSE(NextRebalanceMove(EvenSplit({"a"}, 16), std::vector<uint64_t>(16, 5), 0.1));
  EXPECT_FALSE(NextRebalanceMove(SlotOwners(), {}, 0.1).has_value());
  SlotOwners bad = EvenSplit({"a", "b"}, 16);
  bad.owner[3] = 7;  // no such group
  EXPECT_FALSE(NextRebalanceMove(bad, std::vector<uint64_t>(16, 5), 0.1).has_value());
}

}  // namespace
}  // namespace bloomcli
