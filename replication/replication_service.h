// ReplicationService: what a primary serves its followers (bloom.replication.v1): a snapshot
// of its RocksDB, then its write-ahead log as it grows, and the followers' acknowledgements.
//
// Served on the server's port beside bloom.v1, with the same TLS and tokens. Snapshot and Tail
// copy every filter, and a Tail's acknowledgements decide when writes are acknowledged, so they
// need a token with the replication role (service/auth.h), which a client's write token is
// not; without token auth they are refused unless `allow_unauthenticated` (unsafe: anyone who
// reaches the port could copy the database or pose as a follower). Each caller (a token's
// label, or else the peer's address) may hold a share of the Tail and Snapshot slots only, and
// a stream that stops moving is ended. Followers serve the service too, for Status.
// Snapshot and Status run on gRPC's synchronous threads (rare calls); Tail on its callback API,
// with one thread reading the log for every follower (tail_stream.h).
//
//   ReplicationService replication(store, auth, data_dir);
//   builder.RegisterService(&replication);   // service::ServerOptions::extra_services
//   ...
//   replication.Stop();  // before the server shuts down: the Tail streams end
//
// Thread-safety: thread-safe; `store` and `auth` must outlive it.
#ifndef REPLICATION_REPLICATION_SERVICE_H_
#define REPLICATION_REPLICATION_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "common/blocking_mutex.h"
#include "replication/follower.h"
#include "replication/tail_stream.h"
#include "service/auth.h"
#include "service/transfer_guard.h"
#include "storage/replica/replicated_store.h"

namespace replication {

struct ReplicationServiceOptions {
  // Without token auth: serve Snapshot and Tail anyway (--allow_unauthenticated_replication).
  bool allow_unauthenticated = false;
  // Tail streams at once, in all and per caller; more get RESOURCE_EXHAUSTED (a follower
  // retries).
  int max_tails = 16;
  int max_tails_per_caller = 8;
  // A Tail stream that leaves what it was sent unacknowledged this long, and a Snapshot whose
  // follower reads nothing this long, is ended (ABORTED) and its slot freed
  // (--transfer_idle_timeout; zero: never).
  absl::Duration idle_timeout = absl::Seconds(30);
  // Told the item hashes (or a CUCKOO filter's slot changes) each ApplyJournal applied (a
  // slot move's catch-up), for metrics.
  std::function<void(uint64_t items)> on_caught_up;
};

// The longest follower_id taken (a DNS name's limit): longer ones are refused, so no client
// string of any size reaches the logs.
inline constexpr size_t kMaxFollowerIdBytes = 253;
// One follower's Tail stream, as the primary sees it (for metrics and logs).
struct FollowerStream {
  std::string name;
  std::string peer;
  std::string proof;              // SHA-256 (hex) of the member secret it showed; empty: none
  uint64_t start_sequence = 0;    // where it asked to start: it claims to hold everything before
  uint64_t sent_sequence = 0;     // the last sequence sent to it
  uint64_t durable_sequence = 0;  // the last it acknowledged as durable
  absl::Time connected_at;
  absl::Time last_ack;
};

class ReplicationService final
    : public bloom::replication::v1::ReplicationService::WithCallbackMethod_Tail<
          bloom::replication::v1::ReplicationService::Service> {
 public:
  // Snapshots go to temporary directories under `data_dir` (RocksDB's checkpoints hard-link
  // its files, which needs the same file system). `auth` may be null (no token auth).
  ReplicationService(storage::ReplicatedStore* store, const service::TokenAuthenticator* auth,
                     std::string data_dir, ReplicationServiceOptions options = {});

  grpc::Status Snapshot(
      grpc::ServerContext* context, const bloom::replication::v1::SnapshotRequest* request,
      grpc::ServerWriter<bloom::replication::v1::SnapshotResponse>* writer) override;
  grpc::ServerBidiReactor<bloom::replication::v1::TailRequest,
                          bloom::replication::v1::TailResponse>*
  Tail(grpc::CallbackServerContext* context) override;
  grpc::Status Status(grpc::ServerContext* context,
                      const bloom::replication::v1::StatusRequest* request,
                      bloom::replication::v1::StatusResponse* response) override;
  grpc::Status Switchover(grpc::ServerContext* context,
                          const bloom::replication::v1::SwitchoverRequest* request,
                          bloom::replication::v1::SwitchoverResponse* response) override;
  // On a follower: what Status reports of it (the follower must outlive this service, or be
  // unset first with null). Unset: a primary.
  void SetFollower(const Follower* follower, std::string primary);

  // With failover through etcd: what Status reports of the cluster (called per Status call).
  struct ClusterView {
    std::string name;
    int64_t term = 0;
    std::string leader;
    std::string leader_address;
    std::vector<std::string> sync_set;
  };
  void SetClusterSource(std::function<ClusterView()> source);
  // On a primary elected through etcd: what Switchover runs (service::Failover::Switchover),
  // given the target's name (empty: any) and when to give up. Unset: FAILED_PRECONDITION.
  using SwitchoverHandler =
      std::function<absl::StatusOr<bloom::replication::v1::SwitchoverResponse>(
          const std::string& to, absl::Time deadline)>;
  void SetSwitchoverHandler(SwitchoverHandler handler);

  // In a sharded deployment: what ChangeShardMap runs (server/shard_member.h). Unset:
  // FAILED_PRECONDITION.
  using ShardMapHandler =
      std::function<absl::StatusOr<bloom::replication::v1::ChangeShardMapResponse>(
          const bloom::replication::v1::ChangeShardMapRequest& request)>;
  void SetShardMapHandler(ShardMapHandler handler);
  grpc::Status ChangeShardMap(grpc::ServerContext* context,
                              const bloom::replication::v1::ChangeShardMapRequest* request,
                              bloom::replication::v1::ChangeShardMapResponse* response) override;

  // Slot moves, on a primary (journal_reads.cc): the owner's journal read for the target's
  // copies, and the target's copies caught up from it.
  grpc::Status ReadJournal(grpc::ServerContext* context,
                           const bloom::replication::v1::ReadJournalRequest* request,
                           bloom::replication::v1::ReadJournalResponse* response) override;
  grpc::Status ApplyJournal(grpc::ServerContext* context,
                            const bloom::replication::v1::ApplyJournalRequest* request,
                            bloom::replication::v1::ApplyJournalResponse* response) override;
  grpc::Status ListMade(grpc::ServerContext* context,
                        const bloom::replication::v1::ListMadeRequest* request,
                        bloom::replication::v1::ListMadeResponse* response) override;

  // Ends the Tail streams (UNAVAILABLE: the followers reconnect) and refuses new ones.
  void Stop() {
    stopping_.store(true);
    pump_.Stop();
  }
  std::vector<FollowerStream> Followers() const;

 private:
  // A primary's calls (Snapshot, Tail) need the replication role; Status the read role, on any
  // server; Switchover, ChangeShardMap and the journal calls the admin role. Sets `caller` to
  // whom per-caller shares count.
  grpc::Status Admit(grpc::ServerContextBase* context, service::Role role, bool primary_only,
                     std::string* caller = nullptr) const;
  // Takes one of the caller's Tail slots; false when it or the server has none left.
  bool TakeTailSlot(const std::string& caller, std::string* why);
  void ReleaseTailSlot(const std::string& caller);
  int Register(FollowerStream status);
  void Update(int id, uint64_t sent, uint64_t durable);
  void Unregister(int id);

  storage::ReplicatedStore* const store_;
  const service::TokenAuthenticator* const auth_;
  const std::string data_dir_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_snapshot_{0};
  const ReplicationServiceOptions options_;
  // Streams running now: each Tail holds a log reader and each Snapshot a checkpoint on disk,
  // so nobody may open them without limit (options_.max_tails; snapshots_ admits Snapshots).
  service::TransferGuard snapshots_;
  mutable bloomsync::BlockingMutex mu_;
  int tails_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> tails_per_caller_ ABSL_GUARDED_BY(mu_);  // no zero counts
  int next_id_ = 0;
  std::vector<std::pair<int, FollowerStream>> followers_;
  const Follower* follower_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string primary_;
  std::function<ClusterView()> cluster_source_ ABSL_GUARDED_BY(mu_);
  SwitchoverHandler switchover_ ABSL_GUARDED_BY(mu_);
  ShardMapHandler shard_map_ ABSL_GUARDED_BY(mu_);
  TailPump pump_{store_};  // last: its thread stops first
};

}  // namespace replication

#endif  // REPLICATION_REPLICATION_SERVICE_H_
