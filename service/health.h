// grpc.health.v1 (Check and Watch), served so that a client cannot make the server buffer a big
// request: the service Kubernetes probes call without a token.
//
// gRPC's own health service registers Check as a unary method, and gRPC 1.51 reads a unary
// method's request whole before any code of ours runs, opening the stream's flow-control window
// for whatever length the message announces, so tokenless clients could make the server buffer
// without limit. This service registers both methods as streams, which gRPC
// does not read ahead (a unary client cannot tell: the wire is the same), and reads the one
// request itself:
//  - it must arrive within kReadTimeout of the call's start (a real request is a few bytes that
//    come with the call's headers), or the call is cancelled and what was buffered for it
//    freed. What all health calls hold at once is so bounded by what the transport can take in
//    within that time, whatever their requests announce;
//  - a request of more than kMaxRequestBytes is refused (INVALID_ARGUMENT).
//
//   HealthService health;
//   builder.RegisterService(&health);   // outlives the server, as any service
//   health.SetServing(true);  ...  health.SetServing(false);  // on shutdown
//
// Check answers SERVING or NOT_SERVING for "" (the whole server) and for
// bloom.v1.BloomFilterService, NOT_FOUND for any other name; Watch streams the status
// (SERVICE_UNKNOWN for other names), then each change, until the client cancels. Both send the
// server's version in the `bloom-server-version` header (`grpcurl -v` shows it), so an operator
// can tell which release a pod runs.
//
// Thread-safety: thread-safe.
#ifndef SERVICE_HEALTH_H_
#define SERVICE_HEALTH_H_

#include <grpcpp/impl/service_type.h>

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace service {

class HealthService final : public grpc::Service {
 public:
  static constexpr absl::Duration kReadTimeout = absl::Milliseconds(100);
  static constexpr size_t kMaxRequestBytes = 1024;  // a HealthCheckRequest is a service name
  static constexpr char kVersionHeader[] = "bloom-server-version";

  HealthService();
  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  void SetServing(bool serving);

  class Call;  // one Check or Watch (health.cc)

 private:
  friend class Call;
  bool serving() const;
  void AddWatcher(Call* call);
  void RemoveWatcher(Call* call);

  mutable bloomsync::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Call*> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace service

#endif  // SERVICE_HEALTH_H_
