// NextRebalanceMove: the next slot move that evens a sharded deployment's groups by the bytes
// of their filters (bloom-cli cluster rebalance runs one after another until none is left).
//
//   std::vector<uint64_t> bytes(map.slot_count());   // each slot's filters' bytes
//   absl::optional<PlannedMove> move = NextRebalanceMove(map, bytes, 0.1);
//   if (move) ... bloom-cli cluster move --slots=move->slots --to=move->to
//
// Each move takes slots from one end of a range of the heaviest group to the lightest: as many
// as bring the heaviest down towards the mean without taking the lightest past it. Moves are of
// contiguous slots (what a move can move); a slot is never split. An empty slot weighs one
// byte, so a deployment without data evens its slot counts (a group just added gets its share).
//
// Thread-safety: a pure function.
#ifndef SHARDING_REBALANCE_H_
#define SHARDING_REBALANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/optional.h"
#include "sharding/shard_map.h"

namespace sharding {

struct PlannedMove {
  SlotRange slots;
  std::string from;
  std::string to;
  uint64_t bytes = 0;  // what the slots weigh
};

// Nothing when every group is within `tolerance` (a fraction of the mean, e.g. 0.1) of the mean
// weight, or when no move of whole slots would bring the heaviest and lightest closer.
// `slot_bytes` has one element per slot of `map`.
absl::optional<PlannedMove> NextRebalanceMove(const ShardMap& map,
                                              const std::vector<uint64_t>& slot_bytes,
                                              double tolerance);

}  // namespace sharding

#endif  // SHARDING_REBALANCE_H_
