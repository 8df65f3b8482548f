// bloom-server: persistent Bloom filters over gRPC.
//
// main() sets up logging from the flags (server/server_flags.h), checks the security
// settings, starts the metrics listener and, with etcd, joins the cluster. Then it runs the
// server's incarnations (server/node.h) one after another: each opens the store, serves in
// one role (standalone, primary, or follower) until a signal (server/signals.h: SIGHUP
// re-reads credentials, SIGTERM/SIGINT shut down) or a change of role, and stops in a fixed
// order.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/container_memory.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/open_files.h"
#include "common/status_macros.h"
#include "coordination/sync_set_keeper.h"
#include "google/protobuf/stubs/logging.h"
#include "metrics/metrics.h"
#include "replication/follower.h"
#include "replication/replication_service.h"
#include "server/ack_log.h"
#include "server/failover.h"
#include "server/node.h"
#include "server/role_change.h"
#include "server/server_flags.h"
#include "server/shard_member.h"
#include "server/signals.h"
#include "service/auth.h"
#include "service/server.h"
#include "service/tls.h"
#include "storage/filter_store.h"

// jemalloc's start-up options (read by jemalloc when it serves malloc, common/heap.h; unused
// otherwise): a background thread returns free pages after their decay time, so neither RSS
// nor a request's latency waits for the next allocation to do it.
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
const char* malloc_conf = "background_thread:true";
}

namespace {

// How long calls in flight may finish when the server is rebuilt in a new role.
constexpr absl::Duration kRoleChangeGrace = absl::Milliseconds(300);
// How long a sharded pod waits at start-up for a first shard map before it serves anyway
// (refusing calls for filters, UNAVAILABLE, until the map comes).
constexpr absl::Duration kFirstShardMapWait = absl::Seconds(5);

// Re-reads the token file (always on SIGHUP, else when it changed) and logs the outcome.
void ReloadCredentials(service::TokenAuthenticator* auth, const service::TlsOptions& tls,
                       bool sighup) {
  if (sighup && tls.enabled()) {
    // gRPC's file watcher loads certificate changes itself; say whether they are usable.
    absl::Status checked = service::CheckTlsFiles(tls);
    if (checked.ok()) {
      bloomlog::LogInfo(absl::StrCat("SIGHUP: TLS files are valid; they are in use within ",
                                     absl::FormatDuration(tls.reload_interval)));
    } else {
      bloomlog::LogError(absl::StrCat("SIGHUP: TLS files are not usable: ", checked.message()));
    }
  }
  if (auth == nullptr) return;
  absl::StatusOr<bool> reloaded = auth->Reload(/*force=*/sighup);
  if (!reloaded.ok()) {
    bloomlog::LogError(absl::StrCat("token file not reloaded, the previous tokens stay in force: ",
                                    reloaded.status().message()));
  } else if (*reloaded) {
    bloomlog::LogInfo(absl::StrCat("token file reloaded: ", auth->size(), " tokens"));
  }
}

// Whether "host:port" names a loopback host.
bool IsLoopback(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? listen : listen.substr(0, colon);
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

int Fail(absl::string_view message) {
  bloomlog::LogError(message);
  return 1;
}

// A usage error before logging is set up: on stderr, exit status 2.
int UsageError(absl::string_view message) {
  std::fprintf(stderr, "bloom-server: %.*s\n", static_cast<int>(message.size()), message.data());
  return 2;
}

// `status` (its code, its text) with what failed said first, for the line main() fails with.
absl::Status InContext(absl::string_view what_failed, const absl::Status& status) {
  return {status.code(), absl::StrCat(what_failed, status.ToString())};
}

// libprotobuf logs an ERROR line for every request whose string fields are not UTF-8, which the
// server serves anyway (protos/wire/items_as_bytes.h): a client could fill the log with them.
// Parse complaints are dropped; anything else goes to the server's log.
void RouteProtobufLogs() {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
        if (absl::StrContains(file, "wire_format_lite")) return;
        const std::string text = absl::StrCat("protobuf: ", message, " (", file, ":", line, ")");
        if (level >= google::protobuf::LOGLEVEL_ERROR) {
          bloomlog::LogError(text);
        } else {
          bloomlog::LogWarning(text);
        }
      });
}

void LogHostLimits(const bloomsys::ContainerMemory& container) {
  bloomlog::LogInfo(
      absl::StrCat("container memory: ", container.bytes, " bytes, from ", container.source));
  if (absl::StatusOr<bloomsys::OpenFileLimit> files = bloomsys::RaiseOpenFileLimit(); files.ok()) {
    bloomlog::LogInfo(absl::StrCat("open-file limit: ", files->now,
                                   files->now != files->before
                                       ? absl::StrCat(" (raised from ", files->before, ")")
                                       : std::string(" (the hard limit)")));
  } else {
    bloomlog::LogWarning(absl::StrCat("open-file limit not raised: ", files.status().message()));
  }
}

// The token file's authenticator, or null without one.
absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> LoadTokens(
    const std::string& token_file) {
  if (token_file.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> auth =
      service::TokenAuthenticator::Load(token_file);
  if (auth.ok() && (*auth)->size() == 0) {
    bloomlog::LogWarning(absl::StrCat("the token file ", token_file,
                                      " holds no tokens: every call but health is refused"));
  }
  return auth;
}

absl::StatusOr<std::unique_ptr<storage::FilterStore>> OpenStore(
    const storage::StoreOptions& options) {
  bloomlog::LogInfo(absl::StrCat("starting bloom-server: data_dir=", options.data_dir,
                                 " sync=", options.sync ? "true" : "false",
                                 " memory_limit=", options.memory_limit_bytes,
                                 " allocator=", bloomheap::AllocatorName()));
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = storage::FilterStore::Open(options);
  if (!store.ok()) return store;
  const storage::LoadReport& report = (*store)->load_report();
  bloomlog::LogInfo(absl::StrCat(
      "loaded ", report.filters, " filters (", report.pages, " pages, ", report.journal_records,
      " journal records, ", report.unreadable, " unreadable, ", report.not_loaded,
      " larger than the memory limit, ", report.cold, " cold (on disk until used), ",
      (*store)->memory_used(), " bytes) in ", absl::FormatDuration(report.elapsed)));
  return store;
}

void LogServing(const service::ServerOptions& options, const service::BloomServer& server) {
  const service::TlsOptions& tls = options.tls;
  const bool auth = options.hooks.auth != nullptr;
  bloomlog::LogInfo(absl::StrCat(
      "serving on ", options.listen, " (port ", server.port(), ", callback model, ",
      tls.enabled() ? (tls.client_ca_file.empty() ? "TLS" : "mutual TLS") : "plaintext",
      auth ? ", token auth" : ", no auth", ")"));
  if (!options.health_listen.empty()) {
    bloomlog::LogInfo(absl::StrCat("serving health checks on ", options.health_listen, " (port ",
                                   server.health_port(), ", plaintext)"));
  }
  if (IsLoopback(options.listen)) return;
  if (!tls.enabled()) {
    bloomlog::LogWarning(absl::StrCat("listening on the non-loopback address ", options.listen,
                                      " without TLS: traffic", auth ? " and tokens" : "",
                                      " can be read on the network; set --tls_cert_file and "
                                      "--tls_key_file"));
  }
  if (!auth) {
    bloomlog::LogWarning(absl::StrCat("listening on the non-loopback address ", options.listen,
                                      " without authentication: anyone who can reach it may "
                                      "read and write every filter; set --auth_token_file"));
  }
}

// Writes then renames, so a reader never sees a half-written file.
absl::Status WritePortFile(const std::string& port_file, int port, int metrics_port,
                           int health_port) {
  const std::string tmp = port_file + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (metrics_port != 0) out << "metrics " << metrics_port << "\n";
    if (health_port != 0) out << "health " << health_port << "\n";
  }
  if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot write --port_file ", port_file));
  }
  return absl::OkStatus();
}

// Serves until SIGTERM or SIGINT (re-reading credentials on SIGHUP and when they change);
// returns the signal. On a follower, also refreshes its health and returns 0 when it needs a
// new snapshot of its primary; with failover, returns 0 when `role_changed` says so.
int ServeUntilStopped(service::TokenAuthenticator* auth, const service::TlsOptions& tls,
                      replication::Follower* follower, const std::function<bool()>& role_changed) {
  int signal_number = 0;
  int ticks = 0;
  const bool poll = follower != nullptr || role_changed != nullptr;
  while (signal_number != SIGTERM && signal_number != SIGINT) {
    signal_number = server::WaitForSignal(poll ? absl::Milliseconds(200) : absl::Seconds(1));
    if (follower != nullptr) {
      follower->RefreshHealth();
      if (follower->needs_snapshot()) return 0;
    }
    if (role_changed != nullptr && role_changed()) return 0;
    // Credentials are looked at once a second.
    if (signal_number == SIGHUP || follower == nullptr || ++ticks % 5 == 0) {
      ReloadCredentials(auth, tls, signal_number == SIGHUP);
    }
  }
  return signal_number;
}

// `listen` ("host:port") with its port replaced.
std::string WithPort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  return absl::StrCat(colon == std::string::npos ? listen : listen.substr(0, colon), ":", port);
}

// Opens the store of a new incarnation and starts its servers; with failover, connects it to
// the cluster (a primary with a sync set records it before it takes writes).
absl::Status StartIncarnation(server::Node& node, const server::ServerConfig& config,
                              const absl::StatusOr<replication::FollowerOptions>& follower_options,
                              server::Failover* failover, server::ShardMember* shards,
                              metrics::ServerMetrics& server_metrics) {
  absl::StatusOr<std::unique_ptr<storage::FilterStore>> store = OpenStore(config.store);
  if (!store.ok()) {
    return InContext("cannot open the store: ", store.status());
  }
  node.store = *std::move(store);
  server_metrics.SetStore(node.store.get());
  if (failover != nullptr) {
    failover->SetStore(node.store.get());
    if (!config.store.replica && node.store->replica_acks() != nullptr) {
      // Before the server takes writes: nobody's acknowledgement counts until recorded.
      node.sync_set = std::make_unique<coordination::SyncSetKeeper>(
          failover->member(), node.store->replica_acks(), coordination::SyncSetKeeperOptions{});
    }
  }
  RETURN_IF_ERROR(server::StartNode(node, config, config.server, follower_options));
  if (shards != nullptr) {
    node.replication->SetShardMapHandler(
        [shards](const bloom::replication::v1::ChangeShardMapRequest& request) {
          return server::ChangeShardMap(*shards, request);
        });
  }
  if (failover != nullptr) {
    server::ConnectToCluster(node, *failover, config.replication.cluster,
                             /*primary=*/!config.store.replica, server_metrics);
  } else {
    server_metrics.SetReplicationSource([&node] { return node.Figures(); });
  }
  LogServing(config.server, *node.server);
  return absl::OkStatus();
}

// Why an incarnation ends: a signal, a follower's new snapshot, or a change of role.
void LogStopping(int signal_number, bool needs_snapshot) {
  if (signal_number != 0) {
    bloomlog::LogInfo(absl::StrCat("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
                                   ": shutting down"));
  } else if (needs_snapshot) {
    bloomlog::LogWarning(
        "follower: copying a snapshot of the primary again; this server is unavailable "
        "meanwhile");
  } else {
    bloomlog::LogWarning("the cluster's primary changed: this server restarts in its new role");
  }
}

// With --etcd_endpoints, joins the cluster holding what the data dir holds; null without.
absl::StatusOr<std::unique_ptr<server::Failover>> JoinCluster(const server::ServerConfig& config) {
  if (config.replication.etcd_endpoints.empty()) return nullptr;
  absl::StatusOr<uint64_t> held = server::HeldSequence(config.store);
  if (!held.ok()) {
    return InContext("cannot open the store: ", held.status());
  }
  absl::StatusOr<std::unique_ptr<server::Failover>> started = server::Failover::Start(
      config.replication, config.store.min_replica_acks, *held, server::WakeMainLoop);
  if (!started.ok()) {
    return InContext("etcd: ", started.status());
  }
  bloomlog::LogInfo(absl::StrCat("cluster ", config.replication.cluster, " in etcd at ",
                                 absl::StrJoin(config.replication.etcd_endpoints, ","),
                                 ": this pod is ", config.replication.advertise_address,
                                 ", holding sequence ", *held));
  return started;
}

// The certificates of --tls_cert_file, --tls_client_ca_file, --replication_cert_file,
// --replication_ca_file, --etcd_cert_file and --etcd_ca_file, read at each scrape for their expiry
// (a file that does not read is left out: the server's own checks say why).
std::function<metrics::ServerMetrics::CertificateExpiries()> CertificateSource(
    const server::ServerConfig& config) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"server", config.server.tls.cert_file},
      {"client_ca", config.server.tls.client_ca_file},
      {"replication_client", config.replication.cert_file},
      {"replication_ca", config.replication.ca_file},
      {"etcd_client", config.replication.etcd_cert_file},
      {"etcd_ca", config.replication.etcd_ca_file}};
  return [files] {
    metrics::ServerMetrics::CertificateExpiries expiries;
    for (const auto& [name, path] : files) {
      if (path.empty()) continue;
      if (absl::StatusOr<absl::Time> expires = service::CertificateExpiry(path); expires.ok()) {
        expiries.emplace_back(name, *expires);
      }
    }
    return expiries;
  };
}

// The ack log of --ack_log; null without.
absl::StatusOr<std::unique_ptr<server::AckLog>> OpenAckLog(
    const server::ReplicationConfig& config) {
  if (config.ack_log.empty()) return nullptr;
  return server::AckLog::Open(config.ack_log,
                              config.name.empty() ? config.advertise_address : config.name);
}

}  // namespace

int main(int argc, char** argv) {
  RouteProtobufLogs();
#ifdef NDEBUG
  // Debian's Abseil is built with mutex deadlock detection on, which keeps a lock graph on
  // every Lock (about 2% of a batched query's CPU). The unit tests keep it; release servers
  // do not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return std::string("bloom-server ") + BLOOM_VERSION + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Persistent Bloom filters over gRPC.\n"
      "Flags may also be set as BLOOM_<FLAG> environment variables, e.g. BLOOM_DATA_DIR.");
  if (absl::Status applied = server::ApplyFlagEnvironment(); !applied.ok()) {
    return UsageError(applied.message());
  }
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<server::LogConfig> log = server::LogConfigFromFlags();
  if (!log.ok()) {
    return UsageError(log.status().message());
  }
  bloomlog::SetLevel(log->level);
  bloomlog::SetJson(log->json);
  // Found once: the budget and the transport's share are both cut from it, and the log says
  // where it came from (a wrong container size is how a server gets OOM-killed in a loop).
  const bloomsys::ContainerMemory container = bloomsys::FindContainerMemory();
  absl::StatusOr<server::ServerConfig> config = server::ConfigFromFlags(container);
  if (absl::IsFailedPrecondition(config.status())) return Fail(config.status().message());
  if (!config.ok()) {
    return UsageError(config.status().message());
  }
  for (const std::string& warning : config->warnings) bloomlog::LogWarning(warning);
  if (config->server.item_call_threads > 0) {
    // Before gRPC starts: its "poll" strategy polls each connection from the thread of one
    // completion queue, so that Add and MightContain are read, served and answered on one
    // thread (service/item_calls.h). An operator's own GRPC_POLL_STRATEGY wins.
    setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
  }

  // Security settings are checked before the store opens, so a bad file fails fast.
  service::ServerOptions& server_options = config->server;
  if (server_options.tls.enabled()) {
    if (absl::Status checked = service::CheckTlsFiles(server_options.tls); !checked.ok()) {
      return Fail(absl::StrCat("TLS: ", checked.message()));
    }
  }
  absl::StatusOr<std::unique_ptr<service::TokenAuthenticator>> auth =
      LoadTokens(config->auth_token_file);
  if (!auth.ok()) return Fail(absl::StrCat("auth: ", auth.status().message()));
  if (!server::InstallSignalHandlers()) return Fail("cannot install signal handlers");
  LogHostLimits(container);

  std::unique_ptr<metrics::ServerMetrics> server_metrics = metrics::ServerMetrics::Create(nullptr);
  server_metrics->SetCertificateSource(CertificateSource(*config));
  if (!config->metrics_listen.empty()) {
    if (absl::Status serving = server_metrics->Serve(config->metrics_listen); !serving.ok()) {
      return Fail(serving.ToString());
    }
    bloomlog::LogInfo(absl::StrCat("serving metrics on http://", config->metrics_listen,
                                   "/metrics (port ", server_metrics->port(), ")"));
  }
  server_options.hooks.auth = auth->get();
  // Without a metrics listener nobody reads the figures: skip recording them per call.
  if (server_metrics->port() != 0) server_options.hooks.metrics = server_metrics.get();

  absl::StatusOr<replication::FollowerOptions> follower_options;
  if (char host[256] = {}; config->store.replica && gethostname(host, sizeof(host) - 1) == 0 &&
                           server::NamesThisHost(config->replication.replicate_from, host)) {
    bloomlog::LogInfo(absl::StrCat("--replicate_from=", config->replication.replicate_from,
                                   " names this host (", host, "): serving as the primary"));
    config->store.replica = false;
  }
  if (config->store.replica) {
    follower_options =
        server::FollowerOptionsFromConfig(config->replication, server_options.listen);
    if (!follower_options.ok()) {
      return Fail(absl::StrCat("replication: ", follower_options.status().message()));
    }
  }
  // With etcd, the primary is elected: each incarnation of the server plays the role the
  // pod's member was last told (server/failover.h).
  absl::StatusOr<std::unique_ptr<server::Failover>> joined = JoinCluster(*config);
  if (!joined.ok()) return Fail(joined.status().message());
  std::unique_ptr<server::Failover> failover = *std::move(joined);
  absl::StatusOr<std::unique_ptr<server::AckLog>> ack_log = OpenAckLog(config->replication);
  if (!ack_log.ok()) return Fail(ack_log.status().message());
  // With --shard_map, calls for filters of other groups go there (server/shard_member.h).
  absl::StatusOr<std::unique_ptr<server::ShardMember>> sharded =
      server::JoinShards(*config, kFirstShardMapWait);
  if (!sharded.ok()) return Fail(absl::StrCat("sharding: ", sharded.status().message()));
  std::unique_ptr<server::ShardMember> shards = *std::move(sharded);
  if (shards != nullptr) {
    server_options.hooks.router = shards->router.get();
    server_metrics->SetShardSource([router = shards->router.get()] { return router->Figures(); });
    if (server::AckLog* log = ack_log->get(); log != nullptr) {
      shards->router->ObserveSettled(
          [log, group = shards->router->view().own_group()](uint32_t slot, uint64_t version) {
            log->Settled(slot, version, group);
          });
    }
  }

  // A follower whose primary's log no longer reaches back to it copies a snapshot again: the
  // store, the server and the follower are then built anew, on the same port.
  bool copy_again = false;
  // The term of the primary whose log this pod's data continues (it led that term, or followed
  // it): writes past that primary's start sequence are its own, not writes it never had. 0:
  // not known.
  int64_t data_term = failover != nullptr ? server::ReadDataTerm(config->store.data_dir) : 0;
  bool port_file_written = false;
  int signal_number = 0;
  absl::Time stop_start;
  absl::Status closed;
  server::ServerConfig base = *config;
  while (true) {
    server::Node node;
    uint64_t role_version = 0;
    coordination::Role role;
    if (failover != nullptr) {
      role = failover->WaitForRole(
          [&signal_number] { return (signal_number = server::StopSignalArrived()) != 0; },
          &role_version);
      if (signal_number != 0) break;
      absl::StatusOr<server::ServerConfig> for_role = server::ConfigForRole(
          base, role, *failover, ack_log->get(), data_term, follower_options, copy_again);
      if (!for_role.ok()) return Fail(for_role.status().message());
      *config = *std::move(for_role);
      data_term = role.term;
      if (role.kind == coordination::Role::Kind::kPrimary &&
          !server::ServesAsElected(*failover, role, config->store.data_dir, role_version,
                                   signal_number)) {
        if (signal_number != 0) break;
        continue;
      }
      if (role.kind == coordination::Role::Kind::kPrimary && shards != nullptr &&
          !server::ShardViewCaughtUp(*failover, *shards, role, role_version, kFirstShardMapWait,
                                     signal_number)) {
        if (signal_number != 0) break;
        continue;
      }
    }
    if (config->store.replica) {
      // A copy wipes the data dir first: from then on elections must not count on what it held.
      if (failover != nullptr &&
          (copy_again || !replication::HoldsCompleteCopy(config->store.data_dir))) {
        failover->SetHeld(0);
      }
      // Until a stop signal, or a change of role: a pod elected (or told to follow another
      // primary) while it copies from one that is gone must not go on copying from it.
      absl::Status copied =
          replication::Bootstrap(*follower_options, config->store.data_dir, copy_again, [&] {
            if ((signal_number = server::StopSignalArrived()) != 0) return true;
            return failover != nullptr && failover->RoleChangedSince(role_version);
          });
      if (absl::IsCancelled(copied)) {
        if (signal_number != 0) break;
        bloomlog::LogWarning(
            "the cluster's primary changed while this pod copied a snapshot: it takes its new "
            "role");
        continue;
      }
      if (!copied.ok()) return Fail(absl::StrCat("replication: ", copied.ToString()));
    }
    if (absl::Status started = StartIncarnation(node, *config, follower_options, failover.get(),
                                                shards.get(), *server_metrics);
        !started.ok()) {
      return Fail(started.message());
    }
    if (!config->port_file.empty() && !port_file_written) {
      if (absl::Status written = WritePortFile(config->port_file, node.server->port(),
                                               server_metrics->port(), node.server->health_port());
          !written.ok()) {
        return Fail(written.message());
      }
      port_file_written = true;
    }
    if (failover != nullptr) server::WriteDataTerm(config->store.data_dir, data_term);
    // Rebuilt on the port it got (a port 0 in --listen was picked now).
    base.server.listen = WithPort(base.server.listen, node.server->port());
    config->server.listen = base.server.listen;

    std::function<bool()> role_changed;
    if (failover != nullptr) {
      role_changed = [&failover, &role_version] {
        return failover->RoleChangedSince(role_version);
      };
    }
    while (true) {
      signal_number =
          ServeUntilStopped(auth->get(), base.server.tls, node.follower.get(), role_changed);
      if (signal_number != 0 || failover == nullptr || node.follower == nullptr ||
          !server::RetargetInPlace(node, *failover, *follower_options, role_version, data_term)) {
        break;
      }
      server::WriteDataTerm(config->store.data_dir, data_term);
    }
    stop_start = absl::Now();
    if (signal_number != 0 && failover != nullptr &&
        role.kind == coordination::Role::Kind::kPrimary) {
      server::HandOverBeforeStopping(node, *failover);
    }
    const bool needs_snapshot = node.follower != nullptr && node.follower->needs_snapshot();
    LogStopping(signal_number, needs_snapshot);
    server_metrics->SetReplicationSource(nullptr);
    server_metrics->SetStore(nullptr);
    if (failover != nullptr) failover->SetStore(nullptr);
    // A change of role is urgent (a new primary must take writes, a demoted one must stop),
    // and the calls in flight are mostly forwarded to a primary that is gone: they get a
    // moment, not the whole grace period, and clients retry what was cut.
    closed = node.Stop(signal_number != 0 ? absl::nullopt : absl::make_optional(kRoleChangeGrace));
    if (signal_number != 0) break;
    copy_again = needs_snapshot;
  }
  if (failover != nullptr) {
    // A planned stop hands over at once rather than after the lease's TTL.
    if (absl::Status resigned = failover->Resign(); !resigned.ok()) {
      bloomlog::LogWarning(absl::StrCat("etcd: resigning: ", resigned.ToString()));
    }
    failover.reset();
  }
  server_metrics->SetShardSource(nullptr);
  shards.reset();  // its channels to other groups and its etcd watches
  // Tear down in a fixed order on this thread rather than in destructors at return: the gRPC
  // servers (draining calls, above), the metrics listener, the store (above), and gRPC's
  // library itself, so that no gRPC or civetweb thread still runs when exit handlers (and the
  // sanitizers' checks) do.
  server_metrics.reset();
  // Channel credentials are gRPC objects too: a follower's would hold the library open.
  if (follower_options.ok()) follower_options->credentials.reset();
  if (!service::WaitForGrpcLibraryShutdown(absl::Seconds(5))) {
    bloomlog::LogWarning("gRPC had not finished shutting down after 5s; exiting anyway");
  }
  if (!closed.ok()) return Fail(absl::StrCat("closing the store: ", closed.ToString()));
  bloomlog::LogInfo(
      absl::StrCat("shut down cleanly in ", absl::FormatDuration(absl::Now() - stop_start)));
  return 0;
}
