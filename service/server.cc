#include "service/server.h"

#include <grpc/grpc.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/rpcs.h"
#include "service/token_gate.h"

namespace service {

absl::StatusOr<std::unique_ptr<BloomServer>> BloomServer::Start(storage::FilterStore* store,
                                                                const ServerOptions& options) {
  // Our health service replaces gRPC's, which reads a request whole whatever its size
  // (health.h).
  grpc::EnableDefaultHealthCheckService(false);
  auto server = std::unique_ptr<BloomServer>(new BloomServer(
      std::make_unique<BloomService>(store, options.limits, options.hooks), options));

  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (options.tls.enabled()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tls =
        MakeTlsServerCredentials(options.tls);
    if (!tls.ok()) return tls.status();
    credentials = *tls;
  }
  if (options.hooks.auth != nullptr) {
    // Refuse token-less calls before their messages are read (token_gate.h).
    BloomService* service = server->service_.get();
    metrics::ServerMetrics* metrics = options.hooks.metrics;
    server->gate_ = std::make_shared<TokenGate>(
        options.hooks.auth,
        [service, metrics](const absl::Status& status, absl::string_view path) {
          const rpcs::RpcInfo* rpc = rpcs::FindByPath(path);
          if (rpc != nullptr && metrics != nullptr) {
            metrics->RecordRpc(rpc->rpc, status.code(), absl::ZeroDuration(), 0);
          }
          service->RecordAuthRefusal(status, path, "a peer (refused before its request)");
        },
        options.open_methods);
    credentials = GateCredentials(std::move(credentials), server->gate_);
  } else if (credentials == nullptr) {
    credentials = grpc::InsecureServerCredentials();
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, credentials, &server->port_);
  if (options.item_call_threads > 0) {
    auto service = std::make_unique<AsyncItemService>(server->service_.get());
    server->item_calls_ = std::make_unique<ItemCalls>(server->service_.get(), service.get(),
                                                      options.item_call_threads);
    server->item_calls_->AddQueues(builder);
    server->callback_service_ = std::move(service);
  } else {
    server->callback_service_ = std::make_unique<CallbackItemService>(server->service_.get());
  }
  builder.RegisterService(server->callback_service_.get());
  builder.RegisterService(&server->health_);
  builder.RegisterService(&server->reflection_);
  for (grpc::Service* extra : options.extra_services) builder.RegisterService(extra);
  // gRPC sets SO_REUSEPORT on Linux by default: a second server started on this port (another
  // pod's process on a shared host, a misconfigured instance) would bind it too and take half
  // the connections, silently. Refused instead: "address in use".
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // The pods' own channels to each other (a follower's to its primary, and its forwarder's)
  // send a keep-alive ping every 10 s, calls or not, to notice a peer gone quiet. gRPC's default
  // policy takes one each 5 minutes without calls, and closes a connection that pings more
  // ("too many pings"), failing the call forwarded on it next. Take one each 5 s.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (options.max_connection_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_IDLE_MS,
        static_cast<int>(
            std::min<int64_t>(absl::ToInt64Milliseconds(options.max_connection_idle), INT32_MAX)));
  }
  if (options.max_connection_age > absl::ZeroDuration()) {
    // gRPC's grace after the GOAWAY stays unbounded: Pipeline streams and followers' log
    // streams go on to their end on the old connection; new calls open a new one.
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        static_cast<int>(
            std::min<int64_t>(absl::ToInt64Milliseconds(options.max_connection_age), INT32_MAX)));
  }
  grpc::ResourceQuota quota("bloom-server");
  if (options.transport_memory_bytes > 0) {
    quota.Resize(static_cast<size_t>(options.transport_memory_bytes));
  }
  builder.SetResourceQuota(quota);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  if (server->item_calls_ != nullptr) server->item_calls_->Start();
  server->health_.SetServing(options.serving_at_start);

  if (!options.health_listen.empty()) {
    // A server with the health service only.
    grpc::ServerBuilder health;
    health.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    health.AddListeningPort(options.health_listen, grpc::InsecureServerCredentials(),
                            &server->health_port_);
    health.RegisterService(&server->health_port_health_);
    server->health_server_ = health.BuildAndStart();
    if (server->health_server_ == nullptr || server->health_port_ == 0) {
      server->health_server_.reset();
      server->Shutdown();
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.health_listen,
                                                 " for health checks (address in use?)"));
    }
    server->health_port_health_.SetServing(options.serving_at_start);
  }
  return server;
}

void BloomServer::SetServing(bool serving) {
  if (server_ == nullptr) return;
  health_.SetServing(serving);
  health_port_health_.SetServing(serving);
}

BloomServer::~BloomServer() {
  Shutdown();
  // gRPC may run the gate after this (token_gate.h): not with the service being destroyed.
  if (gate_ != nullptr) gate_->Close();
}

void BloomServer::Shutdown(absl::optional<absl::Duration> grace) {
  if (server_ == nullptr) return;
  health_.SetServing(false);
  health_port_health_.SetServing(false);
  // gRPC's own Shutdown(deadline) also waits for clients to close their connections after its
  // GOAWAY, which an idle client only reads on its next call: every shutdown would last the
  // whole grace period. So drain the calls ourselves, then close the connections at once.
  if (!service_->Drain(absl::Now() + grace.value_or(options_.shutdown_grace))) {
    bloomlog::LogWarning("calls still running after the shutdown grace period are cancelled");
  }
  // Calls forwarded to a primary, or to another group, end with their callers, not when that
  // pod answers.
  if (options_.hooks.forwarder != nullptr) options_.hooks.forwarder->CancelAll();
  if (options_.hooks.router != nullptr) options_.hooks.router->CancelInFlight();
  server_->Shutdown(std::chrono::system_clock::now());
  if (item_calls_ != nullptr) item_calls_->Shutdown();
  server_->Wait();
  server_.reset();
  if (health_server_ != nullptr) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
    health_server_.reset();
  }
}

bool WaitForGrpcLibraryShutdown(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (grpc_is_initialized() != 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace service
