// ShardRouter's decisions over a fixed view: where each kind of call goes, what is refused and
// why, and what it reports; and a read forwarded to a member that is down going to the next.
// (Forwarding of every call, the hop and mover headers are exercised against real pods:
// tests/sharding_test.cc.)
#include "service/shard_router.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "common/slot.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace service {
namespace {

class FixedView : public sharding::ShardView {
 public:
  explicit FixedView(std::string own) : own_(std::move(own)) {}
  std::shared_ptr<const sharding::ShardState> Current() const override { return state_; }
  const std::string& own_group() const override { return own_; }
  void Set(sharding::ShardMap map,
           sharding::GroupAddresses b = {"b-0:1", {"b-0:1", "b-1:1", "b-2:1"}}) {
    auto state = std::make_shared<sharding::ShardState>();
    state->map = std::move(map);
    state->groups["a"] = {"a-0:1", {"a-0:1", "a-1:1"}};
    state->groups["b"] = std::move(b);
    state->groups["c"] = {"", {}};  // no pod up
    state_ = std::move(state);
  }

 private:
  const std::string own_;
  std::shared_ptr<const sharding::ShardState> state_ = std::make_shared<sharding::ShardState>();
};

// The first name "<prefix><n>" in slots first..last of a 16-slot map.
std::string NameIn(uint32_t first, uint32_t last, const std::string& prefix = "f") {
  for (int n = 0;; ++n) {
    std::string name = prefix + std::to_string(n);
    const uint32_t slot = slots::SlotOf(name, 16);
    if (slot >= first && slot <= last) return name;
  }
}

class ShardRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<sharding::ShardMap> map = sharding::ShardMap::EvenSplit({"a", "b", "c"}, 16);
    ASSERT_TRUE(map.ok());
    map_ = *map;  // a: 0-5, b: 6-10, c: 11-15
    view_.Set(map_);
  }
  ShardRouter::Decision Decide(rpcs::Rpc rpc, std::vector<std::string> names,
                               bool fresh_read = false) {
    std::vector<absl::string_view> views(names.begin(), names.end());
    return router_.Decide(rpcs::Info(rpc), views, nullptr, fresh_read);
  }

  sharding::ShardMap map_;
  FixedView view_{"a"};
  ShardRouter router_{&view_, [](const std::string&) { return nullptr; }};
};

TEST_F(ShardRouterTest, WithoutAMapEveryFilterIsRefusedAndCounted) {
  FixedView empty("a");
  ShardRouter router(&empty, [](const std::string&) { return nullptr; });
  const absl::string_view names[] = {"x"};
  const ShardRouter::Decision route = router.Decide(rpcs::Info(rpcs::Rpc::kAdd), names, nullptr);
  EXPECT_FALSE(route.here);
  EXPECT_EQ(route.refusal.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(route.refusal.error_message(), "cluster init"));
  EXPECT_EQ(router.Figures().refused, 1U);
  EXPECT_EQ(router.Describe().map().version(), 0U);
}

TEST_F(ShardRouterTest, OwnFiltersAreServedHereAndOthersGoToTheirGroup) {
  EXPECT_TRUE(Decide(rpcs::Rpc::kAdd, {NameIn(0, 5)}).here);
  // A write goes to the owner's primary.
  const ShardRouter::Decision write = Decide(rpcs::Rpc::kAdd, {NameIn(6, 10)});
  EXPECT_FALSE(write.here);
  EXPECT_TRUE(write.refusal.ok());
  EXPECT_EQ(write.address, "b-0:1");
  EXPECT_EQ(write.group, "b");
  EXPECT_EQ(write.version, 1U);
  // Reads go to the owner's members in turn; one asking for a sequence, to its primary.
  std::vector<std::string> read_at;
  for (int i = 0; i < 3; ++i) read_at.push_back(Decide(rpcs::Rpc::kStats, {NameIn(6, 10)}).address);
  std::sort(read_at.begin(), read_at.end());
  EXPECT_EQ(read_at, (std::vector<std::string>{"b-0:1", "b-1:1", "b-2:1"}));
  EXPECT_EQ(Decide(rpcs::Rpc::kStats, {NameIn(6, 10)}, /*fresh_read=*/true).address, "b-0:1");
  // A group with nobody up: refused, retryable.
  const ShardRouter::Decision nobody = Decide(rpcs::Rpc::kMightContain, {NameIn(11, 15)});
  EXPECT_EQ(nobody.refusal.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(nobody.refusal.error_message(), "group c has no member"));
  // Calls naming no filter are served here.
  EXPECT_TRUE(Decide(rpcs::Rpc::kList, {}).here);
}

TEST_F(ShardRouterTest, AMergeGoesToItsTargetsGroupWhereverItsSourcesAre) {
  // The target's group serves it, reading the other groups' sources (cross_group.cc).
  EXPECT_TRUE(Decide(rpcs::Rpc::kMerge, {NameIn(0, 5), NameIn(6, 10)}).here);
  const ShardRouter::Decision split = Decide(rpcs::Rpc::kMerge, {NameIn(6, 10), NameIn(0, 5)});
  EXPECT_FALSE(split.here);
  EXPECT_TRUE(split.refusal.ok());
  EXPECT_EQ(split.group, "b");
  const std::string tag = NameIn(6, 10);
  const ShardRouter::Decision together =
      Decide(rpcs::Rpc::kMerge, {"x{" + tag + "}", "y{" + tag + "}", tag});
  EXPECT_TRUE(together.refusal.ok());
  EXPECT_EQ(together.group, "b");
}

TEST_F(ShardRouterTest, APausedMoveRefusesWritesEverywhereButNotReads) {
  absl::StatusOr<sharding::ShardMap> copying = map_.BeginMove({0, 2}, "b");
  ASSERT_TRUE(copying.ok());
  view_.Set(*copying);
  const std::string moving = NameIn(0, 2);
  EXPECT_TRUE(Decide(rpcs::Rpc::kAdd, {moving}).here) << "the owner serves while copying";
  absl::StatusOr<sharding::ShardMap> paused = copying->PauseMove();
  ASSERT_TRUE(paused.ok());
  view_.Set(*paused);
  for (const rpcs::Rpc write : {rpcs::Rpc::kAdd, rpcs::Rpc::kReserve, rpcs::Rpc::kDelete,
                                rpcs::Rpc::kRemove, rpcs::Rpc::kImport, rpcs::Rpc::kPipelineAdd}) {
    const ShardRouter::Decision refused = Decide(write, {moving});
    EXPECT_EQ(refused.refusal.error_code(), grpc::StatusCode::UNAVAILABLE)
        << rpcs::Info(write).label;
    EXPECT_TRUE(absl::StrContains(refused.refusal.error_message(), "is moving from group a to b"))
        << refused.refusal.error_message();
  }
  EXPECT_TRUE(Decide(rpcs::Rpc::kMightContain, {moving}).here);
  EXPECT_TRUE(Decide(rpcs::Rpc::kExport, {moving}).here);
  EXPECT_TRUE(Decide(rpcs::Rpc::kAdd, {NameIn(3, 5)}).here) << "other slots never pause";
  // GetShardMap shows the move.
  const bloom::v1::GetShardMapResponse described = router_.Describe();
  EXPECT_TRUE(described.map().move().paused());
  EXPECT_EQ(described.map().move().from(), "a");
  EXPECT_EQ(described.map().move().last(), 2U);
  // Once the target owns the slots, their calls go there.
  absl::StatusOr<sharding::ShardMap> moved = paused->FinishMove();
  ASSERT_TRUE(moved.ok());
  view_.Set(*moved);
  EXPECT_EQ(Decide(rpcs::Rpc::kAdd, {moving}).address, "b-0:1");
}

TEST_F(ShardRouterTest, AWriteAdmittedBeforeAPauseIsNotAcknowledgedAfterIt) {
  const std::string moving = NameIn(0, 2);
  const std::string staying = NameIn(3, 5);
  const absl::string_view both[] = {moving, staying};
  const absl::string_view only_staying[] = {staying};
  absl::StatusOr<sharding::ShardMap> copying = map_.BeginMove({0, 2}, "b");
  ASSERT_TRUE(copying.ok());
  view_.Set(*copying);
  // Admitted and applied while the owner still serves its slot: acknowledged as usual.
  ASSERT_TRUE(Decide(rpcs::Rpc::kAdd, {moving}).here);
  EXPECT_TRUE(router_.SettleWrite(both, nullptr).ok());
  // The pod takes the paused map before the write is acknowledged: the mover may have copied
  // the slot's last changes without it, so it is not acknowledged.
  absl::StatusOr<sharding::ShardMap> paused = copying->PauseMove();
  ASSERT_TRUE(paused.ok());
  view_.Set(*paused);
  const absl::Status settled = router_.SettleWrite(both, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(settled)) << settled;
  EXPECT_TRUE(absl::StrContains(settled.message(), "began moving from group a")) << settled;
  EXPECT_TRUE(router_.SettleWrite(only_staying, nullptr).ok()) << "other slots never pause";
  // Nor once the slot belongs to another group.
  absl::StatusOr<sharding::ShardMap> moved = paused->FinishMove();
  ASSERT_TRUE(moved.ok());
  view_.Set(*moved);
  const absl::string_view only_moving[] = {moving};
  EXPECT_TRUE(absl::IsUnavailable(router_.SettleWrite(only_moving, nullptr)));
  EXPECT_TRUE(router_.SettleWrite({}, nullptr).ok()) << "a write naming no filter";
}

TEST_F(ShardRouterTest, FiguresAndDescriptionSayWhatThePodHolds) {
  const bloom::v1::GetShardMapResponse described = router_.Describe();
  EXPECT_EQ(described.map().version(), 1U);
  EXPECT_EQ(described.map().slot_count(), 16U);
  ASSERT_EQ(described.map().groups_size(), 3);
  EXPECT_EQ(described.map().groups(1).primary(), "b-0:1");
  EXPECT_EQ(described.map().groups(1).members_size(), 3);
  ASSERT_EQ(described.map().ranges_size(), 3);
  EXPECT_EQ(described.map().ranges(2).group(), "c");
  EXPECT_FALSE(described.map().has_move());
  Decide(rpcs::Rpc::kMightContain, {NameIn(11, 15)});  // refused: nobody up in c
  const metrics::ShardFigures figures = router_.Figures();
  EXPECT_EQ(figures.map_version, 1U);
  EXPECT_EQ(figures.groups, 3U);
  EXPECT_EQ(figures.slots, 16U);
  EXPECT_EQ(figures.slots_owned, 6U);
  EXPECT_EQ(figures.refused, 1U);
}

// A pod of group b that answers every MightContain "present", counting them; it refuses the
// first `refusals` calls (and every Add) UNAVAILABLE, as a pod whose map lags refuses a call
// forwarded by a pod holding a newer one.
class PresentEverywhere final : public bloom::v1::BloomFilterService::Service {
 public:
  explicit PresentEverywhere(int refusals = 0) : refusals_(refusals) {}
  grpc::Status MightContain(grpc::ServerContext* /*context*/,
                            const bloom::v1::MightContainRequest* request,
                            bloom::v1::MightContainResponse* response) override {
    if (calls.fetch_add(1) < refusals_) return Refusal();
    for (int i = 0; i < request->raw_items_size(); ++i) response->add_present(true);
    return grpc::Status::OK;
  }
  grpc::Status Add(grpc::ServerContext* /*context*/, const bloom::v1::AddRequest* /*request*/,
                   bloom::v1::AddResponse* /*response*/) override {
    calls.fetch_add(1);
    return Refusal();
  }
  std::atomic<int> calls{0};

 private:
  static grpc::Status Refusal() {
    return {grpc::StatusCode::UNAVAILABLE, "held version 1; the pod that forwarded it held 2"};
  }
  const int refusals_;
};

// A server of `service` on a free loopback port, and its address.
std::unique_ptr<grpc::Server> Serve(grpc::Service* service, std::string* address) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  *address = "127.0.0.1:" + std::to_string(port);
  return server;
}

// Forwarding to real servers over gRPC's transport in this process (scripts/test.sh's over_grpc:
// not under TSan, for which Debian's gRPC is not built).
using ShardRouterForwardingTest = ShardRouterTest;

grpc::Status ForwardAndWait(
    ShardRouter& router, rpcs::Rpc rpc, const std::string& name,
    const std::function<void()>& meanwhile = [] {}) {
  const absl::string_view names[] = {name};
  const ShardRouter::Decision route = router.Decide(rpcs::Info(rpc), names, nullptr);
  if (route.here || !route.refusal.ok()) return {grpc::StatusCode::INTERNAL, "not forwarded"};
  std::promise<grpc::Status> done;
  bloom::v1::MightContainRequest read;
  read.set_name(name);
  read.add_raw_items("x");
  bloom::v1::AddRequest write;
  write.set_name(name);
  google::protobuf::Message* request = rpc == rpcs::Rpc::kAdd
                                           ? static_cast<google::protobuf::Message*>(&write)
                                           : static_cast<google::protobuf::Message*>(&read);
  bloom::v1::MightContainResponse read_answer;
  bloom::v1::AddResponse write_answer;
  google::protobuf::Message* response = rpc == rpcs::Rpc::kAdd
                                            ? static_cast<google::protobuf::Message*>(&write_answer)
                                            : static_cast<google::protobuf::Message*>(&read_answer);
  router.ForwardMessage(nullptr, route, rpcs::Info(rpc).path, *request, response,
                        [&done](const grpc::Status& status) { done.set_value(status); });
  meanwhile();
  return done.get_future().get();
}

TEST_F(ShardRouterForwardingTest, AReadEveryMemberRefusesForAMomentIsSentAgain) {
  PresentEverywhere lagging(/*refusals=*/7);
  std::string up;
  std::unique_ptr<grpc::Server> server = Serve(&lagging, &up);
  ASSERT_NE(server, nullptr);
  view_.Set(map_, {up, {up}});
  ShardRouter router(&view_, [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  });
  const grpc::Status read = ForwardAndWait(router, rpcs::Rpc::kMightContain, NameIn(6, 10));
  EXPECT_TRUE(read.ok()) << read.error_message();
  EXPECT_EQ(lagging.calls.load(), 8);
  // A write is sent once: it may have been made, so its UNAVAILABLE goes to the client.
  const grpc::Status write = ForwardAndWait(router, rpcs::Rpc::kAdd, NameIn(6, 10));
  EXPECT_EQ(write.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(lagging.calls.load(), 9);
  server->Shutdown();
}

TEST_F(ShardRouterForwardingTest, AReadRefusedForLongerThanItsBudgetFails) {
  PresentEverywhere refusing(/*refusals=*/1'000'000);
  std::string up;
  std::unique_ptr<grpc::Server> server = Serve(&refusing, &up);
  ASSERT_NE(server, nullptr);
  view_.Set(map_, {up, {up}});
  const auto connect = [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  };
  ShardRouter briefly(&view_, connect, absl::Milliseconds(100));
  const grpc::Status read = ForwardAndWait(briefly, rpcs::Rpc::kMightContain, NameIn(6, 10));
  EXPECT_EQ(read.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(read.error_message(), "held version 1")) << read.error_message();
  EXPECT_GT(refusing.calls.load(), 2) << "sent again while the budget lasted";
  // A pod changing role cuts the reads waiting to be sent again: they fail at once, and the
  // caller retries them.
  ShardRouter patient(&view_, connect);
  const int before = refusing.calls.load();
  const grpc::Status cut = ForwardAndWait(patient, rpcs::Rpc::kMightContain, NameIn(6, 10), [&] {
    while (refusing.calls.load() < before + 2) std::this_thread::yield();
    patient.CancelInFlight();
  });
  EXPECT_EQ(cut.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(cut.error_message(), "stopped forwarding")) << cut.error_message();
  server->Shutdown();
}

TEST_F(ShardRouterForwardingTest, AReadThatMeetsAMemberDownGoesToTheNext) {
  PresentEverywhere service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string up = "127.0.0.1:" + std::to_string(port);
  const std::string down = "127.0.0.1:1";  // nothing listens there: refused at once
  // Group b: its primary is up, and so is one of its two other members.
  view_.Set(map_, {up, {down, up, down}});
  ShardRouter router(&view_, [](const std::string& address) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  });
  const std::string name = NameIn(6, 10);
  for (int i = 0; i < 6; ++i) {
    const absl::string_view names[] = {name};
    const ShardRouter::Decision route =
        router.Decide(rpcs::Info(rpcs::Rpc::kMightContain), names, nullptr);
    ASSERT_FALSE(route.here);
    ASSERT_TRUE(route.refusal.ok());
    bloom::v1::MightContainRequest request;
    request.set_name(name);
    request.add_raw_items("x");
    bloom::v1::MightContainResponse response;
    std::promise<grpc::Status> done;
    router.ForwardMessage(nullptr, route, rpcs::Info(rpcs::Rpc::kMightContain).path, request,
                          &response,
                          [&done](const grpc::Status& status) { done.set_value(status); });
    const grpc::Status status = done.get_future().get();
    EXPECT_TRUE(status.ok()) << "read " << i << " (to " << route.address
                             << "): " << status.error_message();
    EXPECT_EQ(response.present_size(), 1);
  }
  EXPECT_EQ(service.calls.load(), 6);
  // A write goes to the primary only, and a primary down fails it (the client retries).
  view_.Set(map_, {down, {down, up}});
  const absl::string_view names[] = {name};
  const ShardRouter::Decision write = router.Decide(rpcs::Info(rpcs::Rpc::kAdd), names, nullptr);
  ASSERT_EQ(write.address, down);
  bloom::v1::AddRequest add;
  add.set_name(name);
  bloom::v1::AddResponse added;
  std::promise<grpc::Status> done;
  router.ForwardMessage(nullptr, write, rpcs::Info(rpcs::Rpc::kAdd).path, add, &added,
                        [&done](const grpc::Status& status) { done.set_value(status); });
  EXPECT_EQ(done.get_future().get().error_code(), grpc::StatusCode::UNAVAILABLE);
  server->Shutdown();
}

}  // namespace
}  // namespace service
