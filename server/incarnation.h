// One incarnation of bloom-server (main.cc runs them one after another): its store opened and
// its servers started in the role it plays, served until a signal or a change of role, and
// the reason it stops logged. server/node.h holds what an incarnation owns; this is how
// main() starts, serves and ends one.
//
//   RETURN_IF_ERROR(StartIncarnation(node, config, follower_options, failover, shards, metrics));
//   int signal = ServeUntilStopped(auth, tls, node.follower.get(), role_changed);
//   LogStopping(signal, needs_snapshot);
//
// Thread-safety: functions for main()'s thread.
#ifndef SERVER_INCARNATION_H_
#define SERVER_INCARNATION_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "metrics/metrics.h"
#include "replication/follower.h"
#include "server/failover.h"
#include "server/node.h"
#include "server/server_flags.h"
#include "server/shard_member.h"
#include "service/auth.h"
#include "service/tls.h"

namespace server {

// Opens the store of a new incarnation and starts its servers; with failover, connects it to
// the cluster (a primary with a sync set records it before it takes writes); with shards,
// hands the shard map's changes to them.
absl::Status StartIncarnation(Node& node, const ServerConfig& config,
                              const absl::StatusOr<replication::FollowerOptions>& follower_options,
                              Failover* failover, ShardMember* shards,
                              metrics::ServerMetrics& server_metrics);

// Serves until SIGTERM or SIGINT (re-reading credentials on SIGHUP and when they change);
// returns the signal. On a follower, also refreshes its health and returns 0 when it needs a
// new snapshot of its primary; with failover, returns 0 when `role_changed` says so.
int ServeUntilStopped(service::TokenAuthenticator* auth, const service::TlsOptions& tls,
                      replication::Follower* follower, const std::function<bool()>& role_changed);

// Why an incarnation ends: a signal, a follower's new snapshot, or a change of role.
void LogStopping(int signal_number, bool needs_snapshot);

// `listen` ("host:port") with its port replaced.
std::string WithPort(const std::string& listen, int port);

}  // namespace server

#endif  // SERVER_INCARNATION_H_
