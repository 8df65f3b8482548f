// ShardMapWatch: a pod's view of its sharded deployment, kept from etcd (sharding/shard_view.h).
// It reads the shard map at --shard_map and every group's records (each group is a cluster:
// `<group>/leader` and `<group>/members/`, cluster_state.h), watches them, and publishes a new
// ShardState whenever one changes. The map only moves forward: a record of a lower version
// than the one held is ignored (it cannot be written by the transactions that change the map,
// which compare its revision, but a restored etcd could hold one), and so is a record this
// pod cannot read (logged).
//
//   ASSIGN_OR_RETURN(auto watch, ShardMapWatch::Start(etcd, {"bloom/shardmap", "bloom/a"}));
//   watch->WaitForVersion(1, absl::Now() + absl::Seconds(5));  // a map, if there is one
//   std::shared_ptr<const sharding::ShardState> state = watch->Current();
//
// A thread per watched key (the map, and each group in it) reads it, then waits on etcd's
// watch for the next change; an etcd that fails is retried every `retry`, and meanwhile the
// last state read stays current.
//
// Thread-safety: thread-safe.
#ifndef COORDINATION_SHARD_MAP_WATCH_H_
#define COORDINATION_SHARD_MAP_WATCH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "coordination/etcd_client.h"
#include "sharding/shard_view.h"

namespace coordination {

struct ShardMapWatchOptions {
  std::string map_key;    // where the map is (--shard_map)
  std::string own_group;  // this pod's group (--cluster)
  absl::Duration retry = absl::Milliseconds(500);
};

class ShardMapWatch final : public sharding::ShardView {
 public:
  // `etcd` must outlive the watch. Returns at once; the state fills in as etcd answers.
  static absl::StatusOr<std::unique_ptr<ShardMapWatch>> Start(EtcdClient* etcd,
                                                              ShardMapWatchOptions options);
  ~ShardMapWatch() override;  // stops the threads
  ShardMapWatch(const ShardMapWatch&) = delete;
  ShardMapWatch& operator=(const ShardMapWatch&) = delete;

  std::shared_ptr<const sharding::ShardState> Current() const override;
  const std::string& own_group() const override { return options_.own_group; }
  // Waits until the map held has at least `version` (1: any map), or `deadline`: whether it has.
  bool WaitForVersion(uint64_t version, absl::Time deadline) const;
  // Reads the map's record from etcd now (a linearizable read) and waits until this view
  // holds that version or a later one: what a pod becoming primary does before it takes
  // writes. UNAVAILABLE if etcd cannot be read, DEADLINE_EXCEEDED if the view does not catch up
  // by `deadline`; OK with no map in etcd.
  absl::Status CatchUp(absl::Time deadline) const;

 private:
  ShardMapWatch(EtcdClient* etcd, ShardMapWatchOptions options);
  // Reads `key` (every key under it if `prefix`), passes what it holds to `apply`, then again
  // after each change etcd reports, until the watch stops.
  void Follow(const std::string& key, bool prefix,
              const std::function<void(const std::vector<KeyValue>&)>& apply);
  void ApplyMap(const std::vector<KeyValue>& records);
  void ApplyGroup(const std::string& group, const std::vector<KeyValue>& records);
  // Starts following the groups of `map` not followed yet.
  void FollowGroups(const sharding::ShardMap& map) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sleeps `options_.retry`, or less if the watch stops: whether it goes on.
  bool PauseBeforeRetry();

  EtcdClient* const etcd_;
  const ShardMapWatchOptions options_;
  mutable bloomsync::BlockingMutex mu_;
  mutable bloomsync::CondVar changed_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  sharding::ShardMap map_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, sharding::GroupAddresses, std::less<>> groups_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const sharding::ShardState> current_ ABSL_GUARDED_BY(mu_);
  std::set<EtcdWatch*> watches_ ABSL_GUARDED_BY(mu_);  // cancelled on stop
  std::set<std::string> followed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace coordination

#endif  // COORDINATION_SHARD_MAP_WATCH_H_
