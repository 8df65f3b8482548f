#include "service/bloom_service.h"

#include <algorithm>
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
#include "service/call_scope.h"
#include "service/convert.h"
#include "service/sharded_list.h"
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

void BloomService::HandleReserveThen(const bloom::v1::ReserveRequest& request,
                                     bloom::v1::ReserveResponse* response,
                                     grpc::ServerContextBase* context, Finish finish) {
  if (ServeReserveLikeAcrossGroups(request, response, context, finish)) return;
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
  AnswerReserve(std::move(log), std::move(result), response, std::move(finish));
}

void BloomService::AnswerReserve(std::unique_ptr<CallScope> log,
                                 absl::StatusOr<storage::FilterStore::ReserveResult> result,
                                 bloom::v1::ReserveResponse* response, Finish finish) {
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
  if (ServeMergeAcrossGroups(request, response, context, finish)) return;
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
  AnswerMerge(std::move(log), std::move(merged), response, std::move(finish));
}

void BloomService::AnswerMerge(std::unique_ptr<CallScope> log,
                               absl::StatusOr<storage::FilterInfo> merged,
                               bloom::v1::MergeResponse* response, Finish finish) {
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

BloomService::Finish BloomService::SettledWrite(absl::Span<const absl::string_view> names,
                                                const grpc::ServerContextBase* context,
                                                Finish finish) const {
  if (hooks_.router == nullptr || names.empty()) return finish;
  return
      [router = hooks_.router, context, finish = std::move(finish),
       names = std::vector<std::string>(names.begin(), names.end())](grpc::Status status) mutable {
        if (status.ok()) {
          const std::vector<absl::string_view> views(names.begin(), names.end());
          status = ToGrpcStatus(router->SettleWrite(views, context));
        }
        std::move(finish)(std::move(status));
      };
}

absl::Status BloomService::CheckOwnedHere(absl::string_view name, absl::string_view what,
                                          rpcs::Rpc rpc,
                                          const grpc::ServerContextBase* context) const {
  if (hooks_.router == nullptr) return absl::OkStatus();
  const absl::string_view names[] = {name};
  const ShardRouter::Decision route = hooks_.router->Decide(rpcs::Info(rpc), names, context);
  if (route.here) return absl::OkStatus();
  if (!route.refusal.ok()) {
    return {static_cast<absl::StatusCode>(route.refusal.error_code()),
            route.refusal.error_message()};
  }
  const std::shared_ptr<const sharding::ShardState> state = hooks_.router->view().Current();
  return absl::UnavailableError(
      absl::StrCat("filter \"", name, "\" belongs to group ", state->map.OwnerOfName(name),
                   " at shard map version ", route.version, "; ", what,
                   " to this pod is served by group ", hooks_.router->view().own_group(),
                   ": send it to a pod of that group (GetShardMap lists them)"));
}

grpc::Status BloomService::HandleGetShardMap(const bloom::v1::GetShardMapRequest& /*request*/,
                                             bloom::v1::GetShardMapResponse* response,
                                             grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kGetShardMap, context, "");
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  if (hooks_.router != nullptr) {
    *response = hooks_.router->Describe();
  } else {
    response->mutable_map();  // version 0: not sharded
  }
  return log.Done(absl::OkStatus());
}

grpc::Status BloomService::HandleList(const bloom::v1::ListRequest& request,
                                      bloom::v1::ListResponse* response,
                                      grpc::ServerContextBase* context) {
  CallScope log(this, rpcs::Rpc::kList, context, request.prefix());
  if (absl::Status admitted = log.Admit(); !admitted.ok()) return log.Done(admitted);
  // As in Google's AIP-158, larger values are coerced to the maximum; 0 gets the store's
  // default page size (100).
  const uint32_t page_size = std::min(request.page_size(), kMaxPageSize);
  absl::StatusOr<std::function<bool(absl::string_view)>> accept =
      NamesListed(hooks_.router, request, context);
  if (!accept.ok()) return log.Done(accept.status());
  absl::StatusOr<storage::FilterStore::ListPage> page =
      store_->List({.prefix = request.prefix(),
                    .page_size = page_size,
                    .page_token = request.page_token(),
                    .accept = *std::move(accept),
                    .names_only = request.names_only()});
  if (page.ok()) {
    for (storage::FilterInfo& info : page->filters) {
      if (request.names_only()) {
        response->add_filters()->set_name(std::move(info.name));
      } else {
        ToProto(info, response->add_filters());
      }
    }
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
