// Helpers for the tests whose pods elect their primary through a real etcd (impostor, leader
// key, partition and chaos tests): which pod the leader key names, a pod's replication status
// and whether a cluster is healthy, one add or a presence check through a pod, and the ack
// logs' check that no two pods led one term.
//
// Thread-safety: plain functions; an EtcdClient is thread-safe.
#ifndef TESTS_ELECTED_CLUSTER_H_
#define TESTS_ELECTED_CLUSTER_H_

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "client/bloom_client.h"
#include "coordination/cluster_state.h"
#include "coordination/etcd_client.h"
#include "gtest/gtest.h"

namespace bloomtest {

// A client of the test's etcd, reached directly (outside any partition the test makes).
inline std::unique_ptr<coordination::EtcdClient> ConnectEtcd(const std::string& endpoint) {
  absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> client =
      coordination::EtcdClient::Connect({endpoint}, absl::Seconds(2));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// The index in `addresses` (the pods' advertised addresses) of the pod that the leader key of
// `cluster` names; -1 without a leader key, or with one that does not parse.
inline int NamedPrimary(coordination::EtcdClient& etcd, const std::string& cluster,
                        const std::vector<std::string>& addresses) {
  absl::StatusOr<coordination::KeyValue> leader = etcd.Get(coordination::LeaderKey(cluster));
  if (!leader.ok()) return -1;
  absl::StatusOr<coordination::LeaderRecord> record = coordination::DecodeLeader(leader->value);
  if (!record.ok()) return -1;
  auto it = std::find(addresses.begin(), addresses.end(), record->address);
  return it == addresses.end() ? -1 : static_cast<int>(it - addresses.begin());
}

// The replication Status of the pod at `target` (within 2 s); UNAVAILABLE if it did not answer.
inline absl::StatusOr<bloom::replication::v1::StatusResponse> ReplicationStatusOf(
    const std::string& target) {
  auto stub = bloom::replication::v1::ReplicationService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  bloom::replication::v1::StatusResponse status;
  const grpc::Status called = stub->Status(&context, {}, &status);
  if (!called.ok()) return absl::UnavailableError(called.error_message());
  return status;
}

// Whether the pods at `targets` (plaintext) are a healthy `cluster`: etcd names one of them the
// primary, which says so with every other pod in its sync set, each a follower connected to it.
inline bool ClusterHealthy(coordination::EtcdClient& etcd, const std::string& cluster,
                           const std::vector<std::string>& targets) {
  using Status = bloom::replication::v1::StatusResponse;
  const int primary = NamedPrimary(etcd, cluster, targets);
  if (primary < 0) return false;
  absl::StatusOr<Status> status = ReplicationStatusOf(targets[primary]);
  if (!status.ok() || status->role() != Status::ROLE_PRIMARY ||
      status->cluster().sync_set_size() != static_cast<int>(targets.size()) - 1) {
    return false;
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    if (static_cast<int>(i) == primary) continue;
    absl::StatusOr<Status> follower = ReplicationStatusOf(targets[i]);
    if (!follower.ok() || follower->role() != Status::ROLE_FOLLOWER || !follower->connected() ||
        follower->cluster().leader_address() != targets[primary]) {
      return false;
    }
  }
  return true;
}

// Adds `item` to `filter` (made as needed) through the pod at `target`: whether the add was
// acknowledged within `timeout`.
inline bool AddOne(const std::string& target, const std::string& filter, const std::string& item,
                   absl::Duration timeout = absl::Seconds(5)) {
  bloomclient::ClientOptions options;
  options.timeout = timeout;
  std::unique_ptr<bloomclient::BloomClient> client =
      bloomclient::BloomClient::Connect(target, options);
  bloom::v1::FilterSpec spec;
  spec.set_capacity(1'000'000);
  spec.set_error_rate(0.001);
  return client->Add(filter, {item}, &spec).ok();
}

// Whether every one of `items` reads present in `filter` through the pod at `target` now.
inline bool AllPresent(const std::string& target, const std::string& filter,
                       const std::vector<std::string>& items) {
  std::unique_ptr<bloomclient::BloomClient> reader = bloomclient::BloomClient::Connect(target);
  absl::StatusOr<std::vector<bool>> present = reader->MightContain(filter, items);
  return present.ok() && std::find(present->begin(), present->end(), false) == present->end();
}

// No two pods led or acknowledged in one term: each line of an --ack_log starts "term=<t>"
// (server/ack_log.h) and is written by the pod whose log it is.
inline void ExpectOnePrimaryPerTerm(const std::vector<std::string>& ack_logs) {
  std::map<std::string, size_t> owner;
  for (size_t pod = 0; pod < ack_logs.size(); ++pod) {
    std::ifstream in(ack_logs[pod]);
    for (std::string line; std::getline(in, line);) {
      if (!absl::StartsWith(line, "term=")) continue;
      const std::string term = line.substr(0, line.find(' '));
      auto [it, inserted] = owner.emplace(term, pod);
      EXPECT_EQ(it->second, pod) << "two pods acknowledged in " << term;
    }
  }
  EXPECT_FALSE(owner.empty()) << "no term was led";
}

}  // namespace bloomtest

#endif  // TESTS_ELECTED_CLUSTER_H_
