// NextRebalanceMove: the next slot move that evens a sharded deployment's groups by the bytes
// of their filters (bloom-cli cluster rebalance, cli_rebalance.h, runs one after another until
// none is left). It reads the map as bloom.v1.GetShardMap gives it: the groups, and each
// slot's owner.
//
//   SlotOwners owners = ...;                           // from GetShardMap's ranges
//   std::vector<uint64_t> bytes(owners.owner.size());     // each slot's filters' bytes
//   std::vector<uint64_t> filters(owners.owner.size());   // and how many there are
//   absl::optional<PlannedMove> move =
//       NextRebalanceMove(owners, bytes, filters, {.tolerance = 0.1, .max_filters = 300'000});
//   if (move) ... bloom-cli cluster move --slots=FIRST-LAST --to=move->to
//
// Each move takes slots from one end of a range of the heaviest group to the lightest: as many
// as bring the heaviest down towards the mean without taking the lightest past it, and no more
// than `max_filters` filters, because a move's write pause grows with the filters it moves
// (about 2 us each at cutover; a filter per user puts a million in a few slots). Moves are of
// contiguous slots (what a move can move); a slot is never split, so a slot holding more than
// `max_filters` moves alone. An empty slot weighs one byte, so a deployment without data evens
// its slot counts (a group just added gets its share).
//
// Thread-safety: a pure function.
#ifndef CLIENT_REBALANCE_PLAN_H_
#define CLIENT_REBALANCE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/optional.h"

namespace bloomcli {

// Which group owns each slot.
struct SlotOwners {
  std::vector<std::string> groups;
  std::vector<uint32_t> owner;  // per slot, an index into groups
};

// Slots first..last, both included.
struct PlannedRange {
  uint32_t first = 0;
  uint32_t last = 0;
};

struct PlannedMove {
  PlannedRange slots;
  std::string from;
  std::string to;
  uint64_t bytes = 0;    // what the slots weigh
  uint64_t filters = 0;  // how many filters they hold
};

struct RebalanceLimits {
  // Every group within this fraction of the mean weight is balanced.
  double tolerance = 0.1;
  // At most this many filters in one move, unless one slot holds more; 0 for no bound.
  uint64_t max_filters = 0;
};

// Nothing when every group is within the tolerance of the mean weight, or when no move of whole
// slots would bring the heaviest and lightest closer. `slot_bytes` has one element per slot;
// `slot_filters` one per slot, or none when the counts are unknown (no filter bound then).
absl::optional<PlannedMove> NextRebalanceMove(const SlotOwners& owners,
                                              const std::vector<uint64_t>& slot_bytes,
                                              const std::vector<uint64_t>& slot_filters,
                                              const RebalanceLimits& limits);

}  // namespace bloomcli

#endif  // CLIENT_REBALANCE_PLAN_H_
