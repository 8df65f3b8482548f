// A pod's part in a sharded deployment (shard_member.h).
#include "server/shard_member.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "server/node.h"

namespace server {

absl::StatusOr<std::unique_ptr<ShardMember>> JoinShards(const ServerConfig& config,
                                                        absl::Duration wait_for_map) {
  const ReplicationConfig& replication = config.replication;
  if (replication.shard_map.empty()) return nullptr;
  // Other groups' pods are reached as a follower reaches its primary: the same CA and client
  // certificate. Forwarded calls carry their caller's token.
  absl::StatusOr<replication::FollowerOptions> peers =
      FollowerOptionsFromConfig(replication, config.server.listen);
  if (!peers.ok()) return peers.status();
  auto member = std::make_unique<ShardMember>();
  absl::StatusOr<std::unique_ptr<coordination::EtcdClient>> etcd =
      coordination::EtcdClient::Connect(replication.etcd_endpoints, absl::Seconds(2));
  if (!etcd.ok()) return etcd.status();
  member->etcd = *std::move(etcd);
  absl::StatusOr<std::unique_ptr<coordination::ShardMapWatch>> watch =
      coordination::ShardMapWatch::Start(member->etcd.get(),
                                         {replication.shard_map, replication.cluster});
  if (!watch.ok()) return watch.status();
  member->watch = *std::move(watch);
  member->router = std::make_unique<service::ShardRouter>(
      member->watch.get(), [peers = *std::move(peers)](const std::string& address) {
        replication::FollowerOptions to = peers;
        to.primary = address;
        return replication::PrimaryChannel(to);
      });
  if (member->watch->WaitForVersion(1, absl::Now() + wait_for_map)) {
    bloomlog::LogInfo(absl::StrCat("sharded: group ", replication.cluster, " of the shard map at ",
                                   replication.shard_map, ", version ",
                                   member->watch->Current()->map.version()));
  } else {
    bloomlog::LogWarning(absl::StrCat("sharded: no shard map at ", replication.shard_map,
                                      " yet; calls for filters are refused until one is written "
                                      "(bloom-cli cluster init)"));
  }
  return member;
}

}  // namespace server
