// ShardMember: a pod's part in a sharded deployment (--shard_map): its connection to etcd
// (failover's, when the pod has failover: one connection and one check of etcd's settings per
// pod), its view of the shard map and of every group (coordination/shard_map_watch.h), and the
// router that sends calls for other groups' filters there (service/shard_router.h). It lives
// across the pod's incarnations: a change of role changes neither the map nor the groups.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ShardMember> shards,
//                    JoinShards(config, wait, failover ? failover->etcd() : nullptr));
//   if (shards != nullptr) options.hooks.router = shards->router.get();
//
// Thread-safety: the parts are thread-safe; built and destroyed by main()'s thread.
#ifndef SERVER_SHARD_MEMBER_H_
#define SERVER_SHARD_MEMBER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bloom/replication/v1/replication.pb.h"
#include "coordination/etcd_client.h"
#include "coordination/shard_map_watch.h"
#include "server/server_flags.h"
#include "service/shard_router.h"

namespace server {

struct ShardMember {
  std::string map_key;  // --shard_map
  std::shared_ptr<coordination::EtcdClient> etcd;
  std::unique_ptr<coordination::ShardMapWatch> watch;  // before the router that reads it
  std::unique_ptr<service::ShardRouter> router;

  ~ShardMember() {
    router.reset();  // its channels first, then the watch it reads
    watch.reset();
  }
};

// What the replication service's ChangeShardMap runs on this pod (bloom-cli cluster init and
// add-group): the change, made in etcd by one transaction.
absl::StatusOr<bloom::replication::v1::ChangeShardMapResponse> ChangeShardMap(
    ShardMember& member, const bloom::replication::v1::ChangeShardMapRequest& request);

// Null without --shard_map. Waits up to `wait_for_map` for a first map (a pod that starts
// before `bloom-cli cluster init` refuses calls for filters, UNAVAILABLE, until one is written).
// `etcd`: the pod's client of etcd if it has one already (failover's); null to connect.
absl::StatusOr<std::unique_ptr<ShardMember>> JoinShards(
    const ServerConfig& config, absl::Duration wait_for_map,
    std::shared_ptr<coordination::EtcdClient> etcd);

}  // namespace server

#endif  // SERVER_SHARD_MEMBER_H_
