// BloomService's Merge and Reserve `like` across the groups of a sharded deployment
// (bloom_service.h): the call is served by the group that owns the filter it writes (Merge's
// target, Reserve's name), which reads what it needs of the others' filters from their
// groups' primaries (ShardRouter::ExportFromOwner): a source's whole dump, ORed into the
// target as an Import with merge_into_existing does; a model's header only (spec and seed).
// Reading another pod blocks, so this work runs on the admin lane (call_lane.h), never on a
// gRPC thread.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "service/bloom_service.h"
#include "service/call_scope.h"
#include "service/convert.h"
#include "storage/filter_transfer.h"
#include "storage/format/dump.h"

namespace service {

bool BloomService::ServeReserveLikeAcrossGroups(const bloom::v1::ReserveRequest& request,
                                                bloom::v1::ReserveResponse* response,
                                                grpc::ServerContextBase* context, Finish& finish) {
  ShardRouter* router = hooks_.router;
  if (router == nullptr || request.like().empty() || request.has_spec() ||
      router->OwnedHere(request.like())) {
    return false;
  }
  auto serve = [this, router, &request, response, context](Finish finish) mutable {
    auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kReserve, context, request.name());
    absl::StatusOr<storage::FilterStore::ReserveResult> result;
    if (absl::Status admitted = log->Admit(); !admitted.ok()) {
      result = admitted;
    } else {
      storage::DumpHeaderReader header;
      absl::Status read =
          router->ExportFromOwner(request.like(), context, [&](absl::string_view chunk) {
            RETURN_IF_ERROR(header.Append(chunk));
            return header.record().has_value()
                       ? absl::Status(ShardRouter::kEnough, "the header is enough")
                       : absl::OkStatus();
          });
      if (read.ok() && !header.record().has_value()) {
        read = absl::DataLossError(
            absl::StrCat("the dump of filter '", request.like(), "' ended before its header"));
      }
      result = read.ok() ? store_->ReserveLikeRecord(request.name(), *header.record(),
                                                     request.like(), /*defer_ack=*/true)
                         : absl::StatusOr<storage::FilterStore::ReserveResult>(read);
    }
    AnswerReserve(std::move(log), std::move(result), response, std::move(finish));
  };
  PostToAdminLane(std::move(serve), finish);
  return true;
}

bool BloomService::ServeMergeAcrossGroups(const bloom::v1::MergeRequest& request,
                                          bloom::v1::MergeResponse* response,
                                          grpc::ServerContextBase* context, Finish& finish) {
  ShardRouter* router = hooks_.router;
  if (router == nullptr) return false;
  std::vector<std::string> here;
  std::vector<std::string> elsewhere;
  for (const std::string& source : request.sources()) {
    (router->OwnedHere(source) ? here : elsewhere).push_back(source);
  }
  if (elsewhere.empty() ||
      static_cast<size_t>(request.sources_size()) > storage::FilterStore::kMaxMergeSources) {
    return false;  // served as a Merge of this group's filters (which checks the bound)
  }
  auto serve = [this, router, &request, response, context, here = std::move(here),
                elsewhere = std::move(elsewhere)](Finish finish) mutable {
    auto log = std::make_unique<CallScope>(this, rpcs::Rpc::kMerge, context, request.target());
    absl::StatusOr<storage::FilterInfo> merged;
    if (absl::Status admitted = log->Admit(); !admitted.ok()) {
      merged = admitted;
    } else {
      // The target must exist, as for any Merge (an import would create it).
      merged = store_->Stats(request.target());
    }
    if (merged.ok() && !here.empty()) {
      merged = store_->Merge(request.target(), here, /*defer_ack=*/true);
    }
    // Each other group's source in turn, as an import merged into the target: a failure
    // part-way leaves the sources before it merged (retrying is harmless: OR is idempotent).
    for (const std::string& source : elsewhere) {
      if (!merged.ok()) break;
      absl::StatusOr<std::unique_ptr<storage::PendingImport>> import =
          store_->BeginImport(request.target(), /*merge_into_existing=*/true);
      if (!import.ok()) {
        merged = import.status();
        break;
      }
      absl::Status read = router->ExportFromOwner(
          source, context, [&](absl::string_view chunk) { return (*import)->Append(chunk); });
      merged = read.ok() ? store_->CommitImport(**import, /*defer_ack=*/true)
                         : absl::StatusOr<storage::FilterInfo>(read);
    }
    AnswerMerge(std::move(log), std::move(merged), response, std::move(finish));
  };
  PostToAdminLane(std::move(serve), finish);
  return true;
}

void BloomService::PostToAdminLane(absl::AnyInvocable<void(Finish) &&> serve, Finish& finish) {
  auto shared = std::make_shared<Finish>(std::move(finish));
  if (!admin_lane_.Post(
          [serve = std::move(serve), shared]() mutable { std::move(serve)(std::move(*shared)); })) {
    std::move (*shared)(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                     "too many calls are waiting for other groups' filters; "
                                     "retry later"));
  }
}

}  // namespace service
