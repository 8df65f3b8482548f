#include "server/incarnation.h"

#include <csignal>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/heap.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordination/sync_set_keeper.h"
#include "replication/replication_service.h"
#include "server/role_change.h"
#include "server/signals.h"
#include "server/startup.h"
#include "service/server.h"
#include "storage/filter_store.h"

namespace server {
namespace {

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

}  // namespace

int ServeUntilStopped(service::TokenAuthenticator* auth, const service::TlsOptions& tls,
                      replication::Follower* follower, const std::function<bool()>& role_changed) {
  int signal_number = 0;
  int ticks = 0;
  const bool poll = follower != nullptr || role_changed != nullptr;
  while (signal_number != SIGTERM && signal_number != SIGINT) {
    signal_number = WaitForSignal(poll ? absl::Milliseconds(200) : absl::Seconds(1));
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

std::string WithPort(const std::string& listen, int port) {
  const size_t colon = listen.rfind(':');
  return absl::StrCat(colon == std::string::npos ? listen : listen.substr(0, colon), ":", port);
}

absl::Status StartIncarnation(Node& node, const ServerConfig& config,
                              const absl::StatusOr<replication::FollowerOptions>& follower_options,
                              Failover* failover, ShardMember* shards,
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
  RETURN_IF_ERROR(StartNode(node, config, config.server, follower_options));
  if (shards != nullptr) {
    node.replication->SetShardMapHandler(
        [shards](const bloom::replication::v1::ChangeShardMapRequest& request) {
          return ChangeShardMap(*shards, request);
        });
  }
  if (failover != nullptr) {
    ConnectToCluster(node, *failover, config.replication.cluster,
                     /*primary=*/!config.store.replica, server_metrics);
  } else {
    server_metrics.SetReplicationSource([&node] { return node.Figures(); });
  }
  LogServing(config.server, *node.server);
  return absl::OkStatus();
}

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

}  // namespace server
