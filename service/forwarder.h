// Forwarder: how a follower hands calls to its primary. A write (and a read that asks for a
// sequence the follower has not applied in time) goes to the primary as the caller's own call:
// the same method and request bytes, the caller's token and deadline; the caller gets the
// primary's status and answer, sequence included.
//
//   Forwarder forwarder(connect, "pod-0:50051", [&](uint64_t s, absl::Time d, auto done) {
//     follower.WhenApplied(s, d, std::move(done)); });
//   forwarder.Unary(context, rpcs::Info(rpcs::Rpc::kAdd).path, request, response, done);
//
// Retarget() points it at another primary (failover through etcd): calls in flight finish with
// the old one, later calls go to the new one. Unary calls share one connection; proxied streams
// take places on connections of their own (stream_connections.h).
//
// Thread-safety: thread-safe.
#ifndef SERVICE_FORWARDER_H_
#define SERVICE_FORWARDER_H_

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "common/blocking_mutex.h"
#include "google/protobuf/message.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "service/stream_connections.h"

namespace service {

// A client context for a call forwarded on behalf of `caller` (its token, its shard hop mark
// unless `keep_hop` is false (the shard router sets its own), and its deadline; a unary call's
// at most a minute away). `caller` may be null (in-process).
std::unique_ptr<grpc::ClientContext> ForwardedCallContext(const grpc::ServerContextBase* caller,
                                                          bool stream = false,
                                                          bool keep_hop = true);
// A message as a forwarded call's bytes, and back (false if they do not parse).
grpc::ByteBuffer SerializeToBuffer(const google::protobuf::Message& message);
bool ParseFromBuffer(const grpc::ByteBuffer& buffer, google::protobuf::Message* message);

class Forwarder {
 public:
  using AppliedDone = absl::AnyInvocable<void(bool applied) &&>;
  // Calls done(true) once the follower has applied a sequence, or done(false) at a deadline
  // (replication::Follower::WhenApplied); holds no thread meanwhile.
  using WhenAppliedFn =
      std::function<void(uint64_t sequence, absl::Time deadline, AppliedDone done)>;

  // `connect` opens a channel to an address on a connection of its own.
  Forwarder(StreamConnections::Connect connect, std::string primary_address,
            WhenAppliedFn when_applied);

  std::string primary_address() const;
  void Retarget(std::string primary_address);

  // done(true) when a read asking for `min_sequence` may be answered here (at once, on this
  // thread, for 0 or a sequence already applied), after waiting for the follower to apply it
  // for at most half the time left before the call's deadline (and at most 1 s), so that a
  // forwarded read still has time; done(false): forward it. No thread waits meanwhile.
  void WhenApplied(uint64_t min_sequence, const grpc::ServerContextBase* caller, AppliedDone done);

  // Forwards one unary call: `done` gets the primary's status, and `response` its answer.
  // `request` and `response` must stay valid until `done`. `caller` may be null (in-process:
  // no token, no deadline).
  void Unary(const grpc::ServerContextBase* caller, const std::string& method,
             const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
             std::function<void(grpc::Status)> done);
  // As Unary, for a call whose messages are protobuf objects: `done` runs on a gRPC thread.
  void UnaryMessageAsync(const grpc::ServerContextBase* caller, const std::string& method,
                         const google::protobuf::Message& request,
                         google::protobuf::Message* response,
                         std::function<void(grpc::Status)> done);

  // ForwardedCallContext, for the streams it proxies.
  std::unique_ptr<grpc::ClientContext> ContextFor(const grpc::ServerContextBase* caller,
                                                  bool stream = false) const {
    return ForwardedCallContext(caller, stream);
  }
  std::shared_ptr<grpc::Channel> channel() const;
  // Where proxied streams (Pipeline, Import) get their connection.
  StreamConnections& streams() { return streams_; }
  // Cancels the unary calls forwarded and not yet answered (their callers get UNAVAILABLE, and
  // retry): a server shutting down after its grace period must not wait on a primary that
  // stopped answering. (Streams end with their callers: stream_proxy.cc.)
  void CancelAll();

 private:
  struct Target {
    explicit Target(std::shared_ptr<grpc::Channel> primary, std::string primary_address)
        : channel(std::move(primary)), address(std::move(primary_address)), stub(channel) {}
    std::shared_ptr<grpc::Channel> channel;
    std::string address;
    grpc::GenericStub stub;
  };
  std::shared_ptr<Target> target() const;

  const StreamConnections::Connect connect_;
  const WhenAppliedFn when_applied_;
  StreamConnections streams_;
  mutable bloomsync::BlockingMutex mu_;
  std::shared_ptr<Target> target_ ABSL_GUARDED_BY(mu_);  // each call keeps the one it started with
  // The unary calls not yet answered.
  std::set<std::shared_ptr<grpc::ClientContext>> in_flight_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // CancelAll ran
};

}  // namespace service

#endif  // SERVICE_FORWARDER_H_
