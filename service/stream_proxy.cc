#include "service/stream_proxy.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>

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
// - the upstream reactor holds itself (AddHold) until its answers have ended, so its OnDone
//   cannot run while the caller's side may still start a write on it;
// - the proxy deletes itself when both sides' OnDone have run.
// `mu` is recursive: gRPC may run a reaction on the thread that started its operation.
struct ProxyState {
  std::recursive_mutex mu;
  bool caller_finished = false;    // Finish was called on the caller's side
  bool upstream_released = false;  // the hold is gone: no more operations upstream
  bool upstream_done = false;      // its OnDone ran (its context's call is gone)
  bool headers_sent = false;       // the caller's response headers went out
  int sides_done = 0;
};

template <typename Proxy>
void SideDone(Proxy* proxy) {
  bool last;
  {
    std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
    last = ++proxy->state.sides_done == 2;
  }
  if (last) delete proxy;
}

// A stream refused before anything is read: it only finishes.
template <typename Reactor>
class Refused final : public Reactor {
 public:
  explicit Refused(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

class PipelineProxy {
 public:
  PipelineProxy(Forwarder* forwarder, grpc::CallbackServerContext* context,
                std::unique_ptr<StreamConnections::Lease> place)
      : place(std::move(place)),
        caller(this, context),
        upstream(this, forwarder->ContextFor(context, /*stream=*/true)) {
    std::lock_guard<std::recursive_mutex> lock(state.mu);
    // Bytes both ways: the follower neither parses nor serializes what it passes on.
    grpc::GenericStub(this->place->channel())
        .PrepareBidiStreamingCall(upstream.context.get(), kPipelineMethod, grpc::StubOptions(),
                                  &upstream);
    upstream.AddHold();
    upstream.StartRead(&upstream.answer);
    upstream.StartCall();
    caller.StartRead(&caller.request);
  }

  // The caller's stream: each request goes up, each answer comes down.
  struct Caller final : grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
    Caller(PipelineProxy* proxy, grpc::CallbackServerContext* context)
        : proxy(proxy), context(context) {}
    void OnReadDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.upstream_released) return;
      if (ok) {
        proxy->upstream.StartWrite(&request);
      } else {  // the caller half-closed, or went away: so does the upstream
        proxy->upstream.StartWritesDone();
      }
    }
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.upstream_released) return;
      if (ok) {
        proxy->upstream.StartRead(&proxy->upstream.answer);
      } else {
        proxy->upstream.context->TryCancel();  // the caller is gone
      }
    }
    void OnCancel() override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (!proxy->state.upstream_done) proxy->upstream.context->TryCancel();
    }
    void OnDone() override { SideDone(proxy); }

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
      if (ok && !proxy->state.caller_finished) proxy->caller.StartRead(&proxy->caller.request);
    }
    void OnReadDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (ok) {
        SendHeaders(/*received=*/true);  // an answer came: so did the headers
        if (!proxy->state.caller_finished) proxy->caller.StartWrite(&answer);
        return;
      }
      // The primary ended the stream; OnDone gets its status once this hold is gone.
      proxy->state.upstream_released = true;
      RemoveHold();
    }
    void OnDone(const grpc::Status& status) override {
      {
        std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
        proxy->state.upstream_done = true;
        if (!proxy->state.caller_finished) {
          proxy->state.caller_finished = true;
          proxy->caller.Finish(status);  // the primary's own, message included
        }
      }
      SideDone(proxy);
    }

    PipelineProxy* const proxy;
    std::unique_ptr<grpc::ClientContext> context;
    grpc::ByteBuffer answer;
  };

  // The stream's place on a connection to the primary: given back when the proxy is deleted.
  const std::unique_ptr<StreamConnections::Lease> place;
  ProxyState state;
  Caller caller;
  Upstream upstream;
};

class ImportProxy {
 public:
  ImportProxy(Forwarder* forwarder, grpc::CallbackServerContext* context, ImportResponse* response,
              std::unique_ptr<StreamConnections::Lease> place)
      : place(std::move(place)),
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

  struct Caller final : grpc::ServerReadReactor<ImportChunk> {
    Caller(ImportProxy* proxy, grpc::CallbackServerContext* context)
        : proxy(proxy), context(context) {}
    void OnReadDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.upstream_released) return;
      if (ok) {
        proxy->upstream.StartWrite(&chunk);
        return;
      }
      // The caller's chunks ended (or it went away): so do the upstream's; no more operations
      // upstream, and OnDone brings the primary's answer.
      proxy->upstream.StartWritesDone();
      proxy->state.upstream_released = true;
      proxy->upstream.RemoveHold();
    }
    void OnCancel() override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (!proxy->state.upstream_done) proxy->upstream.context->TryCancel();
    }
    void OnDone() override { SideDone(proxy); }

    ImportProxy* const proxy;
    grpc::CallbackServerContext* const context;
    ImportChunk chunk;
  };

  struct Upstream final : grpc::ClientWriteReactor<ImportChunk> {
    Upstream(ImportProxy* proxy, std::unique_ptr<grpc::ClientContext> context)
        : proxy(proxy), context(std::move(context)) {}
    void OnWriteDone(bool ok) override {
      std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
      if (proxy->state.caller_finished) return;
      if (ok) {
        proxy->caller.StartRead(&proxy->caller.chunk);
      } else if (!proxy->state.upstream_released) {
        // The primary ended the call: no more chunks go up; OnDone brings its status.
        proxy->state.upstream_released = true;
        RemoveHold();
      }
    }
    void OnDone(const grpc::Status& status) override {
      {
        std::lock_guard<std::recursive_mutex> lock(proxy->state.mu);
        proxy->state.upstream_done = true;
        if (!proxy->state.caller_finished) {
          proxy->state.caller_finished = true;
          proxy->caller.Finish(status);
        }
      }
      SideDone(proxy);
    }

    ImportProxy* const proxy;
    std::unique_ptr<grpc::ClientContext> context;
  };

  const std::unique_ptr<StreamConnections::Lease> place;  // as PipelineProxy's
  ProxyState state;
  Caller caller;
  Upstream upstream;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ProxyPipeline(
    Forwarder* forwarder, grpc::CallbackServerContext* context,
    const absl::StatusOr<std::string>& client) {
  absl::StatusOr<std::unique_ptr<StreamConnections::Lease>> place =
      client.ok() ? forwarder->streams().Acquire(*client) : client.status();
  if (!place.ok()) {
    return new Refused<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
        ToGrpcStatus(place.status()));
  }
  return &(new PipelineProxy(forwarder, context, *std::move(place)))->caller;
}

grpc::ServerReadReactor<ImportChunk>* ProxyImport(Forwarder* forwarder,
                                                  grpc::CallbackServerContext* context,
                                                  ImportResponse* response,
                                                  const absl::StatusOr<std::string>& client) {
  absl::StatusOr<std::unique_ptr<StreamConnections::Lease>> place =
      client.ok() ? forwarder->streams().Acquire(*client) : client.status();
  if (!place.ok()) {
    return new Refused<grpc::ServerReadReactor<ImportChunk>>(ToGrpcStatus(place.status()));
  }
  return &(new ImportProxy(forwarder, context, response, *std::move(place)))->caller;
}

}  // namespace service
