// The shard map's record in etcd (sharding/shard_map.h): read it, create it once, and change it
// only by a transaction that compares the record's revision with the one the change was made
// from, so that two changes made at once cannot both apply (the second is made again from what
// the first wrote, or refused).
//
//   ASSIGN_OR_RETURN(ShardMap map, CreateShardMap(etcd, "bloom/shardmap", *even_split));
//   ASSIGN_OR_RETURN(ShardMap next, ChangeShardMap(etcd, "bloom/shardmap",
//       [](const ShardMap& now) { return now.AddGroup("bloom/c"); }));
//
// Thread-safety: functions over a thread-safe EtcdClient.
#ifndef COORDINATION_SHARD_MAP_RECORD_H_
#define COORDINATION_SHARD_MAP_RECORD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "coordination/etcd_client.h"
#include "sharding/shard_map.h"

namespace coordination {

struct StoredShardMap {
  sharding::ShardMap map;
  int64_t mod_revision = 0;  // the record's last write
};

// NOT_FOUND if there is no map at `key`; INVALID_ARGUMENT if its record cannot be read.
absl::StatusOr<StoredShardMap> ReadShardMap(EtcdClient& etcd, const std::string& key);

// Writes `map` (version 1) if there is no map at `key`; ALREADY_EXISTS naming the one there.
absl::StatusOr<sharding::ShardMap> CreateShardMap(EtcdClient& etcd, const std::string& key,
                                                  const sharding::ShardMap& map);

// Reads the map, makes the next one with `change`, and writes it if the record has not changed
// since it was read; if it has, makes the change again from the new record (a few times, then
// ABORTED). The change's own error is returned as it is.
using ShardMapChange =
    std::function<absl::StatusOr<sharding::ShardMap>(const sharding::ShardMap& now)>;
absl::StatusOr<sharding::ShardMap> ChangeShardMap(EtcdClient& etcd, const std::string& key,
                                                  const ShardMapChange& change);

}  // namespace coordination

#endif  // COORDINATION_SHARD_MAP_RECORD_H_
