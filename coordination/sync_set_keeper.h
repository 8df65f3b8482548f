// SyncSetKeeper: the primary's side of the takeover rule (cluster_state.h). It keeps the sync
// set recorded in etcd and the followers whose acknowledgements count (storage::ReplicaAcks)
// in step, so that every acknowledged write is always on at least --min_replica_acks members
// of the recorded set:
// - a connected follower joins: the set with it is recorded first, then its acknowledgements
//   count (adding a member never breaks the invariant);
// - a follower that went away (disconnected, or silent for `stale_after`) leaves only once at
//   least min_replica_acks of the members staying hold every write acknowledged so far
//   (ReplicaAcks::acknowledged_sequence); its acknowledgements stop counting first, then the
//   smaller set is recorded. Until then it stays, and the writes go on with the others' acks.
//
//   SyncSetKeeper keeper(member, store->replica_acks(), {});  // before the store takes writes
//
// Only streams that proved their name count or join: each round the keeper checks every
// unverified stream's proof (the SHA-256 of the secret it showed) against the member record of
// the name it gave (ClusterMember::ReadMember), and marks it verified in `acks` when they
// match. A stream posing as another member, or naming no member at all, is never verified:
// its acknowledgements count for nothing and its name never enters the set.
//
// NextSyncSet is that rule alone; the keeper applies it every `interval` while its member is
// the primary.
//
// Thread-safety: NextSyncSet is a pure function. SyncSetKeeper runs its own thread; its
// methods are thread-safe.
#ifndef COORDINATION_SYNC_SET_KEEPER_H_
#define COORDINATION_SYNC_SET_KEEPER_H_

#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "coordination/cluster_member.h"
#include "storage/replica/replica_acks.h"

namespace coordination {

struct SyncSetChange {
  std::vector<std::string> next;  // sorted
  bool changed = false;
  std::string reason;  // what joined and left, or why a follower that went away stays
};

// The next sync set after `current`, given the connected followers (several streams of one
// follower may appear), the highest acknowledged sequence and --min_replica_acks.
SyncSetChange NextSyncSet(const std::vector<std::string>& current,
                          const std::vector<storage::ReplicaAcks::Follower>& connected,
                          uint64_t acknowledged, int required, absl::Time now,
                          absl::Duration stale_after);

struct SyncSetKeeperOptions {
  absl::Duration interval = absl::Milliseconds(100);
  // A connected follower that has not acknowledged anything for this long counts as gone.
  absl::Duration stale_after = absl::Seconds(10);
};

class SyncSetKeeper {
 public:
  // Counts nobody's acknowledgements until the first set is recorded (a new term's set is
  // empty: ClusterMember wrote it). `member` and `acks` must outlive the keeper.
  SyncSetKeeper(ClusterMember* member, storage::ReplicaAcks* acks, SyncSetKeeperOptions options);
  ~SyncSetKeeper();  // joins its thread
  SyncSetKeeper(const SyncSetKeeper&) = delete;
  SyncSetKeeper& operator=(const SyncSetKeeper&) = delete;

  // The set last recorded in etcd.
  std::vector<std::string> recorded() const;

 private:
  void Loop();
  void Step();
  // Checks the proofs of the streams not verified yet (each at most once per
  // kVerifyInterval); returns the verified streams.
  std::vector<storage::ReplicaAcks::Follower> VerifiedFollowers();

  ClusterMember* const member_;
  storage::ReplicaAcks* const acks_;
  const SyncSetKeeperOptions options_;
  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> recorded_ ABSL_GUARDED_BY(mu_);
  // The keeper thread's only: when each unverified stream (by id) was last checked, and which
  // refusals were logged.
  std::map<int, absl::Time> checked_;
  std::thread thread_;
};

}  // namespace coordination

#endif  // COORDINATION_SYNC_SET_KEEPER_H_
