// Add and MightContain (item_calls.h): on gRPC's callback API (CallbackItemService), or on its
// async API (ItemCalls: one completion queue and one thread per queue).
#include "service/item_calls.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/rpcs.h"
#include "service/direct_parse.h"
#include "service/forwarder.h"
#include "service/shard_router.h"

namespace service {
namespace {

// Calls of each method each queue keeps asked for. A call that arrives with none waiting waits
// in gRPC until one is; this many keep that rare.
constexpr int kCallsWaiting = 16;
// How long Shutdown waits for the adds still being written before it gives up on them.
constexpr absl::Duration kAnswerGrace = absl::Seconds(10);

// Reads a direct-parse request (direct_parse.h) with `parse` into `view`, which points into
// `bytes`; prepares `encoded` for the answers and points `answers` at them.
template <typename Parse>
grpc::Status ReadDirect(const grpc::ByteBuffer& request, const char* message, Parse parse,
                        grpc::Slice& bytes, ItemsRequestView& view, grpc::Slice& encoded,
                        bool*& answers) {
  // One slice: a copy only when gRPC received the message in pieces.
  if (!request.TrySingleSlice(&bytes).ok() && !request.DumpToSingleSlice(&bytes).ok()) {
    return {grpc::StatusCode::INTERNAL, "could not read the request"};
  }
  if (!parse(absl::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()),
             &view)) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("the request is not a well-formed ", message)};
  }
  // A fresh slice is ours to fill (as gRPC's own serializer does).
  encoded = grpc::Slice(PackedBoolsSize(view.items.size()));
  answers = WritePackedBoolsHeader(view.items.size(),
                                   reinterpret_cast<char*>(const_cast<uint8_t*>(encoded.begin())));
  return grpc::Status::OK;
}

void SetResponse(grpc::Slice& encoded, grpc::ByteBuffer& response) {
  grpc::ByteBuffer filled(&encoded, 1);
  response.Swap(&filled);
}

// An AddResponse: the answers, then the sequence of the write (field 2).
void SetAddResponse(grpc::Slice& encoded, uint64_t sequence, grpc::ByteBuffer& response) {
  const std::string field = EncodeSequenceField(sequence);
  grpc::Slice slices[2] = {encoded, grpc::Slice(field)};
  grpc::ByteBuffer filled(slices, field.empty() ? 1 : 2);
  response.Swap(&filled);
}

// A callback call forwarded to the primary: `reactor` (the call's) finishes with the primary's
// status and answer.
grpc::ServerUnaryReactor* ForwardBytes(Forwarder* forwarder, grpc::CallbackServerContext* context,
                                       const char* method, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response,
                                       grpc::ServerUnaryReactor* reactor) {
  forwarder->Unary(context, method, *request, response,
                   [reactor](const grpc::Status& status) { reactor->Finish(status); });
  return reactor;
}

// In a sharded deployment, a call for a filter of another group: forwarded there, or refused
// (shard_router.h); `done` gets its answer. False: this pod's group owns it.
bool RoutedElsewhere(BloomService* core, rpcs::Rpc rpc, const ItemsRequestView& view,
                     grpc::ServerContextBase* context, const grpc::ByteBuffer& request,
                     grpc::ByteBuffer* response, std::function<void(grpc::Status)> done) {
  ShardRouter* router = core->hooks().router;
  if (router == nullptr) return false;
  const rpcs::RpcInfo& info = rpcs::Info(rpc);
  const absl::string_view names[] = {view.name};
  const ShardRouter::Decision route =
      router->Decide(info, names, context, /*fresh_read=*/view.min_sequence != 0);
  if (route.here) return false;
  if (!route.refusal.ok()) {
    done(route.refusal);
  } else {
    router->Forward(context, route, info.path, request, response, std::move(done));
  }
  return true;
}

// A callback call's request and answers, on the heap while the call may be served on another
// thread after its handler returned.
struct CallBuffers {
  grpc::Slice bytes;  // the request; `view` points into it
  // The response; `answers` points into it. On the heap: a small slice keeps its bytes inline,
  // and a moved one would leave them behind.
  grpc::Slice encoded;
  ItemsRequestView view;
  bool* answers = nullptr;
};

// A follower's callback MightContain asking for a sequence (read your writes): answered once the
// follower has applied it, by the thread that sees it applied, or by the primary if it does not
// come in time. No thread waits meanwhile (Forwarder::WhenApplied), so calls asking for
// sequences that never come cannot tie up the gRPC threads.
// `reactor` is the call's (gRPC allows taking it once).
grpc::ServerUnaryReactor* MightContainAtSequence(BloomService* core,
                                                 grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response,
                                                 grpc::ServerUnaryReactor* reactor) {
  // Read again into buffers of its own (the caller's are on its stack).
  auto buffers = std::make_unique<CallBuffers>();
  const grpc::Status read =
      ReadDirect(*request, "bloom.v1.MightContainRequest", ParseMightContainRequest, buffers->bytes,
                 buffers->view, buffers->encoded, buffers->answers);
  if (!read.ok()) {
    reactor->Finish(read);
    return reactor;
  }
  const uint64_t min_sequence = buffers->view.min_sequence;
  core->WhenApplied(
      min_sequence, context,
      [core, context, reactor, request, response, buffers = std::move(buffers)](bool applied) {
        if (!applied) {
          ForwardBytes(core->hooks().forwarder, context, rpcs::Info(rpcs::Rpc::kMightContain).path,
                       request, response, reactor);
          return;
        }
        const grpc::Status status =
            core->HandleMightContainItems(buffers->view, buffers->answers, context);
        if (status.ok()) SetResponse(buffers->encoded, *response);
        reactor->Finish(status);
      });
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* CallbackItemService::Add(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request,
                                                   grpc::ByteBuffer* response) {
  // Served through the store's group committer: the adds of calls arriving together share one
  // RocksDB write (with --sync, one fsync, answered from the WAL syncer's thread), and no gRPC
  // thread waits for another's. The call's buffers live on the heap until it finishes: it may
  // be served on another thread after this returns.
  // A follower forwards it to its primary unread, unless it must read the filter's name first to
  // route it by shard.
  Forwarder* forwarder = core_->hooks().forwarder;
  if (forwarder != nullptr && core_->hooks().router == nullptr) {
    return ForwardBytes(forwarder, context, rpcs::Info(rpcs::Rpc::kAdd).path, request, response,
                        context->DefaultReactor());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto buffers = std::make_unique<CallBuffers>();
  const grpc::Status read =
      ReadDirect(*request, "bloom.v1.AddRequest", ParseAddRequest, buffers->bytes, buffers->view,
                 buffers->encoded, buffers->answers);
  if (!read.ok()) {
    reactor->Finish(read);
    return reactor;
  }
  if (RoutedElsewhere(core_, rpcs::Rpc::kAdd, buffers->view, context, *request, response,
                      [reactor](const grpc::Status& status) { reactor->Finish(status); })) {
    return reactor;
  }
  if (forwarder != nullptr) {
    return ForwardBytes(forwarder, context, rpcs::Info(rpcs::Rpc::kAdd).path, request, response,
                        reactor);
  }
  CallBuffers& call = *buffers;
  core_->HandleAddItemsGrouped(call.view, call.answers, context,
                               [reactor, response, store = core_->store(),
                                buffers = std::move(buffers)](const grpc::Status& status) {
                                 if (status.ok()) {
                                   SetAddResponse(buffers->encoded, store->LatestSequence(),
                                                  *response);
                                 }
                                 reactor->Finish(status);
                               });
  return reactor;
}

grpc::ServerUnaryReactor* CallbackItemService::MightContain(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  grpc::Slice bytes;
  grpc::Slice encoded;
  ItemsRequestView view;
  bool* answers = nullptr;
  grpc::Status status = ReadDirect(*request, "bloom.v1.MightContainRequest",
                                   ParseMightContainRequest, bytes, view, encoded, answers);
  // Taken once: gRPC's default reactor may be asked for only once per call.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (status.ok() && core_->hooks().router != nullptr &&
      RoutedElsewhere(core_, rpcs::Rpc::kMightContain, view, context, *request, response,
                      [reactor](const grpc::Status& routed) { reactor->Finish(routed); })) {
    return reactor;
  }
  if (status.ok() && view.min_sequence != 0 && core_->hooks().forwarder != nullptr) {
    return MightContainAtSequence(core_, context, request, response, reactor);
  }
  if (status.ok()) status = core_->HandleMightContainItems(view, answers, context);
  if (status.ok()) SetResponse(encoded, *response);
  reactor->Finish(status);
  return reactor;
}

// One call: asked for on a queue, read, served, answered. Its address is its tag for both of its
// queue events (the call's arrival, then its answer sent), so it lives on the heap until the
// second. Not moved: `view` and `answers` point into its slices.
class ItemCalls::Call {
 public:
  Call(ItemCalls* owner, Queue* queue, Method method)
      : owner_(owner), queue_(queue), method_(method) {
    grpc::ServerCompletionQueue* completion = queue->completion.get();
    if (method == Method::kAdd) {
      owner->service_->RequestAdd(&context_, &request_, &responder_, completion, completion, this);
    } else {
      owner->service_->RequestMightContain(&context_, &request_, &responder_, completion,
                                           completion, this);
    }
  }

  // On the queue's thread, for each of the call's events.
  void Proceed(bool ok) {
    {
      // Under the lock Answer() holds (perhaps on another thread): what it wrote is seen here.
      bloomsync::MutexLock lock(&queue_->mu);
      // Its answer went out, no call came (the server shut down), or the queue is closing.
      if (answered_ || !ok || queue_->shut) {
        delete this;
        return;
      }
      owner_->answering_.fetch_add(1);
    }
    owner_->Request(*queue_, method_);  // the next call of this method on this queue
    if (method_ == Method::kAdd) {
      ServeAdd();
    } else {
      ServeMightContain();
    }
  }

 private:
  void ServeAdd() {
    BloomService* core = owner_->core_;
    // As CallbackItemService::Add: read first only to route it by shard.
    Forwarder* forwarder = core->hooks().forwarder;
    if (forwarder != nullptr && core->hooks().router == nullptr) {
      ForwardAdd(forwarder);
      return;
    }
    const grpc::Status read = ReadDirect(request_, "bloom.v1.AddRequest", ParseAddRequest, bytes_,
                                         view_, encoded_, answers_);
    if (!read.ok()) {
      Answer(read);
      return;
    }
    if (RoutedElsewhere(core, rpcs::Rpc::kAdd, view_, &context_, request_, &response_,
                        [this](const grpc::Status& status) { Answer(status); })) {
      return;
    }
    if (forwarder != nullptr) {
      ForwardAdd(forwarder);
      return;
    }
    // Served through the store's group committer: the adds of calls arriving together share
    // one RocksDB write (with --sync, one fsync, answered from the WAL syncer's thread).
    core->HandleAddItemsGrouped(view_, answers_, &context_,
                                [this, store = core->store()](const grpc::Status& status) {
                                  if (status.ok()) {
                                    SetAddResponse(encoded_, store->LatestSequence(), response_);
                                  }
                                  Answer(status);
                                });
  }

  void ServeMightContain() {
    BloomService* core = owner_->core_;
    grpc::Status status = ReadDirect(request_, "bloom.v1.MightContainRequest",
                                     ParseMightContainRequest, bytes_, view_, encoded_, answers_);
    if (!status.ok()) {
      Answer(status);
      return;
    }
    if (RoutedElsewhere(core, rpcs::Rpc::kMightContain, view_, &context_, request_, &response_,
                        [this](const grpc::Status& routed) { Answer(routed); })) {
      return;
    }
    // At once on a primary; a follower may answer later, from the thread that sees the
    // caller's sequence applied (the call lives until it is answered).
    core->WhenApplied(view_.min_sequence, &context_,
                      [this](bool applied) { AnswerMightContain(applied); });
  }

  void ForwardAdd(Forwarder* forwarder) {
    forwarder->Unary(&context_, rpcs::Info(rpcs::Rpc::kAdd).path, request_, &response_,
                     [this](const grpc::Status& status) { Answer(status); });
  }

  void AnswerMightContain(bool applied) {
    BloomService* core = owner_->core_;
    if (!applied) {
      // A follower that has not applied the caller's last write in time: the primary answers.
      core->hooks().forwarder->Unary(&context_, rpcs::Info(rpcs::Rpc::kMightContain).path, request_,
                                     &response_,
                                     [this](const grpc::Status& forwarded) { Answer(forwarded); });
      return;
    }
    const grpc::Status status = core->HandleMightContainItems(view_, answers_, &context_);
    if (status.ok()) SetResponse(encoded_, response_);
    Answer(status);
  }

  // Sends the answer (on any thread); the queue's thread deletes the call once it is sent.
  void Answer(const grpc::Status& status) {
    ItemCalls* owner = owner_;  // `this` may be gone once the answer is on the queue
    {
      bloomsync::MutexLock lock(&queue_->mu);
      answered_ = true;
      if (queue_->shut) {
        // Past the shutdown grace: the server has ended the call already.
        delete this;
      } else if (status.ok()) {
        responder_.Finish(response_, status, this);
      } else {
        responder_.FinishWithError(status, this);
      }
    }
    owner->answering_.fetch_sub(1);
  }

  ItemCalls* const owner_;
  Queue* const queue_;
  const Method method_;
  bool answered_ = false;  // guarded by queue_->mu
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_{&context_};
  grpc::Slice bytes_;    // the request in one slice; `view_` points into it
  grpc::Slice encoded_;  // the answers, written through `answers_`
  ItemsRequestView view_;
  bool* answers_ = nullptr;
};

ItemCalls::ItemCalls(BloomService* core, AsyncItemService* service, int threads)
    : core_(core), service_(service), threads_(std::max(threads, 1)) {}

ItemCalls::~ItemCalls() { Shutdown(); }

void ItemCalls::AddQueues(grpc::ServerBuilder& builder) {
  for (int i = 0; i < threads_; ++i) {
    auto queue = std::make_unique<Queue>();
    queue->completion = builder.AddCompletionQueue();
    queues_.push_back(std::move(queue));
  }
}

void ItemCalls::Start() {
  for (const std::unique_ptr<Queue>& queue : queues_) {
    for (int i = 0; i < kCallsWaiting; ++i) {
      Request(*queue, Method::kAdd);
      Request(*queue, Method::kMightContain);
    }
    queue->thread = std::thread(Run, queue.get());
  }
  started_ = true;
}

void ItemCalls::Request(Queue& queue, Method method) {
  bloomsync::MutexLock lock(&queue.mu);
  if (!queue.shut) new Call(this, &queue, method);
}

void ItemCalls::Run(Queue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->completion->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
}

void ItemCalls::Shutdown() {
  if (queues_.empty()) return;
  const absl::Time deadline = absl::Now() + kAnswerGrace;
  while (answering_.load() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (answering_.load() > 0) {
    bloomlog::LogWarning(
        absl::StrCat(answering_.load(), " Add or MightContain calls still unanswered at shutdown"));
  }
  for (const std::unique_ptr<Queue>& queue : queues_) {
    {
      bloomsync::MutexLock lock(&queue->mu);
      queue->shut = true;
    }
    queue->completion->Shutdown();
  }
  for (const std::unique_ptr<Queue>& queue : queues_) {
    if (started_) {
      queue->thread.join();
    } else {  // nothing ran them: drain here (a queue must be empty when destroyed)
      Run(queue.get());
    }
  }
  queues_.clear();
}

}  // namespace service
