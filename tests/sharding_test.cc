// A sharded deployment: two groups (group a: a primary and a follower; group b: one pod)
// sharing one real etcd and a shard map. Every call for a filter, through every pod, reaches
// the group that owns the filter's slot and is served there only; a change of the map sends
// calls to the new owner; a call forwarded by a pod holding another map version is refused,
// never forwarded twice; GetShardMap describes the deployment.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/bloom_client.h"
#include "common/slot.h"
#include "tests/sharded_deployment.h"

namespace bloomtest {
namespace {

TEST_F(ShardingTest, EveryCallThroughEveryPodIsServedByTheOwningGroup) {
  for (int pod = 0; pod < 3; ++pod) {
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(pod));
    for (const std::string& base : {in_a_, in_b_}) {
      const std::string name = absl::StrCat(base, "-via-", pod);
      // The name's slot, not the base's: find where it lives.
      const bool owned_by_a = map_.OwnerOfName(name) == kGroupA;
      SCOPED_TRACE(
          absl::StrCat(name, " through pod ", pod, " (owner ", map_.OwnerOfName(name), ")"));
      ASSERT_TRUE(client->Reserve(name, Spec()).ok());
      ASSERT_TRUE(client->Add(name, {"x", "y"}).ok());
      absl::StatusOr<std::vector<bool>> present = client->MightContain(name, {"x", "y", "z"});
      ASSERT_TRUE(present.ok()) << present.status();
      EXPECT_EQ(*present, (std::vector<bool>{true, true, false}));
      absl::StatusOr<bloom::v1::FilterStats> stats = client->Stats(name);
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_EQ(stats->items_added(), 2U);
      // Held by the owner's primary only.
      const int owner_pod = owned_by_a ? 0 : 2;
      const int other_pod = owned_by_a ? 2 : 0;
      EXPECT_TRUE(WaitFor([&] { return HeldBy(owner_pod, name, "x"); }));
      bool present_elsewhere = false;
      grpc::Status refused = HopTo(other_pod, name, "x", &present_elsewhere);
      EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
      EXPECT_TRUE(absl::StrContains(refused.error_message(), "belongs to group"))
          << refused.error_message();

      // Cuckoo filters' Remove and Count, and Merge of filters of one group.
      const std::string cuckoo = name + "-cuckoo";
      ASSERT_TRUE(client->Reserve(cuckoo, Spec(bloom::v1::FILTER_KIND_CUCKOO)).ok());
      ASSERT_TRUE(client->Add(cuckoo, {"c", "c"}).ok());
      absl::StatusOr<std::vector<uint32_t>> counts = client->Count(cuckoo, {"c"});
      ASSERT_TRUE(counts.ok()) << counts.status();
      EXPECT_EQ((*counts)[0], 2U);
      absl::StatusOr<std::vector<bool>> removed = client->Remove(cuckoo, {"c"});
      ASSERT_TRUE(removed.ok()) << removed.status();
      EXPECT_TRUE((*removed)[0]);
      const std::string tagged = absl::StrCat("{", name, "}-copy");  // same slot as `name`
      absl::StatusOr<bloom::v1::ReserveResponse> like = client->ReserveLike(tagged, name);
      ASSERT_TRUE(like.ok()) << like.status();
      absl::StatusOr<bloom::v1::FilterStats> merged = client->Merge(tagged, {name});
      ASSERT_TRUE(merged.ok()) << merged.status();
      absl::StatusOr<std::vector<bool>> copied = client->MightContain(tagged, {"x"});
      ASSERT_TRUE(copied.ok());
      EXPECT_TRUE((*copied)[0]);
      ASSERT_TRUE(client->Delete(name).ok());
      EXPECT_EQ(client->Stats(name).status().code(), absl::StatusCode::kNotFound);
    }
  }
}

TEST_F(ShardingTest, MergeAndReserveLikeWorkAcrossGroups) {
  // Through every pod: a model in group b, a filter made like it in group a, sources in both.
  for (int pod = 0; pod < 3; ++pod) {
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(pod));
    const std::string prefix = absl::StrCat("across", pod, "-");
    const std::string model = NameIn(map_, kGroupB, prefix + "model-");
    const std::string target = NameIn(map_, kGroupA, prefix + "target-");
    const std::string source_a = NameIn(map_, kGroupA, prefix + "source-a-");
    const std::string source_b = NameIn(map_, kGroupB, prefix + "source-b-");
    ASSERT_TRUE(client->Reserve(model, Spec()).ok());
    // Reserve like: the spec and seed of group b's filter, for group a's.
    for (const std::string& name : {target, source_a, source_b}) {
      absl::StatusOr<bloom::v1::ReserveResponse> like = client->ReserveLike(name, model);
      ASSERT_TRUE(like.ok()) << name << ": " << like.status();
      EXPECT_TRUE(like->created());
    }
    ASSERT_TRUE(client->Add(source_a, {"from-a"}).ok());
    ASSERT_TRUE(client->Add(source_b, {"from-b", "also-b"}).ok());
    ASSERT_TRUE(client->Add(target, {"own"}).ok());
    absl::StatusOr<bloom::v1::FilterStats> merged = client->Merge(target, {source_a, source_b});
    ASSERT_TRUE(merged.ok()) << merged.status();
    absl::StatusOr<std::vector<bool>> present =
        client->MightContain(target, {"own", "from-a", "from-b", "also-b", "never"});
    ASSERT_TRUE(present.ok()) << present.status();
    EXPECT_EQ(*present, (std::vector<bool>{true, true, true, true, false}));
    EXPECT_TRUE(HeldBy(PrimaryOfA(), target, "from-b")) << "group a holds the union";
    // A source that does not exist, or one not made alike, fails the merge with its reason.
    const std::string stranger = NameIn(map_, kGroupB, prefix + "stranger-");
    ASSERT_TRUE(client->Reserve(stranger, Spec(bloom::v1::FILTER_KIND_BLOOM)).ok());
    EXPECT_EQ(client->Merge(target, {stranger}).status().code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(client->Merge(target, {NameIn(map_, kGroupB, prefix + "missing-")}).status().code(),
              absl::StatusCode::kNotFound);
    EXPECT_EQ(client
                  ->ReserveLike(NameIn(map_, kGroupA, prefix + "orphan-"),
                                NameIn(map_, kGroupB, prefix + "missing-"))
                  .status()
                  .code(),
              absl::StatusCode::kNotFound);
  }
}

TEST_F(ShardingTest, GetShardMapDescribesTheDeploymentAndForwardedAnswersCarryItsVersion) {
  absl::StatusOr<bloom::v1::ShardMap> map = MapAt(1);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->version(), 1U);
  EXPECT_EQ(map->slot_count(), kSlots);
  ASSERT_EQ(map->groups_size(), 2);
  EXPECT_EQ(map->groups(0).name(), kGroupA);
  EXPECT_EQ(map->groups(1).name(), kGroupB);
  EXPECT_EQ(map->groups(1).primary(), Target(2));
  EXPECT_EQ(map->groups(0).members_size(), 2);
  ASSERT_EQ(map->ranges_size(), 2);
  EXPECT_EQ(map->ranges(0).first(), 0U);
  EXPECT_EQ(map->ranges(1).last(), kSlots - 1);

  // A call for group b's filter through a pod of group a: forwarded, and says so.
  ASSERT_TRUE(bloomclient::BloomClient::Connect(Target(2))->Reserve(in_b_, Spec()).ok());
  grpc::ClientContext context;
  bloom::v1::MightContainRequest request;
  request.set_name(in_b_);
  request.add_items("x");
  bloom::v1::MightContainResponse response;
  ASSERT_TRUE(Stub(0)->MightContain(&context, request, &response).ok());
  const auto& headers = context.GetServerInitialMetadata();
  auto version = headers.find("bloom-shard-map-version");
  ASSERT_NE(version, headers.end());
  EXPECT_EQ(std::string(version->second.data(), version->second.size()), "1");
  // Pod 0's metrics count it, and say which map it holds.
  const std::string metrics = HttpGet(pods_[0]->metrics_port(), "/metrics");
  EXPECT_EQ(PrometheusSample(metrics, "bloom_shard_map_version"), 1);
  EXPECT_EQ(PrometheusSample(metrics, absl::StrCat("bloom_shard_group{group=\"", kGroupA, "\"}")),
            1);
  EXPECT_EQ(PrometheusSample(metrics, "bloom_shard_slots_owned"), kSlots / 2);
  EXPECT_GE(PrometheusSample(metrics,
                             absl::StrCat("bloom_shard_forwarded_total{group=\"", kGroupB, "\"}")),
            1);
  // Served at home: no header.
  grpc::ClientContext home;
  ASSERT_TRUE(Stub(2)->MightContain(&home, request, &response).ok());
  EXPECT_EQ(home.GetServerInitialMetadata().count("bloom-shard-map-version"), 0U);
}

TEST_F(ShardingTest, AChangeOfTheMapSendsCallsToTheNewOwner) {
  const uint32_t slot = slots::SlotOf(in_a_, kSlots);
  absl::StatusOr<sharding::ShardMap> changed =
      coordination::ChangeShardMap(*etcd_client_, kMapKey, [slot](const sharding::ShardMap& now) {
        return now.Assign({slot, slot}, kGroupB);
      });
  ASSERT_TRUE(changed.ok()) << changed.status();
  for (int pod = 0; pod < 3; ++pod) {
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<bloom::v1::ShardMap> map = MapAt(pod);
      return map.ok() && map->version() == 2;
    }));
  }
  // The slot was empty: a filter made there now, through a pod of group a, lives in group b.
  std::unique_ptr<bloomclient::BloomClient> client = bloomclient::BloomClient::Connect(Target(1));
  ASSERT_TRUE(client->Reserve(in_a_, Spec()).ok());
  ASSERT_TRUE(client->Add(in_a_, {"moved"}).ok());
  EXPECT_TRUE(HeldBy(2, in_a_, "moved"));
  bool present = false;
  EXPECT_EQ(HopTo(0, in_a_, "moved", &present).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Forwarded to pod 0 (group a) by a pod still holding version 1, where group a owned it: pod
  // 0 holds version 2, newer, so it forwards the call on to group b rather than refuse it.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  context.AddMetadata("bloom-shard-hop", "1");
  bloom::v1::MightContainRequest request;
  request.set_name(in_a_);
  request.add_items("moved");
  bloom::v1::MightContainResponse response;
  const grpc::Status stale_sender = Stub(0)->MightContain(&context, request, &response);
  ASSERT_TRUE(stale_sender.ok()) << stale_sender.error_message();
  EXPECT_TRUE(response.present(0));
}

}  // namespace
}  // namespace bloomtest
