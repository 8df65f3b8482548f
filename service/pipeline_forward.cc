// A Pipeline stream's operations on other groups' filters, as unary calls to their owners
// (pipeline_forward.h).
#include "service/pipeline_forward.h"

#include <deque>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"
#include "common/rpcs.h"
#include "service/pipeline_batch.h"

namespace service {

using Kind = PipelineOperationView::Kind;
using bloom::v1::PipelineResponse;

namespace {

// Bytes of items in one merged call: well under gRPC's 4 MiB message bound.
constexpr size_t kMaxMergedBytes = 1 << 20;

// One operation waiting for its call: a copy of what the stream read.
struct Waiting {
  Kind kind = Kind::kNone;
  std::vector<std::string> items;
  std::string create_if_missing;  // the FilterSpec encodings, concatenated (protobuf merges them)
  bool absent_if_missing = false;
  uint64_t min_sequence = 0;
  bool alone = false;  // sent again alone after the call it was merged into failed
  size_t bytes = 0;
  PipelineForwards::Answered answered;

  // Whether `next` can go in the same call, right after this.
  bool Joins(const Waiting& next) const {
    return !alone && !next.alone && next.kind == kind &&
           (kind == Kind::kAdd || kind == Kind::kMightContain) &&
           next.create_if_missing == create_if_missing &&
           next.absent_if_missing == absent_if_missing && next.min_sequence == min_sequence;
  }
};

// The operations one call carries, in order.
using Call = std::vector<Waiting>;

rpcs::Rpc UnaryRpc(Kind kind) {
  switch (kind) {
    case Kind::kAdd:
      return rpcs::Rpc::kAdd;
    case Kind::kRemove:
      return rpcs::Rpc::kRemove;
    case Kind::kCount:
      return rpcs::Rpc::kCount;
    default:
      return rpcs::Rpc::kMightContain;
  }
}

// The unary request `call` stands for (every item as raw_items: bytes hash alike either way,
// and the answers stay in the operations' order).
std::unique_ptr<google::protobuf::Message> RequestOf(const std::string& name, const Call& call) {
  const Waiting& first = call.front();
  auto fill = [&](auto& request) {
    request.set_name(name);
    for (const Waiting& operation : call) {
      for (const std::string& item : operation.items) request.add_raw_items(item);
    }
  };
  switch (first.kind) {
    case Kind::kAdd: {
      auto request = std::make_unique<bloom::v1::AddRequest>();
      fill(*request);
      if (!first.create_if_missing.empty() &&
          !request->mutable_create_if_missing()->ParseFromString(first.create_if_missing)) {
        return nullptr;  // the stream parsed it, so this does not happen
      }
      return request;
    }
    case Kind::kRemove: {
      auto request = std::make_unique<bloom::v1::RemoveRequest>();
      fill(*request);
      return request;
    }
    case Kind::kCount: {
      auto request = std::make_unique<bloom::v1::CountRequest>();
      fill(*request);
      request->set_min_sequence(first.min_sequence);
      return request;
    }
    default: {
      auto request = std::make_unique<bloom::v1::MightContainRequest>();
      fill(*request);
      request->set_absent_if_missing(first.absent_if_missing);
      request->set_min_sequence(first.min_sequence);
      return request;
    }
  }
}

std::unique_ptr<google::protobuf::Message> ResponseFor(Kind kind) {
  switch (kind) {
    case Kind::kAdd:
      return std::make_unique<bloom::v1::AddResponse>();
    case Kind::kRemove:
      return std::make_unique<bloom::v1::RemoveResponse>();
    case Kind::kCount:
      return std::make_unique<bloom::v1::CountResponse>();
    default:
      return std::make_unique<bloom::v1::MightContainResponse>();
  }
}

// Each operation's share of the call's answer (its items' values, in order); an error for all
// if the answer does not have a value per item.
std::vector<PipelineResponse> Split(const Call& call, const google::protobuf::Message& answer) {
  size_t total = 0;
  for (const Waiting& operation : call) total += operation.items.size();
  std::vector<PipelineResponse> results(call.size());
  auto split = [&](const auto& values, auto set) {
    if (static_cast<size_t>(values.size()) != total) {
      for (PipelineResponse& result : results) {
        SetOperationError(
            absl::InternalError(absl::StrCat("the owning group answered ", values.size(),
                                             " values for ", total, " items")),
            result);
      }
      return;
    }
    int next = 0;
    for (size_t i = 0; i < call.size(); ++i) {
      for (size_t k = 0; k < call[i].items.size(); ++k) set(results[i], values.Get(next++));
    }
  };
  switch (call.front().kind) {
    case Kind::kAdd: {
      const auto& added = static_cast<const bloom::v1::AddResponse&>(answer);
      for (PipelineResponse& result : results) result.mutable_add()->set_sequence(added.sequence());
      split(added.added(), [](PipelineResponse& r, bool v) { r.mutable_add()->add_added(v); });
      break;
    }
    case Kind::kRemove: {
      const auto& removed = static_cast<const bloom::v1::RemoveResponse&>(answer);
      results.front().mutable_remove()->set_sequence(removed.sequence());
      split(removed.removed(),
            [](PipelineResponse& r, bool v) { r.mutable_remove()->add_removed(v); });
      break;
    }
    case Kind::kCount: {
      const auto& counted = static_cast<const bloom::v1::CountResponse&>(answer);
      results.front().mutable_count();
      split(counted.counts(),
            [](PipelineResponse& r, uint32_t v) { r.mutable_count()->add_counts(v); });
      break;
    }
    default: {
      const auto& checked = static_cast<const bloom::v1::MightContainResponse&>(answer);
      for (PipelineResponse& result : results) result.mutable_might_contain();
      split(checked.present(),
            [](PipelineResponse& r, bool v) { r.mutable_might_contain()->add_present(v); });
      break;
    }
  }
  return results;
}

void AnswerAll(Call& call, const absl::Status& error) {
  for (Waiting& operation : call) {
    PipelineResponse result;
    SetOperationError(error, result);
    operation.answered(std::move(result));
  }
}

}  // namespace

struct PipelineForwards::Shared {
  // One filter's operations: those not sent yet, and whether a call for it is in flight.
  struct Queue {
    std::deque<Waiting> waiting;
    bool in_flight = false;
  };

  ShardRouter* router;
  grpc::ServerContextBase* caller;
  size_t max_items;
  bloomsync::BlockingMutex mu;
  absl::flat_hash_map<std::string, Queue> queues ABSL_GUARDED_BY(mu);

  // The next call for `name` (its first waiting operation, and those that join it), or none:
  // then nothing is in flight for it.
  Call NextLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Call call;
    auto it = queues.find(name);
    if (it == queues.end()) return call;
    std::deque<Waiting>& waiting = it->second.waiting;
    if (waiting.empty()) {
      queues.erase(it);
      return call;
    }
    size_t items = 0;
    size_t bytes = 0;
    do {
      items += waiting.front().items.size();
      bytes += waiting.front().bytes;
      call.push_back(std::move(waiting.front()));
      waiting.pop_front();
    } while (!waiting.empty() && call.front().Joins(waiting.front()) &&
             items + waiting.front().items.size() <= max_items &&
             bytes + waiting.front().bytes <= kMaxMergedBytes);
    it->second.in_flight = true;
    return call;
  }
};

namespace {

void Finished(const std::shared_ptr<PipelineForwards::Shared>& shared, const std::string& name,
              Call call, const grpc::Status& status, const google::protobuf::Message& answer);

// Sends `call` and the calls for `name` after it, until one is in flight or none is left.
// Calls refused here (no owner up, writes paused, the filter came here) are answered at once.
void Pump(const std::shared_ptr<PipelineForwards::Shared>& shared, const std::string& name,
          Call call) {
  while (!call.empty()) {
    const Kind kind = call.front().kind;
    const rpcs::RpcInfo& info = rpcs::Info(UnaryRpc(kind));
    const absl::string_view names[] = {name};
    // Checks too go to the owner's primary, which holds the adds sent before them (a
    // follower may not have applied them yet).
    const ShardRouter::Decision route =
        shared->router->Decide(info, names, shared->caller, /*fresh_read=*/true);
    absl::Status refused;
    std::unique_ptr<google::protobuf::Message> request;
    if (route.here) {
      refused = absl::UnavailableError(
          absl::StrCat("filter \"", name, "\" came to this pod's group (shard map version ",
                       route.version, ") while the operation waited to be forwarded: retry it"));
    } else if (!route.refusal.ok()) {
      refused = absl::Status(static_cast<absl::StatusCode>(route.refusal.error_code()),
                             route.refusal.error_message());
    } else if (request = RequestOf(name, call); request == nullptr) {
      refused = absl::InvalidArgumentError("create_if_missing could not be read");
    }
    if (refused.ok()) {
      std::shared_ptr<google::protobuf::Message> answer = ResponseFor(kind);
      auto sent = std::make_shared<Call>(std::move(call));
      shared->router->ForwardMessage(
          shared->caller, route, info.path, *request, answer.get(),
          [shared, name, sent, answer](const grpc::Status& status) {
            Finished(shared, name, std::move(*sent), status, *answer);
          },
          ShardRouter::Answer::kOperation);
      return;
    }
    Call answered = std::move(call);
    {
      bloomsync::BlockingLock lock(&shared->mu);
      call = shared->NextLocked(name);
    }
    AnswerAll(answered, refused);
  }
}

void Finished(const std::shared_ptr<PipelineForwards::Shared>& shared, const std::string& name,
              Call call, const grpc::Status& status, const google::protobuf::Message& answer) {
  Call next;
  if (!status.ok() && call.size() > 1) {
    // Each operation again alone, ahead of those that waited behind them.
    bloomsync::BlockingLock lock(&shared->mu);
    std::deque<Waiting>& waiting = shared->queues[name].waiting;
    for (Waiting& operation : call) operation.alone = true;
    waiting.insert(waiting.begin(), std::make_move_iterator(call.begin()),
                   std::make_move_iterator(call.end()));
    next = shared->NextLocked(name);
    call.clear();
  } else {
    bloomsync::BlockingLock lock(&shared->mu);
    next = shared->NextLocked(name);
  }
  if (!call.empty()) {
    if (status.ok()) {
      std::vector<PipelineResponse> results = Split(call, answer);
      for (size_t i = 0; i < call.size(); ++i) call[i].answered(std::move(results[i]));
    } else {
      AnswerAll(call, absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                                   status.error_message()));
    }
  }
  Pump(shared, name, std::move(next));
}

}  // namespace

PipelineForwards::PipelineForwards(ShardRouter* router, grpc::ServerContextBase* caller,
                                   size_t max_items)
    : shared_(std::make_shared<Shared>()) {
  shared_->router = router;
  shared_->caller = caller;
  shared_->max_items = max_items;
}

PipelineForwards::~PipelineForwards() = default;

void PipelineForwards::Send(const PipelineOperationView& operation, Answered answered) {
  Waiting waiting;
  waiting.kind = operation.kind;
  waiting.items.reserve(operation.request.items.size());
  for (absl::string_view item : operation.request.items) {
    waiting.items.emplace_back(item);
    waiting.bytes += item.size();
  }
  for (absl::string_view spec : operation.request.create_if_missing) {
    waiting.create_if_missing.append(spec.data(), spec.size());
  }
  waiting.absent_if_missing = operation.request.absent_if_missing;
  waiting.min_sequence = operation.request.min_sequence;
  waiting.answered = std::move(answered);
  const std::string name(operation.request.name);
  Call call;
  {
    bloomsync::BlockingLock lock(&shared_->mu);
    Shared::Queue& queue = shared_->queues[name];
    queue.waiting.push_back(std::move(waiting));
    if (!queue.in_flight) call = shared_->NextLocked(name);
  }
  Pump(shared_, name, std::move(call));
}

void TakeResult(PipelineResponse&& answer, PipelineResponse& slot) {
  switch (answer.result_case()) {
    case PipelineResponse::kAdd:
      slot.mutable_add()->Swap(answer.mutable_add());
      break;
    case PipelineResponse::kMightContain:
      slot.mutable_might_contain()->Swap(answer.mutable_might_contain());
      break;
    case PipelineResponse::kRemove:
      slot.mutable_remove()->Swap(answer.mutable_remove());
      break;
    case PipelineResponse::kCount:
      slot.mutable_count()->Swap(answer.mutable_count());
      break;
    case PipelineResponse::kError:
      slot.mutable_error()->Swap(answer.mutable_error());
      break;
    case PipelineResponse::RESULT_NOT_SET:
      SetOperationError(absl::InternalError("a forwarded operation came back without an answer"),
                        slot);
      break;
  }
}

}  // namespace service
