// Follower: a server started with --replicate_from. It copies a snapshot of the primary's
// RocksDB when its own data dir holds none (Bootstrap), then tails the primary's log into its
// replica store (storage/filter_store_replica.cc), acknowledging what it has made durable.
//
//   FollowerOptions options{.primary = "pod-0:50051", .credentials = ..., .name = "pod-1"};
//   RETURN_IF_ERROR(Bootstrap(options, data_dir, /*force=*/false, stop));
//   ... open the store with StoreOptions::replica ...
//   Follower follower(store, options, [&](bool serving) { server->SetServing(serving); });
//   follower.Start();
//   ... follower.needs_snapshot(): the primary's log no longer reaches back to this replica;
//   close the store and Bootstrap(..., /*force=*/true) again.
//
// Health: NOT_SERVING until the first catch-up, and whenever the follower is connected but
// more than max_lag behind. A follower that cannot reach its primary keeps serving reads from
// what it has (a lost primary stops writes, not reads), and says so in its log.
//
// Thread-safety: thread-safe. One thread tails the log; the others only read its figures or
// wait for a sequence.
#ifndef REPLICATION_FOLLOWER_H_
#define REPLICATION_FOLLOWER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "common/blocking_mutex.h"
#include "grpcpp/grpcpp.h"
#include "replication/applied_waiters.h"
#include "storage/replica/replicated_store.h"

namespace replication {

struct FollowerOptions {
  std::string primary;  // host:port
  // TLS or plaintext, as the primary serves.
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  // A token with the replication role, sent as "authorization: Bearer <token>"; empty: none.
  std::string token;
  std::string name;  // how the primary's logs and metrics call this follower
  // With failover through etcd: this pod's member secret (ClusterMember::secret), shown in
  // each Tail stream's first request so that the primary counts it as member `name`.
  std::string member_secret;
  absl::Duration max_lag = absl::Seconds(1);
};

// The channel a follower uses to reach its primary (replication and forwarded calls).
std::shared_ptr<grpc::Channel> PrimaryChannel(const FollowerOptions& options);

// Whether `data_dir` holds a complete copy (a RocksDB, and no copy in progress or interrupted).
bool HoldsCompleteCopy(const std::string& data_dir);
// Removes an interrupted copy's files from `data_dir` (a store then opens empty); returns
// whether there was one.
bool DiscardIncompleteCopy(const std::string& data_dir);

// Copies a snapshot of the primary into `data_dir` unless it holds a complete copy already
// (`force`: even then). A copy interrupted by a crash is started again. Retries while the
// primary is unreachable, until `stop` returns true (then CANCELLED).
absl::Status Bootstrap(const FollowerOptions& options, const std::string& data_dir, bool force,
                       const std::function<bool()>& stop);

struct FollowerStatus {
  bool connected = false;
  bool serving = false;           // what health reports
  uint64_t applied_sequence = 0;  // durable in this replica
  uint64_t primary_sequence = 0;  // the primary's latest, as last heard
  absl::Duration lag;             // how far behind the primary's clock this replica's data is
  uint64_t batches_applied = 0;   // since start
  uint64_t bytes_applied = 0;
  size_t reads_waiting = 0;  // for a sequence not applied yet (min_sequence)
};

class Follower {
 public:
  // `store` (a replica) must outlive the follower; `on_serving` is called with the health
  // status whenever it changes (and once at Start).
  Follower(storage::ReplicatedStore* store, FollowerOptions options,
           std::function<void(bool)> on_serving);
  ~Follower();
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  void Start();
  void Stop();

  // True once the primary answered that its log no longer holds this replica's next
  // sequence: the follower stopped; the caller copies a snapshot again.
  bool needs_snapshot() const { return needs_snapshot_.load(); }
  FollowerStatus status() const;
  // Re-evaluates health (a primary gone silent makes the lag grow without any event): call
  // it every few hundred milliseconds.
  void RefreshHealth() { UpdateServing(); }
  // Calls done(true) once the replica has applied `sequence` (at once, on this thread, if it
  // has), or done(false) at `deadline`, once the follower stops, or at once when
  // kMaxWaitingReads calls wait already (applied_waiters.h: no thread is held meanwhile).
  void WhenApplied(uint64_t sequence, absl::Time deadline, AppliedWaiters::Done done) {
    waiters_.Wait(sequence, deadline, std::move(done));
  }
  // Reads waiting in WhenApplied at once, at most: a follower answers more of them by
  // forwarding them to the primary at once.
  static constexpr size_t kMaxWaitingReads = 4096;
  // Tails another primary from here on (failover through etcd elected it): the stream to the
  // old one ends, and the next starts at once from this replica's latest sequence, which must
  // be in the new primary's log (a replica holding more copies a snapshot instead).
  void Retarget(const std::string& primary);
  std::string primary() const;

 private:
  void Run();
  // One Tail stream, until it ends; its status.
  grpc::Status TailOnce();
  // Applies what `queue` delivers (all of it at once, one fsync) and acknowledges it on
  // `stream`, until the stream ends (OK) or a response says why it ends, or applying fails.
  template <typename Queue, typename Stream>
  grpc::Status ApplyResponses(Queue& queue, Stream& stream, uint64_t start);
  // After applying responses whose last one was sent at `primary_time` (the primary's clock),
  // when the primary's latest was `primary_sequence`.
  void OnApplied(uint64_t primary_sequence, absl::Time primary_time);
  void UpdateServing();
  bool SleepUnlessStopped(absl::Duration duration);

  storage::ReplicatedStore* const store_;
  FollowerOptions options_;  // options_.primary guarded by mu_ (Retarget); the rest constant
  const std::function<void(bool)> on_serving_;
  // Retarget replaces it; a stream keeps the one it started with.
  std::shared_ptr<bloom::replication::v1::ReplicationService::Stub> stub_ ABSL_GUARDED_BY(mu_);
  bool retargeted_ ABSL_GUARDED_BY(mu_) = false;  // reconnect without waiting
  absl::Time retargeted_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::atomic<bool> stop_{false};
  std::atomic<bool> needs_snapshot_{false};
  std::thread thread_;

  mutable bloomsync::BlockingMutex mu_;
  bloomsync::CondVar applied_cv_;        // Stop's and Retarget's wake-ups
  grpc::ClientContext* call_ = nullptr;  // the stream in progress, for Stop to cancel
  bool connected_ = false;
  bool caught_up_once_ = false;
  bool unreachable_ = false;  // the last attempt to reach the primary failed
  bool behind_ = false;
  bool serving_ = false;
  uint64_t primary_sequence_ = 0;
  absl::Time caught_up_primary_time_ = absl::InfinitePast();  // primary's clock
  absl::Time last_response_ = absl::InfinitePast();
  absl::Duration last_delay_;
  uint64_t batches_applied_ = 0;
  uint64_t bytes_applied_ = 0;
  // After mu_'s fields: stopped (its waiters answered) first when the follower is destroyed.
  AppliedWaiters waiters_{[store = store_] { return store->VisibleSequence(); }, kMaxWaitingReads};
};

}  // namespace replication

#endif  // REPLICATION_FOLLOWER_H_
