#include "service/bloom_service.h"

#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/optional.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "service/convert.h"
#include "service/stream_proxy.h"
#include "service/transfers.h"

namespace service {
namespace {

constexpr uint32_t kMaxPageSize = 1000;
// List and Stats share one thread (call_lane.h): loops of them take at most one core, and
// this many may wait before more are refused.
constexpr size_t kAdminLaneThreads = 1;
constexpr size_t kAdminLaneQueue = 1024;

}  // namespace

// One call in progress: counts it for Drain(), checks that it may run (not draining, deadline
// not passed, token and role), and when done records its metrics and logs one line at debug
// level (request logging is too much for info).
class CallScope {
 public:
  CallScope(BloomService* service, rpcs::Rpc rpc, grpc::ServerContextBase* context,
            absl::string_view name, size_t items = 0)
      : service_(service),
        rpc_(rpc),
        context_(context),
        name_(name),
        items_(items),
        start_(absl::Now()) {
    // Count first, then check: Drain() sets draining_ and then waits for the count, so a call
    // either sees draining_ or is waited for.
    service_->in_flight_.fetch_add(1);
  }
  ~CallScope() { service_->in_flight_.fetch_sub(1); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // OK if the call may run.
  absl::Status Admit() {
    if (service_->draining_.load()) {
      return absl::UnavailableError("the server is shutting down; retry another replica");
    }
    if (context_ != nullptr && context_->deadline() < std::chrono::system_clock::now()) {
      return absl::DeadlineExceededError("the call's deadline passed before it was handled");
    }
    if (service_->hooks_.auth == nullptr) {
      caller_.role = Role::kWrite;  // without token auth every caller may write
      return absl::OkStatus();
    }
    absl::optional<absl::string_view> authorization;
    if (context_ != nullptr) {
      const auto& metadata = context_->client_metadata();
      if (auto it = metadata.find("authorization"); it != metadata.end()) {
        authorization = absl::string_view(it->second.data(), it->second.size());
      }
    }
    absl::StatusOr<Caller> caller =
        service_->hooks_.auth->Authorize(authorization, RoleFor(rpc_), rpcs::Info(rpc_).label);
    if (caller.ok()) {
      caller_ = *std::move(caller);
      return absl::OkStatus();
    }
    service_->RecordAuthRefusal(caller.status(), rpcs::Info(rpc_).label,
                                context_ ? context_->peer() : "in-process");
    return caller.status();
  }

  // After Admit() succeeded with token auth: the token's role and label.
  [[nodiscard]] const Caller& AdmittedCaller() const { return caller_; }

  [[nodiscard]] grpc::Status Done(const absl::Status& status) const {
    const absl::Duration took = absl::Now() - start_;
    if (service_->hooks_.metrics != nullptr) {
      service_->hooks_.metrics->RecordRpc(rpc_, status.code(), took, items_);
    }
    if (bloomlog::Enabled(bloomlog::Level::kDebug)) {
      bloomlog::LogDebug(absl::StrCat(
          "rpc ", rpcs::Info(rpc_).label, " name=", name_, " items=", items_,
          caller_.label.empty() ? "" : absl::StrCat(" caller=", caller_.label),
          " code=", absl::StatusCodeToString(status.code()), " took=", absl::FormatDuration(took)));
    }
    return ToGrpcStatus(status);
  }

 private:
  // At most one line per second, so a client retrying with a bad token cannot flood the log.
  // The token itself is never logged.
  BloomService* const service_;
  const rpcs::Rpc rpc_;
  grpc::ServerContextBase* const context_;
  std::string name_;
  size_t items_;
  absl::Time start_;
  Caller caller_;  // who the token says the caller is (default: no token needed)
};

BloomService::BloomService(storage::FilterStore* store, ServiceLimits limits, ServiceHooks hooks)
    : store_(store),
      limits_(limits),
      hooks_(hooks),
      transfers_({limits.max_transfers, limits.max_transfers_per_client,
                  limits.transfer_idle_timeout, limits.transfer_min_bytes_per_second},
                 hooks.metrics),
      admin_lane_(kAdminLaneThreads, kAdminLaneQueue) {}

template <typename Request>
absl::Status BloomService::CollectItems(const Request& request,
                                        std::vector<absl::string_view>& items) const {
  const size_t first = items.size();
  // Geometric growth: a Pipeline run collects the items of thousands of operations into one
  // vector, and reserving each one's exact size would copy it all each time.
  const size_t needed = first + request.items_size() + request.raw_items_size();
  if (needed > items.capacity()) items.reserve(std::max(needed, 2 * items.capacity()));
  items.insert(items.end(), request.items().begin(), request.items().end());
  items.insert(items.end(), request.raw_items().begin(), request.raw_items().end());
  return CheckItems(absl::MakeConstSpan(items).subspan(first), request.items_size());
}

absl::Status BloomService::CheckItems(absl::Span<const absl::string_view> items,
                                      size_t text_items) const {
  if (items.empty() || items.size() > limits_.max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("items: a request carries 1 to ", limits_.max_batch,
                     " items (items and raw_items together), got ", items.size()));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].size() > limits_.max_item_bytes) {
      const bool text = i < text_items;
      return absl::InvalidArgumentError(
          absl::StrCat(text ? "items" : "raw_items", "[", text ? i : i - text_items, "] is ",
                       items[i].size(), " bytes; the limit is ", limits_.max_item_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status BloomService::CollectItems(const ItemsRequestView& request,
                                        std::vector<absl::string_view>& items) const {
  const size_t first = items.size();
  const size_t needed = first + request.items.size();
  if (needed > items.capacity()) items.reserve(std::max(needed, 2 * items.capacity()));
  items.insert(items.end(), request.items.begin(), request.items.end());
  return CheckItems(absl::MakeConstSpan(items).subspan(first), request.text_items);
}

absl::StatusOr<absl::optional<bloom::FilterParams>> BloomService::CreateSpecOf(
    const ItemsRequestView& request) {
  if (request.create_if_missing.empty()) return absl::nullopt;
  // Concatenated encodings parse as their merge, as protobuf reads a repeated message field.
  bloom::v1::FilterSpec spec;
  if (!spec.ParseFromString(absl::StrJoin(request.create_if_missing, ""))) {
    return absl::InvalidArgumentError("create_if_missing is not a FilterSpec");
  }
  return FromProto(spec);
}

template absl::Status BloomService::CollectItems(const bloom::v1::AddRequest&,
                                                 std::vector<absl::string_view>&) const;
template absl::Status BloomService::CollectItems(const bloom::v1::MightContainRequest&,
                                                 std::vector<absl::string_view>&) const;
template absl::Status BloomService::CollectItems(const bloom::v1::RemoveRequest&,
                                                 std::vector<absl::string_view>&) const;
template absl::Status BloomService::CollectItems(const bloom::v1::CountRequest&,
                                                 std::vector<absl::string_view>&) const;

namespace {

// Runs `start` with a Finish and waits for it to be called: the in-process forms of the
// handlers that answer through one (tests and fuzzers).
template <typename Start>
grpc::Status WaitFor(Start start) {
  std::promise<grpc::Status> finished;
  std::future<grpc::Status> status = finished.get_future();
  start([&finished](grpc::Status done) { finished.set_value(std::move(done)); });
  return status.get();
}

// Answers a write made without waiting to be acknowledged (filter_store.h: defer_ack, or
// defer_sync with `durable`) through `finish` once the store acknowledges it: at once without
// --min_replica_acks, the fence (or, `durable`, --sync), else from the thread that hears the
// followers (or the WAL syncer's). `answer` runs first if it is acknowledged; a refused write
// is answered at once. `log` counts the call as in flight until then. No thread waits
// meanwhile: a stalled follower or a slow disk cannot tie up the gRPC threads.
void AnswerOnceAcknowledged(storage::FilterStore* store, std::unique_ptr<CallScope> log,
                            const absl::Status& written, absl::AnyInvocable<void() &&> answer,
                            BloomService::Finish finish, bool durable = false) {
  if (!written.ok()) {
    std::move(finish)(log->Done(written));
    return;
  }
  auto acknowledged = [log = std::move(log), answer = std::move(answer),
                       finish = std::move(finish)](const absl::Status& status) mutable {
    if (status.ok()) std::move(answer)();
    std::move(finish)(log->Done(status));
  };
  if (durable) {
    store->WhenDurable(std::move(acknowledged));
  } else {
    store->WhenReplicated(std::move(acknowledged));
  }
}

}  // namespace

void BloomService::HandleReserveThen(const bloom::v1::ReserveRequest& request,
                                     bloom::v1::ReserveResponse* response,
                                     grpc::ServerContextBase* context, Finish finish) {
  auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kReserve, context, request.name());
  absl::StatusOr<storage::FilterStore::ReserveResult> result;
  if (absl::Status admitted = log->Admit(); !admitted.ok()) {
    result = admitted;
  } else if (!request.like().empty()) {
    result = request.has_spec()
                 ? absl::InvalidArgumentError("give spec or like, not both")
                 : store_->ReserveLike(request.name(), request.like(), /*defer_ack=*/true);
  } else if (!request.has_spec()) {
    result = absl::InvalidArgumentError("spec (or like) is required");
  } else {
    result = store_->Reserve(request.name(), FromProto(request.spec()), /*defer_ack=*/true);
  }
  const absl::Status written = result.status();
  AnswerOnceAcknowledged(
      store_, std::move(log), written,
      [store = store_, response, result = std::move(result)]() mutable {
        response->set_created(result->created);
        ToProto(result->info, response->mutable_stats());
        response->set_sequence(store->LatestSequence());
      },
      std::move(finish));
}

grpc::Status BloomService::HandleReserve(const bloom::v1::ReserveRequest& request,
                                         bloom::v1::ReserveResponse* response,
                                         grpc::ServerContextBase* context) {
  return WaitFor(
      [&](Finish finish) { HandleReserveThen(request, response, context, std::move(finish)); });
}

namespace {

// An Add/MightContainRequest message as the views direct_parse.h reads off the wire: its
// items, then its raw_items, pointing into the message.
template <typename Request>
ItemsRequestView ViewOf(const Request& request) {
  ItemsRequestView view;
  view.name = request.name();
  view.items.reserve(request.items_size() + request.raw_items_size());
  for (const std::string& item : request.items()) view.items.emplace_back(item);
  view.text_items = view.items.size();
  for (const std::string& item : request.raw_items()) view.items.emplace_back(item);
  return view;
}

}  // namespace

grpc::Status BloomService::HandleAdd(const bloom::v1::AddRequest& request,
                                     bloom::v1::AddResponse* response,
                                     grpc::ServerContextBase* context) {
  // The path of the server's own unary Add: the request as views (as direct_parse.h reads it
  // off the wire), served through the group committer. So in-process callers (tests, fuzzing)
  // exercise what production runs.
  ItemsRequestView view = ViewOf(request);
  std::string create_spec;
  if (request.has_create_if_missing()) {
    create_spec = request.create_if_missing().SerializeAsString();
    view.create_if_missing.emplace_back(create_spec);
  }
  std::unique_ptr<bool[]> added(new bool[view.items.size()]);
  grpc::Status status = HandleAddItems(view, added.get(), context);
  if (status.ok()) {
    response->mutable_added()->Add(added.get(), added.get() + view.items.size());
    response->set_sequence(store_->LatestSequence());
  }
  return status;
}

grpc::Status BloomService::HandleMightContain(const bloom::v1::MightContainRequest& request,
                                              bloom::v1::MightContainResponse* response,
                                              grpc::ServerContextBase* context) {
  // The path of the server's own unary MightContain, as HandleAdd's.
  ItemsRequestView view = ViewOf(request);
  view.absent_if_missing = request.absent_if_missing();
  view.min_sequence = request.min_sequence();
  std::unique_ptr<bool[]> present(new bool[view.items.size()]);
  grpc::Status status = HandleMightContainItems(view, present.get(), context);
  if (status.ok()) {
    response->mutable_present()->Add(present.get(), present.get() + view.items.size());
  }
  return status;
}

absl::Status AbsentIfMissing(absl::Status checked, bool absent_if_missing,
                             absl::Span<bool> present) {
  if (!absl::IsNotFound(checked) || !absent_if_missing) return checked;
  std::fill(present.begin(), present.end(), false);  // never added
  return absl::OkStatus();
}

namespace {

// One Add call served through the store's group committer (storage/write/group_commit.h). It owns
// its CallScope (the call counts as in flight until `finish`) and deletes itself once
// finished; the request's bytes and `answers` belong to the caller until then.
class AddCallJob final : public storage::GroupCommitter::Job {
 public:
  using Finish = absl::AnyInvocable<void(grpc::Status) &&>;

  AddCallJob(storage::FilterStore* store, std::unique_ptr<CallScope> log,
             const ItemsRequestView& request, absl::optional<bloom::FilterParams> create_spec,
             bool* answers, Finish finish)
      : store_(store),
        log_(std::move(log)),
        request_(request),
        create_spec_(create_spec),
        answers_(answers),
        finish_(std::move(finish)) {}

  void Queue(storage::OperationBatch& batch) override {
    ticket_ = batch.Add(request_.name, request_.items,
                        create_spec_.has_value() ? &*create_spec_ : nullptr);
  }
  void Answer(storage::OperationBatch& batch) override {
    absl::StatusOr<std::unique_ptr<bool[]>> added = batch.TakeAnswers(ticket_);
    status_ = added.status();
    if (added.ok()) std::copy_n(added->get(), request_.items.size(), answers_);
  }
  void Fail(const absl::Status& why) override { status_ = why; }
  void Done() override {
    if (status_.ok() && store_->syncs_adds()) {
      // --sync: answered once the WAL syncer's group fsync covers the add, from its thread.
      store_->WhenDurable([this](const absl::Status& synced) { Complete(synced); });
      return;
    }
    Complete(status_);
  }

 private:
  void Complete(const absl::Status& status) {
    std::move(finish_)(log_->Done(status));
    delete this;
  }

  storage::FilterStore* const store_;
  const std::unique_ptr<CallScope> log_;
  const ItemsRequestView& request_;  // the caller's, valid until `finish`
  const absl::optional<bloom::FilterParams> create_spec_;
  bool* const answers_;
  Finish finish_;
  storage::OperationBatch::Ticket ticket_ = 0;
  absl::Status status_;
};

}  // namespace

void BloomService::HandleAddItemsGrouped(const ItemsRequestView& request, bool* answers,
                                         grpc::ServerContextBase* context,
                                         absl::AnyInvocable<void(grpc::Status) &&> finish) {
  auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kAdd, context, request.name,
                                         request.items.size());
  absl::Status status = log->Admit();
  if (status.ok()) status = CheckItems(request.items, request.text_items);
  absl::optional<bloom::FilterParams> create_spec;
  if (status.ok()) {
    absl::StatusOr<absl::optional<bloom::FilterParams>> spec = CreateSpecOf(request);
    if (spec.ok()) {
      create_spec = *std::move(spec);
    } else {
      status = spec.status();
    }
  }
  if (!status.ok()) {
    std::move(finish)(log->Done(status));
    return;
  }
  // Served now on this thread, or by the thread already serving other calls' adds; the job
  // deletes itself once `finish` has run.
  store_->committer().Submit(
      new AddCallJob(store_, std::move(log), request, create_spec, answers, std::move(finish)));
}

grpc::Status BloomService::HandleAddItems(const ItemsRequestView& request, bool* answers,
                                          grpc::ServerContextBase* context) {
  return WaitFor(
      [&](Finish finish) { HandleAddItemsGrouped(request, answers, context, std::move(finish)); });
}

grpc::Status BloomService::HandleMightContainItems(const ItemsRequestView& request, bool* answers,
                                                   grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kMightContain, context, request.name, request.items.size());
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  if (absl::Status valid = CheckItems(request.items, request.text_items); !valid.ok()) {
    return log.Done(valid);
  }
  return log.Done(AbsentIfMissing(store_->MightContainInto(request.name, request.items, answers),
                                  request.absent_if_missing,
                                  absl::MakeSpan(answers, request.items.size())));
}

absl::StatusOr<std::string> BloomService::ProxyClient(grpc::CallbackServerContext* context,
                                                      rpcs::Rpc rpc) {
  absl::StatusOr<Caller> caller = AdmitStream(context, rpc);
  if (!caller.ok()) return caller.status();
  return ClientKey(*caller, context->peer());
}

absl::StatusOr<Caller> BloomService::AdmitStream(grpc::ServerContextBase* context, rpcs::Rpc rpc) {
  CallScope scope(this, rpc, context, "");
  if (absl::Status admitted = scope.Admit(); !admitted.ok()) {
    // The refused stream is counted here; an admitted one when it ends (pipeline.cc).
    (void)scope.Done(admitted);
    return admitted;
  }
  return scope.AdmittedCaller();
}

grpc::Status BloomService::HandleStats(const bloom::v1::StatsRequest& request,
                                       bloom::v1::StatsResponse* response,
                                       grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kStats, context, request.name());
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  absl::StatusOr<storage::FilterInfo> info = store_->Stats(request.name());
  if (info.ok()) ToProto(*info, response->mutable_stats());
  return log.Done(info.status());
}

void BloomService::HandleDeleteThen(const bloom::v1::DeleteRequest& request,
                                    bloom::v1::DeleteResponse* response,
                                    grpc::ServerContextBase* context, Finish finish) {
  auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kDelete, context, request.name());
  absl::Status written = log->Admit();
  if (written.ok()) written = store_->Delete(request.name(), /*defer_ack=*/true);
  AnswerOnceAcknowledged(
      store_, std::move(log), written,
      [store = store_, response] { response->set_sequence(store->LatestSequence()); },
      std::move(finish));
}

grpc::Status BloomService::HandleDelete(const bloom::v1::DeleteRequest& request,
                                        grpc::ServerContextBase* context) {
  bloom::v1::DeleteResponse response;
  return WaitFor(
      [&](Finish finish) { HandleDeleteThen(request, &response, context, std::move(finish)); });
}

void BloomService::HandleMergeThen(const bloom::v1::MergeRequest& request,
                                   bloom::v1::MergeResponse* response,
                                   grpc::ServerContextBase* context, Finish finish) {
  auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kMerge, context, request.target());
  absl::StatusOr<storage::FilterInfo> merged;
  if (absl::Status admitted = log->Admit(); !admitted.ok()) {
    merged = admitted;
  } else if (static_cast<size_t>(request.sources_size()) > storage::FilterStore::kMaxMergeSources) {
    // The store refuses more sources too; this is before copying them.
    merged = absl::InvalidArgumentError(absl::StrCat("sources names ", request.sources_size(),
                                                     " filters; at most ",
                                                     storage::FilterStore::kMaxMergeSources));
  } else {
    const std::vector<std::string> sources(request.sources().begin(), request.sources().end());
    merged = store_->Merge(request.target(), sources, /*defer_ack=*/true);
  }
  const absl::Status written = merged.status();
  AnswerOnceAcknowledged(
      store_, std::move(log), written,
      [store = store_, response, merged = std::move(merged)]() mutable {
        ToProto(*merged, response->mutable_stats());
        response->set_sequence(store->LatestSequence());
      },
      std::move(finish));
}

grpc::Status BloomService::HandleMerge(const bloom::v1::MergeRequest& request,
                                       bloom::v1::MergeResponse* response,
                                       grpc::ServerContextBase* context) {
  return WaitFor(
      [&](Finish finish) { HandleMergeThen(request, response, context, std::move(finish)); });
}

void BloomService::HandleRemoveThen(const bloom::v1::RemoveRequest& request,
                                    bloom::v1::RemoveResponse* response,
                                    grpc::ServerContextBase* context, Finish finish) {
  auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kRemove, context, request.name(),
                                         request.items_size() + request.raw_items_size());
  absl::Status status = log->Admit();
  std::vector<absl::string_view> items;
  if (status.ok()) status = CollectItems(request, items);
  // Written without waiting for the fsync (--sync) or the followers, and answered once
  // durable: concurrent writes share the fsync, and no gRPC thread waits for it.
  absl::StatusOr<std::vector<bool>> removed =
      status.ok() ? store_->RemoveItems(request.name(), items, /*defer_sync=*/true)
                  : absl::StatusOr<std::vector<bool>>(status);
  const absl::Status written = removed.status();
  AnswerOnceAcknowledged(
      store_, std::move(log), written,
      [store = store_, response, removed = std::move(removed)]() mutable {
        response->mutable_removed()->Add(removed->begin(), removed->end());
        response->set_sequence(store->LatestSequence());
      },
      std::move(finish), /*durable=*/true);
}

grpc::Status BloomService::HandleRemove(const bloom::v1::RemoveRequest& request,
                                        bloom::v1::RemoveResponse* response,
                                        grpc::ServerContextBase* context) {
  return WaitFor(
      [&](Finish finish) { HandleRemoveThen(request, response, context, std::move(finish)); });
}

grpc::Status BloomService::HandleCount(const bloom::v1::CountRequest& request,
                                       bloom::v1::CountResponse* response,
                                       grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kCount, context, request.name(),
                request.items_size() + request.raw_items_size());
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  std::vector<absl::string_view> items;
  if (absl::Status valid = CollectItems(request, items); !valid.ok()) return log.Done(valid);
  absl::StatusOr<std::vector<uint32_t>> counts = store_->Count(request.name(), items);
  if (counts.ok()) response->mutable_counts()->Add(counts->begin(), counts->end());
  return log.Done(counts.status());
}

grpc::Status BloomService::HandleList(const bloom::v1::ListRequest& request,
                                      bloom::v1::ListResponse* response,
                                      grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kList, context, request.prefix());
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  // As in Google's AIP-158, larger values are coerced to the maximum; 0 gets the store's
  // default page size (100).
  const uint32_t page_size = std::min(request.page_size(), kMaxPageSize);
  absl::StatusOr<storage::FilterStore::ListPage> page =
      store_->List(request.prefix(), page_size, request.page_token());
  if (page.ok()) {
    for (const storage::FilterInfo& info : page->filters) ToProto(info, response->add_filters());
    response->set_next_page_token(page->next_page_token);
  }
  return log.Done(page.status());
}

grpc::ServerWriteReactor<bloom::v1::ExportChunk>* BloomService::Export(
    grpc::CallbackServerContext* context, const bloom::v1::ExportRequest* request) {
  return StartExport(this, context, *request);
}

grpc::ServerReadReactor<bloom::v1::ImportChunk>* BloomService::Import(
    grpc::CallbackServerContext* context, bloom::v1::ImportResponse* response) {
  // A follower takes no writes: the whole stream goes to the primary.
  if (hooks_.forwarder != nullptr) {
    return ProxyImport(hooks_.forwarder, context, response,
                       ProxyClient(context, rpcs::Rpc::kImport), proxied_, &transfers_);
  }
  return StartImport(this, context, response);
}

void BloomService::RecordAuthRefusal(const absl::Status& status, absl::string_view method,
                                     absl::string_view peer) {
  if (hooks_.metrics != nullptr) hooks_.metrics->RecordAuthFailure(status.code());
  const int64_t now = absl::ToUnixMicros(absl::Now());
  int64_t last = last_auth_log_micros_.load();
  if (now - last < 1'000'000 || !last_auth_log_micros_.compare_exchange_strong(last, now)) {
    return;
  }
  bloomlog::LogWarning(absl::StrCat(
      "refused ", method, " from ", peer, ": ", absl::StatusCodeToString(status.code()), ": ",
      status.message(),
      " (further refusals this second are counted in bloom_auth_failures_total, not logged)"));
}

bool BloomService::Drain(absl::Time deadline) {
  draining_.store(true);
  // Pipeline streams live as long as their clients like: ask them to answer what they have
  // read and end, then wait for them as for every other call.
  pipelines_.ShutdownAll();
  // A follower's streams to the primary: the same, once the primary has answered what went up.
  proxied_->DrainAll();
  // Calls already on their way (in the connections' buffers, or a process that was paused)
  // arrive after this: a moment more lets them be refused UNAVAILABLE, which clients retry,
  // rather than cancelled by the transport's shutdown.
  const absl::Time late_calls_answered = std::min(deadline, absl::Now() + absl::Milliseconds(100));
  while (in_flight_.load() > 0 || !pipelines_.empty() || !proxied_->empty() ||
         transfers_.active() > 0 || absl::Now() < late_calls_answered) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* BloomService::Pipeline(
    grpc::CallbackServerContext* context) {
  // On a follower, the whole stream goes to the primary (its adds must, and a check after an
  // add of the same item must see it).
  if (hooks_.forwarder != nullptr) {
    return ProxyPipeline(hooks_.forwarder, context, ProxyClient(context, rpcs::Rpc::kPipeline),
                         proxied_);
  }
  return pipelines_.Start(this, context);
}

}  // namespace service
