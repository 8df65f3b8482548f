// Node: one incarnation of bloom-server (server/main.cc): its store, its gRPC server, and what
// replication adds (a primary's service for its followers; a follower's forwarder and log
// tailer). main() builds a new one whenever the pod changes role, or a follower must copy its
// primary's data again; a follower that only changes primary is retargeted in place.
//
//   Node node;
//   ASSIGN_OR_RETURN(node.store, storage::FilterStore::Open(config.store));
//   RETURN_IF_ERROR(StartNode(node, config, server_options, follower_options));
//   ... serve ...
//   absl::Status closed = node.Stop();
//
// Thread-safety: a Node is built, retargeted and stopped by main()'s thread only. The callbacks
// it hands out (a follower's Applied waits, Switchover, metrics figures) run on other threads
// while it serves, and read only objects that are thread-safe themselves.
#ifndef SERVER_NODE_H_
#define SERVER_NODE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "coordination/sync_set_keeper.h"
#include "metrics/metrics.h"
#include "replication/follower.h"
#include "replication/replication_service.h"
#include "server/failover.h"
#include "service/forwarder.h"
#include "service/server.h"
#include "server/server_flags.h"
#include "storage/filter_store.h"

namespace server {

struct Node {
  std::unique_ptr<storage::FilterStore> store;
  // A primary's service for its followers; on a follower it answers Status only.
  std::unique_ptr<replication::ReplicationService> replication;
  std::unique_ptr<service::Forwarder> forwarder;  // follower
  std::unique_ptr<service::BloomServer> server;
  std::unique_ptr<replication::Follower> follower;  // follower
  // A primary elected through etcd with --min_replica_acks: its sync set.
  std::unique_ptr<coordination::SyncSetKeeper> sync_set;

  // Replication's figures for the metrics listener: a follower's progress, or a primary's
  // sequence and followers.
  [[nodiscard]] metrics::ReplicationFigures Figures() const;

  // Stops in a fixed order: the log's streams, the calls (drained), the tailer, the store.
  // `grace`: how long calls in flight may finish (default: --shutdown_grace). Returns the
  // store's closing status.
  absl::Status Stop(absl::optional<absl::Duration> grace = absl::nullopt);
};

// A follower's connection settings from the flags: its primary, its name (default
// "host:port"), the replication token and TLS files read now.
absl::StatusOr<replication::FollowerOptions> FollowerOptionsFromConfig(
    const ReplicationConfig& config, const std::string& listen);

// Starts `node`'s servers over its open store: the calls' server with the replication service
// beside it, and on a replica (config.store.replica) the forwarder and the log tailer.
absl::Status StartNode(Node& node, const ServerConfig& config, service::ServerOptions options,
                       const absl::StatusOr<replication::FollowerOptions>& follower_options);

// The latest sequence in the data dir (0 if it holds no database yet, or an interrupted copy
// of a primary): what this pod holds when it joins an election. Opened and closed as a replica, which writes nothing, and lazily,
// so that no filter is loaded only to be dropped again (the incarnation opens it for real).
absl::StatusOr<uint64_t> HeldSequence(storage::StoreOptions options);

// With failover: gives `node`'s replication service the cluster's view and, on a primary,
// the Switchover call; gives the metrics listener its figures. `failover` outlives `node`'s
// service.
void ConnectToCluster(Node& node, Failover& failover, const std::string& cluster, bool primary,
                      metrics::ServerMetrics& server_metrics);

// A follower told to follow another primary keeps serving reads from its store: only its log
// tailer and its forwarder change primary. That needs a follower that holds nothing past where
// the new primary took over (else it copies the new primary's data, in a new incarnation) and
// is not copying a snapshot. While the cluster has no primary, it serves reads as it was.
// Returns whether it goes on serving (`role_version` then names the role now played, and
// `data_term` the term whose log its data continues).
bool RetargetInPlace(Node& node, Failover& failover, replication::FollowerOptions follower_options,
                     uint64_t& role_version, int64_t& data_term);

// A primary told to stop hands over to the follower holding the most first, if one is
// connected: writes then pause for an election's settle time instead of the lease's TTL, and
// the new primary needs no other member of the sync set to be up (a rolling upgrade stops
// pods one by one).
void HandOverBeforeStopping(Node& node, Failover& failover);

}  // namespace server

#endif  // SERVER_NODE_H_
