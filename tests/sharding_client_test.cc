// A sharded deployment seen by its clients: List across groups, Pipeline streams and
// transfers served by the group of their pod, the C++ client's direct routing (calls go
// straight to the owning group's primary, and the map is fetched again when it changes), and
// bloom-cli's cluster commands creating and describing the map.
#include <csignal>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "common/slot.h"
#include "tests/sharded_deployment.h"

namespace bloomtest {
namespace {

TEST_F(ShardingTest, ListMergesEveryGroupsFiltersInNameOrderPageByPage) {
  std::unique_ptr<bloomclient::BloomClient> writer = bloomclient::BloomClient::Connect(Target(2));
  std::set<std::string> names;
  std::set<std::string> groups;
  for (int i = 0; i < 30; ++i) {
    const std::string name = absl::StrCat("listed:", i);
    ASSERT_TRUE(writer->Reserve(name, Spec()).ok());
    names.insert(name);
    groups.insert(map_.OwnerOfName(name));
  }
  ASSERT_EQ(groups.size(), 2U) << "the names must fall in both groups";
  ASSERT_TRUE(writer->Reserve("other", Spec()).ok());  // not under the prefix
  for (int pod = 0; pod < 3; ++pod) {
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(pod));
    std::vector<std::string> listed;
    std::string token;
    int pages = 0;
    do {
      absl::StatusOr<bloom::v1::ListResponse> page = client->List("listed:", 7, token);
      ASSERT_TRUE(page.ok()) << page.status();
      ASSERT_LE(page->filters_size(), 7);
      for (const bloom::v1::FilterStats& stats : page->filters()) listed.push_back(stats.name());
      token = page->next_page_token();
      ++pages;
    } while (!token.empty() && pages < 20);
    EXPECT_EQ(listed, std::vector<std::string>(names.begin(), names.end())) << "pod " << pod;
  }
}

TEST_F(ShardingTest, PipelineAndTransfersAreServedByTheGroupOfTheirPod) {
  std::unique_ptr<bloomclient::BloomClient> home = bloomclient::BloomClient::Connect(Target(2));
  ASSERT_TRUE(home->Reserve(in_a_, Spec()).ok());
  ASSERT_TRUE(home->Reserve(in_b_, Spec()).ok());
  ASSERT_TRUE(home->Add(in_b_, {"b-item"}).ok());
  // A pipelined client of pod 2 (group b): its group's filters are served on the stream; group
  // a's operations are answered UNAVAILABLE naming group a.
  bloomclient::ClientOptions pipelined;
  pipelined.pipelined = true;
  std::unique_ptr<bloomclient::BloomClient> stream =
      bloomclient::BloomClient::Connect(Target(2), pipelined);
  absl::StatusOr<std::vector<bool>> served = stream->MightContain(in_b_, {"b-item"});
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_TRUE((*served)[0]);
  absl::StatusOr<std::vector<bool>> refused = stream->Add(in_a_, {"a-item"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), kGroupA)) << refused.status();

  std::ostringstream dump;
  EXPECT_TRUE(home->Export(in_b_, dump).ok());
  std::ostringstream elsewhere;
  absl::Status exported = home->Export(in_a_, elsewhere);
  EXPECT_EQ(exported.code(), absl::StatusCode::kUnavailable) << exported;
  std::istringstream in(dump.str());
  const std::string import_name = NameIn(map_, kGroupA, "imported-");
  absl::StatusOr<bloom::v1::FilterStats> imported = home->Import(import_name, in);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnavailable) << imported.status();
  // Through a pod of the owning group, the same dump imports.
  std::istringstream again(dump.str());
  EXPECT_TRUE(
      bloomclient::BloomClient::Connect(Target(PrimaryOfA()))->Import(import_name, again).ok());
}

TEST_F(ShardingTest, ADirectlyRoutingClientSendsEachCallToItsGroupsPrimary) {
  const int primary_a = PrimaryOfA();
  const int seed = 1 - primary_a;  // group a's follower: routing must not need it
  for (const bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "unary");
    bloomclient::ClientOptions options;
    options.shard_routing = true;
    options.pipelined = pipelined;
    options.timeout = absl::Seconds(5);
    std::unique_ptr<bloomclient::BloomClient> client =
        bloomclient::BloomClient::Connect(Target(seed), options);
    ASSERT_EQ(client->shard_map_version(), 1U);
    const std::string a = absl::StrCat(in_a_, "-", pipelined);
    const std::string b = absl::StrCat(in_b_, "-", pipelined);
    ASSERT_TRUE(client->Reserve(a, Spec()).ok());
    ASSERT_TRUE(client->Reserve(b, Spec()).ok());
    // With the seed stopped, every call still reaches its group's primary.
    pods_[seed]->Signal(SIGSTOP);
    for (const std::string& name : {a, b}) {
      absl::StatusOr<std::vector<bool>> added = client->Add(name, {"one", "two"});
      ASSERT_TRUE(added.ok()) << name << ": " << added.status();
      absl::StatusOr<std::vector<bool>> present = client->MightContain(name, {"one", "three"});
      ASSERT_TRUE(present.ok()) << present.status();
      EXPECT_EQ(*present, (std::vector<bool>{true, false}));
      absl::StatusOr<bloom::v1::FilterStats> stats = client->Stats(name);
      ASSERT_TRUE(stats.ok()) << stats.status();
      EXPECT_EQ(stats->items_added(), 2U);
    }
    pods_[seed]->Signal(SIGCONT);
  }
}

TEST_F(ShardingTest, ADirectlyRoutingClientFetchesTheMapAgainWhenItChanges) {
  bloomclient::ClientOptions options;
  options.shard_routing = true;
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(Target(2), options);
  ASSERT_EQ(client->shard_map_version(), 1U);
  const uint32_t slot = slots::SlotOf(in_a_, kSlots);
  ASSERT_TRUE(
      coordination::ChangeShardMap(*etcd_client_, kMapKey, [slot](const sharding::ShardMap& now) {
        return now.Assign({slot, slot}, kGroupB);
      }).ok());
  WaitForMapEverywhere(2);
  // Its copy still sends in_a_ to group a, whose pod forwards it to group b and says so: the
  // answer is right, and the client fetches the map.
  ASSERT_TRUE(client->Reserve(in_a_, Spec()).ok());
  EXPECT_EQ(client->shard_map_version(), 2U);
  ASSERT_TRUE(client->Add(in_a_, {"x"}).ok());
  EXPECT_TRUE(HeldBy(2, in_a_, "x"));
}

TEST(ShardingCliTest, PodsGivenTheGroupsCreateTheMapOrJoinIt) {
  // As the Helm chart starts a new deployment: every pod may create the map; one does.
  class Deployment : public ShardingTest {
   public:
    void TestBody() override {}
    using ShardingTest::MapAt;
    using ShardingTest::StartPods;
    using ShardingTest::WaitForMapEverywhere;
    std::vector<std::string>& every_pod_args() { return every_pod_args_; }
    void RestartAs(int pod, const std::string& group, std::vector<std::string> args) {
      pods_[pod]->Kill();
      groups_[pod] = group;
      every_pod_args_ = std::move(args);
      StartPod(pod);
    }
  } deployment;
  deployment.every_pod_args() = {absl::StrCat("--shard_map_groups=", kGroupA, ",", kGroupB),
                                 absl::StrCat("--shard_map_slots=", kSlots)};
  deployment.StartPods(/*create_map=*/false);
  if (::testing::Test::HasFatalFailure()) return;
  deployment.WaitForMapEverywhere(1);
  absl::StatusOr<bloom::v1::ShardMap> map = deployment.MapAt(2);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->version(), 1U);
  EXPECT_EQ(map->slot_count(), kSlots);
  ASSERT_EQ(map->ranges_size(), 2);
  EXPECT_EQ(map->ranges(0).group(), kGroupA);
  EXPECT_EQ(map->ranges(1).first(), kSlots / 2);
  // The map exists: a pod of a group it lacks (a group added to the deployment, as the chart
  // does when sharding.groups is raised) adds its group, owning no slot.
  deployment.RestartAs(2, "shard-test/c",
                       {absl::StrCat("--shard_map_groups=", kGroupA, ",", kGroupB, ",shard-test/c"),
                        absl::StrCat("--shard_map_slots=", kSlots)});
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<bloom::v1::ShardMap> now = deployment.MapAt(0);
    return now.ok() && now->version() == 2;
  }));
  map = deployment.MapAt(0);
  ASSERT_TRUE(map.ok());
  ASSERT_EQ(map->groups_size(), 3);
  EXPECT_EQ(map->groups(2).name(), "shard-test/c");
  ASSERT_EQ(map->ranges_size(), 2) << "the new group owns nothing yet";
}

TEST(ShardingCliTest, ClusterCommandsCreateAndDescribeTheMap) {
  class Deployment : public ShardingTest {
   public:
    void TestBody() override {}
    using ShardingTest::MapAt;
    using ShardingTest::StartPods;
    using ShardingTest::Target;
    using ShardingTest::WaitForMapEverywhere;
  } deployment;
  deployment.StartPods(/*create_map=*/false);
  if (::testing::Test::HasFatalFailure()) return;
  const std::string cli = absl::StrCat(BLOOM_CLI_PATH, " --server=", deployment.Target(1));
  CommandResult shards = RunCommand(cli + " cluster shards");
  EXPECT_EQ(shards.exit_code, 0) << shards.out;
  EXPECT_TRUE(absl::StrContains(shards.out, "no shard map yet")) << shards.out;
  // Calls for filters wait for a map: UNAVAILABLE meanwhile.
  bloomclient::ClientOptions quick;
  quick.timeout = absl::Seconds(2);
  EXPECT_EQ(
      bloomclient::BloomClient::Connect(deployment.Target(2), quick)->Stats("x").status().code(),
      absl::StatusCode::kUnavailable);

  CommandResult init =
      RunCommand(absl::StrCat(cli, " cluster init ", kGroupA, " ", kGroupB, " --slots=", kSlots));
  ASSERT_EQ(init.exit_code, 0) << init.out;
  EXPECT_TRUE(absl::StrContains(init.out, "version 1")) << init.out;
  CommandResult twice = RunCommand(absl::StrCat(cli, " cluster init ", kGroupA));
  EXPECT_EQ(twice.exit_code, 1) << twice.out;
  EXPECT_TRUE(absl::StrContains(twice.out, "already")) << twice.out;
  deployment.WaitForMapEverywhere(1);
  CommandResult added = RunCommand(cli + " cluster add-group shard-test/c");
  ASSERT_EQ(added.exit_code, 0) << added.out;
  EXPECT_TRUE(absl::StrContains(added.out, "version 2")) << added.out;
  CommandResult bad = RunCommand(cli + " cluster add-group 'no spaces'");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<bloom::v1::ShardMap> map = deployment.MapAt(0);
    return map.ok() && map->version() == 2;
  }));
  shards = RunCommand(cli + " cluster shards");
  EXPECT_EQ(shards.exit_code, 0) << shards.out;
  EXPECT_TRUE(absl::StrContains(shards.out, "shard map version 2, 64 slots")) << shards.out;
  EXPECT_TRUE(absl::StrContains(shards.out, "shard-test/a: 32 slots (0-31)")) << shards.out;
  EXPECT_TRUE(absl::StrContains(shards.out, "shard-test/c: 0 slots (none)")) << shards.out;

  // Without a sharded pod, there is no map to change.
  TempDir plain_dir;
  std::unique_ptr<ServerProcess> plain = ServerProcess::Start(plain_dir.path());
  ASSERT_NE(plain, nullptr);
  CommandResult unsharded = RunCommand(
      absl::StrCat(BLOOM_CLI_PATH, " --server=", plain->target(), " cluster add-group x"));
  EXPECT_EQ(unsharded.exit_code, 1) << unsharded.out;
  EXPECT_TRUE(absl::StrContains(unsharded.out, "not sharded")) << unsharded.out;
}

}  // namespace
}  // namespace bloomtest
