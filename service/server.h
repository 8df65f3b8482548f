// BloomServer: the gRPC server around a BloomService, with health checking (grpc.health.v1,
// SERVING while it serves; health.h) and server reflection (for grpcurl; reflection.h), over
// plaintext or TLS.
//
//   absl::StatusOr<std::unique_ptr<BloomServer>> server = BloomServer::Start(store, options);
//   ... (*server)->port() ...
//   (*server)->Shutdown();
//
// Thread-safety: not thread-safe; one owner starts and shuts it down.
#ifndef SERVICE_SERVER_H_
#define SERVICE_SERVER_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "service/bloom_service.h"
#include "service/callback_service.h"
#include "service/health.h"
#include "service/item_calls.h"
#include "service/reflection.h"
#include "service/tls.h"
#include "service/token_gate.h"
#include "storage/filter_store.h"

namespace service {

// The service runs on gRPC's callback API: unary calls are answered inline on gRPC's threads,
// streams cost no thread while they wait, and with --sync adds are answered from the WAL
// syncer's thread (storage/write/wal_sync.h). With item_call_threads, Add and MightContain run on
// its async API instead, on threads of their own (item_calls.h).
struct ServerOptions {
  // host:port; port 0 picks a free port (see BloomServer::port()).
  std::string listen = "127.0.0.1:50051";
  // Without cert/key files the server speaks plaintext.
  TlsOptions tls;
  // If set ("host:port"), a second, plaintext server that answers only grpc.health.v1: for
  // Kubernetes' gRPC probes, which speak neither TLS nor tokens. Port 0 picks one.
  std::string health_listen;
  ServiceLimits limits;
  ServiceHooks hooks;
  // With token auth (hooks.auth), the methods that need no token (token_gate.h).
  OpenMethods open_methods;
  // Transport guards: concurrent calls per connection and the largest request.
  int max_concurrent_streams = 64;
  int max_message_bytes = 16 << 20;
  // A connection with no call in flight for this long is closed; zero: never.
  absl::Duration max_connection_idle = absl::Minutes(5);
  // A connection is sent GOAWAY after this long (gRPC adds +-10%), so that clients balancing
  // over a DNS name resolve it again; what is in flight finishes on it. Zero: never.
  absl::Duration max_connection_age = absl::Minutes(10);
  // What gRPC may hold in buffers of received data across all connections (its ResourceQuota);
  // past it, it shrinks flow-control windows and cancels calls. 0: unbounded.
  int64_t transport_memory_bytes = 0;
  // How long Shutdown() lets in-flight calls finish before cancelling them.
  absl::Duration shutdown_grace = absl::Seconds(5);
  // Served on the main port beside bloom.v1 (a primary's replication service), with the same
  // TLS and token gate. They must outlive the server.
  std::vector<grpc::Service*> extra_services;
  // If positive, the threads (each with its completion queue) serving Add and MightContain on
  // gRPC's async API (item_calls.h; the process should use gRPC's poll strategy); 0: they are
  // callback calls like the rest.
  int item_call_threads = 0;
  // Whether grpc.health.v1 answers SERVING from the start (a follower starts NOT_SERVING and
  // reports its catch-up through SetServing).
  bool serving_at_start = true;
};

class BloomServer {
 public:
  // Serves `store` (which must outlive the server). UNAVAILABLE if the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<BloomServer>> Start(storage::FilterStore* store,
                                                            const ServerOptions& options);
  ~BloomServer();

  int port() const { return port_; }
  int health_port() const { return health_port_; }
  // Reports NOT_SERVING, stops accepting calls, and waits for in-flight ones (up to the grace
  // period, or `grace` if given, then cancels them).
  void Shutdown(absl::optional<absl::Duration> grace = absl::nullopt);
  // What grpc.health.v1 reports (on both ports) until Shutdown.
  void SetServing(bool serving);

 private:
  BloomServer(std::unique_ptr<BloomService> service, ServerOptions options)
      : service_(std::move(service)), options_(std::move(options)) {}

  std::unique_ptr<BloomService> service_;
  std::shared_ptr<TokenGate> gate_;  // with token auth; shared with gRPC's credentials, closed last
  // What gRPC serves: a CallbackItemService, or an AsyncItemService whose Add and MightContain
  // calls `item_calls_` serves (declared before the server, which must go first).
  std::unique_ptr<BloomCallbackService> callback_service_;
  std::unique_ptr<ItemCalls> item_calls_;
  // grpc.health.v1 on the main port and on the health port (health.h), and reflection on the
  // main port (reflection.h); declared before the servers, which must go first.
  HealthService health_;
  HealthService health_port_health_;
  ReflectionService reflection_{{"bloom.v1.BloomFilterService", "grpc.health.v1.Health"}};
  const ServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;
  int port_ = 0;
  int health_port_ = 0;
};

// Call at exit, after every gRPC object of the process is destroyed: waits (up to `timeout`)
// until gRPC's library has finished shutting down. gRPC 1.51 finishes that on a detached thread
// when its last reference goes on one of its own threads; a process that returned from main
// meanwhile would run exit handlers (and LeakSanitizer's check) beside a thread still tearing
// gRPC down. Returns whether gRPC finished in time.
bool WaitForGrpcLibraryShutdown(absl::Duration timeout);

}  // namespace service

#endif  // SERVICE_SERVER_H_
