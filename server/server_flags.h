// The bloom-server binary's flags: their definitions, BLOOM_<FLAG> environment variables, and
// their validation into the options the store and the server take.
//
//   if (absl::Status applied = ApplyFlagEnvironment(); !applied.ok()) ...;
//   absl::ParseCommandLine(argc, argv);
//   absl::StatusOr<LogConfig> log = LogConfigFromFlags();
//   absl::StatusOr<ServerConfig> config = ConfigFromFlags(FindContainerMemory());
//   if (!config.ok()) ...;  // names the flag and what it accepts
//
// Every flag defined in server_flags.cc can be set by an environment variable BLOOM_<FLAG>
// (e.g. BLOOM_DATA_DIR), which suits Kubernetes; a command-line flag wins over the environment.
//
// Thread-safety: call from main() before starting threads that read flags.
#ifndef SERVER_SERVER_FLAGS_H_
#define SERVER_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/container_memory.h"
#include "common/log.h"
#include "service/server.h"
#include "storage/filter_store.h"

namespace server {

// How the server logs (--log_level, --log_json): set up first, so that what follows is logged
// in that form.
struct LogConfig {
  bloomlog::Level level = bloomlog::Level::kInfo;
  bool json = false;
};
// INVALID_ARGUMENT for an unknown level.
absl::StatusOr<LogConfig> LogConfigFromFlags();

// A follower's way to its primary (--replicate_from and the flags beside it); the primary's
// side (min_replica_acks, the log's retention) is in StoreOptions.
struct ReplicationConfig {
  std::string replicate_from;  // empty: this server is a primary
  std::string token_file;      // the token sent to the primary; empty: none
  std::string ca_file;         // verifies the primary's certificate; empty: plaintext
  // The client certificate and key shown to a primary that asks for one (mutual TLS); both
  // empty: none.
  std::string cert_file;
  std::string key_file;
  std::string name;  // empty: the host name
  absl::Duration max_lag = absl::Seconds(1);
  // Automatic failover (coordination/): the etcd members, the cluster's key prefix, where this
  // pod is reached, and the primary's lease TTL. No endpoints: no etcd.
  std::vector<std::string> etcd_endpoints;
  std::string cluster = "bloom";
  std::string advertise_address;
  absl::Duration leader_ttl = absl::Seconds(5);
  // How this pod reaches etcd (server/etcd_access.h): the CA etcd's certificate chains to
  // (empty: plaintext), a client certificate and its key, and a user of etcd's auth with the
  // file holding its password (empty: no user).
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  std::string etcd_username;
  std::string etcd_password_file;
  // The etcd key of the deployment's shard map (--shard_map); empty: not sharded. The pod's
  // group is its cluster.
  std::string shard_map;
  // The groups and slot count of the map to create when there is none (--shard_map_groups,
  // --shard_map_slots); no groups: create none.
  std::vector<std::string> shard_map_groups;
  uint32_t shard_map_slots = 0;
  // Where a primary logs its terms and acknowledged sequences (--ack_log); empty: nowhere.
  std::string ack_log;
  // A primary without token auth serves replication anyway (unsafe; see the flag).
  bool allow_unauthenticated = false;
  // Between two Switchover calls, or a primary's taking over and the first (0: none).
  absl::Duration switchover_cooldown = absl::Seconds(30);
};

// Everything else main() needs, checked. server.hooks.auth and .metrics are main()'s to fill.
struct ServerConfig {
  storage::StoreOptions store;
  service::ServerOptions server;
  std::string auth_token_file;  // empty: no token auth
  std::string metrics_listen;   // empty: no metrics listener
  std::string port_file;        // empty: none written
  ReplicationConfig replication;
  // Warnings for retired flags that were set, to log once logging is set up.
  std::vector<std::string> warnings;
};

// Sets flags from BLOOM_<FLAG> environment variables; INVALID_ARGUMENT naming the variable for
// a value the flag does not accept. Call before absl::ParseCommandLine, which then wins.
absl::Status ApplyFlagEnvironment();

// The names of the server's flags (those defined in server_flags.cc), sorted.
std::vector<std::string> ServerFlagNames();

// The flags' values, validated. `container` is what percentages of memory are shares of.
// INVALID_ARGUMENT for a value a flag does not take (a usage error: the server exits 2);
// FAILED_PRECONDITION for settings it refuses to start with (logged, exit 1): a client CA
// without a certificate, unknown open methods or server model. Both name the flag.
absl::StatusOr<ServerConfig> ConfigFromFlags(const bloomsys::ContainerMemory& container);

// Whether `primary` ("host:port", --replicate_from) names the host `hostname` itself: its host
// is the host name, or starts with it and a dot (a StatefulSet pod's DNS name,
// "bloom-0.bloom-headless.ns.svc", on the pod named "bloom-0"). Such a server is the primary:
// every pod of a StatefulSet can be given the same --replicate_from, pod 0's address.
bool NamesThisHost(absl::string_view primary, absl::string_view hostname);

// "0", "1048576", "512Mi", "4Gi" (powers of 1024), "1G" (powers of 1000); false for anything
// else or a value past 2^64.
bool ParseBytes(absl::string_view text, uint64_t& bytes);

// "50%": that share of `container` (more than 0, at most 100); otherwise ParseBytes.
bool ParseMemoryLimit(absl::string_view text, const bloomsys::ContainerMemory& container,
                      uint64_t& bytes);

}  // namespace server

#endif  // SERVER_SERVER_FLAGS_H_
