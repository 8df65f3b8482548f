// ShardView: what a pod of a sharded deployment knows now: the shard map at the version it
// holds, and where each group in it is reached. coordination/shard_map_watch.h keeps one from
// etcd; the service's router (service/shard_router.h) reads it for every call it routes.
//
//   std::shared_ptr<const ShardState> state = view->Current();
//   if (state->map.version() == 0) ... no map yet: serve nothing that needs one
//   const std::string& owner = state->map.OwnerOfName(name);
//   const GroupAddresses* where = state->Find(owner);
//
// Thread-safety: implementations are thread-safe; a ShardState is immutable once published.
#ifndef SHARDING_SHARD_VIEW_H_
#define SHARDING_SHARD_VIEW_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "sharding/shard_map.h"

namespace sharding {

// Where one group is reached, from its records in etcd (coordination/cluster_state.h).
struct GroupAddresses {
  std::string primary;               // host:port of its primary; empty while it has none
  std::vector<std::string> members;  // host:port of every member up, the primary among them
};

struct ShardState {
  ShardMap map;  // version 0: none read yet
  std::map<std::string, GroupAddresses, std::less<>> groups;

  // Write pauses of slot moves as this pod saw them, for metrics: when it took the map pausing
  // the current move's writes (InfiniteFuture while none is paused), and the pauses it saw end
  // (by the flip or an abort) and their total length.
  absl::Time paused_since = absl::InfiniteFuture();
  uint64_t pauses_ended = 0;
  absl::Duration paused_total;

  // Null for a group whose records were not read (yet).
  const GroupAddresses* Find(absl::string_view group) const {
    auto it = groups.find(group);
    return it == groups.end() ? nullptr : &it->second;
  }
};

class ShardView {
 public:
  virtual ~ShardView() = default;
  // What this pod knows now; never null.
  virtual std::shared_ptr<const ShardState> Current() const = 0;
  // The group this pod belongs to.
  virtual const std::string& own_group() const = 0;
};

}  // namespace sharding

#endif  // SHARDING_SHARD_VIEW_H_
