#include "service/forwarder.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace service {
namespace {

// The longest a forwarded call may take.
constexpr absl::Duration kForwardedCallBound = absl::Seconds(60);

}  // namespace

grpc::ByteBuffer SerializeToBuffer(const google::protobuf::Message& message) {
  std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return {&slice, 1};
}

bool ParseFromBuffer(const grpc::ByteBuffer& buffer, google::protobuf::Message* message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return message->ParseFromString(bytes);
}

Forwarder::Forwarder(StreamConnections::Connect connect, std::string primary_address,
                     WhenAppliedFn when_applied)
    : connect_(std::move(connect)),
      when_applied_(std::move(when_applied)),
      streams_(connect_, primary_address),
      target_(std::make_shared<Target>(connect_(primary_address), std::move(primary_address))) {}

void Forwarder::Retarget(std::string primary_address) {
  auto target = std::make_shared<Target>(connect_(primary_address), primary_address);
  streams_.Retarget(std::move(primary_address));
  bloomsync::BlockingLock lock(&mu_);
  target_ = std::move(target);
}

std::shared_ptr<Forwarder::Target> Forwarder::target() const {
  bloomsync::BlockingLock lock(&mu_);
  return target_;
}

std::string Forwarder::primary_address() const { return target()->address; }

void Forwarder::CancelAll() {
  std::vector<std::shared_ptr<grpc::ClientContext>> calls;
  {
    bloomsync::BlockingLock lock(&mu_);
    cancelled_ = true;
    calls.assign(in_flight_.begin(), in_flight_.end());
  }
  // Outside the lock: a cancelled call's completion takes it.
  for (const std::shared_ptr<grpc::ClientContext>& context : calls) context->TryCancel();
}

std::shared_ptr<grpc::Channel> Forwarder::channel() const { return target()->channel; }

void Forwarder::WhenApplied(uint64_t min_sequence, const grpc::ServerContextBase* caller,
                            AppliedDone done) {
  if (min_sequence == 0) {
    std::move(done)(true);
    return;
  }
  const absl::Time now = absl::Now();
  absl::Duration wait = absl::Seconds(1);
  if (caller != nullptr) {
    const absl::Time deadline = absl::FromChrono(caller->deadline());
    if (deadline < now + absl::Hours(24 * 365)) wait = std::min(wait, (deadline - now) / 2);
  }
  when_applied_(min_sequence, now + std::max(wait, absl::ZeroDuration()), std::move(done));
}

std::unique_ptr<grpc::ClientContext> ForwardedCallContext(const grpc::ServerContextBase* caller,
                                                          bool stream, bool keep_hop) {
  auto context = std::make_unique<grpc::ClientContext>();
  // A unary call without a deadline still gets a bound: a primary that stopped answering
  // (paused, or cut off) must not hold the call, or this follower's next change of role, for
  // ever. A stream (Pipeline) lives as long as its caller keeps it.
  auto deadline =
      caller != nullptr ? caller->deadline() : std::chrono::system_clock::time_point::max();
  if (!stream) {
    deadline = std::min(
        deadline, std::chrono::system_clock::now() + absl::ToChronoSeconds(kForwardedCallBound));
  }
  context->set_deadline(deadline);
  if (caller == nullptr) return context;
  const auto& metadata = caller->client_metadata();
  // The token, and the marks of a call another group's pod forwarded here and of a slot
  // mover's call (shard_router.h): a follower passing it on to its primary keeps what it is.
  for (const char* header : {"authorization", "bloom-shard-hop", "bloom-shard-move"}) {
    if (!keep_hop && std::string_view(header) == "bloom-shard-hop") continue;
    if (auto it = metadata.find(header); it != metadata.end()) {
      context->AddMetadata(header, std::string(it->second.data(), it->second.size()));
    }
  }
  return context;
}

void Forwarder::Unary(const grpc::ServerContextBase* caller, const std::string& method,
                      const grpc::ByteBuffer& request, grpc::ByteBuffer* response,
                      std::function<void(grpc::Status)> done) {
  // A call whose client ended its side before sending a message (a cancelled call, or a
  // hostile one) reaches its handler with no request: gRPC aborts the process on an attempt to
  // send that on.
  if (!request.Valid()) {
    done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request message"));
    return;
  }
  // The context lives until the call completes.
  std::shared_ptr<grpc::ClientContext> context = ContextFor(caller);
  std::shared_ptr<Target> target;
  {
    bloomsync::BlockingLock lock(&mu_);
    target = target_;
    in_flight_.insert(context);
  }
  grpc::GenericStub& stub = target->stub;
  stub.UnaryCall(context.get(), method, grpc::StubOptions(), &request, response,
                 [this, context, target, done = std::move(done)](grpc::Status status) {
                   bool cut = false;
                   {
                     bloomsync::BlockingLock lock(&mu_);
                     in_flight_.erase(context);
                     cut = cancelled_;
                   }
                   if (cut && status.error_code() == grpc::StatusCode::CANCELLED) {
                     // Cut by CancelAll, not by its caller: the caller should retry it.
                     status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                           "this pod stopped forwarding to the primary (it is "
                                           "changing role or shutting down): retry the call");
                   }
                   done(std::move(status));
                 });
}

void Forwarder::UnaryMessageAsync(const grpc::ServerContextBase* caller, const std::string& method,
                                  const google::protobuf::Message& request,
                                  google::protobuf::Message* response,
                                  std::function<void(grpc::Status)> done) {
  struct Call {
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };
  auto call = std::make_shared<Call>();
  call->request = SerializeToBuffer(request);
  Unary(caller, method, call->request, &call->response,
        [call, response, done = std::move(done)](grpc::Status status) {
          if (status.ok() && !ParseFromBuffer(call->response, response)) {
            status =
                grpc::Status(grpc::StatusCode::INTERNAL, "the primary's answer could not be read");
          }
          done(status);
        });
}

}  // namespace service
