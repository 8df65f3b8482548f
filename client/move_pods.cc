// How a slot mover reaches the deployment's pods (move_pods.h).
#include "client/move_pods.h"

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bloom/replication/v1/replication.grpc.pb.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "common/slot.h"

namespace bloomcli {

namespace rv1 = bloom::replication::v1;

bool Transient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

void MovePods::Prepare(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.timeout));
  if (!options_.token.empty()) context.AddMetadata("authorization", "Bearer " + options_.token);
  // A mover's call (service/shard_router.h): the target serves it for the moving slots.
  context.AddMetadata("bloom-shard-move", "1");
}

absl::StatusOr<bloom::v1::ShardMap> MovePods::Map() const {
  grpc::ClientContext context;
  Prepare(context);
  bloom::v1::GetShardMapResponse response;
  absl::Status called = bloomclient::FromGrpcStatus(
      bloom::v1::BloomFilterService::NewStub(seed_.channel())
          ->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response));
  if (!called.ok()) return called;
  return response.map();
}

bloomclient::BloomClient& MovePods::Pod(const std::string& address) {
  {
    bloomsync::BlockingLock lock(&mu_);
    auto known = pods_.find(address);
    if (known != pods_.end()) return *known->second;
  }
  // Opened without the lock: opening may wait on the pod, and the other copies in flight
  // should not wait with it. Of two threads opening the same pod, the first kept wins.
  bloomclient::ClientOptions options = options_;
  options.shard_routing = false;  // the mover names the pod it means
  options.metadata.emplace_back("bloom-shard-move", "1");
  absl::StatusOr<std::unique_ptr<bloomclient::BloomClient>> opened =
      bloomclient::BloomClient::Open(address, options);
  std::unique_ptr<bloomclient::BloomClient> pod =
      opened.ok() ? *std::move(opened) : bloomclient::BloomClient::Connect(address, options);
  bloomsync::BlockingLock lock(&mu_);
  return *pods_.try_emplace(address, std::move(pod)).first->second;
}

absl::StatusOr<std::string> MovePods::PrimaryOf(const std::string& group) const {
  absl::Status last = absl::UnavailableError(absl::StrCat("group ", group, " has no primary"));
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<bloom::v1::ShardMap> map = Map();
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& each : map->groups()) {
        if (each.name() == group && !each.primary().empty()) return each.primary();
      }
    } else {
      last = map.status();
    }
    absl::SleepFor(kRetryPause);
  }
  return last;
}

absl::StatusOr<std::string> MovePods::CachedPrimaryOf(const std::string& group) {
  {
    bloomsync::BlockingLock lock(&mu_);
    auto known = primaries_.find(group);
    if (known != primaries_.end()) return known->second;
  }
  absl::StatusOr<std::string> primary = PrimaryOf(group);
  if (!primary.ok()) return primary;
  bloomsync::BlockingLock lock(&mu_);
  primaries_[group] = *primary;
  return primary;
}

void MovePods::ForgetPrimaries() {
  bloomsync::BlockingLock lock(&mu_);
  primaries_.clear();
}

absl::StatusOr<std::set<std::string>> MovePods::ListHeld(const std::string& address, uint32_t first,
                                                         uint32_t last, uint32_t slot_count) {
  std::set<std::string> held;
  std::string token;
  do {
    grpc::ClientContext context;
    Prepare(context);  // a mover's List: what the pod holds, copies included
    bloom::v1::ListRequest request;
    request.set_page_size(1000);
    request.set_page_token(token);
    // Names alone, of the moving slots alone: the owner may hold a filter per user in every
    // slot. (A pod from before these fields lists everything
    // with statistics: the slot check below keeps what moves.)
    request.mutable_slots()->set_first(first);
    request.mutable_slots()->set_last(last);
    request.set_names_only(true);
    bloom::v1::ListResponse page;
    absl::Status listed =
        bloomclient::FromGrpcStatus(bloom::v1::BloomFilterService::NewStub(Pod(address).channel())
                                        ->List(&context, request, &page));
    if (!listed.ok()) return listed;
    for (const bloom::v1::FilterStats& stats : page.filters()) {
      const uint32_t slot = slots::SlotOf(stats.name(), slot_count);
      if (slot < first || slot > last) continue;
      held.insert(stats.name());
    }
    token = page.next_page_token();
  } while (!token.empty());
  return held;
}

absl::Status MovePods::DeleteAt(const std::string& group, const std::string& name) {
  absl::Status deleted;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<std::string> primary = CachedPrimaryOf(group);
    if (!primary.ok()) return primary.status();
    deleted = Pod(*primary).Delete(name);
    if (deleted.ok() || absl::IsNotFound(deleted)) return deleted;
    if (!Transient(deleted)) return deleted;
    ForgetPrimaries();
    absl::SleepFor(kRetryPause);
  }
  return deleted;
}

absl::Status MovePods::WaitForVersion(const std::string& group, uint64_t version) {
  const absl::Time give_up = absl::Now() + kWaitForPods;
  while (true) {
    absl::StatusOr<bloom::v1::ShardMap> map = Map();
    std::vector<std::string> members;
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& each : map->groups()) {
        if (each.name() == group) members.assign(each.members().begin(), each.members().end());
      }
    }
    // Every member up now: a member that went away must read the map again before it can
    // serve (a pod takes no call for a filter before its first read of the map).
    bool all = map.ok() && !members.empty();
    std::string behind;
    for (const std::string& member : members) {
      grpc::ClientContext context;
      Prepare(context);
      bloom::v1::GetShardMapResponse response;
      const grpc::Status status =
          bloom::v1::BloomFilterService::NewStub(Pod(member).channel())
              ->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response);
      if (!status.ok() || response.map().version() < version) {
        all = false;
        behind = member;
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("member ", behind, " of group ", group, " has not taken shard map version ",
                       version, " yet; run the move again to resume, or --abort it"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status MovePods::WaitForFollowers(const std::string& group) {
  const absl::Time give_up = absl::Now() + kWaitForPods;
  while (true) {
    absl::StatusOr<bloom::v1::ShardMap> map = Map();
    std::vector<std::string> members;
    std::string primary;
    if (map.ok()) {
      for (const bloom::v1::ShardGroup& each : map->groups()) {
        if (each.name() != group) continue;
        members.assign(each.members().begin(), each.members().end());
        primary = each.primary();
      }
    }
    auto status_of = [&](const std::string& address) -> absl::StatusOr<rv1::StatusResponse> {
      grpc::ClientContext context;
      Prepare(context);
      rv1::StatusResponse response;
      absl::Status called =
          bloomclient::FromGrpcStatus(rv1::ReplicationService::NewStub(Pod(address).channel())
                                          ->Status(&context, rv1::StatusRequest(), &response));
      if (!called.ok()) return called;
      return response;
    };
    bool all = false;
    if (!primary.empty()) {
      absl::StatusOr<rv1::StatusResponse> held = status_of(primary);
      all = held.ok();
      for (const std::string& member : members) {
        if (!all || member == primary) continue;
        absl::StatusOr<rv1::StatusResponse> applied = status_of(member);
        all = applied.ok() && applied->sequence() >= held->sequence();
      }
    }
    if (all) return absl::OkStatus();
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(
          absl::StrCat("the followers of group ", group,
                       " have not applied the copies yet; run the move "
                       "again to resume, or --abort it"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace bloomcli
