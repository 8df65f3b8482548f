// A follower's Pipeline and Import streams, proxied to the primary whole: every message goes
// up as it arrives, every answer comes back, and the stream ends with the primary's status.
// A Pipeline stream carries adds, which only the primary takes; proxying the whole stream keeps
// its promise that a check after an add of the same item sees it.
//
// One message in flight in each direction at a time, so a slow side slows the other, as a
// direct stream would; the caller's token and deadline go with it (Forwarder::ContextFor).
//
// Draining (ProxiedStreams::DrainAll, when the follower shuts down): a Pipeline stream stops
// reading from its caller and half-closes to the primary, which answers everything that went
// up; those answers come down, and the stream then ends UNAVAILABLE ("retry another replica"),
// as the primary's own streams do. An operation read after that was never sent up, so a client
// retries it safely. An Import stream runs to its end.
//
// Thread-safety: the reactors are gRPC's; each proxy deletes itself when both of its calls are
// done (and no DrainAll holds it). ProxiedStreams is thread-safe.
#ifndef SERVICE_STREAM_PROXY_H_
#define SERVICE_STREAM_PROXY_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "common/mutex.h"
#include "service/forwarder.h"
#include "service/transfer_guard.h"

namespace service {

// The streams a follower proxies, so that shutting down can drain them and wait for them.
class ProxiedStreams {
 public:
  // What a proxy gives the registry (stream_proxy.cc).
  class Stream {
   public:
    virtual ~Stream() = default;
    // Keeps the proxy from deleting itself until Unpin(); false when it already is.
    virtual bool Pin() = 0;
    virtual void Unpin() = 0;
    virtual void Drain() = 0;
  };

  ProxiedStreams() = default;
  ProxiedStreams(const ProxiedStreams&) = delete;
  ProxiedStreams& operator=(const ProxiedStreams&) = delete;

  // Drains every stream open now, and every one added later.
  void DrainAll();
  bool empty() const;

  // For the proxies: whether to drain at once (DrainAll ran).
  bool Add(Stream* stream);
  void Remove(Stream* stream);

 private:
  mutable bloomsync::Mutex mu_;
  absl::flat_hash_set<Stream*> live_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

// `client` is the admitted caller's ClientKey (auth.h), or why the follower refused the stream
// (it then finishes with that at once). Each stream takes a place on a connection to the
// primary (Forwarder::streams(), counted for `client`); with none to be had it finishes
// RESOURCE_EXHAUSTED at once. Each proxy is in `streams` while it runs (and keeps it alive: a
// proxy may end after the server that made it).
// The Pipeline stream's messages pass as bytes, unparsed (the primary reads them).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ProxyPipeline(
    Forwarder* forwarder, grpc::CallbackServerContext* context,
    const absl::StatusOr<std::string>& client, std::shared_ptr<ProxiedStreams> streams);

// An Import also takes a slot of `transfers` (the follower's), which ends it ABORTED if it
// stops sending (--transfer_idle_timeout, --transfer_min_rate), as the primary's own imports.
grpc::ServerReadReactor<bloom::v1::ImportChunk>* ProxyImport(
    Forwarder* forwarder, grpc::CallbackServerContext* context, bloom::v1::ImportResponse* response,
    const absl::StatusOr<std::string>& client, std::shared_ptr<ProxiedStreams> streams,
    TransferGuard* transfers);

}  // namespace service

#endif  // SERVICE_STREAM_PROXY_H_
