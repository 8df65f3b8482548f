#include "service/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace service {

absl::StatusOr<std::unique_ptr<BloomServer>> BloomServer::Start(storage::FilterStore* store,
                                                                const ServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  auto server = std::unique_ptr<BloomServer>(
      new BloomServer(std::make_unique<BloomService>(store, options.limits), options));

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &server->port_);
  if (options.model == ServerModel::kCallback) {
    server->callback_service_ = std::make_unique<BloomCallbackService>(server->service_.get());
    builder.RegisterService(server->callback_service_.get());
  } else {
    builder.RegisterService(server->service_.get());
  }
  // The largest request the limits allow: every item at its maximum size, plus framing.
  const double largest = static_cast<double>(options.limits.max_batch) *
                             (static_cast<double>(options.limits.max_item_bytes) + 16) +
                         (1 << 20);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<double>(largest, INT_MAX)));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  server->server_->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

BloomServer::~BloomServer() { Shutdown(); }

void BloomServer::Shutdown() {
  if (server_ == nullptr) return;
  server_->GetHealthCheckService()->SetServingStatus(false);
  // gRPC's own Shutdown(deadline) also waits for clients to close their connections after its
  // GOAWAY, which an idle client only reads on its next call: every shutdown would last the
  // whole grace period. So drain the calls ourselves, then close the connections at once.
  if (!service_->Drain(absl::Now() + options_.shutdown_grace)) {
    bloomlog::LogWarning("calls still running after the shutdown grace period are cancelled");
  }
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace service
