#include "service/pipeline.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/slice.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/log.h"
#include "service/bloom_service.h"
#include "service/convert.h"
#include "service/pipeline_batch.h"
#include "service/pipeline_forward.h"
#include "storage/write/operation_batch.h"

namespace service {

using bloom::v1::PipelineResponse;

class PipelineReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                              private storage::GroupCommitter::Job {
 public:
  PipelineReactor(BloomService* service, PipelineStreams* streams, Caller caller,
                  grpc::CallbackServerContext* context)
      : service_(service),
        streams_(streams),
        caller_(std::move(caller)),
        window_(service->limits().pipeline_window),
        start_(absl::Now()),
        batch_(service, caller_) {
    if (service->hooks().router != nullptr) {
      forwards_ = std::make_unique<PipelineForwards>(service->hooks().router, context,
                                                     service->limits().max_batch);
    }
  }

  // The headers (what this server takes: clients wait for them before they send a count) and
  // the first read (or, if shutdown came first, the end); called once the reactor is registered.
  void Begin() {
    StartSendInitialMetadata();
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      actions = NextActionsLocked();
    }
    Run(actions);
  }

  // From PipelineStreams::ShutdownAll(): answer what was read, then finish UNAVAILABLE.
  void Shutdown() {
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      if (end_status_.ok()) {
        end_status_ = absl::UnavailableError("the server is shutting down; retry another replica");
      }
      stop_reading_ = true;
      actions = NextActionsLocked();
    }
    Run(actions);
  }

  void OnReadDone(bool ok) override {
    // Parsed before the lock is taken, as gRPC's deserialization was.
    size_t bytes = 0;
    absl::StatusOr<std::shared_ptr<const PipelineBatch::Message>> message;
    if (ok) message = ReadMessage(&bytes);
    Actions actions;
    bool serve = false;
    {
      bloomsync::MutexLock lock(&mu_);
      reading_ = false;
      if (!ok) {
        stop_reading_ = true;  // the client half-closed, or the stream broke
      } else if (!message.ok()) {
        if (end_status_.ok()) end_status_ = message.status();
        stop_reading_ = true;
      } else if (!stop_reading_) {
        // (A read that completes after shutdown or a break decided to stop is dropped: its
        // operation was never acknowledged.)
        const size_t more = (*message)->operations.size() - 1;
        unanswered_bytes_ += bytes;
        unanswered_ += 1 + more;
        // The operations of one message stay together in pending_ (taken whole by Serve).
        pending_.push_back({*message, 0, bytes, more});
        for (size_t i = 1; i <= more; ++i) pending_.push_back({*message, i, 0, 0});
        if (!serving_) serve = serving_ = true;
      }
      actions = NextActionsLocked();
    }
    Run(actions);
    if (serve) Serve();
  }

  void OnWriteDone(bool ok) override {
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      writing_ = false;
      unanswered_ -= outbox_.front().operations;
      unanswered_bytes_ -= outbox_.front().request_bytes;
      outbox_.pop_front();  // Break() keeps the message of the write in flight
      if (!ok) Break(absl::CancelledError("the client went away"));
      actions = NextActionsLocked();
    }
    Run(actions);
  }

  void OnCancel() override {
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      Break(absl::CancelledError("the stream was cancelled"));
      actions = NextActionsLocked();
    }
    Run(actions);
  }

  void OnDone() override {
    if (const ServiceHooks& hooks = service_->hooks(); hooks.metrics != nullptr) {
      hooks.metrics->RecordRpc(rpcs::Rpc::kPipeline, end_status_.code(), absl::Now() - start_, 0);
    }
    if (bloomlog::Enabled(bloomlog::Level::kDebug)) {
      uint64_t operations;
      {
        bloomsync::MutexLock lock(&mu_);
        operations = operations_;
      }
      bloomlog::LogDebug(
          absl::StrCat("rpc Pipeline operations=", operations,
                       caller_.label.empty() ? "" : absl::StrCat(" caller=", caller_.label),
                       " code=", absl::StatusCodeToString(end_status_.code()),
                       " took=", absl::FormatDuration(absl::Now() - start_)));
    }
    streams_->Remove(this);  // may delete this
  }

 private:
  struct Answered {
    PipelineResponse response;
    size_t request_bytes;
    size_t operations;  // 1 + response.more_size()
    // False while its batch waits for the WAL's fsync (--sync): nothing from here on is
    // written before it (answers stay in request order).
    bool durable = true;
    // Its operations sent to other groups (pipeline_forward.h) and not answered yet: it is not
    // written before they are.
    size_t awaiting = 0;
    uint64_t serial = 0;  // consecutive along the outbox: finds it when a forward answers
  };

  // The message just read, in one slice (a copy only when it arrived in pieces) that its
  // operations keep: their items are views into it (direct_parse.h).
  absl::StatusOr<std::shared_ptr<const PipelineBatch::Message>> ReadMessage(size_t* bytes) {
    auto slice = std::make_shared<grpc::Slice>();  // not moved: a small slice holds its bytes
    if (!read_buffer_.TrySingleSlice(slice.get()).ok() &&
        !read_buffer_.DumpToSingleSlice(slice.get()).ok()) {
      return absl::InternalError("could not read a PipelineRequest");
    }
    read_buffer_.Clear();
    *bytes = slice->size();
    const absl::string_view wire(reinterpret_cast<const char*>(slice->begin()), slice->size());
    return PipelineBatch::Read(slice, wire, service_->limits().max_pipeline_operations);
  }

  // What to start once the mutex is released: gRPC may run a reaction inline.
  struct Actions {
    bool read = false;
    const PipelineResponse* write = nullptr;
    bool finish = false;
    absl::Status status;
  };

  // Nothing more is read, answered or written; the stream finishes with `why` (if it has no
  // error yet). The counts of unanswered operations no longer matter: nothing is read again.
  void Break(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (end_status_.ok()) end_status_ = why;
    broken_ = stop_reading_ = true;
    abandoned_.store(true, std::memory_order_relaxed);
    pending_.clear();
    // The write in flight keeps its message until OnWriteDone.
    outbox_.erase(writing_ ? outbox_.begin() + 1 : outbox_.begin(), outbox_.end());
  }

  Actions NextActionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Actions actions;
    if (finished_) return actions;
    if (!writing_ && !outbox_.empty() && outbox_.front().durable && outbox_.front().awaiting == 0 &&
        !broken_) {
      writing_ = true;
      actions.write = &outbox_.front().response;
    }
    if (!reading_ && !stop_reading_ && unanswered_ < window_ &&
        unanswered_bytes_ < kPipelineReadAheadBytes) {
      reading_ = true;
      actions.read = true;
    }
    if (stop_reading_ && pending_.empty() && !serving_ && outbox_.empty() && !writing_ &&
        syncs_in_flight_ == 0 && forwards_in_flight_ == 0) {
      finished_ = true;
      actions.finish = true;
      actions.status = end_status_;
    }
    return actions;
  }

  void Run(const Actions& actions) {
    if (actions.write != nullptr) {
      // The outbox's front stays put while it is written (only later answers are added, and
      // only answers not yet durable change), so it is read here without the lock.
      bool own_buffer = false;
      write_buffer_.Clear();  // the previous write's is done with (one write in flight)
      const grpc::Status serialized =
          grpc::GenericSerialize<grpc::ProtoBufferWriter, PipelineResponse>(
              *actions.write, &write_buffer_, &own_buffer);
      if (!serialized.ok()) {
        bloomlog::LogWarning(absl::StrCat("Pipeline: an answer could not be serialized: ",
                                          serialized.error_message()));
      }
      StartWrite(&write_buffer_);
    }
    if (actions.read) StartRead(&read_buffer_);
    if (actions.finish) Finish(ToGrpcStatus(actions.status));
  }

  // Serves what was read until nothing is pending; one thread at a time (serving_). A batch
  // with adds goes to the store's GroupCommitter, which serves it together with other
  // streams' and calls' (one RocksDB write for all) on whichever thread is serving them; its
  // Done() goes on serving here. A batch of checks only is answered on this thread: it writes
  // nothing.
  void Serve() {
    for (;;) {
      Actions actions;
      bool done = false;  // decided under the lock: once serving_ is clear, another thread may
                          // begin serving, and batch_ is its
      {
        bloomsync::MutexLock lock(&mu_);
        if (pending_.empty()) {
          serving_ = false;
          done = true;
          actions = NextActionsLocked();
        } else {
          batch_.Take(pending_);
        }
      }
      if (done) {
        Run(actions);  // may finish the stream: `this` is not touched after it
        return;
      }
      if (batch_.has_writes()) {
        service_->store()->committer().Submit(this);  // Done() serves what is read meanwhile
        return;
      }
      {
        absl::StatusOr<std::unique_ptr<storage::OperationBatch>> store_batch =
            service_->store()->StartBatch();
        if (store_batch.ok()) {
          Queue(**store_batch);
        } else {
          Fail(store_batch.status());
        }
      }
      Deliver();
    }
  }

  // storage::GroupCommitter::Job, for batch_ (which has adds). Runs on the committer's
  // serving thread, which may be another stream's.
  void Queue(storage::OperationBatch& store_batch) override {
    batch_.Queue(store_batch, abandoned_);
  }
  void Answer(storage::OperationBatch& store_batch) override { batch_.Answer(store_batch); }
  void Fail(const absl::Status& why) override { batch_.Fail(why); }
  void Done() override {
    Deliver();
    Serve();
  }

  // Puts the answers of batch_ in the outbox (to be written once durable: with --sync, after
  // FilterStore::WhenDurable) and empties batch_.
  void Deliver() {
    std::vector<PipelineBatch::Operation>& operations = batch_.operations();
    std::vector<PipelineResponse>& responses = batch_.responses();
    const bool deferred_sync = batch_.deferred_sync();
    for (size_t i = 0; i < operations.size(); ++i) {
      responses[i].set_id(operations[i].view().id);
    }
    size_t awaiting_sync = 0;
    const std::vector<size_t>& forwarded = batch_.forwarded();
    std::vector<Forward> forwards;  // to send once the lock is released
    forwards.reserve(forwarded.size());
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      operations_ += operations.size();
      if (!broken_) {
        // One response per message: a message's `more` is answered in its response's.
        auto next_forward = forwarded.begin();
        for (size_t i = 0; i < operations.size(); i += 1 + operations[i].more) {
          for (size_t k = 1; k <= operations[i].more; ++k) {
            responses[i].mutable_more()->Add(std::move(responses[i + k]));
          }
          const uint64_t serial = next_serial_++;
          size_t awaiting = 0;
          for (; next_forward != forwarded.end() && *next_forward <= i + operations[i].more;
               ++next_forward) {
            forwards.push_back({*next_forward, serial, *next_forward - i});
            ++awaiting;
          }
          outbox_.push_back({std::move(responses[i]), operations[i].bytes, 1 + operations[i].more,
                             !deferred_sync, awaiting, serial});
          if (deferred_sync) ++awaiting_sync;
        }
        forwards_in_flight_ += forwards.size();
      }
      if (deferred_sync) ++syncs_in_flight_;
      actions = NextActionsLocked();  // serving_ is still set: this does not finish the stream
    }
    // Sent while the operations' views are still held (Send copies them).
    for (const Forward& forward : forwards) {
      forwards_->Send(operations[forward.operation].view(),
                      [this, serial = forward.serial, place = forward.place](
                          PipelineResponse result) { OnForwarded(serial, place, result); });
    }
    batch_.Clear();
    Run(actions);
    if (deferred_sync) {
      service_->store()->WhenDurable(
          [this, awaiting_sync](const absl::Status& synced) { OnDurable(awaiting_sync, synced); });
    }
  }

  // The WAL's fsync for `count` answers at the oldest not durable ones of the outbox finished
  // (--sync; WhenDurable calls back in the order it was asked, so they are these): they may be
  // written now. If it failed, their adds answer its error instead (unacknowledged: a client
  // retries them; a BLOOM filter's adds are idempotent, a CUCKOO filter's adds and removes are not:
  // bloom.proto says so).
  void OnDurable(size_t count, const absl::Status& synced) {
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      --syncs_in_flight_;
      for (Answered& answered : outbox_) {
        if (count == 0) break;
        if (answered.durable) continue;
        answered.durable = true;
        --count;
        if (synced.ok()) continue;
        if (answered.response.has_add() || answered.response.has_remove()) {
          SetOperationError(synced, answered.response);
        }
        for (PipelineResponse& more : *answered.response.mutable_more()) {
          if (more.has_add() || more.has_remove()) SetOperationError(synced, more);
        }
      }
      actions = NextActionsLocked();
    }
    Run(actions);
  }

  // An operation of the batch being delivered that goes to another group: the outbox entry
  // (serial) of its message, and its place there (0: the message's own, k: its more[k-1]).
  struct Forward {
    size_t operation;
    uint64_t serial;
    size_t place;
  };

  // A forwarded operation's answer: into its place in the outbox, which may now be written.
  void OnForwarded(uint64_t serial, size_t place, PipelineResponse& result) {
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      --forwards_in_flight_;
      // Not found: the stream broke meanwhile, and its unwritten answers were dropped.
      if (!outbox_.empty() && serial >= outbox_.front().serial &&
          serial - outbox_.front().serial < outbox_.size()) {
        Answered& answered = outbox_[serial - outbox_.front().serial];
        PipelineResponse& slot =
            place == 0 ? answered.response : *answered.response.mutable_more(place - 1);
        TakeResult(std::move(result), slot);
        --answered.awaiting;
      }
      actions = NextActionsLocked();
    }
    Run(actions);  // may finish the stream: `this` is not touched after it
  }

  BloomService* const service_;
  PipelineStreams* const streams_;
  const Caller caller_;
  const size_t window_;
  const absl::Time start_;

  grpc::ByteBuffer read_buffer_;   // the one read in flight writes here
  grpc::ByteBuffer write_buffer_;  // the one write in flight's answer, serialized
  // The batch being served, its answers, and its runs of adds queued in the store batch: only
  // the thread serving the stream (serving_) touches them.
  PipelineBatch batch_;
  // In a sharded deployment: the operations on other groups' filters go through here.
  std::unique_ptr<PipelineForwards> forwards_;
  // Set with broken_: read without the lock between runs of a batch, so that a cancelled
  // stream stops serving a large message part way.
  std::atomic<bool> abandoned_{false};
  bloomsync::Mutex mu_;
  std::vector<PipelineBatch::Operation> pending_
      ABSL_GUARDED_BY(mu_);                           // read, not yet being served
  std::deque<Answered> outbox_ ABSL_GUARDED_BY(mu_);  // answered; front is written first
  size_t unanswered_ ABSL_GUARDED_BY(mu_) = 0;        // read and not yet written
  size_t unanswered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t operations_ ABSL_GUARDED_BY(mu_) = 0;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_reading_ ABSL_GUARDED_BY(mu_) = false;  // half-closed, shutting down, or broken
  bool broken_ ABSL_GUARDED_BY(mu_) = false;        // cancelled or a failed write
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Batches whose answers wait for FilterStore::WhenDurable: the stream does not finish (and
  // its reactor is not freed) before they are called back.
  int syncs_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Operations sent to other groups and not answered: likewise.
  size_t forwards_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_serial_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status end_status_;  // guarded by mu_ until finished_, then read by OnDone
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* PipelineStreams::Start(
    BloomService* service, grpc::CallbackServerContext* context) {
  absl::StatusOr<Caller> caller = service->AdmitStream(context);
  if (!caller.ok()) {
    // A reactor that only finishes: nothing is read, so an unauthenticated peer's messages
    // are never buffered for it.
    class Refused final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
     public:
      explicit Refused(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
      void OnDone() override { delete this; }
    };
    return new Refused(caller.status());
  }
  // Tells clients that this server answers a PipelineRequest's `more` and its `count` (see
  // bloom.proto): servers that predate either end the stream on it.
  context->AddInitialMetadata("bloom-pipeline-more", "1");
  context->AddInitialMetadata("bloom-pipeline-count", "1");
  auto reactor = std::make_shared<PipelineReactor>(service, this, *std::move(caller), context);
  bool draining = false;
  {
    bloomsync::MutexLock lock(&mu_);
    live_.emplace(reactor.get(), reactor);
    // Checked under the lock that ShutdownAll() takes after setting draining: a stream either
    // is seen by ShutdownAll() or sees draining here.
    draining = service->draining();
  }
  if (draining) {
    reactor->Shutdown();
  } else {
    reactor->Begin();
  }
  return reactor.get();
}

void PipelineStreams::ShutdownAll() {
  std::vector<std::shared_ptr<PipelineReactor>> streams;
  {
    bloomsync::MutexLock lock(&mu_);
    for (const auto& [key, reactor] : live_) streams.push_back(reactor);
  }
  for (const std::shared_ptr<PipelineReactor>& reactor : streams) reactor->Shutdown();
}

bool PipelineStreams::empty() const {
  bloomsync::ReaderMutexLock lock(&mu_);
  return live_.empty();
}

void PipelineStreams::Remove(PipelineReactor* reactor) {
  std::shared_ptr<PipelineReactor> owned;
  {
    bloomsync::MutexLock lock(&mu_);
    auto it = live_.find(reactor);
    if (it == live_.end()) return;
    owned = std::move(it->second);
    live_.erase(it);
  }
  // `owned` may be the last reference: the reactor is deleted here, outside the lock.
}

}  // namespace service
