// ReplicaAcks: on a primary with --min_replica_acks=N, which sequence each follower has made
// durable in its own RocksDB, and the writes that wait for N of them before they are
// acknowledged.
//
//   ReplicaAcks acks(/*required=*/1, absl::Seconds(5));
//   int follower = acks.Connect("pod-1");      // a Tail stream opened
//   acks.WhenAcked(sequence, [](const absl::Status& s) { /* answer the call */ });
//   acks.Ack(follower, durable_sequence);        // the follower's answer: callbacks run
//   acks.Disconnect(follower);
//
// Waiters are grouped as the group committer groups writes: one ack of a follower answers
// every write up to the sequence it names, and a wait is a map entry, not a thread. A write
// that N followers have not acknowledged within the timeout fails UNAVAILABLE, naming how many
// did; it is never acknowledged as if it had been replicated. Callbacks run in the order of
// their sequences (equal ones in the order they were asked), outside the lock, on the thread
// of the Ack that satisfied them or on the timer thread.
//
// A stream covers only what it was sent: the writes from its first sequence (`from`, where it
// started) up to what it acknowledged. A stream that starts at a claimed sequence covers no
// write before it, however far it later acknowledges.
//
// Which followers count: every connected one, until SetSyncSet() is called; from then on only
// those it names (a primary elected through etcd counts only the sync set it recorded there,
// coordination/cluster_state.h), and of their streams only those whose proof of membership was
// verified (SetVerified: the stream's name is a member's, and it showed that member's secret).
// In a sync set a follower counts once however many streams it has open (its name is its
// member name); without one every stream counts.
//
// Thread-safety: every method is thread-safe.
#ifndef STORAGE_REPLICA_REPLICA_ACKS_H_
#define STORAGE_REPLICA_REPLICA_ACKS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"

namespace storage {

class ReplicaAcks {
 public:
  using Done = absl::AnyInvocable<void(const absl::Status&) &&>;

  // `required` >= 1 followers must acknowledge each write within `timeout`.
  ReplicaAcks(int required, absl::Duration timeout);
  // Fails the waiting writes with UNAVAILABLE and stops the timer thread.
  ~ReplicaAcks();
  ReplicaAcks(const ReplicaAcks&) = delete;
  ReplicaAcks& operator=(const ReplicaAcks&) = delete;

  int required() const { return required_; }
  absl::Duration timeout() const { return timeout_; }

  // A follower's stream opened, naming itself `name`, showing `proof` (the SHA-256 of its
  // member secret, or empty), sent the log from sequence `from` on; returns its id for Ack,
  // SetVerified and Disconnect.
  int Connect(const std::string& name, std::string proof = {}, uint64_t from = 0);
  // Whether stream `id` proved to be member `name` (only verified streams count in a sync set).
  void SetVerified(int id, bool verified);
  // Follower `id` holds durably every write it was sent up to `durable_sequence`.
  void Ack(int id, uint64_t durable_sequence);
  void Disconnect(int id);

  // Calls `done` with OK once `required` followers acknowledged `sequence`, or with
  // UNAVAILABLE after the timeout. At once, on this thread, if they already have.
  void WhenAcked(uint64_t sequence, Done done);
  // WhenAcked, waiting: for writes answered on their own thread (Reserve, Delete, Import).
  absl::Status WaitAcked(uint64_t sequence);

  // From now on only the followers named count (the set is recorded first: the caller's
  // order). Waiting writes that the new set already covers are answered.
  void SetSyncSet(const std::vector<std::string>& names);
  // The highest sequence every write up to which has been acknowledged (or could have been):
  // the quorum's highest point so far. Followers leave a sync set only once enough of those
  // staying hold it.
  uint64_t acknowledged_sequence() const;

  struct Follower {
    std::string name;
    uint64_t durable_sequence = 0;
    absl::Time last_ack;
    int id = -1;
    std::string proof;
    bool verified = false;
    uint64_t from = 0;  // the first sequence its stream was sent
  };
  std::vector<Follower> Followers() const;
  // Writes that failed for want of acknowledgements, since start.
  uint64_t timeouts() const;
  // Writes waiting now for their acknowledgements (WhenAcked and WaitAcked).
  size_t waiting() const;

 private:
  struct Waiter {
    absl::Time deadline;
    Done done;
  };
  // The highest sequence `required_` counted followers have all acknowledged (0 if fewer are
  // connected), whatever they were sent: it raises acknowledged_, which may overstate (a
  // follower then leaves a sync set later, never sooner).
  uint64_t QuorumSequenceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `required_` counted followers were each sent `sequence` and acknowledged it.
  bool CoveredLocked(uint64_t sequence) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes out the waiters the quorum covers (in order) into `ready`.
  void TakeCoveredLocked(std::vector<Done>& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();

  const int required_;
  const absl::Duration timeout_;
  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar cv_;  // wakes the timer thread to stop
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, Follower> followers_ ABSL_GUARDED_BY(mu_);
  // By sequence; equal sequences in the order they were asked (multimap keeps it).
  std::multimap<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t timeouts_ ABSL_GUARDED_BY(mu_) = 0;
  bool sync_set_mode_ ABSL_GUARDED_BY(mu_) = false;
  std::set<std::string> sync_set_
      ABSL_GUARDED_BY(mu_);  // with sync_set_mode_: the followers that count
  uint64_t acknowledged_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread timer_;
};

}  // namespace storage

#endif  // STORAGE_REPLICA_REPLICA_ACKS_H_
