// A List over every group of a sharded deployment (sharded_list.h).
#include "service/sharded_list.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "common/blocking_mutex.h"
#include "common/rpcs.h"
#include "common/slot.h"
#include "service/shard_router.h"

namespace service {

namespace {

// Mirrors BloomService's page sizes: 0 means 100, at most 1000.
constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;

// The groups' answers, gathered until the last arrives.
struct Gathered {
  Gathered(const bloom::v1::ListRequest& request, bloom::v1::ListResponse* response,
           BloomService::Finish finish, size_t groups)
      : request(request), response(response), finish(std::move(finish)), answers(groups) {}

  const bloom::v1::ListRequest& request;
  bloom::v1::ListResponse* const response;
  BloomService::Finish finish;
  bloomsync::BlockingMutex mu;
  std::vector<bloom::v1::ListResponse> answers;  // one per group
  size_t waiting ABSL_GUARDED_BY(mu) = 0;
  grpc::Status failed ABSL_GUARDED_BY(mu);  // the first group's failure

  // One group answered (or failed); the last merges and finishes.
  void Answered(const grpc::Status& status) {
    grpc::Status first_failure;
    {
      bloomsync::BlockingLock lock(&mu);
      if (!status.ok() && failed.ok()) failed = status;
      if (--waiting > 0) return;
      first_failure = failed;
    }
    if (!first_failure.ok()) {
      std::move(finish)(first_failure);
      return;
    }
    Merge();
    std::move(finish)(grpc::Status::OK);
  }

  void Merge() {
    uint32_t page_size = request.page_size() == 0 ? kDefaultPageSize : request.page_size();
    page_size = std::min(page_size, kMaxPageSize);
    std::vector<bloom::v1::FilterStats*> all;
    bool more = false;
    for (bloom::v1::ListResponse& answer : answers) {
      more = more || !answer.next_page_token().empty();
      for (bloom::v1::FilterStats& stats : *answer.mutable_filters()) all.push_back(&stats);
    }
    std::sort(all.begin(), all.end(),
              [](const bloom::v1::FilterStats* a, const bloom::v1::FilterStats* b) {
                return a->name() < b->name();
              });
    more = more || all.size() > page_size;
    if (all.size() > page_size) all.resize(page_size);
    // The last name listed is the next page's token (before the stats are moved out).
    if (more && !all.empty()) response->set_next_page_token(all.back()->name());
    for (bloom::v1::FilterStats* stats : all) *response->add_filters() = std::move(*stats);
  }
};

}  // namespace

absl::StatusOr<std::function<bool(absl::string_view)>> NamesListed(
    const ShardRouter* router, const bloom::v1::ListRequest& request,
    const grpc::ServerContextBase* context) {
  if (router == nullptr) {
    if (!request.has_slots()) return nullptr;
    return absl::FailedPreconditionError(
        "this deployment is not sharded: a List cannot ask for slots");
  }
  std::shared_ptr<const sharding::ShardState> state = router->view().Current();
  if (state->map.version() == 0) {
    if (!request.has_slots()) return nullptr;  // as an unsharded server, until the map is read
    return absl::UnavailableError("this pod has not read its deployment's shard map yet: retry");
  }
  const uint32_t slot_count = state->map.slot_count();
  if (request.has_slots() &&
      (request.slots().first() > request.slots().last() || request.slots().last() >= slot_count)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slots ", request.slots().first(), "-", request.slots().last(),
                     " are not a span of the deployment's slots, 0-", slot_count - 1));
  }
  const bool owned_only = !ShardRouter::MoverCall(context);
  const bool some_slots = request.has_slots();
  const uint32_t first = request.slots().first();
  const uint32_t last = request.slots().last();
  return [state = std::move(state), own = router->view().own_group(), owned_only, some_slots, first,
          last, slot_count](absl::string_view name) {
    const uint32_t slot = slots::SlotOf(name, slot_count);
    if (some_slots && (slot < first || slot > last)) return false;
    return !owned_only || state->map.OwnerOf(slot) == own;
  };
}

void ListEveryGroup(BloomService* core, grpc::ServerContextBase* context,
                    const bloom::v1::ListRequest& request, bloom::v1::ListResponse* response,
                    BloomService::Finish finish) {
  ShardRouter* router = core->hooks().router;
  const std::shared_ptr<const sharding::ShardState> state = router->view().Current();
  const std::vector<std::string>& groups = state->map.groups();
  auto gathered = std::make_shared<Gathered>(request, response, std::move(finish),
                                             std::max<size_t>(1, groups.size()));
  // This pod's own group first (admission included); with no map yet, only it.
  size_t own = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i] == router->view().own_group()) own = i;
  }
  const grpc::Status listed = core->HandleList(request, &gathered->answers[own], context);
  if (!listed.ok() || groups.size() <= 1) {
    if (listed.ok()) gathered->Merge();
    std::move(gathered->finish)(listed);
    return;
  }
  {
    bloomsync::BlockingLock lock(&gathered->mu);
    gathered->waiting = groups.size() - 1;
  }
  const rpcs::RpcInfo& info = rpcs::Info(rpcs::Rpc::kList);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (i == own) continue;
    ShardRouter::Decision route =
        router->ToGroup(*state, groups[i], /*primary=*/request.min_sequence() != 0);
    route.read = true;
    if (!route.refusal.ok()) {
      gathered->Answered(route.refusal);
      continue;
    }
    router->ForwardMessage(
        context, route, info.path, request, &gathered->answers[i],
        [gathered, group = groups[i]](const grpc::Status& status) {
          gathered->Answered(status.ok() ? status
                                         : grpc::Status(status.error_code(),
                                                        absl::StrCat("listing group ", group, ": ",
                                                                     status.error_message())));
        });
  }
}

}  // namespace service
