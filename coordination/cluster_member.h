// ClusterMember: one pod's part in its cluster's records in etcd (cluster_state.h). It keeps a
// lease (LeaseKeeper) and its member key under it, watches the leader key, holds an election by
// the takeover rule when there is no leader, and tells its owner which role to play.
//
//   ClusterMemberOptions options{.cluster = "c1", .name = "pod-1", .address = "pod-1:50051"};
//   options.held_sequence = [&] { return store->LatestSequence(); };
//   options.on_role = [&](const Role& role) { /* serve as primary, or follow role.leader */ };
//   ASSIGN_OR_RETURN(std::unique_ptr<ClusterMember> member, ClusterMember::Start(etcd, options));
//   ... before acknowledging a write:  if (!member->MayAcknowledge()) fail UNAVAILABLE
//
// An election, when the leader key is absent:
// 1. the first member to see that creates the election marker (cluster_state.h); its
//    create_revision E is the round's;
// 2. each member writes what it holds into its member record, waits `settle` for the others,
//    and reads every record written after E (fresh: from after the last primary went) and the
//    sync set;
// 3. the member the takeover rule names takes the leader key under its lease, deleting the
//    marker in the same transaction (two members can never both succeed), and writes an empty
//    sync set for its term;
// 4. the others wait for a leader, and hold the round again (rewriting their records) if
//    none comes.
//
// A planned switchover (HandOver) is the primary's: it stops acknowledging (BeginHandOver),
// waits until the target holds every write it holds, records the target in its sync set, and
// ends its lease; the election that follows makes the target primary (the takeover rule puts a
// handover first), and this member takes part in it as any other, with a new lease.
//
// Roles change only on this member's thread, in order, through on_role: kNone while it has no
// lease or the cluster has no leader, kPrimary with the term it won, kFollower with the leader
// to follow. A primary whose lease is lost (or whose leader key is gone) becomes kNone at once
// and MayAcknowledge() turns false before that: it checks the lease's bound itself.
//
// Thread-safety: thread-safe. on_role runs on the member's own thread and must not call Stop
// or the destructor.
#ifndef COORDINATION_CLUSTER_MEMBER_H_
#define COORDINATION_CLUSTER_MEMBER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "coordination/cluster_state.h"
#include "coordination/etcd_client.h"
#include "coordination/lease_keeper.h"

namespace coordination {

struct Role {
  enum class Kind { kNone, kPrimary, kFollower };
  Kind kind = Kind::kNone;
  // The leader key's create_revision: grows with every new primary.
  int64_t term = 0;
  // The primary (this member itself when kPrimary).
  LeaderRecord leader;
};

struct ClusterMemberOptions {
  std::string cluster;    // the key prefix
  std::string name;       // unique in the cluster; no spaces, '=' or ','
  std::string address;    // host:port other pods and clients reach this one at; no spaces
  int required_acks = 0;  // --min_replica_acks, written into each sync set this member writes
  LeaseOptions lease;     // ttl is --leader_ttl
  // How long an election waits for members to say what they hold.
  absl::Duration settle = absl::Milliseconds(500);
  // The last sequence this member holds durably.
  std::function<uint64_t()> held_sequence;
  // Each change of role, on the member's thread.
  std::function<void(const Role&)> on_role;
};

class ClusterMember {
 public:
  // Checks the options and starts the member's thread (which retries etcd until it answers).
  // `etcd` must outlive the member.
  static absl::StatusOr<std::unique_ptr<ClusterMember>> Start(EtcdClient* etcd,
                                                              ClusterMemberOptions options);
  // Stops without resigning (like a crash, the lease then expires); Resign() first for a
  // planned hand-over.
  ~ClusterMember();
  ClusterMember(const ClusterMember&) = delete;
  ClusterMember& operator=(const ClusterMember&) = delete;

  Role role() const;
  const std::string& name() const { return options_.name; }
  // A random secret made when the member starts, whose SHA-256 its member record names
  // (`proof`): its follower shows it to the primary, so that no other stream can count as
  // this member (replication/tail_stream.h). Never logged, never written to etcd.
  const std::string& secret() const { return secret_; }
  // The member record of `name` as etcd holds it now; NOT_FOUND if it has none (not up).
  absl::StatusOr<MemberRecord> ReadMember(const std::string& name) const;
  // The fence: true only while this member is the primary and its lease is certainly held.
  bool MayAcknowledge() const;
  // As primary: records `followers` as the sync set of this term, before their
  // acknowledgements may count. FAILED_PRECONDITION if this member is not the primary of the
  // term it believes in (the leader key has moved on).
  absl::Status RecordSyncSet(std::vector<std::string> followers);
  // As the primary of `term` that cannot serve it (its data is not what it claimed when it
  // took over): deletes the leader key of that term, so that an election (in which this
  // member says what it holds now) replaces it at once. The member goes on taking part.
  absl::Status StepDown(int64_t term);
  // Ends this member's lease (its member key, and the leader key if it holds it, go at once,
  // so another member can take over without waiting for the TTL), and stops taking part.
  absl::Status Resign();

  // A planned switchover, in three steps. BeginHandOver closes the fence (MayAcknowledge turns
  // false) while this member stays primary; FAILED_PRECONDITION if it is not the primary.
  absl::Status BeginHandOver();
  // Opens the fence again (the target did not catch up in time).
  void CancelHandOver();
  // Once `to` holds every write up to `sequence` (which must cover every write this member may
  // have acknowledged: read after BeginHandOver): records the handover in the sync set of this
  // term, then ends the lease; the member goes on, without a role until the election that
  // follows. FAILED_PRECONDITION without BeginHandOver or when no longer primary.
  absl::Status HandOver(const std::string& to, uint64_t sequence);

 private:
  ClusterMember(EtcdClient* etcd, ClusterMemberOptions options);
  void Loop();
  // One round: returns when the role may have changed or the member stops.
  void Step();
  bool EnsureLease();
  void Elect();
  void FollowLeader(const KeyValue& leader_key, int64_t revision);
  void SetRole(const Role& role);
  // This member's record, holding `held`.
  MemberRecord Record(uint64_t held) const;
  // Writes `set` if the leader key of its term still stands.
  absl::Status WriteSyncSet(const SyncSet& set);
  // Sleeps up to `duration`; false if the member is stopping.
  bool Pause(absl::Duration duration);
  std::shared_ptr<LeaseKeeper> keeper() const;
  bool stopping() const;

  EtcdClient* const etcd_;
  const ClusterMemberOptions options_;
  const std::string secret_;

  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Role role_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<LeaseKeeper> keeper_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<EtcdWatch> watch_ ABSL_GUARDED_BY(mu_);  // cancelled to end a wait
  std::atomic<bool> primary_{false};       // role_.kind == kPrimary, read without the lock
  std::atomic<bool> handing_over_{false};  // between BeginHandOver and the next role
  // The sync set last recorded in this term (names, and a handover once HandOver wrote one):
  // RecordSyncSet keeps the handover in every later record of the term.
  std::vector<std::string> recorded_names_ ABSL_GUARDED_BY(mu_);
  std::string handover_to_ ABSL_GUARDED_BY(mu_);
  uint64_t handover_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // Held across each write of the sync set, so that a record read before a handover cannot
  // land after it.
  bloomsync::BlockingMutex sync_write_mu_;
  int64_t last_term_ = 0;                               // the member thread's only
  absl::Time last_refusal_log_ = absl::InfinitePast();  // the member thread's only
  std::thread thread_;
};

}  // namespace coordination

#endif  // COORDINATION_CLUSTER_MEMBER_H_
