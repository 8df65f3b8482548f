#include "common/short_string.h"

#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace {

TEST(ShortStringTest, HoldsEverySizeInlineUpToTheLimitThenOnTheHeap) {
  for (size_t size = 0; size <= 100; ++size) {
    std::string text(size, 'a');
    for (size_t i = 0; i < size; ++i) text[i] = static_cast<char>('a' + i % 26);
    if (size > 0) text[size / 2] = '\0';  // bytes, not C strings
    const ShortString s(text);
    EXPECT_EQ(s.view(), text) << size;
    EXPECT_EQ(s.size(), size);
    EXPECT_EQ(s.str(), text);
    EXPECT_EQ(s.on_heap(), size > ShortString::kMaxInline) << size;
  }
  EXPECT_EQ(ShortString().view(), "");
}

TEST(ShortStringTest, MovesLeaveTheSourceEmptyAndFreeOnce) {
  for (const std::string& text : {std::string("user:42"), std::string(40, 'x')}) {
    ShortString a(text);
    ShortString b(std::move(a));
    EXPECT_EQ(b.view(), text);
    EXPECT_EQ(a.view(), "");  // NOLINT(bugprone-use-after-move): moved-from is empty
    ShortString c("other, and long enough to live on the heap");
    c = std::move(b);  // frees c's own text (ASan: no leak, no double free)
    EXPECT_EQ(c.view(), text);
    EXPECT_EQ(b.view(), "");    // NOLINT(bugprone-use-after-move)
    c = std::move(c);           // NOLINT: self-move keeps it
    EXPECT_EQ(c.view(), text);  // NOLINT(bugprone-use-after-move): ... as this checks
  }
}

}  // namespace
