// ClusterMember against a real etcd: elections, failover, the sync set and the fence.
#include "coordination/cluster_member.h"

#include <atomic>
#include <csignal>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "coordination/sync_set_keeper.h"
#include "gtest/gtest.h"
#include "storage/replica/replica_acks.h"
#include "tests/support/etcd_process.h"
#include "tests/support/testing.h"

namespace coordination {
namespace {

using bloomtest::EtcdProcess;
using bloomtest::WaitFor;

// One member and what it was told.
struct Pod {
  std::atomic<uint64_t> held{0};
  std::mutex mu;
  std::vector<Role> roles;  // every change, in order
  std::unique_ptr<ClusterMember> member;

  Role Last() {
    std::lock_guard<std::mutex> lock(mu);
    return roles.empty() ? Role{} : roles.back();
  }
  bool Is(Role::Kind kind) { return Last().kind == kind; }
};

class ClusterMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Connect({etcd_->endpoint()}, absl::Seconds(2));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  void TearDown() override {
    for (auto& [name, pod] : pods_) pod->member.reset();  // before etcd goes
  }

  ClusterMemberOptions Options(const std::string& name, Pod* pod, int required_acks) {
    ClusterMemberOptions options;
    options.cluster = "c1";
    options.name = name;
    options.address = name + ".bloom:50051";
    options.required_acks = required_acks;
    options.lease.ttl = ttl_;
    options.settle = absl::Milliseconds(300);
    options.held_sequence = [pod] { return pod->held.load(); };
    options.on_role = [pod](const Role& role) {
      std::lock_guard<std::mutex> lock(pod->mu);
      pod->roles.push_back(role);
    };
    return options;
  }

  Pod* StartPod(const std::string& name, uint64_t held, int required_acks = 0) {
    auto pod = std::make_unique<Pod>();
    pod->held = held;
    absl::StatusOr<std::unique_ptr<ClusterMember>> member =
        ClusterMember::Start(client_.get(), Options(name, pod.get(), required_acks));
    EXPECT_TRUE(member.ok()) << member.status();
    if (member.ok()) pod->member = *std::move(member);
    Pod* raw = pod.get();
    pods_[name] = std::move(pod);
    return raw;
  }

  // Stops a member as a crash would: its lease is no longer renewed, nothing is revoked.
  void Crash(const std::string& name) { pods_.at(name)->member.reset(); }

  // The one pod that is primary now, or "" if none (or more than one: a test failure).
  std::string Primary() {
    std::string primary;
    for (auto& [name, pod] : pods_) {
      if (pod->member != nullptr && pod->Is(Role::Kind::kPrimary)) {
        EXPECT_TRUE(primary.empty()) << "two primaries: " << primary << " and " << name;
        primary = name;
      }
    }
    return primary;
  }

  absl::Duration ttl_ = absl::Seconds(2);
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
  std::map<std::string, std::unique_ptr<Pod>> pods_;
};

TEST_F(ClusterMemberTest, TheMemberHoldingTheMostLeadsAndTheOthersFollowIt) {
  StartPod("pod-a", 10);
  StartPod("pod-b", 30);
  StartPod("pod-c", 20);
  ASSERT_TRUE(WaitFor([&] {
    return Primary() == "pod-b" && pods_["pod-a"]->Is(Role::Kind::kFollower) &&
           pods_["pod-c"]->Is(Role::Kind::kFollower);
  }));
  const Role primary = pods_["pod-b"]->Last();
  EXPECT_GT(primary.term, 0);
  EXPECT_EQ(primary.leader.start_sequence, 30u);
  for (const char* name : {"pod-a", "pod-c"}) {
    const Role role = pods_[name]->Last();
    EXPECT_EQ(role.term, primary.term) << name;
    EXPECT_EQ(role.leader.name, "pod-b") << name;
    EXPECT_EQ(role.leader.address, "pod-b.bloom:50051") << name;
  }
  EXPECT_TRUE(pods_["pod-b"]->member->MayAcknowledge());
  EXPECT_FALSE(pods_["pod-a"]->member->MayAcknowledge());
  // The records in etcd: the leader key (created at the term's revision), an empty sync set
  // of the term, no election marker left.
  absl::StatusOr<KeyValue> leader = client_->Get("c1/leader");
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(leader->create_revision, primary.term);
  absl::StatusOr<KeyValue> sync = client_->Get("c1/sync");
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(sync->value,
            Encode(SyncSet{.leader = "pod-b", .term = primary.term, .required = 0, .names = {}}));
  EXPECT_TRUE(absl::IsNotFound(client_->Get("c1/election").status()));
  absl::StatusOr<std::vector<KeyValue>> members = client_->GetPrefix("c1/members/");
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ(members->size(), 3u);
}

TEST_F(ClusterMemberTest, ACrashedPrimaryIsReplacedWithinItsTtl) {
  StartPod("pod-a", 10);
  StartPod("pod-b", 20);
  StartPod("pod-c", 30);
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-c"; }));
  const int64_t old_term = pods_["pod-c"]->Last().term;
  pods_["pod-a"]->held = 25;  // what each follower applied of pod-c's log
  pods_["pod-b"]->held = 28;

  const absl::Time crashed = absl::Now();
  Crash("pod-c");
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-b"; }, absl::Seconds(15)));
  const absl::Duration failover = absl::Now() - crashed;
  // The lease runs out (at most a TTL), then a settle and the claim.
  EXPECT_LT(failover, ttl_ + absl::Seconds(2)) << failover;
  const Role primary = pods_["pod-b"]->Last();
  EXPECT_GT(primary.term, old_term);
  EXPECT_EQ(primary.leader.start_sequence, 28u);
  ASSERT_TRUE(WaitFor([&] {
    const Role role = pods_["pod-a"]->Last();
    return role.kind == Role::Kind::kFollower && role.leader.name == "pod-b";
  }));
  EXPECT_EQ(pods_["pod-a"]->Last().term, primary.term);
}

TEST_F(ClusterMemberTest, RecordsFromBeforeThePrimaryWentDoNotCount) {
  StartPod("pod-a", 10);
  StartPod("pod-b", 20);
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-b"; }));
  // A member that registered, then hung (its lease kept alive): its record says nothing of
  // what it holds now. Counted, it would be chosen, and nobody would take over.
  absl::StatusOr<EtcdLease> lease = client_->GrantLease(absl::Seconds(60));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(
      client_->Put("c1/members/pod-z", Encode(MemberRecord{"pod-z", "z:1", 999, 1}), lease->id)
          .ok());
  Crash("pod-b");
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-a"; }, absl::Seconds(15)));
}

TEST_F(ClusterMemberTest, AResigningPrimaryHandsOverWithoutWaitingForItsTtl) {
  ttl_ = absl::Seconds(10);
  StartPod("pod-a", 10);
  StartPod("pod-b", 20);
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-b"; }));
  const absl::Time resigned = absl::Now();
  ASSERT_TRUE(pods_["pod-b"]->member->Resign().ok());
  EXPECT_FALSE(pods_["pod-b"]->member->MayAcknowledge());
  ASSERT_TRUE(WaitFor([&] { return pods_["pod-a"]->Is(Role::Kind::kPrimary); }));
  EXPECT_LT(absl::Now() - resigned, absl::Seconds(5));  // well under the 10 s TTL
}

TEST_F(ClusterMemberTest, OnlyAMemberOfTheSyncSetTakesOver) {
  StartPod("pod-a", 100, /*required_acks=*/1);
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-a"; }));
  StartPod("pod-b", 50, 1);
  StartPod("pod-c", 90, 1);
  ASSERT_TRUE(WaitFor([&] {
    return pods_["pod-b"]->Is(Role::Kind::kFollower) && pods_["pod-c"]->Is(Role::Kind::kFollower);
  }));
  ASSERT_TRUE(pods_["pod-a"]->member->RecordSyncSet({"pod-b"}).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(pods_["pod-b"]->member->RecordSyncSet({"pod-c"})));

  Crash("pod-a");
  // pod-c holds more, but only pod-b is known to hold every acknowledged write.
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-b"; }, absl::Seconds(15)));
  ASSERT_TRUE(WaitFor([&] {
    const Role role = pods_["pod-c"]->Last();
    return role.kind == Role::Kind::kFollower && role.leader.name == "pod-b";
  }));
  // The new term starts with an empty set.
  absl::StatusOr<KeyValue> sync = client_->Get("c1/sync");
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(
      sync->value,
      Encode(SyncSet{
          .leader = "pod-b", .term = pods_["pod-b"]->Last().term, .required = 1, .names = {}}));
}

TEST_F(ClusterMemberTest, WithTooFewOfTheSyncSetUpNobodyTakesOverUntilThePrimaryReturns) {
  StartPod("pod-a", 100, 1);
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-a"; }));
  StartPod("pod-b", 100, 1);
  StartPod("pod-c", 100, 1);
  ASSERT_TRUE(WaitFor([&] { return pods_["pod-c"]->Is(Role::Kind::kFollower); }));
  ASSERT_TRUE(pods_["pod-a"]->member->RecordSyncSet({"pod-b", "pod-c"}).ok());

  // With one acknowledgement of two, a write may be on pod-b alone: pod-c must not lead.
  Crash("pod-a");
  Crash("pod-b");
  absl::SleepFor(ttl_ + absl::Seconds(2));
  EXPECT_EQ(Primary(), "");
  EXPECT_TRUE(pods_["pod-c"]->Is(Role::Kind::kNone));
  EXPECT_TRUE(absl::IsNotFound(client_->Get("c1/leader").status()));

  // The primary that wrote the set comes back: it holds every write it acknowledged.
  pods_.erase("pod-a");
  StartPod("pod-a", 100, 1);
  ASSERT_TRUE(WaitFor([&] { return Primary() == "pod-a"; }, absl::Seconds(15)));
}

TEST_F(ClusterMemberTest, APrimaryCutOffFromEtcdStopsAcknowledgingBeforeItsLeaseCanExpire) {
  Pod* pod = StartPod("pod-a", 10);
  ASSERT_TRUE(WaitFor([&] { return pod->Is(Role::Kind::kPrimary); }));
  ASSERT_TRUE(pod->member->MayAcknowledge());
  const int64_t term = pod->Last().term;

  const absl::Time stopped = absl::Now();
  etcd_->Signal(SIGSTOP);
  ASSERT_TRUE(WaitFor([&] { return !pod->member->MayAcknowledge(); }, absl::Seconds(5)));
  EXPECT_LT(absl::Now() - stopped, ttl_);
  ASSERT_TRUE(WaitFor([&] { return pod->Is(Role::Kind::kNone); }, absl::Seconds(5)));
  EXPECT_FALSE(pod->member->MayAcknowledge());

  // etcd back: the old lease's key goes, and an election makes it primary of a new term.
  etcd_->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return pod->Is(Role::Kind::kPrimary); }, absl::Seconds(20)));
  EXPECT_GT(pod->Last().term, term);
  EXPECT_TRUE(pod->member->MayAcknowledge());
}

TEST_F(ClusterMemberTest, ThePrimaryCountsOnlyFollowersItRecordedInTheSyncSet) {
  ttl_ = absl::Seconds(10);  // the lease outlasts etcd's pause below
  Pod* pod = StartPod("pod-a", 10, /*required_acks=*/1);
  ASSERT_TRUE(WaitFor([&] { return pod->Is(Role::Kind::kPrimary); }));
  const int64_t term = pod->Last().term;
  // Followers pod-b and pod-c are members: their records name the digests of their secrets.
  absl::StatusOr<EtcdLease> lease = client_->GrantLease(absl::Seconds(60));
  ASSERT_TRUE(lease.ok()) << lease.status();
  for (const char* name : {"pod-b", "pod-c"}) {
    const MemberRecord record{name, absl::StrCat(name, ":1"), 0, 0,
                              ProofOf(absl::StrCat(name, "-secret"))};
    ASSERT_TRUE(client_->Put(MemberKey("c1", name), Encode(record), lease->id).ok());
  }
  storage::ReplicaAcks acks(/*required=*/1, absl::Seconds(30));
  const int b = acks.Connect("pod-b", ProofOf("pod-b-secret"));
  // Two impostors: one posing as pod-b without its secret, one naming no member. Whatever
  // they acknowledge counts for nothing, and neither enters the set.
  const int posing = acks.Connect("pod-b", ProofOf("a guess"));
  const int ghost = acks.Connect("ghost", ProofOf("ghost-secret"));
  SyncSetKeeperOptions options;
  options.interval = absl::Milliseconds(20);
  options.stale_after = absl::Seconds(30);

  // etcd stopped before the keeper starts: pod-b cannot be recorded, so its
  // acknowledgements do not count.
  etcd_->Signal(SIGSTOP);
  auto keeper = std::make_unique<SyncSetKeeper>(pod->member.get(), &acks, options);
  acks.Ack(b, 10);
  acks.Ack(posing, 1000);
  acks.Ack(ghost, 1000);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(acks.acknowledged_sequence(), 0u);
  EXPECT_TRUE(keeper->recorded().empty());
  etcd_->Signal(SIGCONT);

  // Recorded: then counted.
  ASSERT_TRUE(WaitFor([&] { return acks.acknowledged_sequence() == 10; }));
  EXPECT_EQ(keeper->recorded(), std::vector<std::string>{"pod-b"});
  absl::StatusOr<KeyValue> sync = client_->Get("c1/sync");
  ASSERT_TRUE(sync.ok()) << sync.status();
  EXPECT_EQ(sync->value,
            Encode(SyncSet{.leader = "pod-a", .term = term, .required = 1, .names = {"pod-b"}}));
  EXPECT_EQ(acks.acknowledged_sequence(), 10u);  // not the impostors' 1000
  for (const storage::ReplicaAcks::Follower& follower : acks.Followers()) {
    EXPECT_EQ(follower.verified, follower.id == b) << follower.name;
  }
  acks.Disconnect(posing);
  acks.Disconnect(ghost);

  // pod-c joins and acknowledges only part of what pod-b did; pod-b goes: it stays in the
  // set until pod-c holds every acknowledged write.
  const int c = acks.Connect("pod-c", ProofOf("pod-c-secret"));
  ASSERT_TRUE(WaitFor([&] { return keeper->recorded().size() == 2; }));
  acks.Ack(b, 20);
  acks.Ack(c, 15);
  acks.Disconnect(b);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(keeper->recorded(), (std::vector<std::string>{"pod-b", "pod-c"}));
  acks.Ack(c, 20);
  ASSERT_TRUE(WaitFor([&] { return keeper->recorded().size() == 1; }));
  EXPECT_EQ(keeper->recorded(), std::vector<std::string>{"pod-c"});
  EXPECT_EQ(client_->Get("c1/sync")->value,
            Encode(SyncSet{.leader = "pod-a", .term = term, .required = 1, .names = {"pod-c"}}));
  keeper.reset();
}

TEST_F(ClusterMemberTest, AMemberCutOffFromEtcdNeverBecomesPrimary) {
  const std::string dead = "127.0.0.1:" + std::to_string(bloomtest::FreeLoopbackPort());
  absl::StatusOr<std::unique_ptr<EtcdClient>> nowhere =
      EtcdClient::Connect({dead}, absl::Milliseconds(500));
  ASSERT_TRUE(nowhere.ok()) << nowhere.status();
  Pod pod;
  pod.held = 100;
  absl::StatusOr<std::unique_ptr<ClusterMember>> member =
      ClusterMember::Start(nowhere->get(), Options("pod-a", &pod, 0));
  ASSERT_TRUE(member.ok()) << member.status();
  absl::SleepFor(ttl_ + absl::Seconds(1));
  EXPECT_FALSE((*member)->MayAcknowledge());
  EXPECT_EQ((*member)->role().kind, Role::Kind::kNone);
  std::lock_guard<std::mutex> lock(pod.mu);
  EXPECT_TRUE(pod.roles.empty());
}

TEST_F(ClusterMemberTest, OptionsAreChecked) {
  Pod pod;
  ClusterMemberOptions options = Options("pod a", &pod, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterMember::Start(client_.get(), options).status()));
  options = Options("pod-a", &pod, 0);
  options.address = "";
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterMember::Start(client_.get(), options).status()));
  options = Options("pod-a", &pod, -1);
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterMember::Start(client_.get(), options).status()));
  options = Options("pod-a", &pod, 0);
  options.on_role = nullptr;
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterMember::Start(client_.get(), options).status()));
}

}  // namespace
}  // namespace coordination
