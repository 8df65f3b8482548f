// CreationLog: a watch records the names made, a position gives every name made after it, and
// a position the log cannot answer in full (another epoch, a lapsed watch, names forgotten for
// room) is refused, so that the mover lists every filter instead of missing one.
#include "storage/filter/creation_log.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace storage {
namespace {

constexpr absl::Time kWatchStart = absl::FromUnixSeconds(1'000'000);
constexpr absl::Duration kWatchHold = absl::Minutes(1);

std::vector<std::string> NamesSince(CreationLog& log, CreationLog::Position& at, absl::Time now) {
  absl::optional<CreationLog::Made> made = log.Since(at, now, kWatchHold);
  EXPECT_TRUE(made.has_value());
  if (!made.has_value()) return {};
  at = made->next;
  return made->names;
}

TEST(CreationLogTest, AWatchGivesEveryNameMadeAfterAPosition) {
  CreationLog log(/*epoch=*/7, /*capacity=*/100);
  log.Record("before", kWatchStart);  // no watch: not kept
  CreationLog::Position at = log.Watch(kWatchStart, kWatchHold);
  EXPECT_EQ(at.epoch, 7u);
  log.Record("a", kWatchStart);
  log.Record("b", kWatchStart + absl::Seconds(1));
  EXPECT_EQ(NamesSince(log, at, kWatchStart + absl::Seconds(2)),
            (std::vector<std::string>{"a", "b"}));
  log.Record("c", kWatchStart + absl::Seconds(3));
  EXPECT_EQ(NamesSince(log, at, kWatchStart + absl::Seconds(4)), std::vector<std::string>{"c"});
  EXPECT_EQ(NamesSince(log, at, kWatchStart + absl::Seconds(5)), std::vector<std::string>{});
  // Each Since renewed the watch: a minute after the last one, it still records.
  log.Record("d", kWatchStart + absl::Seconds(64));
  EXPECT_EQ(NamesSince(log, at, kWatchStart + absl::Seconds(64)), std::vector<std::string>{"d"});
}

TEST(CreationLogTest, APositionOfAnotherEpochOrBeforeALapseIsRefused) {
  CreationLog log(/*epoch=*/7, /*capacity=*/100);
  const CreationLog::Position at = log.Watch(kWatchStart, kWatchHold);
  EXPECT_FALSE(log.Since({8, at.count}, kWatchStart, kWatchHold).has_value()) << "another store's";
  EXPECT_FALSE(log.Since({7, at.count + 1}, kWatchStart, kWatchHold).has_value())
      << "not reached yet";
  // The watch lapses; a name made then is not recorded, so no position before it may be
  // answered, even once a new watch is on.
  log.Record("unseen", kWatchStart + kWatchHold);
  const CreationLog::Position again = log.Watch(kWatchStart + kWatchHold, kWatchHold);
  EXPECT_FALSE(log.Since(at, kWatchStart + kWatchHold, kWatchHold).has_value());
  log.Record("seen", kWatchStart + kWatchHold);
  absl::optional<CreationLog::Made> made = log.Since(again, kWatchStart + kWatchHold, kWatchHold);
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->names, std::vector<std::string>{"seen"});
}

TEST(CreationLogTest, NamesForgottenForRoomMakeOlderPositionsRefused) {
  CreationLog log(/*epoch=*/1, /*capacity=*/3);
  const CreationLog::Position at = log.Watch(kWatchStart, kWatchHold);
  log.Record("a", kWatchStart);
  CreationLog::Position after_a = log.Since(at, kWatchStart, kWatchHold)->next;
  for (const char* name : {"b", "c", "d"}) log.Record(name, kWatchStart);
  EXPECT_FALSE(log.Since(at, kWatchStart, kWatchHold).has_value()) << "'a' was forgotten";
  EXPECT_EQ(NamesSince(log, after_a, kWatchStart), (std::vector<std::string>{"b", "c", "d"}));
}

}  // namespace
}  // namespace storage
