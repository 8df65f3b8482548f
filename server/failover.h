// Failover: main()'s part of automatic failover through etcd (--etcd_endpoints). It runs the
// pod's ClusterMember (coordination/cluster_member.h), keeps the role it was last told to
// play for main()'s loop, which builds each incarnation of the server for it (a primary, or a
// follower of the elected primary), and tells the member what this pod holds.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Failover> failover, Failover::Start(config, acks, held));
//   uint64_t version;
//   coordination::Role role = failover->WaitForRole(stop, &version);
//   ... serve as `role` while !failover->RoleChangedSince(version) ...
//
// Thread-safety: thread-safe.
#ifndef SERVER_FAILOVER_H_
#define SERVER_FAILOVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "coordination/cluster_member.h"
#include "coordination/etcd_client.h"
#include "server/server_flags.h"
#include "storage/filter_store.h"

namespace server {

class Failover {
 public:
  // Connects to etcd and starts the member. `held`: the latest sequence in the data dir now.
  // `on_change` (may be null) runs on the member's thread after each change of role, to wake
  // whoever waits on RoleChangedSince.
  static absl::StatusOr<std::unique_ptr<Failover>> Start(const ReplicationConfig& config,
                                                         int required_acks, uint64_t held,
                                                         std::function<void()> on_change = {});
  ~Failover();  // stops the member (its lease expires; Resign first to hand over at once)

  // The pod's client of etcd, which the shard member shares (server/shard_member.h).
  const std::shared_ptr<coordination::EtcdClient>& etcd() const { return etcd_; }

  // Blocks until the member has a role other than kNone, or `stop` returns true (then kNone).
  coordination::Role WaitForRole(const std::function<bool()>& stop, uint64_t* version);
  bool RoleChangedSince(uint64_t version) const;
  // The role last told, and its version.
  coordination::Role role(uint64_t* version) const;

  // The open store, whose latest sequence elections read; null when it closes (its latest
  // sequence is kept).
  void SetStore(storage::FilterStore* store);
  uint64_t held() const;
  // Without a store: this pod now holds `sequence` (0: its data is about to be copied anew,
  // or an interrupted copy was removed), as elections will read.
  void SetHeld(uint64_t sequence);

  // The fence for StoreOptions::may_acknowledge.
  std::function<bool()> Fence() const;
  coordination::ClusterMember* member() const { return member_.get(); }
  // Ends this pod's lease, so another pod takes over without waiting for its TTL.
  absl::Status Resign();

  // A planned switchover from this pod, the primary, to the follower named `to` (empty: the
  // follower that holds the most): writes are refused from now on (UNAVAILABLE, retried by
  // clients), and once `to` holds every write this pod holds, the handover is recorded in etcd
  // and this pod's lease ends; `to` wins the election that follows, and this pod follows it.
  // `followers` lists each connected follower's name and durable sequence; `latest` is this
  // pod's latest sequence. FAILED_PRECONDITION if this pod is not the primary or `to` is not a
  // connected follower; DEADLINE_EXCEEDED if `to` does not catch up by `deadline` (writes are
  // taken again, as before). `to` naming this pod is done already.
  struct FollowerProgress {
    std::string name;
    uint64_t durable_sequence = 0;
  };
  struct Handover {
    std::string to;
    uint64_t sequence = 0;  // every write up to this is on `to`
    int64_t term = 0;       // the term that ended (or goes on, when `to` is this pod)
  };
  // A Switchover call's admission: RESOURCE_EXHAUSTED, saying when to retry, within
  // --switchover_cooldown of the last switchover that paused writes here (Switchover) or of
  // this pod's taking over. (A primary stopping hands over without it.)
  absl::Status CheckSwitchoverCooldown() const;

  absl::StatusOr<Handover> Switchover(
      const std::string& to, absl::Time deadline,
      const std::function<std::vector<FollowerProgress>()>& followers,
      const std::function<uint64_t()>& latest);

 private:
  Failover() = default;

  std::shared_ptr<coordination::EtcdClient> etcd_;
  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar changed_;
  coordination::Role role_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // grows with each role
  storage::FilterStore* store_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t held_ ABSL_GUARDED_BY(mu_) = 0;  // without a store
  absl::Duration switchover_cooldown_;
  absl::Time primary_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_switchover_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Declared last: destroyed first, while what its callbacks use is still there.
  std::unique_ptr<coordination::ClusterMember> member_;
};

}  // namespace server

#endif  // SERVER_FAILOVER_H_
