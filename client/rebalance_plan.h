// NextRebalanceMove: the next slot move that evens a sharded deployment's groups by the bytes
// of their filters (bloom-cli cluster rebalance, cli_rebalance.h, runs one after another until
// none is left). It reads the map as bloom.v1.GetShardMap gives it: the groups, and each
// slot's owner.
//
//   SlotOwners owners = ...;                         // from GetShardMap's ranges
//   std::vector<uint64_t> bytes(owners.owner.size());   // each slot's filters' bytes
//   absl::optional<PlannedMove> move = NextRebalanceMove(owners, bytes, 0.1);
//   if (move) ... bloom-cli cluster move --slots=FIRST-LAST --to=move->to
//
// Each move takes slots from one end of a range of the heaviest group to the lightest: as many
// as bring the heaviest down towards the mean without taking the lightest past it. Moves are of
// contiguous slots (what a move can move); a slot is never split. An empty slot weighs one
// byte, so a deployment without data evens its slot counts (a group just added gets its share).
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
  uint64_t bytes = 0;  // what the slots weigh
};

// Nothing when every group is within `tolerance` (a fraction of the mean, e.g. 0.1) of the mean
// weight, or when no move of whole slots would bring the heaviest and lightest closer.
// `slot_bytes` has one element per slot.
absl::optional<PlannedMove> NextRebalanceMove(const SlotOwners& owners,
                                              const std::vector<uint64_t>& slot_bytes,
                                              double tolerance);

}  // namespace bloomcli

#endif  // CLIENT_REBALANCE_PLAN_H_
