#include "service/pipeline.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
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
#include "storage/operation_batch.h"

namespace service {

using bloom::v1::PipelineRequest;
using bloom::v1::PipelineResponse;

namespace {

void SetError(const absl::Status& status, PipelineResponse& response) {
  bloom::v1::OperationError* error = response.mutable_error();
  error->set_code(static_cast<int32_t>(status.code()));
  error->set_message(status.message().data(), status.message().size());
}

const std::string& OperationName(const PipelineRequest& request) {
  return request.has_add() ? request.add().name() : request.might_contain().name();
}

// Whether b may be served in one store call with a (same kind, same filter, and for adds the
// same create_if_missing).
bool Mergeable(const PipelineRequest& a, const PipelineRequest& b) {
  if (a.op_case() != b.op_case() || OperationName(a) != OperationName(b)) return false;
  if (!a.has_add()) return true;
  if (a.add().has_create_if_missing() != b.add().has_create_if_missing()) return false;
  return !a.add().has_create_if_missing() ||
         google::protobuf::util::MessageDifferencer::Equals(a.add().create_if_missing(),
                                                            b.add().create_if_missing());
}

}  // namespace

class PipelineReactor final : public grpc::ServerBidiReactor<PipelineRequest, PipelineResponse>,
                              private storage::GroupCommitter::Job {
 public:
  PipelineReactor(BloomService* service, PipelineStreams* streams, Caller caller)
      : service_(service),
        streams_(streams),
        caller_(std::move(caller)),
        window_(service->limits().pipeline_window),
        start_(absl::Now()) {}

  // The first read (or, if shutdown came first, the end); called once the reactor is
  // registered.
  void Begin() {
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
    Actions actions;
    bool serve = false;
    {
      bloomsync::MutexLock lock(&mu_);
      reading_ = false;
      if (!ok) {
        stop_reading_ = true;  // the client half-closed, or the stream broke
      } else if (const size_t operations = bloom::wire::RefusedOperationCount(read_buffer_);
                 operations > 0) {
        if (end_status_.ok()) {
          end_status_ = absl::InvalidArgumentError(absl::StrCat(
              "PipelineRequest id ", read_buffer_.id(), " carries ", operations,
              " operations (itself and its `more`); the limit is ",
              service_->limits().max_pipeline_operations, " (--max_pipeline_operations)"));
        }
        stop_reading_ = true;
      } else if (read_buffer_.op_case() == PipelineRequest::OP_NOT_SET) {
        if (end_status_.ok()) {
          end_status_ = absl::InvalidArgumentError(absl::StrCat(
              "PipelineRequest id ", read_buffer_.id(), " has neither add nor might_contain"));
        }
        stop_reading_ = true;
      } else if (absl::Status packed = CheckMore(read_buffer_); !packed.ok()) {
        if (end_status_.ok()) end_status_ = packed;
        stop_reading_ = true;
      } else if (!stop_reading_) {
        // (A read that completes after shutdown or a break decided to stop is dropped: its
        // operation was never acknowledged.)
        const size_t bytes = read_buffer_.ByteSizeLong();
        google::protobuf::RepeatedPtrField<PipelineRequest> more;
        more.Swap(read_buffer_.mutable_more());
        unanswered_bytes_ += bytes;
        unanswered_ += 1 + more.size();
        // The operations of one message stay together in pending_ (taken whole by Serve).
        pending_.push_back({std::move(read_buffer_), bytes, static_cast<size_t>(more.size())});
        for (PipelineRequest& request : more) pending_.push_back({std::move(request), 0, 0});
        read_buffer_.Clear();
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
      hooks.metrics->RecordRpc(metrics::Rpc::kPipeline, end_status_.code(), absl::Now() - start_,
                               0);
    }
    if (bloomlog::Enabled(bloomlog::Level::kDebug)) {
      bloomlog::LogDebug(
          absl::StrCat("rpc Pipeline operations=", operations_,
                       caller_.label.empty() ? "" : absl::StrCat(" caller=", caller_.label),
                       " code=", absl::StatusCodeToString(end_status_.code()),
                       " took=", absl::FormatDuration(absl::Now() - start_)));
    }
    streams_->Remove(this);  // may delete this
  }

 private:
  struct Read {
    PipelineRequest request;
    size_t bytes;  // of the message it came in (0 for the operations in a message's `more`)
    size_t more;   // operations that came in this one's `more`: the Reads right after it
  };
  struct Answered {
    PipelineResponse response;
    size_t request_bytes;
    size_t operations;  // 1 + response.more_size()
    // False while its batch waits for the WAL's fsync (--sync): nothing from here on is
    // written before it (answers stay in request order).
    bool durable = true;
  };

  // The operations in a message's `more` must each have one and no `more` of their own.
  static absl::Status CheckMore(const PipelineRequest& request) {
    for (const PipelineRequest& more : request.more()) {
      if (more.op_case() == PipelineRequest::OP_NOT_SET) {
        return absl::InvalidArgumentError(absl::StrCat("PipelineRequest id ", request.id(),
                                                       ": more (id ", more.id(),
                                                       ") has neither add nor might_contain"));
      }
      if (more.more_size() > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("PipelineRequest id ", request.id(), ": more (id ", more.id(),
                         ") has a `more` of its own; operations nest one level only"));
      }
    }
    return absl::OkStatus();
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
    if (!writing_ && !outbox_.empty() && outbox_.front().durable && !broken_) {
      writing_ = true;
      actions.write = &outbox_.front().response;
    }
    if (!reading_ && !stop_reading_ && unanswered_ < window_ &&
        unanswered_bytes_ < kPipelineReadAheadBytes) {
      reading_ = true;
      actions.read = true;
    }
    if (stop_reading_ && pending_.empty() && !serving_ && outbox_.empty() && !writing_ &&
        syncs_in_flight_ == 0) {
      finished_ = true;
      actions.finish = true;
      actions.status = end_status_;
    }
    return actions;
  }

  void Run(const Actions& actions) {
    if (actions.write != nullptr) StartWrite(actions.write);
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
          batch_.assign(std::make_move_iterator(pending_.begin()),
                        std::make_move_iterator(pending_.end()));
          pending_.clear();
        }
      }
      if (done) {
        Run(actions);  // may finish the stream: `this` is not touched after it
        return;
      }
      responses_.clear();
      responses_.resize(batch_.size());
      deferred_sync_ = false;
      const bool adds = std::any_of(batch_.begin(), batch_.end(),
                                    [](const Read& read) { return read.request.has_add(); });
      if (adds) {
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
    queued_.clear();
    size_t begin = 0;
    while (begin < batch_.size()) {
      if (abandoned_.load(std::memory_order_relaxed)) {
        // Nobody will read the answers: the rest of the batch is not served (and, being
        // unacknowledged, needs no answer).
        batch_.resize(begin);
        responses_.resize(begin);
        return;
      }
      size_t end = begin + 1;
      while (end < batch_.size() && Mergeable(batch_[begin].request, batch_[end].request)) ++end;
      const absl::Time start = absl::Now();
      const auto run = absl::MakeConstSpan(batch_).subspan(begin, end - begin);
      const auto run_responses = absl::MakeSpan(responses_).subspan(begin, end - begin);
      if (run.front().request.has_add()) {
        deferred_sync_ = service_->store()->syncs_adds();
        QueueAdds(store_batch, run, run_responses, queued_.emplace_back(begin, end, start));
      } else {
        AnswerChecks(store_batch, run, run_responses);
        RecordRun(begin, end, absl::Now() - start);
      }
      begin = end;
    }
  }
  void Answer(storage::OperationBatch& store_batch) override {
    for (QueuedRun& run : queued_) {
      TakeAdds(store_batch, absl::MakeConstSpan(batch_).subspan(run.begin, run.end - run.begin),
               absl::MakeSpan(responses_).subspan(run.begin, run.end - run.begin), run);
      RecordRun(run.begin, run.end, absl::Now() - run.start);
    }
  }
  void Fail(const absl::Status& why) override {
    for (PipelineResponse& response : responses_) SetError(why, response);
  }
  void Done() override {
    Deliver();
    Serve();
  }

  // Puts the answers of batch_ in the outbox (to be written once durable: with --sync, after
  // FilterStore::WhenDurable) and empties batch_.
  void Deliver() {
    for (size_t i = 0; i < batch_.size(); ++i) responses_[i].set_id(batch_[i].request.id());
    size_t awaiting_sync = 0;
    Actions actions;
    {
      bloomsync::MutexLock lock(&mu_);
      operations_ += batch_.size();
      if (!broken_) {
        // One response per message: a message's `more` is answered in its response's.
        for (size_t i = 0; i < batch_.size(); i += 1 + batch_[i].more) {
          for (size_t k = 1; k <= batch_[i].more; ++k) {
            responses_[i].mutable_more()->Add(std::move(responses_[i + k]));
          }
          outbox_.push_back(
              {std::move(responses_[i]), batch_[i].bytes, 1 + batch_[i].more, !deferred_sync_});
          if (deferred_sync_) ++awaiting_sync;
        }
      }
      if (deferred_sync_) ++syncs_in_flight_;
      actions = NextActionsLocked();  // serving_ is still set: this does not finish the stream
    }
    batch_.clear();
    Run(actions);
    if (deferred_sync_) {
      service_->store()->WhenDurable(
          [this, awaiting_sync](const absl::Status& synced) { OnDurable(awaiting_sync, synced); });
    }
  }

  // The WAL's fsync for `count` answers at the oldest not durable ones of the outbox finished
  // (--sync; WhenDurable calls back in the order it was asked, so they are these): they may be
  // written now. If it failed, their adds answer its error instead (unacknowledged: a client
  // retries them; adds are idempotent).
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
        if (answered.response.has_add()) SetError(synced, answered.response);
        for (PipelineResponse& more : *answered.response.mutable_more()) {
          if (more.has_add()) SetError(synced, more);
        }
      }
      actions = NextActionsLocked();
    }
    Run(actions);
  }

  // A run of adds queued in the store batch: one ticket for all (merged), or one per operation.
  struct QueuedRun {
    QueuedRun(size_t begin, size_t end, absl::Time start) : begin(begin), end(end), start(start) {}
    size_t begin, end;
    absl::Time start;
    bool merged = false;
    std::vector<storage::OperationBatch::Ticket> tickets;  // merged: one; else per operation
    std::vector<size_t> ends;  // merged: the items of operation i end at ends[i]
    std::vector<bool> failed;  // not merged: answered with an error before queueing
  };

  void QueueAdds(storage::OperationBatch& store_batch, absl::Span<const Read> run,
                 absl::Span<PipelineResponse> responses, QueuedRun& queued) {
    if (absl::Status allowed = RequireRole(caller_, Role::kWrite, "Pipeline add"); !allowed.ok()) {
      for (PipelineResponse& response : responses) SetError(allowed, response);
      queued.failed.assign(run.size(), true);
      return;
    }
    const bloom::v1::AddRequest& first = run.front().request.add();
    bloom::FilterSpec create_spec;
    if (first.has_create_if_missing()) create_spec = FromProto(first.create_if_missing());
    const bloom::FilterSpec* spec = first.has_create_if_missing() ? &create_spec : nullptr;
    std::vector<absl::string_view> items;
    if (run.size() > 1) {
      bool valid = true;
      for (const Read& read : run) {
        valid = valid && service_->CollectItems(read.request.add(), items).ok();
        queued.ends.push_back(items.size());
      }
      if (valid) {
        queued.merged = true;
        queued.tickets.push_back(store_batch.Add(first.name(), items, spec));
        return;
      }
      queued.ends.clear();
    }
    QueueEach(store_batch, run, responses, queued);
  }

  // One ticket per operation of the run; invalid ones are answered at once.
  void QueueEach(storage::OperationBatch& store_batch, absl::Span<const Read> run,
                 absl::Span<PipelineResponse> responses, QueuedRun& queued) {
    queued.merged = false;
    queued.tickets.assign(run.size(), 0);
    queued.failed.assign(run.size(), false);
    std::vector<absl::string_view> items;
    for (size_t i = 0; i < run.size(); ++i) {
      const bloom::v1::AddRequest& add = run[i].request.add();
      items.clear();
      if (absl::Status valid = service_->CollectItems(add, items); !valid.ok()) {
        SetError(valid, responses[i]);
        queued.failed[i] = true;
        continue;
      }
      bloom::FilterSpec create_spec;
      if (add.has_create_if_missing()) create_spec = FromProto(add.create_if_missing());
      queued.tickets[i] =
          store_batch.Add(add.name(), items, add.has_create_if_missing() ? &create_spec : nullptr);
    }
  }

  // Answers a queued run once the batch is written. A merged add that failed is queued again
  // one operation at a time, so each gets the answer it would get alone (e.g. a full
  // non-scaling filter may still hold the first operation's items).
  void TakeAdds(storage::OperationBatch& store_batch, absl::Span<const Read> run,
                absl::Span<PipelineResponse> responses, QueuedRun& queued) {
    if (queued.merged) {
      absl::StatusOr<std::vector<bool>> added = store_batch.TakeResult(queued.tickets.front());
      if (added.ok()) {
        size_t begin = 0;
        for (size_t i = 0; i < run.size(); ++i) {
          auto* answers = responses[i].mutable_add()->mutable_added();
          answers->Reserve(static_cast<int>(queued.ends[i] - begin));
          for (size_t k = begin; k < queued.ends[i]; ++k) answers->Add((*added)[k]);
          begin = queued.ends[i];
        }
        return;
      }
      QueueEach(store_batch, run, responses, queued);
      store_batch.Flush();
    }
    for (size_t i = 0; i < run.size(); ++i) {
      if (queued.failed[i]) continue;
      absl::StatusOr<std::vector<bool>> added = store_batch.TakeResult(queued.tickets[i]);
      if (!added.ok()) {
        SetError(added.status(), responses[i]);
        continue;
      }
      auto* answers = responses[i].mutable_add()->mutable_added();
      answers->Reserve(static_cast<int>(added->size()));
      for (bool a : *added) answers->Add(a);
    }
  }

  // Checks of one filter: one store call for all, or one each if that fails (so each gets the
  // answer it would get alone, absent_if_missing included).
  void AnswerChecks(storage::OperationBatch& store_batch, absl::Span<const Read> run,
                    absl::Span<PipelineResponse> responses) {
    std::vector<absl::string_view> items;
    if (run.size() > 1) {
      std::vector<size_t> ends;
      bool valid = true;
      for (const Read& read : run) {
        valid = valid && service_->CollectItems(read.request.might_contain(), items).ok();
        ends.push_back(items.size());
      }
      std::unique_ptr<bool[]> present(new bool[items.size()]);
      if (valid &&
          store_batch
              .MightContainInto(run.front().request.might_contain().name(), items, present.get())
              .ok()) {
        size_t begin = 0;
        for (size_t i = 0; i < run.size(); ++i) {
          auto* answers = responses[i].mutable_might_contain()->mutable_present();
          answers->Reserve(static_cast<int>(ends[i] - begin));
          for (size_t k = begin; k < ends[i]; ++k) answers->Add(present[k]);
          begin = ends[i];
        }
        return;
      }
    }
    for (size_t i = 0; i < run.size(); ++i) {
      const bloom::v1::MightContainRequest& request = run[i].request.might_contain();
      items.clear();
      absl::Status status = service_->CollectItems(request, items);
      std::unique_ptr<bool[]> present(new bool[items.size()]);
      if (status.ok()) {
        status = AbsentIfMissing(store_batch.MightContainInto(request.name(), items, present.get()),
                                 request.absent_if_missing(),
                                 absl::MakeSpan(present.get(), items.size()));
      }
      if (!status.ok()) {
        SetError(status, responses[i]);
        continue;
      }
      auto* answers = responses[i].mutable_might_contain()->mutable_present();
      answers->Reserve(static_cast<int>(items.size()));
      for (size_t k = 0; k < items.size(); ++k) answers->Add(present[k]);
    }
  }

  void RecordRun(size_t begin, size_t end, absl::Duration took) {
    metrics::ServerMetrics* metrics = service_->hooks().metrics;
    if (metrics == nullptr) return;
    for (size_t i = begin; i < end; ++i) {
      const PipelineRequest& request = batch_[i].request;
      const bool add = request.has_add();
      const size_t items =
          add ? request.add().items_size() + request.add().raw_items_size()
              : request.might_contain().items_size() + request.might_contain().raw_items_size();
      const auto code = responses_[i].has_error()
                            ? static_cast<absl::StatusCode>(responses_[i].error().code())
                            : absl::StatusCode::kOk;
      metrics->RecordRpc(add ? metrics::Rpc::kPipelineAdd : metrics::Rpc::kPipelineMightContain,
                         code, took, items);
    }
  }

  BloomService* const service_;
  PipelineStreams* const streams_;
  const Caller caller_;
  const size_t window_;
  const absl::Time start_;

  PipelineRequest read_buffer_;  // the one read in flight writes here
  // The batch being served, its answers, and its runs of adds queued in the store batch: only
  // the thread serving the stream (serving_) touches them.
  std::vector<Read> batch_;
  std::vector<PipelineResponse> responses_;
  std::vector<QueuedRun> queued_;
  bool deferred_sync_ = false;  // batch_ has adds and --sync: its answers wait for the fsync
  // Set with broken_: read without the lock between runs of a batch, so that a cancelled
  // stream stops serving a large message part way.
  std::atomic<bool> abandoned_{false};
  bloomsync::Mutex mu_;
  std::vector<Read> pending_ ABSL_GUARDED_BY(mu_);    // read, not yet being served
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
  absl::Status end_status_;  // guarded by mu_ until finished_, then read by OnDone
};

grpc::ServerBidiReactor<PipelineRequest, PipelineResponse>* PipelineStreams::Start(
    BloomService* service, grpc::CallbackServerContext* context) {
  absl::StatusOr<Caller> caller = service->AdmitStream(context);
  if (!caller.ok()) {
    // A reactor that only finishes: nothing is read, so an unauthenticated peer's messages
    // are never buffered for it.
    class Refused final : public grpc::ServerBidiReactor<PipelineRequest, PipelineResponse> {
     public:
      explicit Refused(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
      void OnDone() override { delete this; }
    };
    return new Refused(caller.status());
  }
  // Tells clients that this server answers a PipelineRequest's `more` (see bloom.proto).
  context->AddInitialMetadata("bloom-pipeline-more", "1");
  auto reactor = std::make_shared<PipelineReactor>(service, this, *std::move(caller));
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
