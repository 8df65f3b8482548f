// The sync set's joining and leaving rule (NextSyncSet), alone.
#include "coordination/sync_set_keeper.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace coordination {
namespace {

using Follower = storage::ReplicaAcks::Follower;
using Names = std::vector<std::string>;

constexpr absl::Time kNow = absl::FromUnixSeconds(1'000'000);
constexpr absl::Duration kStale = absl::Seconds(10);

Follower Live(const std::string& name, uint64_t durable) {
  return Follower{name, durable, kNow - absl::Seconds(1)};
}

TEST(NextSyncSetTest, ConnectedFollowersJoin) {
  const SyncSetChange change =
      NextSyncSet({}, {Live("b", 0), Live("a", 5)}, /*acknowledged=*/0, 1, kNow, kStale);
  EXPECT_TRUE(change.changed);
  EXPECT_EQ(change.next, (Names{"a", "b"}));
  EXPECT_NE(change.reason.find("joined: a,b"), std::string::npos) << change.reason;

  const SyncSetChange same =
      NextSyncSet({"a", "b"}, {Live("a", 5), Live("b", 5)}, 5, 1, kNow, kStale);
  EXPECT_FALSE(same.changed);
  EXPECT_EQ(same.next, (Names{"a", "b"}));
}

TEST(NextSyncSetTest, AFollowerLeavesOnlyWhenThoseStayingHoldEveryAcknowledgedWrite) {
  // b went away; a holds everything acknowledged: b leaves.
  const SyncSetChange left = NextSyncSet({"a", "b"}, {Live("a", 100)}, 100, 1, kNow, kStale);
  EXPECT_TRUE(left.changed);
  EXPECT_EQ(left.next, (Names{"a"}));
  // a lags behind what was acknowledged (acknowledged by b alone): b stays.
  const SyncSetChange stays = NextSyncSet({"a", "b"}, {Live("a", 90)}, 100, 1, kNow, kStale);
  EXPECT_FALSE(stays.changed);
  EXPECT_EQ(stays.next, (Names{"a", "b"}));
  EXPECT_NE(stays.reason.find("b went away but stays"), std::string::npos) << stays.reason;
  // Two acknowledgements: two of those staying must hold it.
  const SyncSetChange two =
      NextSyncSet({"a", "b", "c"}, {Live("a", 100), Live("b", 100)}, 100, 2, kNow, kStale);
  EXPECT_EQ(two.next, (Names{"a", "b"}));
  const SyncSetChange not_two =
      NextSyncSet({"a", "b", "c"}, {Live("a", 100), Live("b", 99)}, 100, 2, kNow, kStale);
  EXPECT_EQ(not_two.next, (Names{"a", "b", "c"}));
}

TEST(NextSyncSetTest, AJoinerDoesNotHelpALeaverGoUntilItCaughtUp) {
  // c joins in the same round as b goes; c holds nothing yet, and a alone lags.
  const SyncSetChange change =
      NextSyncSet({"a", "b"}, {Live("a", 90), Live("c", 0)}, 100, 1, kNow, kStale);
  EXPECT_EQ(change.next, (Names{"a", "b", "c"}));
  // Once c holds what was acknowledged, b leaves.
  const SyncSetChange later =
      NextSyncSet({"a", "b", "c"}, {Live("a", 90), Live("c", 100)}, 100, 1, kNow, kStale);
  EXPECT_EQ(later.next, (Names{"a", "c"}));
}

TEST(NextSyncSetTest, ASilentFollowerCountsAsGoneAndDoesNotJoin) {
  const Follower silent{"b", 100, kNow - kStale - absl::Seconds(1)};
  const SyncSetChange change =
      NextSyncSet({"a", "b"}, {Live("a", 100), silent}, 100, 1, kNow, kStale);
  EXPECT_EQ(change.next, (Names{"a"}));
  const SyncSetChange no_join = NextSyncSet({"a"}, {Live("a", 100), silent}, 100, 1, kNow, kStale);
  EXPECT_FALSE(no_join.changed);
}

TEST(NextSyncSetTest, AFollowerWithTwoStreamsIsOneMember) {
  const SyncSetChange change =
      NextSyncSet({"a", "b"}, {Live("a", 50), Live("a", 100)}, 100, 1, kNow, kStale);
  EXPECT_EQ(change.next, (Names{"a"}));  // its furthest stream holds everything
}

}  // namespace
}  // namespace coordination
