// bloom-cli cluster rebalance (client/cli_rebalance.h).
#include "client/cli_rebalance.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bloom/v1/bloom.grpc.pb.h"
#include "client/cli_move.h"
#include "client/cli_output.h"
#include "client/rebalance_plan.h"
#include "common/slot.h"

namespace bloomcli {
namespace {

absl::StatusOr<bloom::v1::ShardMap> MapAt(const bloomclient::BloomClient& client) {
  grpc::ClientContext context;
  client.PrepareContext(context);
  bloom::v1::GetShardMapResponse response;
  absl::Status called = bloomclient::FromGrpcStatus(
      bloom::v1::BloomFilterService::NewStub(client.channel())
          ->GetShardMap(&context, bloom::v1::GetShardMapRequest(), &response));
  if (!called.ok()) return called;
  return response.map();
}

// Each slot's owner, as the map's ranges say.
absl::StatusOr<SlotOwners> Owners(const bloom::v1::ShardMap& map) {
  SlotOwners owners;
  std::map<std::string, uint32_t> index;
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    index[group.name()] = static_cast<uint32_t>(owners.groups.size());
    owners.groups.push_back(group.name());
  }
  owners.owner.assign(map.slot_count(), 0);
  std::vector<bool> owned(map.slot_count(), false);
  for (const bloom::v1::SlotRange& range : map.ranges()) {
    auto group = index.find(range.group());
    if (group == index.end() || range.last() >= map.slot_count() || range.first() > range.last()) {
      return absl::InternalError(absl::StrCat("the shard map's range ", range.first(), "-",
                                              range.last(), " of ", range.group(),
                                              " does not fit the map"));
    }
    for (uint32_t slot = range.first(); slot <= range.last(); ++slot) {
      owners.owner[slot] = group->second;
      owned[slot] = true;
    }
  }
  if (std::find(owned.begin(), owned.end(), false) != owned.end()) {
    return absl::InternalError("the shard map leaves a slot without an owner");
  }
  return owners;
}

// What each slot holds, by the filters each group's primary holds itself.
struct SlotContents {
  std::vector<uint64_t> bytes;    // the sum of their sizes
  std::vector<uint64_t> filters;  // how many
};

absl::StatusOr<SlotContents> ListSlotContents(const bloom::v1::ShardMap& map,
                                              bloomclient::ClientOptions options) {
  SlotContents contents{std::vector<uint64_t>(map.slot_count(), 0),
                        std::vector<uint64_t>(map.slot_count(), 0)};
  options.shard_routing = false;
  options.metadata.emplace_back("bloom-shard-move", "1");  // a pod's own filters only
  for (const bloom::v1::ShardGroup& group : map.groups()) {
    if (group.primary().empty()) {
      return absl::UnavailableError(
          absl::StrCat("group ", group.name(), " has no primary now: retry"));
    }
    absl::StatusOr<std::unique_ptr<bloomclient::BloomClient>> pod =
        bloomclient::BloomClient::Open(group.primary(), options);
    if (!pod.ok()) return pod.status();
    std::string token;
    do {
      absl::StatusOr<bloom::v1::ListResponse> page = (*pod)->List("", 1000, token);
      if (!page.ok()) return page.status();
      for (const bloom::v1::FilterStats& stats : page->filters()) {
        const uint32_t slot = slots::SlotOf(stats.name(), map.slot_count());
        contents.bytes[slot] += stats.size_bytes();
        ++contents.filters[slot];
      }
      token = page->next_page_token();
    } while (!token.empty());
  }
  return contents;
}

}  // namespace

int Rebalance(const bloomclient::BloomClient& client, const bloomclient::ClientOptions& options,
              const RebalanceArgs& args) {
  RebalanceLimits limits{.tolerance = 0.1, .max_filters = kDefaultMaxFiltersPerMove};
  int max_moves = 16;
  if ((!args.tolerance.empty() && (!absl::SimpleAtod(args.tolerance, &limits.tolerance) ||
                                   limits.tolerance < 0 || limits.tolerance > 10)) ||
      (!args.max_moves.empty() &&
       (!absl::SimpleAtoi(args.max_moves, &max_moves) || max_moves < 1)) ||
      (!args.max_filters.empty() &&
       (!absl::SimpleAtoi(args.max_filters, &limits.max_filters) || limits.max_filters < 1))) {
    std::fprintf(stderr,
                 "bloom-cli: cluster rebalance takes --tolerance=FRACTION (0 to 10, default "
                 "0.1), --max-moves=N (at least 1, default 16) and --max-filters=N (filters in "
                 "one move, at least 1, default %llu)\n",
                 static_cast<unsigned long long>(kDefaultMaxFiltersPerMove));
    return 2;
  }
  for (int moves = 0;; ++moves) {
    absl::StatusOr<bloom::v1::ShardMap> map = MapAt(client);
    if (!map.ok()) return Error(map.status());
    if (map->slot_count() == 0) {
      return Error(absl::FailedPreconditionError("the deployment is not sharded (no shard map)"));
    }
    if (map->has_move()) {
      return Error(absl::FailedPreconditionError(
          absl::StrCat("slots ", map->move().first(), "-", map->move().last(), " are moving to ",
                       map->move().to(),
                       ": finish that move (cluster move with the same slots) or --abort it")));
    }
    absl::StatusOr<SlotOwners> owners = Owners(*map);
    if (!owners.ok()) return Error(owners.status());
    absl::StatusOr<SlotContents> contents = ListSlotContents(*map, options);
    if (!contents.ok()) return Error(contents.status());
    const absl::optional<PlannedMove> move =
        NextRebalanceMove(*owners, contents->bytes, contents->filters, limits);
    if (!move.has_value()) {
      std::cout << "balanced: every group within " << limits.tolerance * 100
                << "% of the mean, or no "
                << "move of whole slots would bring them closer (" << moves << " moves made)"
                << std::endl;
      return 0;
    }
    const std::string slots = absl::StrCat(move->slots.first, "-", move->slots.last);
    std::cout << "move " << moves + 1 << ": slots " << slots << " (" << move->bytes << " bytes, "
              << move->filters << " filters) from " << move->from << " to " << move->to
              << std::endl;
    if (args.dry_run) return 0;
    if (moves >= max_moves) {
      std::cout << "stopping after " << max_moves << " moves (--max-moves): run it again to go on"
                << std::endl;
      return 0;
    }
    // The plan keeps to the bound (a slot holding more moves alone); the move checks the count
    // again, with room for the filters made since the listing.
    const uint64_t move_bound =
        std::max(limits.max_filters, move->filters) + limits.max_filters / 10 + 100;
    const int moved = MoveSlots(
        client, options, {.slots = slots, .to = move->to, .max_filters = absl::StrCat(move_bound)});
    if (moved != 0) return moved;
  }
}

}  // namespace bloomcli
