#include "common/slot.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace slots {
namespace {

TEST(SlotTest, Crc32IsZlibs) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926U);
  EXPECT_EQ(Crc32(""), 0U);
  EXPECT_EQ(Crc32("user:1"), 0x7BA5C282U);  // zlib.crc32(b"user:1")
}

TEST(SlotTest, HashTagsNameTheHashedPart) {
  EXPECT_EQ(HashedPart("feed:{user42}:seen"), "user42");
  EXPECT_EQ(HashedPart("{a}{b}"), "a");
  EXPECT_EQ(HashedPart("x{}y"), "x{}y");    // empty tag: the whole name
  EXPECT_EQ(HashedPart("x{y"), "x{y");      // no closing brace
  EXPECT_EQ(HashedPart("x}y{z"), "x}y{z");  // no closing brace after the opening one
  EXPECT_EQ(HashedPart("a{{b}c"), "{b");    // the first `{` opens it
  EXPECT_EQ(SlotOf("feed:{user42}:seen", 4096), SlotOf("feed:{user42}:liked", 4096));
  EXPECT_EQ(SlotOf("feed:{user42}:seen", 4096), SlotOf("user42", 4096));
}

// The values every client's own test checks too (client/*): the function can never change.
TEST(SlotTest, KnownSlots) {
  EXPECT_EQ(SlotOf("123456789", 4096), 2342U);
  EXPECT_EQ(SlotOf("user:1", 4096), 0x7BA5C282U % 4096);
  EXPECT_EQ(SlotOf("", 4096), 0U);
  EXPECT_EQ(SlotOf("anything", 1), 0U);
  EXPECT_EQ(SlotOf("anything", 0), 0U);  // no slots: everything in one
}

TEST(SlotTest, NamesSpreadOverSlots) {
  constexpr uint32_t kSlots = 4096;
  std::vector<int> counts(kSlots, 0);
  constexpr int kNames = kSlots * 64;
  for (int i = 0; i < kNames; ++i) ++counts[SlotOf("user:" + std::to_string(i), kSlots)];
  int most = 0;
  int least = kNames;
  for (const int count : counts) {
    most = std::max(most, count);
    least = std::min(least, count);
  }
  // 64 names a slot on average; a fair hash keeps every slot within a few standard deviations.
  EXPECT_LE(most, 64 + 48);
  EXPECT_GE(least, 64 - 48);
}

}  // namespace
}  // namespace slots
