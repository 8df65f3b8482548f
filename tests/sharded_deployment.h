// A sharded deployment for the tests (sharding_test.cc, sharding_client_test.cc): two groups on
// one real etcd (group a: a primary and a follower, pods 0 and 1; group b: pod 2), every pod
// with --shard_map, and the map split evenly between them (or none yet: StartPods(false)).
//
// Thread-safety: a test fixture, used by the test's thread.
#ifndef TESTS_SHARDED_DEPLOYMENT_H_
#define TESTS_SHARDED_DEPLOYMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "coordination/shard_map_record.h"
#include "gtest/gtest.h"
#include "sharding/shard_map.h"
#include "tests/elected_cluster.h"
#include "tests/support/etcd_process.h"
#include "tests/support/server_process.h"
#include "tests/support/testing.h"

namespace bloomtest {

inline constexpr char kMapKey[] = "shard-test/shardmap";
inline constexpr char kGroupA[] = "shard-test/a";
inline constexpr char kGroupB[] = "shard-test/b";
inline constexpr uint32_t kSlots = 64;
// The bloom-shard-hop header of a call the tests send as if forwarded by a pod holding a map
// newer than any: a pod serves it from its own group's store or refuses it, never forwarding
// it again.
inline constexpr char kHopFromTheFuture[] = "18446744073709551615";

// The first name "<prefix><n>" whose slot `map` gives to `group`.
inline std::string NameIn(const sharding::ShardMap& map, const std::string& group,
                          const std::string& prefix) {
  for (int n = 0;; ++n) {
    std::string name = absl::StrCat(prefix, n);
    if (map.OwnerOfName(name) == group) return name;
  }
}

inline bloom::v1::FilterSpec Spec(bloom::v1::FilterKind kind = bloom::v1::FILTER_KIND_BLOOM) {
  bloom::v1::FilterSpec spec;
  spec.set_capacity(10'000);
  spec.set_error_rate(0.01);
  spec.set_kind(kind);
  return spec;
}

class ShardingTest : public ::testing::Test {
 protected:
  void SetUp() override { StartPods(/*create_map=*/true); }

  // Starts etcd and the pods; with `create_map`, writes the even map first and waits until
  // every pod holds it and knows both primaries.
  void StartPods(bool create_map) {
    etcd_ = EtcdProcess::Start();
    ASSERT_NE(etcd_, nullptr);
    etcd_client_ = ConnectEtcd(etcd_->endpoint());
    ASSERT_NE(etcd_client_, nullptr);
    absl::StatusOr<sharding::ShardMap> even =
        sharding::ShardMap::EvenSplit({kGroupA, kGroupB}, kSlots);
    ASSERT_TRUE(even.ok());
    map_ = *even;
    if (create_map) {
      ASSERT_TRUE(coordination::CreateShardMap(*etcd_client_, kMapKey, map_).ok());
    }
    const char* groups[] = {kGroupA, kGroupA, kGroupB};
    for (int i = 0; i < 3; ++i) {
      dirs_.push_back(std::make_unique<TempDir>());
      ports_.push_back(FreeLoopbackPort());
      groups_.emplace_back(groups[i]);
    }
    pods_.resize(3);
    for (int i = 0; i < 3; ++i) {
      StartPod(i);
      ASSERT_NE(pods_[i], nullptr);
    }
    in_a_ = NameIn(map_, kGroupA, "filter-");
    in_b_ = NameIn(map_, kGroupB, "filter-");
    if (create_map) WaitForMapEverywhere(1);
  }

  // Starts pod `i` (again, on its port and data dir, after a kill).
  void StartPod(int i) {
    if (pods_[i] != nullptr) stopped_.push_back(std::move(pods_[i]));  // its log, for failures
    std::vector<std::string> args = {"--listen=" + Target(i),
                                     "--advertise_address=" + Target(i),
                                     "--etcd_endpoints=" + etcd_->endpoint(),
                                     "--cluster=" + groups_[i],
                                     std::string("--shard_map=") + kMapKey,
                                     "--leader_ttl=2s",
                                     "--metrics_listen=127.0.0.1:0",
                                     "--allow_unauthenticated_replication"};
    if (groups_[i] == kGroupA) args.insert(args.end(), group_a_args_.begin(), group_a_args_.end());
    args.insert(args.end(), every_pod_args_.begin(), every_pod_args_.end());
    pods_[i] = ServerProcess::Start(dirs_[i]->path(), args);
  }

  // Every pod holds version `version` (or later) and knows where both groups' primaries are.
  void WaitForMapEverywhere(uint64_t version) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(WaitFor([&] {
        absl::StatusOr<bloom::v1::ShardMap> map = MapAt(i);
        if (!map.ok() || map->version() < version) return false;
        int primaries = 0;
        for (const bloom::v1::ShardGroup& group : map->groups())
          primaries += !group.primary().empty();
        return primaries == 2;
      })) << "pod "
          << i;
    }
  }

  // The pod that is group a's primary now (0 or 1), as pod 2's map says.
  int PrimaryOfA() {
    absl::StatusOr<bloom::v1::ShardMap> map = MapAt(2);
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& group : map->groups()) {
        if (group.name() == kGroupA) return group.primary() == Target(1) ? 1 : 0;
      }
    }
    return 0;
  }

  [[nodiscard]] std::string Target(int i) const { return absl::StrCat("127.0.0.1:", ports_[i]); }

  std::unique_ptr<bloom::v1::BloomFilterService::Stub> Stub(int pod) {
    return bloom::v1::BloomFilterService::NewStub(
        grpc::CreateChannel(Target(pod), grpc::InsecureChannelCredentials()));
  }

  absl::StatusOr<bloom::v1::ShardMap> MapAt(int pod) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    bloom::v1::GetShardMapResponse response;
    grpc::Status status = Stub(pod)->GetShardMap(&context, {}, &response);
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return response.map();
  }

  // MightContain of `item` in `name`, sent to `pod` as if another pod had forwarded it there
  // (bloom-shard-hop): served only if `pod`'s group owns the filter.
  grpc::Status HopTo(int pod, const std::string& name, const std::string& item, bool* present) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    context.AddMetadata("bloom-shard-hop", kHopFromTheFuture);
    bloom::v1::MightContainRequest request;
    request.set_name(name);
    request.add_items(item);
    bloom::v1::MightContainResponse response;
    grpc::Status status = Stub(pod)->MightContain(&context, request, &response);
    *present = status.ok() && response.present_size() == 1 && response.present(0);
    return status;
  }

  // The items of `items` that pod `pod` does not hold in `name` itself (asked as a forwarded
  // call, which it never forwards again); all of them if it cannot answer.
  std::vector<std::string> MissingAt(int pod, const std::string& name,
                                     const std::vector<std::string>& items) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    context.AddMetadata("bloom-shard-hop", kHopFromTheFuture);
    bloom::v1::MightContainRequest request;
    request.set_name(name);
    for (const std::string& item : items) request.add_items(item);
    bloom::v1::MightContainResponse response;
    if (!Stub(pod)->MightContain(&context, request, &response).ok()) return items;
    std::vector<std::string> missing;
    for (int i = 0; i < response.present_size(); ++i) {
      if (!response.present(i)) missing.push_back(items[i]);
    }
    return missing;
  }

  // Whether `item` is in `name` in group `group`'s store (asked of that group's primary as a
  // forwarded call, which it never forwards again).
  bool HeldBy(int pod, const std::string& name, const std::string& item) {
    bool present = false;
    return HopTo(pod, name, item, &present).ok() && present;
  }

  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<coordination::EtcdClient> etcd_client_;
  sharding::ShardMap map_;
  std::vector<std::unique_ptr<TempDir>> dirs_;
  std::vector<int> ports_;
  std::vector<std::string> groups_;
  std::vector<std::unique_ptr<ServerProcess>> pods_;
  std::vector<std::unique_ptr<ServerProcess>> stopped_;
  // More flags for group a's pods (set before SetUp).
  std::vector<std::string> group_a_args_;
  std::vector<std::string> every_pod_args_;
  std::string in_a_;
  std::string in_b_;
};

}  // namespace bloomtest

#endif  // TESTS_SHARDED_DEPLOYMENT_H_
