// A sharded deployment seen by its clients: List across groups, Pipeline streams serving every
// group's filters, transfers served by the group of their pod, the C++ client's direct routing
// (calls go straight to the owning group's primary, and the map is fetched again when it changes),
// and bloom-cli's cluster commands creating and describing the map.
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

// One PipelineRequest of `add` (or a check when false) of `items` to `name`, with id `id`.
bloom::v1::PipelineRequest Operation(uint64_t id, bool add, const std::string& name,
                                     const std::vector<std::string>& items) {
  bloom::v1::PipelineRequest request;
  request.set_id(id);
  auto fill = [&](auto* op) {
    op->set_name(name);
    for (const std::string& item : items) op->add_items(item);
  };
  if (add) {
    fill(request.mutable_add());
  } else {
    fill(request.mutable_might_contain());
  }
  return request;
}

TEST_F(ShardingTest, PipelineStreamsServeEveryGroupsFiltersInRequestOrder) {
  std::unique_ptr<bloomclient::BloomClient> home = bloomclient::BloomClient::Connect(Target(2));
  ASSERT_TRUE(home->Reserve(in_a_, Spec()).ok());
  ASSERT_TRUE(home->Reserve(in_b_, Spec()).ok());
  const std::string cuckoo_a = NameIn(map_, kGroupA, "cuckoo-");
  ASSERT_TRUE(home->Reserve(cuckoo_a, Spec(bloom::v1::FILTER_KIND_CUCKOO)).ok());
  // Through pod 2 (group b's primary), and through group a's follower, which proxies the whole
  // stream to its primary: both serve group a's and group b's filters on one stream.
  const int follower_a = 1 - PrimaryOfA();
  for (const int pod : {2, follower_a}) {
    SCOPED_TRACE(absl::StrCat("stream to pod ", pod));
    const std::string tag = absl::StrCat("p", pod, "-");
    bloomclient::ClientOptions pipelined;
    pipelined.pipelined = true;
    std::unique_ptr<bloomclient::BloomClient> stream =
        bloomclient::BloomClient::Connect(Target(pod), pipelined);
    for (const std::string& name : {in_a_, in_b_}) {
      ASSERT_TRUE(stream->Add(name, {tag + "one"}).ok()) << name;
      absl::StatusOr<std::vector<bool>> present = stream->MightContain(name, {tag + "one", "none"});
      ASSERT_TRUE(present.ok()) << present.status();
      EXPECT_EQ(*present, (std::vector<bool>{true, false})) << name;
    }
    EXPECT_TRUE(HeldBy(PrimaryOfA(), in_a_, tag + "one"));
    EXPECT_TRUE(HeldBy(2, in_b_, tag + "one"));
    // A cuckoo filter of group a: Add, Count and Remove go there too.
    ASSERT_TRUE(stream->Add(cuckoo_a, {tag + "c", tag + "c"}).ok());
    absl::StatusOr<std::vector<uint32_t>> counts = stream->Count(cuckoo_a, {tag + "c"});
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_EQ(*counts, (std::vector<uint32_t>{2}));
    absl::StatusOr<std::vector<bool>> removed = stream->Remove(cuckoo_a, {tag + "c"});
    ASSERT_TRUE(removed.ok()) << removed.status();
    EXPECT_EQ(*removed, (std::vector<bool>{true}));

    // On the raw stream: one message whose `more` mixes both groups, each add followed by a
    // check of the same item (answered in order, each check seeing its add), and one add of
    // an item too large among group a's adds, which fails alone.
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto raw = Stub(pod)->Pipeline(&context);
    // Operations 2p and 2p+1 add and check item p of one filter (group b's for every third
    // p); operation 60 adds an item too large instead.
    bloom::v1::PipelineRequest message;
    std::vector<std::string> expected;
    for (uint64_t id = 0; id < 120; ++id) {
      const uint64_t pair = id / 2;
      const std::string& name = pair % 3 == 0 ? in_b_ : in_a_;
      const bool add = id % 2 == 0;
      bloom::v1::PipelineRequest operation =
          id == 60 ? Operation(id, true, in_a_, {std::string(100 << 10, 'x')})
                   : Operation(id, add, name, {absl::StrCat(tag, "m", pair)});
      expected.emplace_back(id == 60 ? "error" : add ? "add" : "check");
      if (id == 0) {
        message = std::move(operation);
      } else {
        *message.add_more() = std::move(operation);
      }
    }
    ASSERT_TRUE(raw->Write(message));
    bloom::v1::PipelineResponse response;
    ASSERT_TRUE(raw->Read(&response));
    ASSERT_EQ(response.more_size(), 119);
    for (uint64_t id = 0; id < 120; ++id) {
      const bloom::v1::PipelineResponse& answer = id == 0 ? response : response.more(id - 1);
      EXPECT_EQ(answer.id(), id);
      if (expected[id] == "error") {
        EXPECT_EQ(answer.error().code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
      } else if (expected[id] == "add") {
        EXPECT_TRUE(answer.has_add()) << id << ": " << answer.error().message();
      } else {
        ASSERT_TRUE(answer.has_might_contain()) << id << ": " << answer.error().message();
        // Each check sees the add before it (but the one that failed).
        if (id != 61) {
          EXPECT_TRUE(answer.might_contain().present(0)) << id;
        }
      }
    }
    // Adds of group a's filter in a row, which go to it as one call (each answered alone
    // when one of them is too large), then checks of them all.
    message.Clear();
    for (uint64_t id = 200; id < 260; ++id) {
      const bool add = id < 230;
      bloom::v1::PipelineRequest operation =
          id == 215 ? Operation(id, true, in_a_, {std::string(100 << 10, 'y')})
                    : Operation(id, add, in_a_, {absl::StrCat(tag, "run", add ? id : id - 30)});
      if (id == 200) {
        message = std::move(operation);
      } else {
        *message.add_more() = std::move(operation);
      }
    }
    ASSERT_TRUE(raw->Write(message));
    ASSERT_TRUE(raw->Read(&response));
    ASSERT_EQ(response.more_size(), 59);
    for (uint64_t id = 200; id < 260; ++id) {
      const bloom::v1::PipelineResponse& answer = id == 200 ? response : response.more(id - 201);
      EXPECT_EQ(answer.id(), id);
      if (id == 215) {
        EXPECT_EQ(answer.error().code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
      } else if (id < 230) {
        EXPECT_TRUE(answer.has_add()) << id << ": " << answer.error().message();
      } else if (id != 245) {
        ASSERT_TRUE(answer.has_might_contain()) << id << ": " << answer.error().message();
        EXPECT_TRUE(answer.might_contain().present(0)) << id;
      }
    }
    raw->WritesDone();
    EXPECT_TRUE(raw->Finish().ok());
  }
}

TEST_F(ShardingTest, TransfersAreServedByTheGroupOfTheirPod) {
  std::unique_ptr<bloomclient::BloomClient> home = bloomclient::BloomClient::Connect(Target(2));
  ASSERT_TRUE(home->Reserve(in_a_, Spec()).ok());
  ASSERT_TRUE(home->Reserve(in_b_, Spec()).ok());
  ASSERT_TRUE(home->Add(in_b_, {"b-item"}).ok());
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
