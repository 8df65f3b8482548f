// The shard map's record in etcd (shard_map_record.h).
#include "coordination/shard_map_record.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace coordination {

absl::StatusOr<StoredShardMap> ReadShardMap(EtcdClient& etcd, const std::string& key) {
  absl::StatusOr<KeyValue> record = etcd.Get(key);
  if (!record.ok()) {
    if (absl::IsNotFound(record.status())) {
      return absl::NotFoundError(
          absl::StrCat("no shard map at ", key, " (bloom-cli cluster init creates one)"));
    }
    return record.status();
  }
  absl::StatusOr<sharding::ShardMap> map = sharding::ShardMap::Decode(record->value);
  if (!map.ok()) return map.status();
  return StoredShardMap{*std::move(map), record->mod_revision};
}

absl::StatusOr<sharding::ShardMap> CreateShardMap(EtcdClient& etcd, const std::string& key,
                                                  const sharding::ShardMap& map) {
  absl::StatusOr<bool> created = etcd.CreateIfAbsent(key, map.Encode());
  if (!created.ok()) return created.status();
  if (!*created) {
    absl::StatusOr<StoredShardMap> there = ReadShardMap(etcd, key);
    return absl::AlreadyExistsError(absl::StrCat(
        "a shard map is at ", key, " already",
        there.ok() ? absl::StrCat(" (version ", there->map.version(), ")") : std::string()));
  }
  return map;
}

absl::StatusOr<sharding::ShardMap> ChangeShardMap(EtcdClient& etcd, const std::string& key,
                                                  const ShardMapChange& change) {
  constexpr int kAttempts = 8;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<StoredShardMap> now = ReadShardMap(etcd, key);
    if (!now.ok()) return now.status();
    absl::StatusOr<sharding::ShardMap> next = change(now->map);
    if (!next.ok()) return next.status();
    if (next->version() != now->map.version() + 1) {
      return absl::InternalError(absl::StrCat("a shard map change made version ", next->version(),
                                              " from version ", now->map.version()));
    }
    absl::StatusOr<bool> written = etcd.PutIfModRevision(key, next->Encode(), now->mod_revision);
    if (!written.ok()) return written.status();
    if (*written) return next;
  }
  return absl::AbortedError(absl::StrCat("the shard map at ", key, " changed under ", kAttempts,
                                         " attempts in a row to change it; retry"));
}

}  // namespace coordination
