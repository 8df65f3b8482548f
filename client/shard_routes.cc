// A client's copy of its sharded deployment's map (client/shard_routes.h).
#include "client/shard_routes.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "common/slot.h"

namespace bloomclient {

namespace {

// The least time between two fetches of the map: a burst of stale answers costs one.
constexpr absl::Duration kRefreshInterval = absl::Milliseconds(100);

}  // namespace

ShardRoutes::ShardRoutes(bloom::v1::BloomFilterService::Stub* seed, Connect connect,
                         Prepare prepare, absl::optional<Coalescer::Options> coalescing)
    : seed_(seed),
      connect_(std::move(connect)),
      prepare_(std::move(prepare)),
      coalescing_(std::move(coalescing)) {}

absl::Status ShardRoutes::Refresh(uint64_t at_least) {
  std::lock_guard<std::mutex> fetching(refresh_mu_);
  if (at_least != 0 && version() >= at_least) return absl::OkStatus();  // fetched meanwhile
  last_refresh_ = absl::Now();
  grpc::ClientContext context;
  prepare_(context);
  bloom::v1::GetShardMapResponse response;
  const grpc::Status status =
      seed_->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return absl::OkStatus();
  if (!status.ok()) {
    return {static_cast<absl::StatusCode>(status.error_code()), status.error_message()};
  }
  const bloom::v1::ShardMap& map = response.map();
  std::lock_guard<std::mutex> lock(mu_);
  if (map.version() <= version_) return absl::OkStatus();  // never back
  std::map<std::string, std::shared_ptr<Group>> by_address;
  std::map<std::string, std::shared_ptr<Group>> by_group;
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    if (group.primary().empty()) continue;  // none now: its filters go through the seed
    std::shared_ptr<Group>& routed = by_address[group.primary()];
    if (routed == nullptr) {
      auto kept = by_address_.find(group.primary());
      if (kept != by_address_.end()) {
        routed = kept->second;
      } else {
        routed = std::make_shared<Group>();
        routed->address = group.primary();
        routed->channel = connect_(group.primary());
        routed->stub = bloom::v1::BloomFilterService::NewStub(routed->channel);
        if (coalescing_.has_value()) {
          Coalescer::Options options = *coalescing_;
          options.last_sequence = &routed->last_sequence;
          routed->coalescer = std::make_unique<Coalescer>(routed->stub.get(), options);
        }
      }
    }
    by_group[group.name()] = routed;
  }
  std::vector<std::shared_ptr<Group>> owner(map.slot_count());
  for (const bloom::v1::SlotRange& range : map.ranges()) {
    auto group = by_group.find(range.group());
    for (uint32_t slot = range.first(); slot <= range.last() && slot < owner.size(); ++slot) {
      owner[slot] = group == by_group.end() ? nullptr : group->second;
    }
  }
  version_ = map.version();
  slot_count_ = map.slot_count();
  owner_ = std::move(owner);
  by_address_ = std::move(by_address);
  return absl::OkStatus();
}

std::shared_ptr<ShardRoutes::Group> ShardRoutes::For(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot_count_ == 0) return nullptr;
  return owner_[slots::SlotOf(name, slot_count_)];
}

uint64_t ShardRoutes::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

void ShardRoutes::RefreshIfDue() {
  {
    std::lock_guard<std::mutex> fetching(refresh_mu_);
    if (absl::Now() - last_refresh_ < kRefreshInterval) return;
  }
  Refresh().IgnoreError();  // a failed fetch keeps the copy: the pods forward meanwhile
}

void ShardRoutes::AfterCall(const grpc::ClientContext& context, const grpc::Status& status) {
  const auto& headers = context.GetServerInitialMetadata();
  if (auto it = headers.find("bloom-shard-map-version"); it != headers.end()) {
    uint64_t version = 0;
    if (absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &version)) {
      if (version > this->version()) {
        // A later map than this copy: fetch it (once, however many calls learn it at once).
        Refresh(version).IgnoreError();
      } else {
        RefreshIfDue();  // forwarded though the copy is as recent: a group without a primary
      }
      return;
    }
  }
  if (!status.ok()) {
    AfterError(
        absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message()));
  }
}

void ShardRoutes::AfterError(const absl::Status& status) {
  // A pod's refusal of a filter another group owns (service/shard_router.h, and Pipeline's).
  if (absl::IsUnavailable(status) && absl::StrContains(status.message(), "belongs to group")) {
    RefreshIfDue();
  }
}

}  // namespace bloomclient
