#include "service/pipeline.h"

#include <google/protobuf/util/message_differencer.h>

#include <deque>
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

class PipelineReactor final : public grpc::ServerBidiReactor<PipelineRequest, PipelineResponse> {
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
      } else if (read_buffer_.op_case() == PipelineRequest::OP_NOT_SET) {
        if (end_status_.ok()) {
          end_status_ = absl::InvalidArgumentError(absl::StrCat(
              "PipelineRequest id ", read_buffer_.id(), " has neither add nor might_contain"));
        }
        stop_reading_ = true;
      } else if (!stop_reading_) {
        // (A read that completes after shutdown or a break decided to stop is dropped: its
        // operation was never acknowledged.)
        const size_t bytes = read_buffer_.ByteSizeLong();
        unanswered_bytes_ += bytes;
        ++unanswered_;
        pending_.push_back({std::move(read_buffer_), bytes});
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
      --unanswered_;
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
    size_t bytes;
  };
  struct Answered {
    PipelineResponse response;
    size_t request_bytes;
  };
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
    pending_.clear();
    // The write in flight keeps its message until OnWriteDone.
    outbox_.erase(writing_ ? outbox_.begin() + 1 : outbox_.begin(), outbox_.end());
  }

  Actions NextActionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Actions actions;
    if (finished_) return actions;
    if (!writing_ && !outbox_.empty() && !broken_) {
      writing_ = true;
      actions.write = &outbox_.front().response;
    }
    if (!reading_ && !stop_reading_ && unanswered_ < window_ &&
        unanswered_bytes_ < kPipelineReadAheadBytes) {
      reading_ = true;
      actions.read = true;
    }
    if (stop_reading_ && pending_.empty() && !serving_ && outbox_.empty() && !writing_) {
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

  // Serves what was read until nothing is pending; one thread at a time (serving_).
  void Serve() {
    std::vector<Read> batch;
    for (;;) {
      Actions actions;
      {
        bloomsync::MutexLock lock(&mu_);
        if (pending_.empty()) {
          serving_ = false;
          actions = NextActionsLocked();
        } else {
          batch.assign(std::make_move_iterator(pending_.begin()),
                       std::make_move_iterator(pending_.end()));
          pending_.clear();
        }
      }
      if (batch.empty()) {
        Run(actions);
        return;
      }
      std::vector<PipelineResponse> responses = Answer(batch);
      {
        bloomsync::MutexLock lock(&mu_);
        operations_ += batch.size();
        if (!broken_) {
          for (size_t i = 0; i < batch.size(); ++i) {
            outbox_.push_back({std::move(responses[i]), batch[i].bytes});
          }
        }
        actions = NextActionsLocked();
      }
      batch.clear();
      Run(actions);
    }
  }

  // Answers a batch in order; runs of mergeable operations share one store call.
  std::vector<PipelineResponse> Answer(const std::vector<Read>& batch) {
    std::vector<PipelineResponse> responses(batch.size());
    size_t begin = 0;
    while (begin < batch.size()) {
      size_t end = begin + 1;
      while (end < batch.size() && Mergeable(batch[begin].request, batch[end].request)) ++end;
      const absl::Time start = absl::Now();
      AnswerRun(absl::MakeConstSpan(batch).subspan(begin, end - begin),
                absl::MakeSpan(responses).subspan(begin, end - begin));
      RecordRun(batch, responses, begin, end, absl::Now() - start);
      begin = end;
    }
    for (size_t i = 0; i < batch.size(); ++i) responses[i].set_id(batch[i].request.id());
    return responses;
  }

  // Operations on one filter of one kind: one store call for all, or one each if that fails
  // (so each gets the answer it would get alone).
  void AnswerRun(absl::Span<const Read> run, absl::Span<PipelineResponse> responses) {
    const bool add = run.front().request.has_add();
    if (add) {
      if (absl::Status allowed = RequireRole(caller_, Role::kWrite, "Pipeline add");
          !allowed.ok()) {
        for (PipelineResponse& response : responses) SetError(allowed, response);
        return;
      }
    }
    if (run.size() > 1 && AnswerMerged(run, responses, add)) return;
    for (size_t i = 0; i < run.size(); ++i) {
      const PipelineRequest& request = run[i].request;
      absl::Status status = add ? service_->RunAdd(request.add(), responses[i].mutable_add())
                                : service_->RunMightContain(request.might_contain(),
                                                            responses[i].mutable_might_contain());
      if (!status.ok()) SetError(status, responses[i]);
    }
  }

  // Whether the run was answered by one store call; false leaves `responses` untouched.
  bool AnswerMerged(absl::Span<const Read> run, absl::Span<PipelineResponse> responses, bool add) {
    std::vector<absl::string_view> items;
    std::vector<size_t> ends;  // items of operation i end at ends[i]
    for (const Read& read : run) {
      absl::Status valid = add ? service_->CollectItems(read.request.add(), items)
                               : service_->CollectItems(read.request.might_contain(), items);
      if (!valid.ok()) return false;
      ends.push_back(items.size());
    }
    absl::StatusOr<std::vector<bool>> results;
    if (add) {
      const bloom::v1::AddRequest& first = run.front().request.add();
      bloom::FilterSpec create_spec;
      if (first.has_create_if_missing()) create_spec = FromProto(first.create_if_missing());
      results = service_->store()->Add(first.name(), items,
                                       first.has_create_if_missing() ? &create_spec : nullptr);
    } else {
      results = service_->store()->MightContain(run.front().request.might_contain().name(), items);
    }
    if (!results.ok()) return false;
    size_t begin = 0;
    for (size_t i = 0; i < run.size(); ++i) {
      auto* answers = add ? responses[i].mutable_add()->mutable_added()
                          : responses[i].mutable_might_contain()->mutable_present();
      answers->Reserve(static_cast<int>(ends[i] - begin));
      for (size_t k = begin; k < ends[i]; ++k) answers->Add((*results)[k]);
      begin = ends[i];
    }
    return true;
  }

  void RecordRun(const std::vector<Read>& batch, const std::vector<PipelineResponse>& responses,
                 size_t begin, size_t end, absl::Duration took) {
    metrics::ServerMetrics* metrics = service_->hooks().metrics;
    if (metrics == nullptr) return;
    for (size_t i = begin; i < end; ++i) {
      const PipelineRequest& request = batch[i].request;
      const bool add = request.has_add();
      const size_t items =
          add ? request.add().items_size() + request.add().raw_items_size()
              : request.might_contain().items_size() + request.might_contain().raw_items_size();
      const auto code = responses[i].has_error()
                            ? static_cast<absl::StatusCode>(responses[i].error().code())
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
