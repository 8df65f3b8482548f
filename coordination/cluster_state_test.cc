// Cluster records and the takeover rule (cluster_state.h).
#include "coordination/cluster_state.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/testing.h"

namespace coordination {
namespace {

MemberRecord Member(const std::string& name, uint64_t sequence) {
  return MemberRecord{name, name + ":50051", sequence, 7};
}

TEST(ClusterRecordsTest, RoundTripAsText) {
  const MemberRecord member{"pod-1", "pod-1.bloom:50051", 12345, 42};
  EXPECT_EQ(Encode(member), "name=pod-1 address=pod-1.bloom:50051 sequence=12345 term=42");
  absl::StatusOr<MemberRecord> read = DecodeMember(Encode(member));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->name, "pod-1");
  EXPECT_EQ(read->address, "pod-1.bloom:50051");
  EXPECT_EQ(read->sequence, 12345u);
  EXPECT_EQ(read->term, 42);

  absl::StatusOr<LeaderRecord> leader = DecodeLeader(Encode(LeaderRecord{"pod-0", "a:1", 99}));
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(leader->name, "pod-0");
  EXPECT_EQ(leader->address, "a:1");
  EXPECT_EQ(leader->start_sequence, 99u);

  absl::StatusOr<SyncSet> sync = DecodeSyncSet(
      Encode(SyncSet{.leader = "pod-0", .term = 8, .required = 1, .names = {"pod-1", "pod-2"}}));
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(sync->leader, "pod-0");
  EXPECT_EQ(sync->term, 8);
  EXPECT_EQ(sync->required, 1);
  EXPECT_EQ(sync->names, (std::vector<std::string>{"pod-1", "pod-2"}));
  absl::StatusOr<SyncSet> empty =
      DecodeSyncSet(Encode(SyncSet{.leader = "pod-0", .term = 8, .required = 1, .names = {}}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->names.empty());
  EXPECT_TRUE(empty->handover_to.empty());
  SyncSet handing_over{.leader = "pod-0", .term = 8, .required = 1, .names = {"pod-1"}};
  handing_over.handover_to = "pod-1";
  handing_over.handover_sequence = 77;
  absl::StatusOr<SyncSet> handover = DecodeSyncSet(Encode(handing_over));
  ASSERT_TRUE(handover.ok()) << handover.status();
  EXPECT_EQ(handover->handover_to, "pod-1");
  EXPECT_EQ(handover->handover_sequence, 77u);

  // A later version's extra words are passed over.
  EXPECT_TRUE(DecodeLeader("name=a address=b:1 start_sequence=3 zone=eu").ok());
}

TEST(ClusterRecordsTest, MalformedRecordsNameWhatIsWrong) {
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeMember("").status()));
  absl::Status no_address = DecodeMember("name=a sequence=1 term=2").status();
  EXPECT_NE(no_address.message().find("no address"), absl::string_view::npos) << no_address;
  absl::Status not_number = DecodeMember("name=a address=b:1 sequence=x term=2").status();
  EXPECT_NE(not_number.message().find("sequence=x is not a number"), absl::string_view::npos)
      << not_number;
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeLeader("name=a address").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeLeader("=a").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(DecodeSyncSet("leader=a term=1 required=-1 names=").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeSyncSet("leader=a term=1 required=1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      DecodeSyncSet("leader=a term=1 required=1 names= handover_to=b").status()));
}

TEST(TakeoverRuleTest, WithoutASyncSetTheMemberHoldingTheMostLeads) {
  const std::vector<MemberRecord> members = {Member("pod-2", 10), Member("pod-1", 30),
                                             Member("pod-0", 20)};
  EXPECT_TRUE(MayTakeOver("pod-1", members, nullptr).allowed);
  const TakeoverDecision other = MayTakeOver("pod-0", members, nullptr);
  EXPECT_FALSE(other.allowed);
  EXPECT_EQ(other.candidate, "pod-1");
  // A tie goes to the smallest name, the same for every member reading the records.
  const std::vector<MemberRecord> tied = {Member("pod-2", 30), Member("pod-1", 30)};
  EXPECT_TRUE(MayTakeOver("pod-1", tied, nullptr).allowed);
  EXPECT_FALSE(MayTakeOver("pod-2", tied, nullptr).allowed);
  EXPECT_FALSE(MayTakeOver("pod-0", {}, nullptr).allowed);
}

TEST(TakeoverRuleTest, AfterAPrimaryThatDidNotWaitForAcksAnyMemberMayLead) {
  const SyncSet sync{.leader = "pod-0", .term = 5, .required = 0, .names = {}};
  const std::vector<MemberRecord> members = {Member("pod-1", 10), Member("pod-2", 11)};
  EXPECT_TRUE(MayTakeOver("pod-2", members, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-1", members, &sync).allowed);
}

TEST(TakeoverRuleTest, OneAckOfTwoNeedsBothFollowersOfTheSetUp) {
  const SyncSet sync{.leader = "pod-0", .term = 5, .required = 1, .names = {"pod-1", "pod-2"}};
  // Both up: the one holding more has every acknowledged write.
  const std::vector<MemberRecord> both = {Member("pod-1", 10), Member("pod-2", 12)};
  EXPECT_TRUE(MayTakeOver("pod-2", both, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-1", both, &sync).allowed);
  // One up: a write may have been acknowledged by the other alone.
  const TakeoverDecision alone = MayTakeOver("pod-1", {Member("pod-1", 10)}, &sync);
  EXPECT_FALSE(alone.allowed);
  EXPECT_TRUE(alone.candidate.empty());
  EXPECT_NE(alone.reason.find("2 are needed"), std::string::npos) << alone.reason;
  // A member outside the set never counts, however much it holds.
  const std::vector<MemberRecord> outsider = {Member("pod-1", 10), Member("pod-3", 99)};
  EXPECT_FALSE(MayTakeOver("pod-3", outsider, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-1", outsider, &sync).allowed);
}

TEST(TakeoverRuleTest, TwoAcksOfTwoLetEitherFollowerLeadAlone) {
  const SyncSet sync{.leader = "pod-0", .term = 5, .required = 2, .names = {"pod-1", "pod-2"}};
  EXPECT_TRUE(MayTakeOver("pod-2", {Member("pod-2", 3)}, &sync).allowed);
}

TEST(TakeoverRuleTest, ThePrimaryThatWroteTheSetLeadsAgainWhenBack) {
  const SyncSet sync{.leader = "pod-0", .term = 5, .required = 1, .names = {"pod-1", "pod-2"}};
  // Followers hold a prefix of their primary's log: it holds at least what they do.
  const std::vector<MemberRecord> members = {Member("pod-0", 15), Member("pod-1", 10),
                                             Member("pod-2", 12)};
  EXPECT_TRUE(MayTakeOver("pod-0", members, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-2", members, &sync).allowed);
  EXPECT_EQ(MayTakeOver("pod-2", members, &sync).candidate, "pod-0");
}

TEST(TakeoverRuleTest, AMemberThatLostItsDataDoesNotCount) {
  const SyncSet sync{.leader = "pod-0", .term = 5, .required = 1, .names = {"pod-1", "pod-2"}};
  // The old primary is back with less than a follower holds: it is not trusted to lead.
  const std::vector<MemberRecord> rewound = {Member("pod-0", 3), Member("pod-1", 10),
                                             Member("pod-2", 12)};
  EXPECT_FALSE(MayTakeOver("pod-0", rewound, &sync).allowed);
  EXPECT_TRUE(MayTakeOver("pod-2", rewound, &sync).allowed);
  // A wiped follower does not make up the two of the set that must be up.
  const std::vector<MemberRecord> wiped = {Member("pod-1", 10), Member("pod-2", 0)};
  EXPECT_FALSE(MayTakeOver("pod-1", wiped, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-2", wiped, &sync).allowed);
}

TEST(TakeoverRuleTest, AnEmptySetWithAcksLetsOnlyItsPrimaryLead) {
  // A new primary's set before its followers caught up: only it holds every write.
  const SyncSet sync{.leader = "pod-1", .term = 9, .required = 1, .names = {}};
  EXPECT_FALSE(MayTakeOver("pod-2", {Member("pod-2", 50)}, &sync).allowed);
  EXPECT_TRUE(MayTakeOver("pod-1", {Member("pod-1", 60), Member("pod-2", 50)}, &sync).allowed);
}

TEST(TakeoverRuleTest, APlannedSwitchoverNamesItsTargetWhileItIsUp) {
  SyncSet sync{.leader = "pod-0", .term = 5, .required = 1, .names = {"pod-1", "pod-2"}};
  sync.handover_to = "pod-2";
  sync.handover_sequence = 40;
  // The old primary is back and holds the most, and pod-1 is in the set: pod-2 still leads.
  const std::vector<MemberRecord> members = {Member("pod-0", 41), Member("pod-1", 40),
                                             Member("pod-2", 40)};
  EXPECT_TRUE(MayTakeOver("pod-2", members, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-0", members, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-1", members, &sync).allowed);
  EXPECT_EQ(MayTakeOver("pod-1", members, &sync).candidate, "pod-2");
  // Even with min_replica_acks=0, and outside the set.
  sync.required = 0;
  sync.names.clear();
  EXPECT_TRUE(MayTakeOver("pod-2", members, &sync).allowed);
  // A target holding less than it was handed (its data dir was replaced) does not: the
  // ordinary rule decides.
  const std::vector<MemberRecord> behind = {Member("pod-0", 41), Member("pod-2", 39)};
  EXPECT_FALSE(MayTakeOver("pod-2", behind, &sync).allowed);
  EXPECT_TRUE(MayTakeOver("pod-0", behind, &sync).allowed);
  // Nor does a target that is down: the old primary, back, leads again; a follower alone
  // cannot be sure it holds every acknowledged write.
  sync.required = 1;
  sync.names = {"pod-1", "pod-2"};
  EXPECT_TRUE(MayTakeOver("pod-0", {Member("pod-0", 41), Member("pod-1", 40)}, &sync).allowed);
  EXPECT_FALSE(MayTakeOver("pod-1", {Member("pod-1", 40)}, &sync).allowed);
}

}  // namespace
}  // namespace coordination
