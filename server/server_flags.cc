#include "server/server_flags.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "sharding/shard_map.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, data_dir, "./bloom-data", "directory of the RocksDB data");
ABSL_FLAG(bool, sync, false,
          "fsync the write-ahead log before acknowledging an Add (survives power loss; slower)");
ABSL_FLAG(std::string, memory_limit, "50%",
          "cache budget for filters (their bits and a bookkeeping charge each, "
          "storage/memory/resident_charge.h): past it the "
          "least recently used filters are written "
          "out and loaded again on use; e.g. 536870912, 512Mi, 4Gi, or a share of the "
          "container's memory limit (the machine's memory outside a container) such as 50% (the "
          "default: RocksDB, request buffers and the heap's own overhead need the rest); 0 = no "
          "limit");
ABSL_FLAG(bool, lazy_start, false,
          "start without loading any filter (only the journal is scanned); filters load on "
          "first use, so start-up time does not depend on their number. Skips the start-up "
          "checks of every filter (unreadable ones are found on use; orphaned pages stay)");
ABSL_FLAG(uint64_t, max_batch, 100'000, "most items (items + raw_items) in one request");
ABSL_FLAG(uint64_t, max_item_bytes, 64 << 10, "largest item, in bytes");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error");
ABSL_FLAG(bool, log_json, false, "log one JSON object per line");
ABSL_FLAG(absl::Duration, checkpoint_interval, absl::Seconds(30),
          "a filter with unpersisted changes is checkpointed at least this often");
ABSL_FLAG(std::string, checkpoint_write_rate, "64Mi",
          "bytes per second at which the background checkpointer writes the pages of a large "
          "checkpoint (a steady stream to disk and to followers, not a burst); 0: unpaced. "
          "Checkpoints of under 1 MiB of pages are never held back");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGTERM, how long in-flight calls may run before they are cancelled");
ABSL_FLAG(std::string, server_model, "auto",
          "retired: the server always uses gRPC's callback API (auto and callback are accepted; "
          "sync, the former thread-per-call model, is served as callback with a warning)");
ABSL_FLAG(std::string, port_file, "",
          "if set, written once serving: the gRPC port on the first line, then 'metrics <port>' "
          "and 'health <port>' lines for those listeners (for tests and tools)");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain for TLS; with --tls_key_file turns TLS on (re-read on change)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS)");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(5),
          "how often the TLS files are checked for changes (rotation without restart)");
ABSL_FLAG(std::string, auth_token_file, "",
          "file of '<sha256 of token> <read|write|admin|replication> [label]' lines; if set, every "
          "call but health "
          "checking needs 'authorization: Bearer <token>' (re-read on change and on SIGHUP)");
ABSL_FLAG(
    std::string, open_methods, "health",
    "with --auth_token_file, the methods the main port serves without a token: health, "
    "reflection, both or none (\"\"). Reflection receives a request whole before it can check "
    "its size: open it only to clients you trust");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics); empty = off");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of a plaintext gRPC server answering only grpc.health.v1, for Kubernetes "
          "probes when the main port needs TLS or mTLS; empty = off");
// Defaults sized so that one connection at both limits (64 x 16 MiB of buffered requests) fits
// in a 2 GiB container beside the filters; --transport_memory bounds all connections together.
ABSL_FLAG(int32_t, max_concurrent_streams, 64, "most concurrent calls per client connection");
ABSL_FLAG(int32_t, item_call_threads, 0,
          "if positive, unary Add and MightContain calls run on gRPC's async API on this many "
          "threads, each polling its share of the client connections (less server CPU for "
          "batched unary calls, more for Pipeline streams); 0 = on the callback API");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "a client connection with no call in flight for this long is closed (GOAWAY; gRPC "
          "clients reconnect on their next call), so idle connections do not pile up; 0 = never");
ABSL_FLAG(absl::Duration, max_connection_age, absl::Minutes(10),
          "a client connection is sent GOAWAY after this long (+-10%), so that clients balancing "
          "over a DNS name (dns:/// and a headless Service) resolve it again and find pods added "
          "since; calls and streams in flight finish on the old connection; 0 = never");
ABSL_FLAG(std::string, max_message_bytes, "16Mi", "largest request message, e.g. 4Mi, 16Mi");
ABSL_FLAG(uint64_t, pipeline_window, 64,
          "operations a Pipeline stream reads ahead of their answers before it stops reading "
          "(back-pressure on a client that sends faster than it reads)");
ABSL_FLAG(uint64_t, max_pipeline_operations, 100'000,
          "most operations in one Pipeline message (itself and its `more`); a message with more "
          "is refused (INVALID_ARGUMENT) before it is parsed");
ABSL_FLAG(std::string, transport_memory, "256Mi",
          "most bytes gRPC may buffer for received requests, over all connections (its "
          "ResourceQuota); past it, flow-control windows shrink and calls are cancelled "
          "(RESOURCE_EXHAUSTED). Bytes or a share of the container's memory (10%); 0 = no bound");
ABSL_FLAG(uint64_t, max_transfers, 16,
          "most Export and Import streams at once; more get RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, max_transfers_per_client, 4,
          "of --max_transfers, most at once for one client (a token's label, or else the peer's "
          "address); more get RESOURCE_EXHAUSTED");
ABSL_FLAG(std::string, transfer_min_rate, "64Ki",
          "bytes a second an Export or Import must move, averaged over --transfer_idle_timeout, "
          "or it is cancelled (ABORTED) and what it held released; e.g. 64Ki, 1Mi; 0 = any");
ABSL_FLAG(absl::Duration, transfer_idle_timeout, absl::Seconds(30),
          "an Export whose client stops reading, or an Import that sends no chunk, for this long "
          "is cancelled (ABORTED) and what it held released; so is a follower's Snapshot that "
          "reads nothing, or Tail that acknowledges nothing it was sent; 0 = never");
ABSL_FLAG(int32_t, max_threads, 0,
          "retired with the sync server model, whose threads it bounded; ignored (with a "
          "warning) if set");

ABSL_FLAG(std::string, replicate_from, "",
          "host:port of the primary: this server is its follower (it copies and tails the "
          "primary's data, answers reads, forwards writes); empty: a primary");
ABSL_FLAG(int32_t, min_replica_acks, 0,
          "on a primary: a write is acknowledged only once this many followers hold it "
          "durably (0: followers are asynchronous)");
ABSL_FLAG(absl::Duration, replica_ack_timeout, absl::Seconds(5),
          "a write that --min_replica_acks followers have not acknowledged by then fails "
          "UNAVAILABLE");
ABSL_FLAG(absl::Duration, max_replica_lag, absl::Seconds(1),
          "a follower reports NOT_SERVING to health checks while it is further behind its "
          "primary");
ABSL_FLAG(absl::Duration, replication_log_retention, absl::Minutes(10),
          "how long a primary keeps write-ahead log files for followers that tail it; a server "
          "that nobody replicated from (and that replicated from nobody) for this long keeps "
          "none");
ABSL_FLAG(std::string, replication_log_limit, "1Gi",
          "at most this much kept write-ahead log (older files go first; checked every second "
          "and after every flush, so it is passed only for the moment between a log file's "
          "archiving and its purge)");
ABSL_FLAG(std::string, replication_token_file, "",
          "file holding the token (replication role) a follower sends to its primary; empty: "
          "none");
ABSL_FLAG(bool, allow_unauthenticated_replication, false,
          "UNSAFE: without --auth_token_file, serve replication (Snapshot, Tail) to anyone who "
          "reaches the port: any client could then copy every filter, or pose as a follower "
          "and make this primary acknowledge writes that a failover loses. Only on a network "
          "that nothing but the pods reaches. Without it, a primary without token auth "
          "refuses replication");
ABSL_FLAG(absl::Duration, switchover_cooldown, absl::Seconds(30),
          "with --etcd_endpoints: a Switchover call is refused (RESOURCE_EXHAUSTED) within "
          "this long of the primary's last one or of its taking over: each refuses writes for "
          "a moment; 0 = no cooldown");
ABSL_FLAG(std::string, replication_ca_file, "",
          "PEM CA that a follower verifies its primary's TLS certificate with; empty: "
          "plaintext to the primary");
ABSL_FLAG(std::string, replication_cert_file, "",
          "PEM client certificate a follower presents to its primary (a primary with "
          "--tls_client_ca_file requires one); with --replication_key_file and "
          "--replication_ca_file");
ABSL_FLAG(std::string, replication_key_file, "", "PEM private key of --replication_cert_file");
ABSL_FLAG(std::string, replica_name, "",
          "how the primary's logs and metrics name this follower; default: the host name");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "host:port,... of etcd: the primary is elected there and followers follow it "
          "(automatic failover; replaces --replicate_from); empty: no etcd");
ABSL_FLAG(std::string, cluster, "bloom",
          "with --etcd_endpoints: the cluster's key prefix in etcd (clusters can share one etcd)");
ABSL_FLAG(std::string, advertise_address, "",
          "with --etcd_endpoints: host:port at which the other pods and clients reach this "
          "one");
ABSL_FLAG(absl::Duration, leader_ttl, absl::Seconds(5),
          "with --etcd_endpoints: the TTL of the primary's lease in etcd; a primary that "
          "cannot renew it stops acknowledging writes before it can expire, and a new primary "
          "is elected after it expired");
ABSL_FLAG(std::string, etcd_ca_file, "",
          "with --etcd_endpoints: PEM CA that etcd's certificates chain to: TLS to etcd, "
          "verifying etcd (re-read every 5s, so a rotated file takes effect); empty: plaintext");
ABSL_FLAG(std::string, etcd_cert_file, "",
          "with --etcd_ca_file: PEM client certificate shown to an etcd run with "
          "--client-cert-auth (re-read every 5s); with --etcd_key_file");
ABSL_FLAG(std::string, etcd_key_file, "", "PEM private key of --etcd_cert_file");
ABSL_FLAG(std::string, etcd_username, "",
          "with --etcd_endpoints: a user of etcd's auth (etcdctl user add) whose role may read "
          "and write the keys under --cluster/ (and --shard_map); with --etcd_password_file");
ABSL_FLAG(std::string, etcd_password_file, "",
          "the file holding --etcd_username's password (read at start; surrounding whitespace "
          "is dropped)");
ABSL_FLAG(std::string, shard_map, "",
          "with --etcd_endpoints: the etcd key of the shard map of a deployment of several "
          "groups (each group a --cluster); this pod serves the filters whose slots its group "
          "owns and forwards calls for the others to their group. Empty: not sharded (this "
          "group holds every filter)");
ABSL_FLAG(std::vector<std::string>, shard_map_groups, {},
          "with --shard_map: if no map exists yet, create it with these groups (--cluster keys, "
          "this pod's among them) owning even ranges of --shard_map_slots; the pods of a new "
          "deployment racing to create it write one map (an etcd transaction), and a map that "
          "exists is left as it is. Empty: create none (bloom-cli cluster init does)");
ABSL_FLAG(uint32_t, shard_map_slots, slots::kDefaultSlotCount,
          "with --shard_map_groups: the slot count of the map it creates (1 to 16384), fixed "
          "for the deployment's life");
ABSL_FLAG(std::string, ack_log, "",
          "with --etcd_endpoints: append a line to this file for each term this pod leads and "
          "each new highest sequence it acknowledges in it, before answering (for failover "
          "checkers: tests/failover_chaos_test.cc); empty: none");

namespace server {
namespace {

absl::Status Invalid(absl::string_view message) { return absl::InvalidArgumentError(message); }
absl::Status Refused(absl::string_view message) { return absl::FailedPreconditionError(message); }

// Whether `flag` is one of the server's: defined in this file (the binary links others, e.g.
// Abseil's own --flagfile).
bool IsServerFlag(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), "server/server_flags.cc");
}

}  // namespace

bool NamesThisHost(absl::string_view primary, absl::string_view hostname) {
  if (hostname.empty()) return false;
  absl::string_view host = primary.substr(0, primary.rfind(':'));
  return host == hostname || (absl::StartsWith(host, hostname) && host.size() > hostname.size() &&
                              host[hostname.size()] == '.');
}

namespace {

// The flags of how this pod reaches etcd; their files are read by server/etcd_access.h.
absl::Status EtcdAccessFromFlags(ReplicationConfig& replication) {
  replication.etcd_ca_file = absl::GetFlag(FLAGS_etcd_ca_file);
  replication.etcd_cert_file = absl::GetFlag(FLAGS_etcd_cert_file);
  replication.etcd_key_file = absl::GetFlag(FLAGS_etcd_key_file);
  replication.etcd_username = absl::GetFlag(FLAGS_etcd_username);
  replication.etcd_password_file = absl::GetFlag(FLAGS_etcd_password_file);
  const bool any = !replication.etcd_ca_file.empty() || !replication.etcd_cert_file.empty() ||
                   !replication.etcd_key_file.empty() || !replication.etcd_username.empty() ||
                   !replication.etcd_password_file.empty();
  if (any && replication.etcd_endpoints.empty()) {
    return Invalid(
        "--etcd_ca_file, --etcd_cert_file, --etcd_key_file, --etcd_username and "
        "--etcd_password_file need --etcd_endpoints");
  }
  if (replication.etcd_cert_file.empty() != replication.etcd_key_file.empty()) {
    return Invalid("--etcd_cert_file and --etcd_key_file go together");
  }
  if (!replication.etcd_cert_file.empty() && replication.etcd_ca_file.empty()) {
    return Invalid(
        "--etcd_cert_file is a TLS client certificate: it needs --etcd_ca_file (TLS to etcd)");
  }
  if (replication.etcd_username.empty() != replication.etcd_password_file.empty()) {
    return Invalid("--etcd_username and --etcd_password_file go together");
  }
  return absl::OkStatus();
}

absl::Status ReplicationFromFlags(ServerConfig& config) {
  ReplicationConfig& replication = config.replication;
  replication.replicate_from = absl::GetFlag(FLAGS_replicate_from);
  replication.token_file = absl::GetFlag(FLAGS_replication_token_file);
  replication.ca_file = absl::GetFlag(FLAGS_replication_ca_file);
  replication.cert_file = absl::GetFlag(FLAGS_replication_cert_file);
  replication.key_file = absl::GetFlag(FLAGS_replication_key_file);
  if (replication.cert_file.empty() != replication.key_file.empty()) {
    return Invalid("--replication_cert_file and --replication_key_file go together");
  }
  if (!replication.cert_file.empty() && replication.ca_file.empty()) {
    return Invalid(
        "--replication_cert_file is a TLS client certificate: it needs --replication_ca_file "
        "(TLS to the primary)");
  }
  replication.name = absl::GetFlag(FLAGS_replica_name);
  replication.max_lag = absl::GetFlag(FLAGS_max_replica_lag);
  replication.allow_unauthenticated = absl::GetFlag(FLAGS_allow_unauthenticated_replication);
  replication.switchover_cooldown = absl::GetFlag(FLAGS_switchover_cooldown);
  if (replication.switchover_cooldown < absl::ZeroDuration()) {
    return Invalid("--switchover_cooldown must not be negative");
  }
  storage::StoreOptions& store = config.store;
  store.replica = !replication.replicate_from.empty();
  store.min_replica_acks = absl::GetFlag(FLAGS_min_replica_acks);
  store.replica_ack_timeout = absl::GetFlag(FLAGS_replica_ack_timeout);
  store.log_retention.ttl = absl::GetFlag(FLAGS_replication_log_retention);
  if (store.min_replica_acks < 0 || store.min_replica_acks > 16) {
    return Invalid("--min_replica_acks must be 0 to 16");
  }
  if (store.replica_ack_timeout <= absl::ZeroDuration() ||
      replication.max_lag <= absl::ZeroDuration() ||
      store.log_retention.ttl < absl::ZeroDuration()) {
    return Invalid(
        "--replica_ack_timeout and --max_replica_lag must be positive, "
        "--replication_log_retention not negative");
  }
  if (!ParseBytes(absl::GetFlag(FLAGS_replication_log_limit),
                  store.log_retention.size_limit_bytes)) {
    return Invalid("--replication_log_limit must be bytes, e.g. 1Gi");
  }
  if (store.replica && replication.replicate_from.find(':') == std::string::npos) {
    return Invalid("--replicate_from must be host:port of the primary");
  }
  replication.etcd_endpoints.clear();
  for (absl::string_view endpoint :
       absl::StrSplit(absl::GetFlag(FLAGS_etcd_endpoints), ',', absl::SkipWhitespace())) {
    replication.etcd_endpoints.emplace_back(absl::StripAsciiWhitespace(endpoint));
  }
  replication.cluster = absl::GetFlag(FLAGS_cluster);
  replication.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  replication.leader_ttl = absl::GetFlag(FLAGS_leader_ttl);
  replication.ack_log = absl::GetFlag(FLAGS_ack_log);
  if (absl::Status etcd = EtcdAccessFromFlags(replication); !etcd.ok()) return etcd;
  replication.shard_map = absl::GetFlag(FLAGS_shard_map);
  if (!replication.shard_map.empty()) {
    if (replication.etcd_endpoints.empty()) {
      return Invalid("--shard_map needs --etcd_endpoints: the shard map lives in etcd");
    }
    if (absl::Status group = sharding::ShardMap::CheckGroupName(replication.cluster); !group.ok()) {
      return Invalid(
          absl::StrCat("--cluster names this pod's group in --shard_map's map: ", group.message()));
    }
  }
  replication.shard_map_groups = absl::GetFlag(FLAGS_shard_map_groups);
  replication.shard_map_slots = absl::GetFlag(FLAGS_shard_map_slots);
  if (!replication.shard_map_groups.empty()) {
    if (replication.shard_map.empty()) {
      return Invalid("--shard_map_groups needs --shard_map: the key of the map it creates");
    }
    absl::StatusOr<sharding::ShardMap> first =
        sharding::ShardMap::EvenSplit(replication.shard_map_groups, replication.shard_map_slots);
    if (!first.ok()) {
      return Invalid(
          absl::StrCat("--shard_map_groups and --shard_map_slots: ", first.status().message()));
    }
    if (!first->HasGroup(replication.cluster)) {
      return Invalid(absl::StrCat("--shard_map_groups must name this pod's group, --cluster=",
                                  replication.cluster));
    }
  }
  if (!replication.ack_log.empty() && replication.etcd_endpoints.empty()) {
    return Invalid("--ack_log needs --etcd_endpoints: it logs acknowledgements by term");
  }
  if (!replication.etcd_endpoints.empty()) {
    if (store.replica) {
      return Invalid(
          "--etcd_endpoints and --replicate_from exclude each other: with etcd the "
          "primary is elected, and followers follow whoever it is");
    }
    for (const std::string& endpoint : replication.etcd_endpoints) {
      if (endpoint.find(':') == std::string::npos) {
        return Invalid(absl::StrCat("--etcd_endpoints: \"", endpoint, "\" is not host:port"));
      }
    }
    if (replication.advertise_address.find(':') == std::string::npos ||
        absl::StrContains(replication.advertise_address, " ")) {
      return Invalid(
          "--etcd_endpoints needs --advertise_address=host:port, where the other "
          "pods reach this one");
    }
    if (replication.cluster.empty() || absl::StrContains(replication.cluster, " ")) {
      return Invalid("--cluster must be a non-empty key prefix without spaces");
    }
    if (replication.leader_ttl < absl::Seconds(2) ||
        replication.leader_ttl != absl::Seconds(absl::ToInt64Seconds(replication.leader_ttl))) {
      return Invalid("--leader_ttl must be whole seconds, at least 2s");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> ServerFlagNames() {
  std::vector<std::string> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsServerFlag(*flag)) names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status ApplyFlagEnvironment() {
  for (const std::string& name : ServerFlagNames()) {
    const std::string variable = absl::StrCat("BLOOM_", absl::AsciiStrToUpper(name));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return Invalid(absl::StrCat("bad ", variable, "='", value, "': ", error));
    }
  }
  return absl::OkStatus();
}

bool ParseBytes(absl::string_view text, uint64_t& bytes) {
  struct Suffix {
    const char* text;
    uint64_t factor;
  };
  constexpr Suffix kSuffixes[] = {
      {"Ki", 1ULL << 10}, {"Mi", 1ULL << 20}, {"Gi", 1ULL << 30},     {"Ti", 1ULL << 40},
      {"K", 1000ULL},     {"M", 1000'000ULL}, {"G", 1000'000'000ULL}, {"T", 1000'000'000'000ULL}};
  uint64_t factor = 1;
  for (const Suffix& s : kSuffixes) {
    if (absl::EndsWith(text, s.text)) {
      factor = s.factor;
      text.remove_suffix(std::strlen(s.text));
      break;
    }
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || (value != 0 && factor > UINT64_MAX / value)) return false;
  bytes = value * factor;
  return true;
}

bool ParseMemoryLimit(absl::string_view text, const bloomsys::ContainerMemory& container,
                      uint64_t& bytes) {
  if (absl::ConsumeSuffix(&text, "%")) {
    double percent = 0;
    if (!absl::SimpleAtod(text, &percent) || !(percent > 0 && percent <= 100)) return false;
    bytes = static_cast<uint64_t>(static_cast<double>(container.bytes) * percent / 100);
    return true;
  }
  return ParseBytes(text, bytes);
}

absl::StatusOr<LogConfig> LogConfigFromFlags() {
  LogConfig log;
  if (!bloomlog::ParseLevel(absl::GetFlag(FLAGS_log_level), log.level)) {
    return Invalid("--log_level must be debug, info, warning or error");
  }
  log.json = absl::GetFlag(FLAGS_log_json);
  return log;
}

absl::StatusOr<ServerConfig> ConfigFromFlags(const bloomsys::ContainerMemory& container) {
  ServerConfig config;

  storage::StoreOptions& store = config.store;
  store.data_dir = absl::GetFlag(FLAGS_data_dir);
  store.sync = absl::GetFlag(FLAGS_sync);
  store.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  store.lazy_start = absl::GetFlag(FLAGS_lazy_start);
  if (!ParseBytes(absl::GetFlag(FLAGS_checkpoint_write_rate),
                  store.checkpoint_write_bytes_per_second)) {
    return Invalid("--checkpoint_write_rate must be bytes per second, e.g. 64Mi (0: unpaced)");
  }
  if (!ParseMemoryLimit(absl::GetFlag(FLAGS_memory_limit), container, store.memory_limit_bytes)) {
    return Invalid(
        "--memory_limit must be bytes (536870912, 512Mi) or a share of the container's memory "
        "(50%)");
  }

  service::ServerOptions& server = config.server;
  service::ServiceLimits& limits = server.limits;
  limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  limits.max_item_bytes = absl::GetFlag(FLAGS_max_item_bytes);
  limits.pipeline_window = absl::GetFlag(FLAGS_pipeline_window);
  limits.max_pipeline_operations = absl::GetFlag(FLAGS_max_pipeline_operations);
  limits.max_transfers = absl::GetFlag(FLAGS_max_transfers);
  limits.max_transfers_per_client = absl::GetFlag(FLAGS_max_transfers_per_client);
  limits.transfer_idle_timeout = absl::GetFlag(FLAGS_transfer_idle_timeout);
  if (limits.max_batch == 0 || limits.max_item_bytes == 0 || limits.pipeline_window == 0 ||
      limits.max_pipeline_operations == 0 || limits.max_transfers == 0 ||
      limits.max_transfers_per_client == 0 || limits.transfer_idle_timeout < absl::ZeroDuration()) {
    return Invalid(
        "--max_batch, --max_item_bytes, --pipeline_window, --max_pipeline_operations, "
        "--max_transfers and --max_transfers_per_client must be positive, "
        "--transfer_idle_timeout not negative");
  }
  if (!ParseBytes(absl::GetFlag(FLAGS_transfer_min_rate), limits.transfer_min_bytes_per_second)) {
    return Invalid("--transfer_min_rate must be bytes a second, e.g. 64Ki");
  }
  uint64_t max_message_bytes = 0;
  if (!ParseBytes(absl::GetFlag(FLAGS_max_message_bytes), max_message_bytes) ||
      max_message_bytes < 1024 || max_message_bytes > INT32_MAX) {
    return Invalid("--max_message_bytes must be 1Ki to 2Gi, e.g. 64Mi");
  }
  server.max_message_bytes = static_cast<int>(max_message_bytes);
  uint64_t transport_memory = 0;
  if (!ParseMemoryLimit(absl::GetFlag(FLAGS_transport_memory), container, transport_memory) ||
      transport_memory > INT64_MAX) {
    return Invalid(
        "--transport_memory must be bytes (268435456, 256Mi) or a share of the container's "
        "memory (10%)");
  }
  server.transport_memory_bytes = static_cast<int64_t>(transport_memory);
  server.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  server.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  server.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  if (server.max_concurrent_streams < 1 || server.max_connection_idle < absl::ZeroDuration() ||
      server.max_connection_age < absl::ZeroDuration()) {
    return Invalid(
        "--max_concurrent_streams must be positive, --max_connection_idle and "
        "--max_connection_age not negative");
  }
  server.item_call_threads = absl::GetFlag(FLAGS_item_call_threads);
  if (server.item_call_threads < 0 || server.item_call_threads > 64) {
    return Invalid("--item_call_threads must be 0 (off) to 64");
  }
  server.listen = absl::GetFlag(FLAGS_listen);
  server.health_listen = absl::GetFlag(FLAGS_health_listen);
  server.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);

  service::TlsOptions& tls = server.tls;
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  tls.reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  if (!tls.client_ca_file.empty() && !tls.enabled()) {
    return Refused("--tls_client_ca_file needs --tls_cert_file and --tls_key_file");
  }
  absl::StatusOr<service::OpenMethods> open_methods =
      service::ParseOpenMethods(absl::GetFlag(FLAGS_open_methods));
  if (!open_methods.ok()) {
    return Refused(absl::StrCat("--open_methods: ", open_methods.status().message()));
  }
  server.open_methods = *open_methods;
  RETURN_IF_ERROR(ReplicationFromFlags(config));
  config.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  config.port_file = absl::GetFlag(FLAGS_port_file);

  const std::string model = absl::GetFlag(FLAGS_server_model);
  if (model != "auto" && model != "callback" && model != "sync") {
    return Refused("--server_model must be auto, callback or sync (retired: served as callback)");
  }
  if (model == "sync") {
    config.warnings.emplace_back(
        "--server_model=sync is retired: serving with the callback model (with --sync, adds are "
        "answered after a shared fsync without holding a thread each); drop the flag");
  }
  if (absl::GetFlag(FLAGS_max_threads) != 0) {
    config.warnings.emplace_back(
        "--max_threads is retired with the sync server model and has no effect");
  }
  return config;
}

}  // namespace server
