#include "service/stream_proxy.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/optional.h"
#include "common/rpcs.h"
#include "grpcpp/generic/generic_stub.h"
#include "service/convert.h"

namespace service {
namespace {

using bloom::v1::ImportChunk;
using bloom::v1::ImportResponse;

// Copies the primary's response headers (e.g. bloom-pipeline-more) to the caller's.
void CopyHeaders(const grpc::ClientContext& from, grpc::CallbackServerContext* to) {
  for (const auto& [key, value] : from.GetServerInitialMetadata()) {
    to->AddInitialMetadata(std::string(key.data(), key.size()),
                           std::string(value.data(), value.size()));
  }
}

// The rules both proxies follow, so that neither side is used after it is done:
// - every Start* on either side happens under `mu` and only while that side may still take
//   one (the caller's until its Finish, the upstream's until its hold is released);
// - the upstream reactor holds itself (AddHold) until no more answers can come down: its
//   answers ended, or the caller went away while one was being written to it (no read is
//   pending upstream then; the hold must be released there, or the proxy would wait forever);
//   so its OnDone cannot run while the caller's side may still start an operation on it;
// - the proxy deletes itself when both sides' OnDone have run and no DrainAll holds it.
// `mu` is recursive: gRPC may run a reaction on the thread that started its operation.
struct ProxyState {
  std::recursive_mutex mu;
  bool caller_finished = false;    // Finish was called on the caller's side
  bool upstream_released = false;  // the hold is gone: no more operations upstream
  bool upstream_done = false;      // its OnDone ran (its context's call is gone)
  bool headers_sent = false;       // the caller's response headers went out
  int sides_done = 0;
  int pins = 1;           // the factory's, until the proxy is registered
  bool deleting = false;  // both sides done and no pins: no new pin
};

// A proxy's membership of its ProxiedStreams and its lifetime (ProxyState).
class ProxyBase : public ProxiedStreams::Stream {
 public:
  explicit ProxyBase(std::shared_ptr<ProxiedStreams> streams) : streams_(std::move(streams)) {}

  bool Pin() final {
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    if (state.deleting) return false;
    ++state.pins;
    return true;
  }
  void Unpin() final { Count(&state.pins, -1); }
  // One side's OnDone has run.
  void SideDone() { Count(&state.sides_done, +1); }
  // Registers the new proxy, drains it if the server already drains, and drops the factory's pin.
  void Register() {
    if (streams_->Add(this)) Drain();
    Unpin();
  }

  ProxyState state;

 private:
  // Moves `counter` (a pin or a side done) by `delta`; the proxy goes once both sides are done
  // and nothing pins it.
  void Count(int* counter, int delta) {
    bool last = false;
    {
      std::lock_guard<std::recursive_mutex> lock(state.mu);
      *counter += delta;
      if (state.sides_done == 2 && state.pins == 0 && !state.deleting) {
        state.deleting = true;
        last = true;
      }
    }
    if (last) DeleteSelf();
  }
  // Out of the registry first (after this no DrainAll can pin it), then gone.
  void DeleteSelf() {
    streams_->Remove(this);
    delete this;
  }

  const std::shared_ptr<ProxiedStreams> streams_;
};

// A stream refused before anything is read: it only finishes.
template <typename Reactor>
class Refused final : public Reactor {
 public:
  explicit Refused(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

class PipelineProxy final : public ProxyBase {
 public:
  PipelineProxy(Forwarder* forwarder, grpc::CallbackServerContext* context,
                std::unique_ptr<StreamConnections::Lease> place,
                std::shared_ptr<ProxiedStreams> streams)
      : ProxyBase(std::move(streams)),
        place(std::move(place)),
        caller(this, context),
        upstream(this, forwarder->ContextFor(context, /*stream=*/true)) {
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    // Bytes both ways: the follower neither parses nor serializes what it passes on.
    grpc::GenericStub(this->place->channel())
        .PrepareBidiStreamingCall(upstream.context.get(), rpcs::Info(rpcs::Rpc::kPipeline).path,
                                  grpc::StubOptions(), &upstream);
    upstream.AddHold();
    upstream.StartRead(&upstream.answer);
    upstream.StartCall();
    caller.StartRead(&caller.request);
  }

  // No more messages go up: the primary answers those that did, then the stream ends.
  void Drain() override {
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    if (draining_ || state.caller_finished || state.upstream_released) return;
    draining_ = true;
    HalfCloseLocked();
  }

  // The caller's stream: each request goes up, each answer comes down.
  struct Caller final : grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
    Caller(PipelineProxy* proxy, grpc::CallbackServerContext* context)
        : proxy(proxy), context(context) {}
    void OnReadDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.upstream_released) return;
      if (ok && !proxy->draining_) {
        proxy->write_up_pending_ = true;
        proxy->upstream.StartWrite(&request);
        return;
      }
      // The caller half-closed or went away, or the proxy drains (a message read now is
      // dropped: it never reached the primary): the upstream half-closes too.
      if (!ok) proxy->caller_half_closed_ = true;
      proxy->HalfCloseLocked();
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.upstream_released) return;
      if (ok) {
        proxy->upstream.StartRead(&proxy->upstream.answer);
        return;
      }
      // The caller is gone and takes no more answers; no read is pending upstream, so release
      // the hold here: the primary's stream ends, and its OnDone finishes this side.
      proxy->upstream.context->TryCancel();
      proxy->ReleaseUpstreamLocked();
    }
    void OnCancel() override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (!proxy->state.upstream_done) proxy->upstream.context->TryCancel();
    }
    void OnDone() override { proxy->SideDone(); }

    PipelineProxy* const proxy;
    grpc::CallbackServerContext* const context;
    grpc::ByteBuffer request;
  };

  // The stream to the primary.
  struct Upstream final : grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
    Upstream(PipelineProxy* proxy, std::unique_ptr<grpc::ClientContext> context)
        : proxy(proxy), context(std::move(context)) {}
    // The primary's headers, once, before the first answer: gRPC may deliver the first answer's
    // reaction before this one (on another thread).
    void SendHeaders(bool received) {
      if (proxy->state.headers_sent || proxy->state.caller_finished) return;
      proxy->state.headers_sent = true;
      if (received) CopyHeaders(*context, proxy->caller.context);
      proxy->caller.StartSendInitialMetadata();
    }
    void OnReadInitialMetadataDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      SendHeaders(ok);
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      proxy->write_up_pending_ = false;
      // Not ok: the primary ended the stream, and the pending read brings its end.
      if (!ok || proxy->state.caller_finished || proxy->state.upstream_released) return;
      if (proxy->draining_) {
        proxy->HalfCloseLocked();
      } else {
        proxy->caller.StartRead(&proxy->caller.request);
      }
    }
    void OnReadDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (ok && !proxy->state.caller_finished) {
        SendHeaders(/*received=*/true);  // an answer came: so did the headers
        proxy->caller.StartWrite(&answer);
        return;
      }
      // The primary ended the stream; OnDone gets its status once this hold is gone.
      proxy->ReleaseUpstreamLocked();
    }
    void OnDone(const grpc::Status& status) override {
      {
        std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
        proxy->state.upstream_done = true;
        if (!proxy->state.caller_finished) {
          proxy->state.caller_finished = true;
          // The primary's own status, message included; OK after a drain cut the stream short
          // means the caller's later operations were not made: it should go elsewhere.
          proxy->caller.Finish(proxy->draining_ && status.ok() && !proxy->caller_half_closed_
                                   ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                  "the server is shutting down; retry another "
                                                  "replica")
                                   : status);
        }
      }
      proxy->SideDone();
    }

    PipelineProxy* const proxy;
    std::unique_ptr<grpc::ClientContext> context;
    grpc::ByteBuffer answer;
  };

  // The stream's place on a connection to the primary: given back when the proxy is deleted.
  const std::unique_ptr<StreamConnections::Lease> place;
  Caller caller;
  Upstream upstream;

 private:
  // Half-closes the upstream once no caller's message is on its way up.
  void HalfCloseLocked() {
    if (writes_done_ || write_up_pending_ || state.upstream_released) return;
    writes_done_ = true;
    upstream.StartWritesDone();
  }
  void ReleaseUpstreamLocked() {
    if (state.upstream_released) return;
    state.upstream_released = true;
    upstream.RemoveHold();
  }

  // Guarded by state.mu.
  bool draining_ = false;            // Drain(): no more messages go up
  bool writes_done_ = false;         // the upstream is half-closed
  bool write_up_pending_ = false;    // a caller's message is on its way up
  bool caller_half_closed_ = false;  // the caller's messages ended (or it went away)
};

// An Import: chunks go up one at a time, and the primary's answer comes back. The follower
// guards it as the primary guards its own (TransferGuard: admission, and abandoning a stream
// that stops sending): the primary's own guard ends its side, but a client that stalls with a
// read pending here would otherwise hold its stream open until its deadline.
class ImportProxy final : public ProxyBase {
 public:
  ImportProxy(Forwarder* forwarder, grpc::CallbackServerContext* context, ImportResponse* response,
              std::unique_ptr<StreamConnections::Lease> place,
              std::shared_ptr<ProxiedStreams> streams)
      : ProxyBase(std::move(streams)),
        place(std::move(place)),
        caller(this, context),
        upstream(this, forwarder->ContextFor(context, /*stream=*/true)) {
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    bloom::v1::BloomFilterService::NewStub(this->place->channel())
        ->async()
        ->Import(upstream.context.get(), response, &upstream);
    upstream.AddHold();
    upstream.StartCall();
    caller.StartRead(&caller.chunk);
  }

  // Takes a transfer slot of `guard` for `client`, or ends the stream with the refusal.
  void Admit(TransferGuard* guard, const std::string& client) {
    absl::StatusOr<std::unique_ptr<TransferGuard::Ticket>> ticket =
        guard->Admit(TransferGuard::Kind::kImport, caller.context->peer(), client,
                     [this](const absl::Status& why) { Abandon(why); });
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    if (ticket.ok()) {
      ticket_ = *std::move(ticket);
    } else {
      EndLocked(ticket.status());
    }
  }

  // An upload runs to its end: cut short, it would be lost whole.
  void Drain() override {}

  struct Caller final : grpc::ServerReadReactor<ImportChunk> {
    Caller(ImportProxy* proxy, grpc::CallbackServerContext* context)
        : proxy(proxy), context(context) {}
    void OnReadDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.upstream_released) return;
      if (ok) {
        if (proxy->ticket_ != nullptr) {
          proxy->ticket_->Touch(chunk.name().size() + chunk.data().size());
        }
        proxy->write_up_pending_ = true;
        proxy->upstream.StartWrite(&chunk);
        return;
      }
      // The caller's chunks ended (or it went away): so do the upstream's; no more operations
      // upstream, and OnDone brings the primary's answer.
      proxy->upstream.StartWritesDone();
      proxy->ReleaseUpstreamLocked();
    }
    void OnCancel() override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (!proxy->state.upstream_done) proxy->upstream.context->TryCancel();
    }
    void OnDone() override {
      // The ticket goes first, outside the lock (its destructor waits for a running Abandon).
      std::unique_ptr<TransferGuard::Ticket> ticket;
      {
        std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
        ticket = std::move(proxy->ticket_);
      }
      ticket.reset();
      proxy->SideDone();
    }

    ImportProxy* const proxy;
    grpc::CallbackServerContext* const context;
    ImportChunk chunk;
  };

  struct Upstream final : grpc::ClientWriteReactor<ImportChunk> {
    Upstream(ImportProxy* proxy, std::unique_ptr<grpc::ClientContext> context)
        : proxy(proxy), context(std::move(context)) {}
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      proxy->write_up_pending_ = false;
      if (proxy->state.caller_finished) return;
      if (ok && !proxy->ended_.has_value()) {
        proxy->caller.StartRead(&proxy->caller.chunk);
      } else {
        // The primary ended the call, or this side did (EndLocked): no more chunks go up;
        // OnDone brings the status.
        proxy->ReleaseUpstreamLocked();
      }
    }
    void OnDone(const grpc::Status& status) override {
      {
        std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
        proxy->state.upstream_done = true;
        if (!proxy->state.caller_finished) {
          proxy->state.caller_finished = true;
          proxy->caller.Finish(proxy->ended_.has_value() ? ToGrpcStatus(*proxy->ended_) : status);
        }
      }
      proxy->SideDone();
    }

    ImportProxy* const proxy;
    std::unique_ptr<grpc::ClientContext> context;
  };

  const std::unique_ptr<StreamConnections::Lease> place;  // as PipelineProxy's
  Caller caller;
  Upstream upstream;

 private:
  // From the guard's watchdog, holding the guard's lock.
  void Abandon(const absl::Status& why) {
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    EndLocked(why);
  }
  // Ends the stream with `why`: the upstream is cancelled, and the caller is finished with `why`
  // once it is done, even while the caller's read waits for a chunk that does not come.
  void EndLocked(const absl::Status& why) {
    if (ended_.has_value() || state.caller_finished) return;
    ended_ = why;
    upstream.context->TryCancel();
    if (!write_up_pending_) ReleaseUpstreamLocked();  // else its OnWriteDone does
  }
  void ReleaseUpstreamLocked() {
    if (state.upstream_released) return;
    state.upstream_released = true;
    upstream.RemoveHold();
  }

  // Guarded by state.mu.
  bool write_up_pending_ = false;       // a chunk is on its way up
  absl::optional<absl::Status> ended_;  // EndLocked's reason
  // Last, so destroyed first: its destructor waits for an Abandon in progress, which touches
  // the members above.
  std::unique_ptr<TransferGuard::Ticket> ticket_;
};

}  // namespace

void ProxiedStreams::DrainAll() {
  std::vector<Stream*> pinned;
  {
    bloomsync::MutexLock lock(&mu_);
    draining_ = true;
    for (Stream* stream : live_) {
      if (stream->Pin()) pinned.push_back(stream);
    }
  }
  // Outside the lock: a drain starts gRPC operations, whose reactions may end other proxies.
  for (Stream* stream : pinned) {
    stream->Drain();
    stream->Unpin();
  }
}

bool ProxiedStreams::empty() const {
  bloomsync::ReaderMutexLock lock(&mu_);
  return live_.empty();
}

bool ProxiedStreams::Add(Stream* stream) {
  bloomsync::MutexLock lock(&mu_);
  live_.insert(stream);
  return draining_;
}

void ProxiedStreams::Remove(Stream* stream) {
  bloomsync::MutexLock lock(&mu_);
  live_.erase(stream);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ProxyPipeline(
    Forwarder* forwarder, grpc::CallbackServerContext* context,
    const absl::StatusOr<std::string>& client, std::shared_ptr<ProxiedStreams> streams) {
  absl::StatusOr<std::unique_ptr<StreamConnections::Lease>> place =
      client.ok() ? forwarder->streams().Acquire(*client) : client.status();
  if (!place.ok()) {
    return new Refused<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
        ToGrpcStatus(place.status()));
  }
  auto* proxy = new PipelineProxy(forwarder, context, *std::move(place), std::move(streams));
  // gRPC runs no reaction of the caller's side before it has this reactor, so the proxy cannot
  // end before it is returned.
  auto* reactor = &proxy->caller;
  proxy->Register();
  return reactor;
}

grpc::ServerReadReactor<ImportChunk>* ProxyImport(Forwarder* forwarder,
                                                  grpc::CallbackServerContext* context,
                                                  ImportResponse* response,
                                                  const absl::StatusOr<std::string>& client,
                                                  std::shared_ptr<ProxiedStreams> streams,
                                                  TransferGuard* transfers) {
  absl::StatusOr<std::unique_ptr<StreamConnections::Lease>> place =
      client.ok() ? forwarder->streams().Acquire(*client) : client.status();
  if (!place.ok()) {
    return new Refused<grpc::ServerReadReactor<ImportChunk>>(ToGrpcStatus(place.status()));
  }
  auto* proxy =
      new ImportProxy(forwarder, context, response, *std::move(place), std::move(streams));
  auto* reactor = &proxy->caller;
  proxy->Admit(transfers, *client);
  proxy->Register();
  return reactor;
}

}  // namespace service
