// The shard map's record and a pod's view of it, against a real etcd.
#include "coordination/shard_map_watch.h"

#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "coordination/cluster_state.h"
#include "coordination/shard_map_record.h"
#include "gtest/gtest.h"
#include "tests/support/etcd_process.h"
#include "tests/support/testing.h"

namespace coordination {
namespace {

using bloomtest::EtcdProcess;
using bloomtest::WaitFor;
using sharding::ShardMap;

class ShardMapWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Connect({etcd_->endpoint()}, absl::Seconds(2));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(ShardMapWatchTest, CreateOnceThenChangeByComparingTheRevision) {
  absl::StatusOr<ShardMap> even = ShardMap::EvenSplit({"d/a", "d/b"}, 64);
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(ReadShardMap(*client_, "d/shardmap").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(CreateShardMap(*client_, "d/shardmap", *even).ok());
  absl::StatusOr<ShardMap> again = CreateShardMap(*client_, "d/shardmap", *even);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();

  // Two writers changing it at once: each change applies exactly once, from what the other
  // wrote.
  std::vector<std::thread> writers;
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([this, i] {
      absl::StatusOr<ShardMap> added = ChangeShardMap(
          *client_, "d/shardmap",
          [i](const ShardMap& now) { return now.AddGroup("d/extra" + std::to_string(i)); });
      EXPECT_TRUE(added.ok()) << added.status();
    });
  }
  for (std::thread& writer : writers) writer.join();
  absl::StatusOr<StoredShardMap> stored = ReadShardMap(*client_, "d/shardmap");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->map.version(), 5U);
  EXPECT_EQ(stored->map.groups().size(), 6U);

  // A change that fails leaves the record alone and says why.
  absl::StatusOr<ShardMap> refused = ChangeShardMap(
      *client_, "d/shardmap", [](const ShardMap& now) { return now.AddGroup("d/a"); });
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadShardMap(*client_, "d/shardmap")->map.version(), 5U);
}

TEST_F(ShardMapWatchTest, FollowsTheMapAndWhereEveryGroupIsReached) {
  absl::StatusOr<std::unique_ptr<ShardMapWatch>> watch =
      ShardMapWatch::Start(client_.get(), {"d/shardmap", "d/a", absl::Milliseconds(100)});
  ASSERT_TRUE(watch.ok()) << watch.status();
  EXPECT_EQ((*watch)->Current()->map.version(), 0U);
  EXPECT_FALSE((*watch)->WaitForVersion(1, absl::Now() + absl::Milliseconds(200)));

  ASSERT_TRUE(client_->Put(LeaderKey("d/b"), Encode(LeaderRecord{"b-0", "b-0:1", 0})).ok());
  ASSERT_TRUE(client_->Put(MemberKey("d/b", "b-0"), Encode(MemberRecord{"b-0", "b-0:1"})).ok());
  ASSERT_TRUE(client_->Put(MemberKey("d/b", "b-1"), Encode(MemberRecord{"b-1", "b-1:1"})).ok());
  absl::StatusOr<ShardMap> even = ShardMap::EvenSplit({"d/a", "d/b"}, 64);
  ASSERT_TRUE(CreateShardMap(*client_, "d/shardmap", *even).ok());
  ASSERT_TRUE((*watch)->WaitForVersion(1, absl::Now() + absl::Seconds(10)));
  EXPECT_EQ((*watch)->Current()->map.Encode(), even->Encode());
  ASSERT_TRUE(WaitFor([&] {
    const sharding::GroupAddresses* b = (*watch)->Current()->Find("d/b");
    return b != nullptr && b->primary == "b-0:1" && b->members.size() == 2;
  }));

  // A new primary, and a change of the map, are seen.
  ASSERT_TRUE(client_->Put(LeaderKey("d/b"), Encode(LeaderRecord{"b-1", "b-1:1", 0})).ok());
  ASSERT_TRUE(ChangeShardMap(*client_, "d/shardmap", [](const ShardMap& now) {
                return now.Assign({0, 63}, "d/b");
              }).ok());
  ASSERT_TRUE((*watch)->WaitForVersion(2, absl::Now() + absl::Seconds(10)));
  EXPECT_EQ((*watch)->Current()->map.OwnerOf(0), "d/b");
  ASSERT_TRUE(WaitFor([&] { return (*watch)->Current()->Find("d/b")->primary == "b-1:1"; }));

  // A record it cannot read, or an older version, leaves the map as it was.
  ASSERT_TRUE(client_->Put("d/shardmap", "format=1 nonsense").ok());
  ASSERT_TRUE(client_->Put("d/shardmap", even->Encode()).ok());  // version 1 again
  ASSERT_TRUE(client_->Put(LeaderKey("d/a"), Encode(LeaderRecord{"a-0", "a-0:1", 0})).ok());
  ASSERT_TRUE(WaitFor([&] {
    const sharding::GroupAddresses* a = (*watch)->Current()->Find("d/a");
    return a != nullptr && a->primary == "a-0:1";
  }));
  EXPECT_EQ((*watch)->Current()->map.version(), 2U);
  EXPECT_EQ((*watch)->Current()->map.OwnerOf(0), "d/b");
}

TEST_F(ShardMapWatchTest, KeepsItsViewWhileEtcdIsDownAndCatchesUpAfter) {
  absl::StatusOr<ShardMap> even = ShardMap::EvenSplit({"d/a"}, 16);
  ASSERT_TRUE(CreateShardMap(*client_, "d/shardmap", *even).ok());
  absl::StatusOr<std::unique_ptr<ShardMapWatch>> watch =
      ShardMapWatch::Start(client_.get(), {"d/shardmap", "d/a", absl::Milliseconds(100)});
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE((*watch)->WaitForVersion(1, absl::Now() + absl::Seconds(10)));
  etcd_->Signal(SIGSTOP);  // etcd stops answering: reads time out meanwhile
  ASSERT_TRUE(WaitFor([&] { return bloomtest::ProcessState(etcd_->pid()) == 'T'; }));
  EXPECT_FALSE(client_->Get("d/shardmap").ok());
  EXPECT_EQ((*watch)->Current()->map.version(), 1U);
  etcd_->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor([&] { return client_->Get("d/shardmap").ok(); }));
  ASSERT_TRUE(ChangeShardMap(*client_, "d/shardmap", [](const ShardMap& now) {
                return now.AddGroup("d/b");
              }).ok());
  EXPECT_TRUE((*watch)->WaitForVersion(2, absl::Now() + absl::Seconds(10)));
}

TEST_F(ShardMapWatchTest, RefusesAGroupNameThatCannotBeInAMap) {
  EXPECT_EQ(ShardMapWatch::Start(client_.get(), {"d/shardmap", "bad group"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardMapWatch::Start(client_.get(), {"", "d/a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace coordination
