// bloom-server: persistent Bloom filters over gRPC.
//
// main() sets up logging from the flags (server/server_flags.h), checks the security
// settings, starts the metrics listener and, with etcd, joins the cluster (server/startup.h).
// Then it runs the server's incarnations (server/incarnation.h, server/node.h) one after
// another: each opens the store, serves in one role (standalone, primary, or follower; with
// etcd, the role elected, server/role_change.h) until a signal (server/signals.h: SIGHUP
// re-reads credentials, SIGTERM/SIGINT shut down) or a change of role, and stops in a fixed
// order.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/container_memory.h"
#include "common/log.h"
#include "metrics/metrics.h"
#include "replication/follower.h"
#include "server/ack_log.h"
#include "server/failover.h"
#include "server/incarnation.h"
#include "server/node.h"
#include "server/role_change.h"
#include "server/server_flags.h"
#include "server/shard_member.h"
#include "server/signals.h"
#include "server/startup.h"
#include "service/auth.h"
#include "service/server.h"
#include "service/tls.h"

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

int Fail(absl::string_view message) {
  bloomlog::LogError(message);
  return 1;
}

// A usage error before logging is set up: on stderr, exit status 2.
int UsageError(absl::string_view message) {
  std::fprintf(stderr, "bloom-server: %.*s\n", static_cast<int>(message.size()), message.data());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  server::RouteProtobufLogs();
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
      server::LoadTokens(config->auth_token_file);
  if (!auth.ok()) return Fail(absl::StrCat("auth: ", auth.status().message()));
  if (!server::InstallSignalHandlers()) return Fail("cannot install signal handlers");
  server::LogHostLimits(container);

  std::unique_ptr<metrics::ServerMetrics> server_metrics = metrics::ServerMetrics::Create(nullptr);
  server_metrics->SetCertificateSource(server::CertificateSource(*config));
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
  absl::StatusOr<std::unique_ptr<server::Failover>> joined = server::JoinCluster(*config);
  if (!joined.ok()) return Fail(joined.status().message());
  std::unique_ptr<server::Failover> failover = *std::move(joined);
  absl::StatusOr<std::unique_ptr<server::AckLog>> ack_log = server::OpenAckLog(config->replication);
  if (!ack_log.ok()) return Fail(ack_log.status().message());
  // With --shard_map, calls for filters of other groups go there (server/shard_member.h).
  absl::StatusOr<std::unique_ptr<server::ShardMember>> sharded = server::JoinShards(
      *config, kFirstShardMapWait, failover != nullptr ? failover->etcd() : nullptr);
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
    if (absl::Status started = server::StartIncarnation(
            node, *config, follower_options, failover.get(), shards.get(), *server_metrics);
        !started.ok()) {
      return Fail(started.message());
    }
    if (!config->port_file.empty() && !port_file_written) {
      if (absl::Status written =
              server::WritePortFile(config->port_file, node.server->port(), server_metrics->port(),
                                    node.server->health_port());
          !written.ok()) {
        return Fail(written.message());
      }
      port_file_written = true;
    }
    if (failover != nullptr) server::WriteDataTerm(config->store.data_dir, data_term);
    // Rebuilt on the port it got (a port 0 in --listen was picked now).
    base.server.listen = server::WithPort(base.server.listen, node.server->port());
    config->server.listen = base.server.listen;

    std::function<bool()> role_changed;
    if (failover != nullptr) {
      role_changed = [&failover, &role_version] {
        return failover->RoleChangedSince(role_version);
      };
    }
    while (true) {
      signal_number = server::ServeUntilStopped(auth->get(), base.server.tls, node.follower.get(),
                                                role_changed);
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
    server::LogStopping(signal_number, needs_snapshot);
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
