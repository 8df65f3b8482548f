#include "service/pipeline_batch.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/bloom_service.h"
#include "service/convert.h"

namespace service {

using bloom::v1::PipelineResponse;

namespace {

using Kind = PipelineOperationView::Kind;

// Whether b may be served in one store call with a (same kind, same filter, and for adds the
// same create_if_missing, compared as bytes: equal specs encoded differently are served apart,
// which is only slower).
bool Mergeable(const PipelineOperationView& a, const PipelineOperationView& b) {
  if (a.kind != b.kind || a.request.name != b.request.name) return false;
  // Each remove answers its own removed[]; a count is a call of its own too (they are rare
  // enough that merging them would only add code).
  if (a.kind == Kind::kRemove || a.kind == Kind::kCount) return false;
  return a.kind != Kind::kAdd || a.request.create_if_missing == b.request.create_if_missing;
}

// The RPC table's row of an operation.
rpcs::Rpc RpcOf(Kind kind) {
  switch (kind) {
    case Kind::kAdd:
      return rpcs::Rpc::kPipelineAdd;
    case Kind::kRemove:
      return rpcs::Rpc::kPipelineRemove;
    case Kind::kCount:
      return rpcs::Rpc::kPipelineCount;
    default:
      return rpcs::Rpc::kPipelineMightContain;
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const PipelineBatch::Message>> PipelineBatch::Read(
    std::shared_ptr<const void> keep, absl::string_view bytes, size_t max_operations) {
  size_t operations = 0;
  uint64_t id = 0;
  if (!CountPipelineOperations(bytes, &operations, &id)) {
    return absl::InvalidArgumentError("a PipelineRequest is not well-formed");
  }
  if (max_operations > 0 && operations > max_operations) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineRequest id ", id, " carries ", operations,
                     " operations (itself and its `more`); the limit is ", max_operations,
                     " (--max_pipeline_operations)"));
  }
  auto message = std::make_shared<Message>();
  message->bytes = std::move(keep);
  if (!ParsePipelineRequest(bytes, &message->operations, &message->merged)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineRequest id ", id, " is not well-formed"));
  }
  const std::vector<PipelineOperationView>& read = message->operations;
  if (read.front().kind == Kind::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PipelineRequest id ", id, " has no operation (add, might_contain, remove or count)"));
  }
  for (size_t i = 1; i < read.size(); ++i) {
    if (read[i].kind == Kind::kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("PipelineRequest id ", id, ": more (id ", read[i].id,
                       ") has no operation (add, might_contain, remove or count)"));
    }
    if (read[i].nested_more > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("PipelineRequest id ", id, ": more (id ", read[i].id,
                       ") has a `more` of its own; operations nest one level only"));
    }
  }
  return std::shared_ptr<const Message>(std::move(message));
}

void SetOperationError(const absl::Status& status, PipelineResponse& response) {
  bloom::v1::OperationError* error = response.mutable_error();
  error->set_code(static_cast<int32_t>(status.code()));
  error->set_message(status.message().data(), status.message().size());
}

PipelineBatch::PipelineBatch(BloomService* service, Caller caller)
    : service_(service), caller_(std::move(caller)) {}

void PipelineBatch::Take(std::vector<Operation>& pending) {
  operations_.swap(pending);  // both keep their capacity for the next batch
  pending.clear();
  responses_.clear();
  responses_.resize(operations_.size());
  forwarded_.clear();
  deferred_sync_ = false;
}

bool PipelineBatch::has_writes() const {
  return std::any_of(operations_.begin(), operations_.end(), [](const Operation& operation) {
    return operation.view().kind == Kind::kAdd || operation.view().kind == Kind::kRemove;
  });
}

void PipelineBatch::Clear() {
  operations_.clear();
  responses_.clear();
  queued_.clear();
  forwarded_.clear();
}

ShardRouter::Decision PipelineBatch::RouteOf(const Operation& operation) const {
  ShardRouter* router = service_->hooks().router;
  if (router == nullptr) return {};
  const absl::string_view names[] = {operation.view().request.name};
  return router->Decide(rpcs::Info(RpcOf(operation.view().kind)), names, nullptr);
}

void PipelineBatch::Queue(storage::OperationBatch& store_batch,
                          const std::atomic<bool>& abandoned) {
  queued_.clear();
  size_t begin = 0;
  while (begin < operations_.size()) {
    if (abandoned.load(std::memory_order_relaxed)) {
      // Nobody will read the answers: the rest of the batch is not served (and, being
      // unacknowledged, needs no answer).
      operations_.resize(begin);
      responses_.resize(begin);
      return;
    }
    size_t end = begin + 1;
    while (end < operations_.size() &&
           Mergeable(operations_[begin].view(), operations_[end].view())) {
      ++end;
    }
    const absl::Time start = absl::Now();
    const auto run = absl::MakeConstSpan(operations_).subspan(begin, end - begin);
    const auto run_responses = absl::MakeSpan(responses_).subspan(begin, end - begin);
    // In a sharded deployment, operations on other groups' filters go to their owners
    // (pipeline_forward.h); those refused here (writes paused, no owner up) answer why.
    if (const ShardRouter::Decision route = RouteOf(run.front());
        !route.here && !route.refusal.ok()) {
      const absl::Status refused(static_cast<absl::StatusCode>(route.refusal.error_code()),
                                 route.refusal.error_message());
      for (PipelineResponse& response : run_responses) SetOperationError(refused, response);
      RecordRun(begin, end, absl::Now() - start);
    } else if (!route.here) {
      for (size_t i = begin; i < end; ++i) forwarded_.push_back(i);
    } else if (run.front().view().kind == Kind::kAdd) {
      deferred_sync_ = service_->store()->syncs_adds();
      QueueAdds(store_batch, run, run_responses, queued_.emplace_back(begin, end, start));
    } else if (run.front().view().kind == Kind::kCount) {
      AnswerCount(store_batch, run.front(), run_responses.front());
      RecordRun(begin, end, absl::Now() - start);
    } else if (run.front().view().kind == Kind::kRemove) {
      // Written now, without waiting for the fsync: answered once the batch's is done.
      deferred_sync_ = service_->store()->syncs_adds();
      AnswerRemoves(store_batch, run, run_responses);
      SettleWrites(run, run_responses);
      RecordRun(begin, end, absl::Now() - start);
    } else {
      AnswerChecks(store_batch, run, run_responses);
      RecordRun(begin, end, absl::Now() - start);
    }
    begin = end;
  }
}
void PipelineBatch::Answer(storage::OperationBatch& store_batch) {
  for (QueuedRun& run : queued_) {
    const Run operations = absl::MakeConstSpan(operations_).subspan(run.begin, run.end - run.begin);
    const Responses responses = absl::MakeSpan(responses_).subspan(run.begin, run.end - run.begin);
    TakeAdds(store_batch, operations, responses, run);
    SettleWrites(operations, responses);
    RecordRun(run.begin, run.end, absl::Now() - run.start);
  }
}
void PipelineBatch::SettleWrites(Run run, Responses responses) {
  const ShardRouter* router = service_->hooks().router;
  if (router == nullptr) return;
  for (size_t i = 0; i < run.size(); ++i) {
    if (!responses[i].has_add() && !responses[i].has_remove()) continue;  // failed already
    const absl::string_view names[] = {run[i].view().request.name};
    if (absl::Status settled = router->SettleWrite(names, nullptr); !settled.ok()) {
      SetOperationError(settled, responses[i]);
    }
  }
}

void PipelineBatch::Fail(const absl::Status& why) {
  for (PipelineResponse& response : responses_) SetOperationError(why, response);
}
void PipelineBatch::QueueAdds(storage::OperationBatch& store_batch, Run run, Responses responses,
                              QueuedRun& queued) {
  if (absl::Status allowed = RequireRole(caller_, RoleFor(rpcs::Rpc::kPipelineAdd), "Pipeline add");
      !allowed.ok()) {
    for (PipelineResponse& response : responses) SetOperationError(allowed, response);
    queued.failed.assign(run.size(), true);
    return;
  }
  const ItemsRequestView& first = run.front().view().request;
  absl::StatusOr<absl::optional<bloom::FilterParams>> create_spec =
      BloomService::CreateSpecOf(first);
  std::vector<absl::string_view> items;
  if (run.size() > 1 && create_spec.ok()) {
    bool valid = true;
    for (const Operation& read : run) {
      valid = valid && service_->CollectItems(read.view().request, items).ok();
      queued.ends.push_back(items.size());
    }
    if (valid) {
      queued.merged = true;
      queued.tickets.push_back(
          store_batch.Add(first.name, items, create_spec->has_value() ? &**create_spec : nullptr));
      return;
    }
    queued.ends.clear();
  }
  QueueEach(store_batch, run, responses, queued);
}

// One ticket per operation of the run; invalid ones are answered at once.
void PipelineBatch::QueueEach(storage::OperationBatch& store_batch, Run run, Responses responses,
                              QueuedRun& queued) {
  queued.merged = false;
  queued.tickets.assign(run.size(), 0);
  queued.failed.assign(run.size(), false);
  std::vector<absl::string_view> items;
  for (size_t i = 0; i < run.size(); ++i) {
    const ItemsRequestView& add = run[i].view().request;
    items.clear();
    absl::Status valid = service_->CollectItems(add, items);
    absl::StatusOr<absl::optional<bloom::FilterParams>> create_spec =
        valid.ok() ? BloomService::CreateSpecOf(add) : valid;
    if (!create_spec.ok()) {
      SetOperationError(create_spec.status(), responses[i]);
      queued.failed[i] = true;
      continue;
    }
    queued.tickets[i] =
        store_batch.Add(add.name, items, create_spec->has_value() ? &**create_spec : nullptr);
  }
}

// Answers a queued run once the batch is written. A merged add that failed is queued again
// one operation at a time, so each gets the answer it would get alone (e.g. a full
// non-scaling filter may still hold the first operation's items).
void PipelineBatch::TakeAdds(storage::OperationBatch& store_batch, Run run, Responses responses,
                             QueuedRun& queued) {
  if (queued.merged) {
    absl::StatusOr<std::unique_ptr<bool[]>> added = store_batch.TakeAnswers(queued.tickets.front());
    if (added.ok()) {
      size_t begin = 0;
      for (size_t i = 0; i < run.size(); ++i) {
        responses[i].mutable_add()->set_sequence(service_->store()->LatestSequence());
        responses[i].mutable_add()->mutable_added()->Add(added->get() + begin,
                                                         added->get() + queued.ends[i]);
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
      SetOperationError(added.status(), responses[i]);
      continue;
    }
    responses[i].mutable_add()->set_sequence(service_->store()->LatestSequence());
    auto* answers = responses[i].mutable_add()->mutable_added();
    answers->Reserve(static_cast<int>(added->size()));
    for (bool a : *added) answers->Add(a);
  }
}

void PipelineBatch::AnswerRemoves(storage::OperationBatch& store_batch, Run run,
                                  Responses responses) {
  std::vector<absl::string_view> items;
  for (size_t i = 0; i < run.size(); ++i) {
    const ItemsRequestView& request = run[i].view().request;
    items.clear();
    absl::Status status =
        RequireRole(caller_, RoleFor(rpcs::Rpc::kPipelineRemove), "Pipeline remove");
    if (status.ok()) status = service_->CollectItems(request, items);
    absl::StatusOr<std::vector<bool>> removed = status.ok()
                                                    ? store_batch.RemoveItems(request.name, items)
                                                    : absl::StatusOr<std::vector<bool>>(status);
    if (!removed.ok()) {
      SetOperationError(removed.status(), responses[i]);
      continue;
    }
    bloom::v1::RemoveResponse* answer = responses[i].mutable_remove();
    answer->mutable_removed()->Add(removed->begin(), removed->end());
    answer->set_sequence(service_->store()->LatestSequence());
  }
}

void PipelineBatch::AnswerCount(storage::OperationBatch& store_batch, const Operation& operation,
                                PipelineResponse& response) {
  const ItemsRequestView& request = operation.view().request;
  std::vector<absl::string_view> items;
  absl::Status status = service_->CollectItems(request, items);
  absl::StatusOr<std::vector<uint32_t>> counts =
      status.ok() ? store_batch.Count(request.name, items)
                  : absl::StatusOr<std::vector<uint32_t>>(status);
  if (!counts.ok()) {
    SetOperationError(counts.status(), response);
    return;
  }
  response.mutable_count()->mutable_counts()->Add(counts->begin(), counts->end());
}

// Checks of one filter: one store call for all, or one each if that fails (so each gets the
// answer it would get alone, absent_if_missing included).
void PipelineBatch::AnswerChecks(storage::OperationBatch& store_batch, Run run,
                                 Responses responses) {
  std::vector<absl::string_view> items;
  if (run.size() > 1) {
    std::vector<size_t> ends;
    bool valid = true;
    for (const Operation& read : run) {
      valid = valid && service_->CollectItems(read.view().request, items).ok();
      ends.push_back(items.size());
    }
    std::unique_ptr<bool[]> present(new bool[items.size()]);
    if (valid &&
        store_batch.MightContainInto(run.front().view().request.name, items, present.get()).ok()) {
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
    const ItemsRequestView& request = run[i].view().request;
    items.clear();
    absl::Status status = service_->CollectItems(request, items);
    std::unique_ptr<bool[]> present(new bool[items.size()]);
    if (status.ok()) {
      status =
          AbsentIfMissing(store_batch.MightContainInto(request.name, items, present.get()),
                          request.absent_if_missing, absl::MakeSpan(present.get(), items.size()));
    }
    if (!status.ok()) {
      SetOperationError(status, responses[i]);
      continue;
    }
    auto* answers = responses[i].mutable_might_contain()->mutable_present();
    answers->Reserve(static_cast<int>(items.size()));
    for (size_t k = 0; k < items.size(); ++k) answers->Add(present[k]);
  }
}

void PipelineBatch::RecordRun(size_t begin, size_t end, absl::Duration took) {
  metrics::ServerMetrics* metrics = service_->hooks().metrics;
  if (metrics == nullptr) return;
  for (size_t i = begin; i < end; ++i) {
    const PipelineOperationView& view = operations_[i].view();
    const size_t items = view.request.items.size();
    const auto code = responses_[i].has_error()
                          ? static_cast<absl::StatusCode>(responses_[i].error().code())
                          : absl::StatusCode::kOk;
    metrics->RecordRpc(RpcOf(view.kind), code, took, items);
  }
}

}  // namespace service
