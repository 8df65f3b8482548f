#include "sharding/shard_map.h"

#include <string>

#include "common/slot.h"
#include "gtest/gtest.h"

namespace sharding {
namespace {

TEST(ShardMapTest, EvenSplitGivesContiguousRangesDifferingByAtMostOne) {
  absl::StatusOr<ShardMap> map = ShardMap::EvenSplit({"a", "b", "c"}, 4096);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->version(), 1U);
  const std::vector<OwnedRange> ranges = map->Ranges();
  ASSERT_EQ(ranges.size(), 3U);
  EXPECT_EQ(ranges[0].group, "a");
  EXPECT_EQ(ranges[0].slots.first, 0U);
  EXPECT_EQ(ranges[2].slots.last, 4095U);
  const std::vector<uint32_t> counts = map->SlotsPerGroup();
  EXPECT_EQ(counts[0] + counts[1] + counts[2], 4096U);
  for (const uint32_t count : counts) EXPECT_NEAR(count, 4096 / 3, 1);
}

TEST(ShardMapTest, RecordRoundTrips) {
  absl::StatusOr<ShardMap> map = ShardMap::EvenSplit({"bloom/a", "bloom/b"}, 16);
  ASSERT_TRUE(map.ok());
  absl::StatusOr<ShardMap> moved = map->Assign({3, 4}, "bloom/b");
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->Encode(),
            "format=1 version=2 slots=16 groups=bloom/a,bloom/b "
            "owners=bloom/a:0-2,bloom/b:3-4,bloom/a:5-7,bloom/b:8-15");
  absl::StatusOr<ShardMap> decoded = ShardMap::Decode(moved->Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->Encode(), moved->Encode());
  for (uint32_t slot = 0; slot < 16; ++slot)
    EXPECT_EQ(decoded->OwnerOf(slot), moved->OwnerOf(slot));
}

TEST(ShardMapTest, OwnerOfNameUsesTheSlotFunction) {
  absl::StatusOr<ShardMap> map = ShardMap::EvenSplit({"a", "b"}, 4096);
  ASSERT_TRUE(map.ok());
  // slot("123456789") = 2342: the second half.
  EXPECT_EQ(map->OwnerOfName("123456789"), "b");
  EXPECT_EQ(map->OwnerOfName("x{123456789}y"), "b");
  EXPECT_EQ(map->OwnerOfName(""), "a");  // slot 0
}

TEST(ShardMapTest, BadRecordsAreRefusedWithAReason) {
  struct Case {
    const char* record;
    const char* reason;
  } cases[] = {
      {"", "no format"},
      {"format=2 version=1 slots=2 groups=a owners=a:0-1", "format 2"},
      {"format=1 slots=2 groups=a owners=a:0-1", "no version"},
      {"format=1 version=1 slots=0 groups=a owners=a:0-1", "slots=0"},
      {"format=1 version=1 slots=99999 groups=a owners=a:0-1", "slots=99999"},
      {"format=1 version=1 slots=2 groups= owners=a:0-1", "no groups"},
      {"format=1 version=1 slots=2 groups=a,a owners=a:0-1", "named twice"},
      {"format=1 version=1 slots=2 groups=a owners=b:0-1", "not in groups"},
      {"format=1 version=1 slots=2 groups=a owners=a:0-2", "past the last slot"},
      {"format=1 version=1 slots=2 groups=a owners=a:0", "slot 1 has no owner"},
      {"format=1 version=1 slots=2 groups=a owners=a:0-1,a:1", "two owners"},
      {"format=1 version=1 slots=2 groups=a owners=a:1-0", "ends before"},
      {"format=1 version=1 slots=2 groups=a owners=a", "GROUP:FIRST-LAST"},
      {"format=1 version=1 slots=2 groups=a b owners=a:0-1", "not key=value"},
      {"format=1 version=1 slots=2 groups=a$ owners=a:0-1", "letters"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ShardMap> decoded = ShardMap::Decode(c.record);
    ASSERT_FALSE(decoded.ok()) << c.record;
    EXPECT_NE(decoded.status().message().find(c.reason), absl::string_view::npos)
        << c.record << ": " << decoded.status();
  }
}

TEST(ShardMapTest, ChangesMakeTheNextVersion) {
  absl::StatusOr<ShardMap> map = ShardMap::EvenSplit({"a"}, 8);
  ASSERT_TRUE(map.ok());
  absl::StatusOr<ShardMap> added = map->AddGroup("b");
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(added->version(), 2U);
  EXPECT_EQ(added->SlotsPerGroup(), (std::vector<uint32_t>{8, 0}));
  EXPECT_EQ(added->AddGroup("b").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(added->AddGroup("/b").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ShardMap> moved = added->Assign({4, 7}, "b");
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->version(), 3U);
  EXPECT_EQ(moved->SlotsPerGroup(), (std::vector<uint32_t>{4, 4}));
  EXPECT_EQ(moved->Assign({4, 8}, "b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(moved->Assign({0, 0}, "c").status().code(), absl::StatusCode::kNotFound);
  // A group that owns nothing survives the record.
  absl::StatusOr<ShardMap> emptied = moved->Assign({0, 7}, "a");
  ASSERT_TRUE(emptied.ok());
  absl::StatusOr<ShardMap> decoded = ShardMap::Decode(emptied->Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->HasGroup("b"));
}

TEST(ShardMapTest, EvenSplitChecksItsArguments) {
  EXPECT_FALSE(ShardMap::EvenSplit({}, 16).ok());
  EXPECT_FALSE(ShardMap::EvenSplit({"a", "a"}, 16).ok());
  EXPECT_FALSE(ShardMap::EvenSplit({"a"}, 0).ok());
  EXPECT_FALSE(ShardMap::EvenSplit({"a"}, slots::kMaxSlotCount + 1).ok());
  EXPECT_FALSE(ShardMap::EvenSplit({"a", "b", "c"}, 2).ok());
  EXPECT_TRUE(ShardMap::EvenSplit({"a"}, slots::kMaxSlotCount).ok());
}

TEST(ShardMapTest, SlotRangesParse) {
  EXPECT_EQ(*ParseSlotRange("3-9"), (SlotRange{3, 9}));
  EXPECT_EQ(*ParseSlotRange("7"), (SlotRange{7, 7}));
  EXPECT_FALSE(ParseSlotRange("9-3").ok());
  EXPECT_FALSE(ParseSlotRange("-3").ok());
  EXPECT_FALSE(ParseSlotRange("3-").ok());
  EXPECT_FALSE(ParseSlotRange("x").ok());
}

TEST(ShardMapTest, AMoveGoesFromCopyToPausedToTheTargetOwningTheSlots) {
  absl::StatusOr<ShardMap> map = ShardMap::EvenSplit({"a", "b"}, 16);
  ASSERT_TRUE(map.ok());
  absl::StatusOr<ShardMap> copying = map->BeginMove({2, 5}, "b");
  ASSERT_TRUE(copying.ok()) << copying.status();
  EXPECT_EQ(copying->version(), 2U);
  EXPECT_EQ(copying->move()->from, "a");
  EXPECT_TRUE(copying->Moving(2));
  EXPECT_FALSE(copying->Moving(6));
  EXPECT_FALSE(copying->WritesPaused(3));
  EXPECT_EQ(copying->OwnerOf(3), "a");
  EXPECT_EQ(copying->Encode(),
            "format=1 version=2 slots=16 groups=a,b owners=a:0-7,b:8-15 moving=2-5:b:copy");
  // One move at a time, and no plain reassignment meanwhile.
  EXPECT_EQ(copying->BeginMove({6, 6}, "b").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(copying->Assign({6, 6}, "b").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(copying->FinishMove().status().code(), absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<ShardMap> paused = copying->PauseMove();
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE(paused->WritesPaused(5));
  EXPECT_FALSE(paused->WritesPaused(6));
  absl::StatusOr<ShardMap> decoded = ShardMap::Decode(paused->Encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->Encode(), paused->Encode());
  EXPECT_TRUE(decoded->WritesPaused(2));

  absl::StatusOr<ShardMap> moved = paused->FinishMove();
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->version(), 4U);
  EXPECT_FALSE(moved->move().has_value());
  EXPECT_EQ(moved->OwnerOf(2), "b");
  EXPECT_EQ(moved->OwnerOf(5), "b");
  EXPECT_EQ(moved->OwnerOf(6), "a");

  absl::StatusOr<ShardMap> aborted = paused->AbortMove();
  ASSERT_TRUE(aborted.ok());
  EXPECT_EQ(aborted->OwnerOf(2), "a");
  EXPECT_FALSE(aborted->move().has_value());
}

TEST(ShardMapTest, MovesThatCannotBeAreRefused) {
  absl::StatusOr<ShardMap> map = ShardMap::EvenSplit({"a", "b"}, 16);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->BeginMove({6, 9}, "b").status().code(), absl::StatusCode::kFailedPrecondition)
      << "two owners";
  EXPECT_EQ(map->BeginMove({8, 9}, "b").status().code(), absl::StatusCode::kFailedPrecondition)
      << "b's already";
  EXPECT_EQ(map->BeginMove({0, 1}, "c").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(map->BeginMove({0, 16}, "b").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(map->PauseMove().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(map->AbortMove().status().code(), absl::StatusCode::kFailedPrecondition);
  for (const char* record : {
           "format=1 version=2 slots=16 groups=a,b owners=a:0-7,b:8-15 moving=2-5:b",
           "format=1 version=2 slots=16 groups=a,b owners=a:0-7,b:8-15 moving=2-5:b:later",
           "format=1 version=2 slots=16 groups=a,b owners=a:0-7,b:8-15 moving=2-9:b:copy",
           "format=1 version=2 slots=16 groups=a,b owners=a:0-7,b:8-15 moving=2-5:c:copy",
           "format=1 version=2 slots=16 groups=a,b owners=a:0-7,b:8-15 moving=2-99:b:copy",
       }) {
    EXPECT_EQ(ShardMap::Decode(record).status().code(), absl::StatusCode::kInvalidArgument)
        << record;
  }
}

}  // namespace
}  // namespace sharding
